"""`collect -o`: what may be written and what `--force` may replace. A bundle is replaced only
when every file in it, at every depth (or every member of the archive), is one a bundle holds;
`-o` names a .tar.gz/.tgz or a folder, never another kind of archive."""

from __future__ import annotations

import io
import tarfile

import pytest
from k8s_server import Running, scenario_healthy

from llmdoctor.cli import run as cli_run
from llmdoctor.collectors.bundle import Bundle

POD = "pod/vllm-7b-7d9f8c6b5-x2kqp"
CONFIG = "tests/fixtures/capacity/qwen2-7b-instruct-config.json"


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    with Running(scenario_healthy(), tmp_path / "kubeconfig") as running:
        monkeypatch.setenv("KUBECONFIG", str(running.kubeconfig))
        yield running


def collect(out, *extra) -> int:
    args = ["collect", POD, "-n", "serving", "--window", "0", "-o", str(out), *extra]
    with pytest.raises(SystemExit) as done:
        cli_run(args)
    return done.value.code


def one_line_refusal(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err
    assert len(err.strip().splitlines()) == 1, err
    return err


def test_force_replaces_its_own_bundles_with_every_collector(cluster, tmp_path, capsys):
    # every file collect writes (exec, logs, vllm, node, model/config.json) is one a bundle holds
    for name in ("fb", "incident.tar.gz"):
        out = tmp_path / name
        assert collect(out, "--model-config", CONFIG) == 0
        assert collect(out, "--model-config", CONFIG, "--force") == 0, capsys.readouterr().err
        with Bundle(out) as bundle:
            assert {"model/config.json", "k8s/pod.json"} <= set(bundle.files())


@pytest.mark.parametrize(
    "notes", ["logs/retro-notes.md", "k8s/extra/pod-before.json", "vllm/metrics-0.txt.orig"]
)
def test_force_keeps_a_file_added_inside_a_bundle_folder(cluster, tmp_path, capsys, notes):
    out = tmp_path / "fb"
    assert collect(out) == 0
    (out / notes).parent.mkdir(parents=True, exist_ok=True)
    (out / notes).write_text("notes")
    capsys.readouterr()
    assert collect(out, "--force") == 3
    err = one_line_refusal(capsys)
    assert notes in err and "not only an llmdoctor bundle" in err
    assert (out / notes).read_text() == "notes"


@pytest.mark.parametrize("extra", ["NOTES.md", "data.csv", "k8s/pod.json.bak"])
def test_force_keeps_an_archive_that_holds_other_files(cluster, tmp_path, capsys, extra):
    out = tmp_path / "incident.tar.gz"
    assert collect(out) == 0
    with tarfile.open(out) as tar:  # the bundle as collected, plus someone's file
        members = [(m, tar.extractfile(m).read() if m.isfile() else None) for m in tar]
    root = members[0][0].name.split("/")[0]
    with tarfile.open(out, "w:gz") as tar:
        for member, data in members:
            tar.addfile(member, io.BytesIO(data) if data is not None else None)
        info = tarfile.TarInfo(f"{root}/{extra}")
        info.size = 5
        tar.addfile(info, io.BytesIO(b"notes"))
    before = out.read_bytes()
    capsys.readouterr()
    assert collect(out, "--force") == 3
    err = one_line_refusal(capsys)
    assert f"{root}/{extra}" in err and "not only an llmdoctor bundle" in err
    assert out.read_bytes() == before


@pytest.mark.parametrize(
    "name", ["incident.zip", "x.tar", "x.tar.bz2", "x.tar.xz", "x.gz", "x.TGZ"]
)
def test_output_that_names_another_kind_of_archive_is_refused(tmp_path, capsys, name):
    # refused before anything is collected: no cluster is needed, nothing is written
    out = tmp_path / name
    assert collect(out, "--timeout", "1") == 3
    err = one_line_refusal(capsys)
    assert "not supported" in err and ".tar.gz" in err and ".tgz" in err and "folder" in err
    assert not out.exists() and list(tmp_path.iterdir()) == []
