"""A slow first token is named queue saturation only when the scrapes saw a queue; a full KV
cache is a problem only when something waits, swaps or is preempted.

The bundles are the real vLLM 0.32 drills' (tests/fixtures/real-vllm-0.32/, SOURCES.md there)
with one file changed per case: the probe's timings (a slow first token, as a real probe
measured it in the KV-full drill: 2,639 ms of 2,912) or the waiting gauges of a scrape.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from vllm_server import set_values

from llmdoctor.cli import run as cli_run

REAL = Path(__file__).parent / "fixtures" / "real-vllm-0.32"
WAITING = ("vllm:num_requests_waiting", "vllm:num_requests_waiting_by_reason")


def real_bundle(tmp_path: Path, drill: str, name: str = "bundle") -> Path:
    path = tmp_path / name
    shutil.copytree(REAL / drill / "bundle", path)
    return path


def slow_first_token(path: Path, ttft_ms: float = 5900.0, total_ms: float = 6200.0) -> None:
    """The healthy drill's completed probe, its first token `ttft_ms` late."""
    probe = json.loads((REAL / "healthy" / "bundle" / "vllm" / "probe.json").read_text())
    probe.update(ttft_ms=ttft_ms, latency_ms=total_ms)
    (path / "vllm" / "probe.json").write_text(json.dumps(probe))


def set_waiting(path: Path, waiting: float, *scrapes: int) -> None:
    """The waiting gauges of these scrapes (0, 1) set to `waiting`."""
    for scrape in scrapes:
        metrics = path / "vllm" / f"metrics-{scrape}.txt"
        metrics.write_text(set_values(metrics.read_text(), dict.fromkeys(WAITING, waiting)))


def diagnose(capsys, path: Path, *extra: str) -> tuple[int, str]:
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        cli_run(["diagnose", "--bundle", str(path), "--no-color", *extra])
    return exit_info.value.code, capsys.readouterr().out


def diagnose_json(capsys, path: Path) -> dict:
    _, out = diagnose(capsys, path, "--json")
    return json.loads(out)


def finding(report: dict, check: str) -> dict:
    (found,) = [f for f in report["findings"] if f["check"] == check]
    return found


def root_cause_line(text: str) -> str:
    return next(line for line in text.splitlines() if line.startswith("Root cause"))


def test_a_slow_first_token_with_no_queue_in_the_scrapes_is_not_named_queue_saturation(
    tmp_path, capsys
):
    # the healthy drill's scrapes: 0 running, 0 waiting in both, 3.0 s apart
    path = real_bundle(tmp_path, "healthy")
    slow_first_token(path)
    code, text = diagnose(capsys, path)
    root = root_cause_line(text)
    assert code == 2 and "Request queue saturated" not in root, root
    assert "first token (5900 ms)" in root and "(runbook " not in root, root
    assert "0 waiting over the 3.0 s between two scrapes: not a queue" in root, root
    assert "Do now      no cause is proven" in text
    assert "runbook tokenizer-problem:" in text and "runbook gateway-timeout:" in text
    # the queue check's "no queue" agrees with the finding: it keeps its check mark, and no
    # check mark is doubted
    assert "Cannot tell" not in text, text
    report = diagnose_json(capsys, path)
    gen = finding(report, "vllm-generation")
    assert gen["severity"] == "critical" and "5900 ms" in gen["summary"]
    assert gen["runbooks"] == ["tokenizer-problem", "gateway-timeout"]
    assert finding(report, "vllm-queue")["severity"] == "ok"
    assert "contradicted_by" not in finding(report, "vllm-queue")


def test_waiting_in_one_scrape_only_is_not_a_sustained_queue(tmp_path, capsys):
    path = real_bundle(tmp_path, "healthy")
    slow_first_token(path)
    set_waiting(path, 3, 1)
    report = diagnose_json(capsys, path)
    gen = finding(report, "vllm-generation")
    assert "waiting 0 → 3" in gen["summary"] and "not a sustained one" in gen["summary"]
    # a queue that may be forming is a place to look, first, not the proven cause
    assert gen["runbooks"][0] == "queue-saturation" and gen["runbooks_unproven"] is True


def test_a_slow_first_token_behind_a_real_queue_still_names_queue_saturation(tmp_path, capsys):
    # the saturation drill's scrapes: 4 running at --max-num-seqs 4, 14 then 10 waiting
    path = real_bundle(tmp_path, "saturation")
    slow_first_token(path)
    code, text = diagnose(capsys, path, "--max-num-seqs", "4")
    assert code == 2 and "not a queue" not in text and "no cause is proven" not in text, text
    gen = finding(diagnose_json(capsys, path), "vllm-generation")
    assert gen["runbooks"] == ["queue-saturation"]
    assert "requests waited in every scrape (waiting 14 → 10)" in gen["summary"]
    # told under the queue (itself under the full cache that holds it, as before)
    assert {"check": "vllm-queue", "subject": gen["subject"]} in gen["explained_by"]


def test_without_metrics_the_queue_is_said_unchecked_not_assumed(tmp_path, capsys):
    path = real_bundle(tmp_path, "healthy")
    slow_first_token(path)
    for name in ("metrics-0.txt", "metrics-1.txt", "scrapes.json"):
        (path / "vllm" / name).unlink()
    code, text = diagnose(capsys, path)
    root = root_cause_line(text)
    assert code == 2 and "the queue could not be checked" in root, root
    assert "Request queue saturated" not in root and "(runbook " not in root, root
    gen = finding(diagnose_json(capsys, path), "vllm-generation")
    assert gen["runbooks"][0] == "queue-saturation" and "tokenizer-problem" in gen["runbooks"]


def full_cache_bundle(tmp_path: Path, waiting: float) -> Path:
    """The saturation drill's scrapes (4 running, the cache at 100 %, no preemption) with
    `waiting` requests in both, and the healthy drill's working probe."""
    path = real_bundle(tmp_path, "saturation", f"waiting-{waiting:g}")
    shutil.copy(REAL / "healthy" / "bundle" / "vllm" / "probe.json", path / "vllm" / "probe.json")
    set_waiting(path, waiting, 0, 1)
    return path


def test_a_full_kv_cache_with_nothing_waiting_is_a_note_not_a_warning(tmp_path, capsys):
    report = diagnose_json(capsys, full_cache_bundle(tmp_path, 0))
    kv = finding(report, "vllm-kv-cache")
    assert kv["severity"] == "info", kv
    assert "KV cache at 100.0%" in kv["summary"] and "0 waiting" in kv["summary"]
    assert "next burst will queue or preempt" in kv["summary"]
    # the drill's own slow first tokens (vllm-latency) remain; the cache is not named for them
    code, text = diagnose(capsys, full_cache_bundle(tmp_path / "again", 0))
    assert code == 1 and "kv-cache-preemption" not in root_cause_line(text), text
    assert " INFO  vllm-kv-cache" in text and "WARNING  vllm-kv-cache" not in text, text


def test_a_full_kv_cache_with_requests_waiting_stays_a_warning(tmp_path, capsys):
    kv = finding(diagnose_json(capsys, full_cache_bundle(tmp_path, 5)), "vllm-kv-cache")
    assert kv["severity"] == "warning" and kv["runbooks"] == ["kv-cache-preemption"]
    assert "waiting 5 → 5" in kv["summary"]


def test_a_probe_timed_out_behind_a_real_queue_is_named_queue_saturation(tmp_path, capsys):
    # the saturation drill: the probe stalled 8 s while 16 clients kept 4 running and 10-14
    # waiting, tokens flowing
    path = real_bundle(tmp_path, "saturation")
    gen = finding(diagnose_json(capsys, path), "vllm-generation")
    assert "requests waited in every scrape" in gen["summary"], gen["summary"]
    assert "the probe waits behind them" in gen["summary"]
    assert gen["runbooks"] == ["queue-saturation"] and "runbooks_unproven" not in gen


def test_a_probe_timed_out_while_tokens_flow_and_nothing_waits_is_not_the_queue(tmp_path, capsys):
    # the same scrapes with nothing waiting in either: the engine generates, yet the probe got
    # no byte in 8 s, so it was held before the engine's queue (or its own request is slow)
    path = real_bundle(tmp_path, "saturation")
    set_waiting(path, 0, 0, 1)
    code, text = diagnose(capsys, path)
    root = root_cause_line(text)
    assert code == 2 and "Request queue saturated" not in root, root
    assert "0 waiting over the" in root and "held before the engine's queue" in root, root
    assert "Do now      no cause is proven" in text
    gen = finding(diagnose_json(capsys, path), "vllm-generation")
    assert gen["runbooks"] == ["gateway-timeout", "tokenizer-problem"]
    assert gen["runbooks_unproven"] is True


def probe_timings(path: Path, **timings) -> None:
    """The healthy drill's completed probe with these timings (ms, or None, NaN ...)."""
    probe = json.loads((REAL / "healthy" / "bundle" / "vllm" / "probe.json").read_text())
    probe.update(timings)
    (path / "vllm" / "probe.json").write_text(json.dumps(probe))


def test_a_slow_decode_with_clean_metrics_names_no_cause(tmp_path, capsys):
    # the first token in 1 s of 5: decoding was slow, but the window shows no preemption, no
    # queue and no --enforce-eager: the usual suspects are places to look, not a verdict
    path = real_bundle(tmp_path, "healthy")
    probe_timings(path, latency_ms=5000.0, ttft_ms=1000.0, itl_ms=250.0)
    code, text = diagnose(capsys, path)
    root = root_cause_line(text)
    assert code == 2 and "KV cache full" not in root and "(runbook " not in root, root
    assert "decoding is slow (inter-token 250 ms)" in root and "no cause is proven" in root, root
    gen = finding(diagnose_json(capsys, path), "vllm-generation")
    assert gen["runbooks_unproven"] is True


def test_a_slow_decode_with_preemptions_in_the_window_names_the_cache(tmp_path, capsys):
    # the KV-full drill's scrapes: preemptions rose between them
    path = real_bundle(tmp_path, "kv-full")
    probe_timings(path, latency_ms=5000.0, ttft_ms=1000.0, itl_ms=250.0)
    gen = finding(diagnose_json(capsys, path), "vllm-generation")
    assert gen["runbooks"][0] == "kv-cache-preemption" and "runbooks_unproven" not in gen


def test_requests_waiting_with_none_running_are_not_a_capacity_queue(tmp_path, capsys):
    # 50 waiting in both scrapes, 0 running (the probe's own 16 tokens generated between the
    # scrapes): adding replicas is not the fix
    path = real_bundle(tmp_path, "healthy")
    slow_first_token(path)
    set_waiting(path, 50, 0, 1)
    code, text = diagnose(capsys, path)
    root = root_cause_line(text)
    assert code == 2 and "Request queue saturated" not in root, root
    assert "with none running" in root and "not a capacity queue" in root, root
    gen = finding(diagnose_json(capsys, path), "vllm-generation")
    assert "queue-saturation" not in gen["runbooks"] and gen["runbooks_unproven"] is True


@pytest.mark.parametrize(
    ("timings", "why"),
    [
        ({"latency_ms": None}, "latency_ms None"),
        ({"latency_ms": float("nan")}, "latency_ms nan"),
        ({"latency_ms": -5.0, "ttft_ms": -3.0}, "latency_ms -5.0"),
        ({"latency_ms": 500.0, "ttft_ms": 4000.0}, "ttft_ms 4000 after latency_ms 500"),
        # a streamed generation over HTTP measured at 0 ms was not measured
        ({"latency_ms": 0.0, "ttft_ms": 0.0}, "latency_ms 0 for"),
    ],
)
def test_unreadable_probe_timings_are_never_a_check_mark(tmp_path, capsys, timings, why):
    path = real_bundle(tmp_path, "healthy")
    probe_timings(path, **timings)
    gen = finding(diagnose_json(capsys, path), "vllm-generation")
    assert gen["severity"] == "info", gen
    assert why in gen["summary"] and "latency not judged" in gen["summary"], gen["summary"]


def test_a_full_kv_cache_with_nothing_running_is_not_explained_by_running_requests(
    tmp_path, capsys
):
    path = real_bundle(tmp_path, "healthy")
    for scrape in (0, 1):
        metrics = path / "vllm" / f"metrics-{scrape}.txt"
        metrics.write_text(set_values(metrics.read_text(), {"vllm:kv_cache_usage_perc": 1.0}))
    kv = finding(diagnose_json(capsys, path), "vllm-kv-cache")
    assert kv["severity"] == "warning", kv
    assert "no request running" in kv["summary"] and "running requests fill it" not in kv["summary"]


def test_a_negative_waiting_gauge_is_ignored_not_read_as_a_queue(tmp_path, capsys):
    path = real_bundle(tmp_path, "healthy")
    slow_first_token(path)
    set_waiting(path, -7, 0, 1)
    report = diagnose_json(capsys, path)
    gen = finding(report, "vllm-generation")
    assert "-7" not in gen["summary"], gen["summary"]
    notes = json.dumps(report)
    assert "vllm:num_requests_waiting is -7.0, below 0 (ignored)" in notes
