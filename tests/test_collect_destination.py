"""`collect -o`: what may be written and what `--force` may replace. A bundle is replaced only
when every file in it, at every depth (or every member of the archive), is one a bundle holds;
`-o` names a .tar.gz/.tgz or a folder, never another kind of archive."""

from __future__ import annotations

import gzip
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


@pytest.mark.parametrize("archive", [False, True])
def test_force_replaces_a_bundle_holding_the_serving_images_argument_check(tmp_path, archive):
    # serving/vllm-args.json is written into every bundle whose pod allowed exec; a bundle
    # holding it is llmdoctor's own and --force may replace it (it was once called foreign)
    from llmdoctor.collectors.bundle import write_bundle
    from llmdoctor.engine.facts import Facts

    facts = Facts()
    facts.set("time/now", 1_700_000_000.0)
    facts.set("serving/vllm-args.json", {"vllm": "0.10.1", "accepted": True})
    dest = tmp_path / ("b.tar.gz" if archive else "b")
    write_bundle(facts, dest, target=POD)
    write_bundle(facts, dest, target=POD, force=True)
    with Bundle(dest) as bundle:
        assert "serving/vllm-args.json" in bundle.files()


def small_facts():
    from llmdoctor.engine.facts import Facts

    facts = Facts()
    facts.set("logs/vllm.log", "INFO started\n")
    facts.set("k8s/pod.json", {"kind": "Pod"})
    return facts


def test_force_never_deletes_a_folder_of_other_files(tmp_path):
    from llmdoctor.collectors.bundle import write_bundle
    from llmdoctor.errors import BadBundle

    incidents = tmp_path / "incidents"
    incidents.mkdir()
    (incidents / "notes.md").write_text("retro notes")
    (incidents / "2026-11-01.tar.gz").write_bytes(b"an earlier bundle")
    with pytest.raises(BadBundle, match="not only an llmdoctor bundle"):
        write_bundle(small_facts(), incidents, target="pod/x", force=True)
    assert (incidents / "notes.md").read_text() == "retro notes"
    assert (incidents / "2026-11-01.tar.gz").exists()


def test_force_keeps_notes_added_to_an_earlier_bundle_folder(tmp_path):
    from llmdoctor.collectors.bundle import write_bundle
    from llmdoctor.errors import BadBundle

    dest = write_bundle(small_facts(), tmp_path / "incident", target="pod/x")
    (dest / "timeline.md").write_text("09:00 paged")
    with pytest.raises(BadBundle, match=r"timeline\.md"):
        write_bundle(small_facts(), dest, target="pod/x", force=True)
    assert (dest / "timeline.md").read_text() == "09:00 paged"


def test_force_replaces_an_earlier_bundle_folder_or_archive(tmp_path):
    from llmdoctor.collectors.bundle import Bundle, write_bundle

    for name in ("incident", "incident.tar.gz"):
        dest = write_bundle(small_facts(), tmp_path / name, target="pod/old")
        write_bundle(small_facts(), dest, target="pod/new", force=True)
        with Bundle(dest) as b:
            assert b.manifest["target"] == "pod/new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["incident", "incident.tar.gz"]


def test_force_never_overwrites_a_file_that_is_not_a_bundle(tmp_path):
    from llmdoctor.collectors.bundle import write_bundle
    from llmdoctor.errors import BadBundle

    dest = tmp_path / "incident.tar.gz"
    dest.write_bytes(gzip.compress(b"someone's own archive"))
    with pytest.raises(BadBundle, match="not an llmdoctor bundle"):
        write_bundle(small_facts(), dest, target="pod/x", force=True)
    assert gzip.decompress(dest.read_bytes()) == b"someone's own archive"


@pytest.mark.parametrize(
    ("output", "says"),
    [
        ("/dev/null", "not a regular file or folder"),
        (".", "give a file or folder name"),
        ("..", "give a file or folder name"),
    ],
)
def test_collect_to_a_device_or_the_current_folder_is_refused_up_front(capsys, output, says):
    with pytest.raises(SystemExit) as done:
        cli_run(["collect", "pod/vllm-7b", "-o", output, "--force", "--timeout", "1"])
    err = capsys.readouterr().err
    assert done.value.code == 3
    assert says in err and "internal error" not in err and len(err.strip().splitlines()) == 1


def test_a_bundle_into_an_unwritable_folder_is_a_one_line_refusal(tmp_path):
    from llmdoctor.collectors.bundle import write_bundle
    from llmdoctor.errors import BadBundle

    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(BadBundle, match="cannot write"):
        write_bundle(small_facts(), blocker / "incident.tar.gz", target="pod/x")
    assert blocker.read_text() == "not a folder"


def test_the_count_of_what_could_not_be_collected_leaves_out_what_was_not_asked(tmp_path, capsys):
    # a hostile pass: "1 things could not be collected" of a healthy server, the one "thing"
    # being the tokenizer nobody asked for (--tokenizer not given)
    from vllm_server import FakeVllmServer, Scenario

    with FakeVllmServer(Scenario()) as srv, pytest.raises(SystemExit) as done:
        cli_run(["collect", srv.url, "-o", str(tmp_path / "b"), "--window", "0.2"])
    out = capsys.readouterr().out
    assert done.value.code == 0 and out.startswith("wrote "), out
    assert "could not be collected" not in out, out
    manifest = (tmp_path / "b" / "manifest.json").read_text()
    assert "not requested (llmdoctor probe --tokenizer PATH)" in manifest  # still listed
    # with a failure, the count is of failures, in the singular when there is one
    with pytest.raises(SystemExit):
        cli_run(["collect", "http://127.0.0.1:9", "-o", str(tmp_path / "c"), "--timeout", "1"])
    out = capsys.readouterr().out
    assert "things could not be collected" in out and "1 things" not in out, out
