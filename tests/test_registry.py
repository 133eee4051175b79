"""Every check id and runbook id that code refers to exists."""

from __future__ import annotations

from pathlib import Path

import pytest
from example_bundles import bundle, by_check, diagnose_json

from llmdoctor.cli import run as cli_run
from llmdoctor.engine.registry import SCOPES, all_checks
from llmdoctor.wiki.library import builtin_dir, load_library


def test_every_runbook_a_check_links_to_exists():
    entries = load_library().entries
    missing = {(c.id, rid) for c in all_checks() for rid in c.runbooks if rid not in entries}
    assert not missing, f"checks link to runbooks that do not exist: {sorted(missing)}"


def test_check_ids_are_unique_and_scoped():
    checks = all_checks()
    ids = [c.id for c in checks]
    assert len(ids) == len(set(ids))
    assert all(c.scope in SCOPES for c in checks)
    assert all(c.title for c in checks)


def test_builtin_runbooks_parse_without_errors():
    lib = load_library()
    assert not lib.errors, [str(e) for e in lib.errors]
    assert builtin_dir().is_dir()


def test_detected_by_names_existing_checks():
    ids = {c.id for c in all_checks()}
    bad = {
        (e.id, c) for e in load_library().entries.values() for c in e.detected_by if c not in ids
    }
    assert not bad, sorted(bad)


EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "bundles"


HANGING_CHECK = """
import time
from llmdoctor.engine.registry import check


@check("{id}", title="a check that never returns", scope="logs")
def hangs(facts):
    time.sleep(3600)
"""


def site_check(tmp_path: Path, check_id: str, body: str = HANGING_CHECK) -> Path:
    folder = tmp_path / f"checks-{check_id}"
    folder.mkdir()
    (folder / f"{check_id.replace('-', '_')}.py").write_text(body.format(id=check_id))
    return folder


def test_a_hung_check_times_out_and_the_report_still_completes(capsys, tmp_path):
    import time

    folder = site_check(tmp_path, "site-hangs-forever")
    started = time.monotonic()
    code, report, _ = diagnose_json(
        capsys,
        bundle(tmp_path, "crashloop-cuda-oom"),
        "--checks-dir",
        str(folder),
        "--timeout",
        "0.5",
    )
    assert time.monotonic() - started < 30
    (error,) = [e for e in report["errors"] if e.get("check") == "site-hangs-forever"]
    # it sleeps, using no CPU: stopped at three times its budget on the clock
    waited = error["message"].removeprefix("timed out: no result after ").split("s,")[0]
    assert float(waited) >= 1.5, error["message"]
    assert code == 2  # the real findings are all still there
    assert by_check(report, "pod-restarts")


def test_a_check_id_defined_in_two_files_is_one_line_naming_both(capsys, tmp_path):
    first = site_check(tmp_path, "site-twice")
    second = tmp_path / "other-site"
    second.mkdir()
    (second / "again.py").write_text(HANGING_CHECK.format(id="site-twice"))
    with pytest.raises(SystemExit) as done:
        cli_run(
            [
                "diagnose",
                "--bundle",
                str(EXAMPLES / "healthy-vllm-7b"),
                "--checks-dir",
                str(first),
                "--checks-dir",
                str(second),
            ]
        )
    err = capsys.readouterr().err
    assert done.value.code == 3
    assert len(err.strip().splitlines()) == 1
    assert "'site-twice' is defined twice" in err
    assert "site_twice.py" in err and "again.py" in err


def test_a_site_check_reusing_a_builtin_id_is_refused_not_dropped(capsys, tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "xid.py").write_text(
        "from llmdoctor.engine.registry import check\n\n\n"
        '@check("xid", title="site xid", scope="node")\n'
        "def xid(facts):\n    return None\n"
    )
    with pytest.raises(SystemExit) as done:
        cli_run(
            ["diagnose", "--bundle", str(EXAMPLES / "healthy-vllm-7b"), "--checks-dir", str(folder)]
        )
    err = capsys.readouterr().err
    assert done.value.code == 3
    assert "'xid' is defined twice" in err and "checks/xid.py" in err and str(folder) in err
