"""explain reads whatever it is given within bounds (llmdoctor/triage/log_input.py): UTF-16, gzip
from a pipe, binary, devices, FIFOs, gzip bombs, endless streams, huge lines, NUL runs."""

from __future__ import annotations

import gzip
import json
import os

import pytest

from llmdoctor.cli import run as cli_run

OOM_LINE = (
    # PyTorch's message, as in examples/bundles/crashloop-cuda-oom/logs/vllm.previous.log
    "ERROR 03-13 09:00:43 [core.py:330] torch.OutOfMemoryError: CUDA out of memory. "
    "Tried to allocate 1.16 GiB. GPU 0 has a total capacity of 7.75 GiB of which 1.17 GiB is free."
)


def explain_cli(capsys, *args: str, stdin: bytes | None = None, monkeypatch=None):
    import io
    import sys

    if stdin is not None:
        assert monkeypatch is not None
        fake = io.TextIOWrapper(io.BufferedReader(io.BytesIO(stdin)))
        monkeypatch.setattr(sys, "stdin", fake)
    with pytest.raises(SystemExit) as done:
        cli_run(["explain", *args])
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    return int(done.value.code), out.out, out.err


def test_a_utf16_log_is_read_as_text(capsys, tmp_path):
    # PowerShell's `kubectl logs ... > crash.log` writes UTF-16 LE with a BOM
    log = tmp_path / "crash.log"
    log.write_bytes(("INFO starting\r\n" + OOM_LINE + "\r\n").encode("utf-16"))
    code, out, err = explain_cli(capsys, str(log), "--json")
    assert code == 2
    assert json.loads(out)["matches"][0]["id"] == "cuda-oom-runtime"
    assert "read as UTF-16-LE text" in err


def test_utf16_without_a_bom_on_stdin_is_read_as_text(capsys, monkeypatch):
    data = (OOM_LINE + "\n").encode("utf-16-le")
    code, out, _ = explain_cli(capsys, "-", "--json", stdin=data, monkeypatch=monkeypatch)
    assert code == 2 and json.loads(out)["matches"][0]["id"] == "cuda-oom-runtime"


@pytest.mark.parametrize("from_stdin", [False, True])
def test_a_utf8_bom_is_no_part_of_the_first_line(capsys, tmp_path, monkeypatch, from_stdin):
    # Notepad and PowerShell 7's `Out-File -Encoding utf8BOM` start the file with EF BB BF
    data = b"\xef\xbb\xbf" + (OOM_LINE + "\n").encode()
    if from_stdin:
        code, out, _ = explain_cli(capsys, "-", "--json", stdin=data, monkeypatch=monkeypatch)
    else:
        log = tmp_path / "crash.log"
        log.write_bytes(data)
        code, out, _ = explain_cli(capsys, str(log), "--json")
    first = json.loads(out)["matches"][0]
    assert code == 2 and first["id"] == "cuda-oom-runtime"
    assert first["evidence"][0]["text"] == OOM_LINE


def test_a_big_log_with_a_bom_reads_as_the_same_log_without_it(capsys, tmp_path):
    # over the size read whole, a file is read in blocks (and read again after an outage): the
    # BOM stays out of its first line there too, and it is no reason to read it otherwise
    body = (OOM_LINE + "\n" + "INFO 03-13 09:00:44 [loggers.py:1] serving\n" * 250_000).encode()
    plain, marked = tmp_path / "plain.log", tmp_path / "marked.log"
    plain.write_bytes(body)
    marked.write_bytes(b"\xef\xbb\xbf" + body)
    answers = []
    for log in (plain, marked):
        code, out, _ = explain_cli(capsys, str(log), "--json")
        doc = json.loads(out)
        answers.append((code, doc["matches"], doc["salient"], doc["read_whole"]))
    assert answers[0] == answers[1]
    assert answers[1][1][0]["evidence"][0]["text"] == OOM_LINE and not answers[1][3]


def test_a_bom_where_cat_joined_two_saved_logs_is_no_part_of_that_line(capsys, tmp_path):
    log = tmp_path / "joined.log"
    log.write_bytes(b"INFO starting\n\xef\xbb\xbf" + (OOM_LINE + "\n").encode())
    code, out, _ = explain_cli(capsys, str(log), "--json")
    assert code == 2 and json.loads(out)["matches"][0]["evidence"][0]["text"] == OOM_LINE


def test_gzip_from_a_pipe_is_not_consumed_by_sniffing(capsys, tmp_path):
    # `llmdoctor explain <(gzip -c crash.log)`: the path is a pipe, readable once
    import threading

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    data = gzip.compress((OOM_LINE + "\n").encode())

    def writer():
        with open(fifo, "wb") as fh:
            fh.write(data)

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    code, out, _ = explain_cli(capsys, str(fifo), "--json")
    thread.join(5)
    assert code == 2 and json.loads(out)["matches"][0]["id"] == "cuda-oom-runtime"


def test_binary_on_stdin_is_refused_not_searched(capsys, monkeypatch):
    blob = bytes(range(256)) * 400
    code, _, err = explain_cli(capsys, "-", stdin=blob, monkeypatch=monkeypatch)
    assert code == 3 and "looks like binary data" in err


def test_dev_zero_is_refused_at_once(capsys):
    code, _, err = explain_cli(capsys, "/dev/zero")
    assert code == 3 and "is a device, not a log file" in err


def test_endless_nul_bytes_on_stdin_stop_with_a_reason(capsys, monkeypatch):
    from llmdoctor.triage import log_input

    monkeypatch.setattr(log_input, "MAX_NUL_PREFIX", 1 << 20)
    code, _, err = explain_cli(capsys, "-", stdin=b"\0" * (3 << 20), monkeypatch=monkeypatch)
    assert code == 3 and "NUL bytes and nothing else" in err


def test_a_fifo_without_a_writer_is_refused_after_a_wait(capsys, tmp_path, monkeypatch):
    import time

    from llmdoctor.triage import log_input

    monkeypatch.setattr(log_input, "FIFO_WRITER_WAIT", 0.3)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    started = time.monotonic()
    code, _, err = explain_cli(capsys, str(fifo))
    assert time.monotonic() - started < 10
    assert code == 3 and "a named pipe with no writer (waited 0.3s)" in err


def test_a_gzip_bomb_is_refused_by_its_ratio(capsys, tmp_path, monkeypatch):
    from llmdoctor.triage import log_input

    monkeypatch.setattr(log_input, "GZIP_RATIO_FROM", 1 << 20)
    bomb = tmp_path / "vllm.log.1.gz"
    bomb.write_bytes(gzip.compress(b"INFO x\n" * (4 << 20), 9))  # 28 MiB from ~50 KiB
    code, _, err = explain_cli(capsys, str(bomb))
    assert code == 3 and "refusing it as a decompression bomb" in err


def test_a_stream_of_unknown_size_is_read_up_to_the_cap_and_says_so(capsys, monkeypatch):
    from llmdoctor.triage import log_input

    monkeypatch.setattr(log_input, "MAX_STREAM_BYTES", 1 << 20)
    data = (OOM_LINE + "\n").encode() + b"INFO fine\n" * 300_000
    code, _, err = explain_cli(capsys, "-", stdin=data, monkeypatch=monkeypatch)
    assert code == 2
    assert "not read: everything after the first" in err and "split it or pass a file" in err


def test_a_gzip_file_read_up_to_the_cap_says_to_decompress_it(capsys, monkeypatch, tmp_path):
    # a file is read whole, a gzip file as a stream up to the cap: "pass a file" was no advice
    # to someone who had passed one
    import gzip

    from llmdoctor.triage import log_input

    monkeypatch.setattr(log_input, "MAX_STREAM_BYTES", 1 << 20)
    log = tmp_path / "vllm.log.gz"
    log.write_bytes(gzip.compress((OOM_LINE + "\n").encode() + b"INFO fine\n" * 300_000))
    code, _, err = explain_cli(capsys, str(log))
    assert code == 2
    assert "not read: everything after the first 1 MiB" in err
    assert "decompress it and pass the file" in err and "split it" not in err


def test_a_huge_line_is_cut_and_said_so_in_linear_time(capsys, tmp_path):
    # 192 MiB on one line: before, the block reader re-copied the growing line (quadratic)
    import time

    log = tmp_path / "one-line.log"
    with open(log, "wb") as fh:
        fh.write(OOM_LINE.encode() + b" ")
        for _ in range(24):
            fh.write(b"y" * (8 << 20))
        fh.write(b"\nINFO after\n")
    started = time.monotonic()
    code, out, err = explain_cli(capsys, str(log), "--json")
    assert time.monotonic() - started < 30
    assert code == 2 and json.loads(out)["matches"][0]["id"] == "cuda-oom-runtime"
    assert "not read: the middle of 1 line(s) longer than 1 MiB" in err


def test_a_log_removed_as_it_is_opened_is_a_clear_error(capsys, tmp_path, monkeypatch):
    # logrotate removed the file between explain's open and its read: one line, exit 3, no
    # "internal error"
    from llmdoctor.triage import log_input

    log = tmp_path / "server.log"
    log.write_text(OOM_LINE + "\n")
    peek = log_input._peek

    def peek_then_remove(raw, n):
        out = peek(raw, n)
        log.unlink()
        return out

    monkeypatch.setattr(log_input, "_peek", peek_then_remove)
    code, _, err = explain_cli(capsys, str(log))
    assert code == 3 and "cannot be read" in err and "internal error" not in err


def test_the_middle_of_a_cut_line_is_said_unread_not_called_healthy(capsys, tmp_path):
    # an OOM in the middle of a 4 MiB line is never read: the answer says which part went
    # unread (text and JSON), and never that no line of the log looks like an error
    log = tmp_path / "one-long-line.log"
    with open(log, "wb") as fh:
        fh.write(b"x" * (2 << 20) + b" " + OOM_LINE.encode() + b" " + b"y" * (2 << 20) + b"\n")
        fh.write(b"INFO after\n")
    code, out, _ = explain_cli(capsys, str(log))
    assert code == 0 and "No line it read looks like an error" in out
    assert "Not checked: the middle of 1 line(s) longer than 1 MiB" in out
    code, out, _ = explain_cli(capsys, str(log), "--json")
    assert json.loads(out)["unchecked"] == [
        "the middle of 1 line(s) longer than 1 MiB (only their beginning and their end were read)"
    ]


def test_a_line_over_the_bound_is_found_anywhere_without_mapping_the_file(tmp_path):
    # has_line_over looks near every half-MiB with pread: a 3 MiB line is found wherever it
    # sits (in a window's middle, after a run of short lines), normal lines never are
    from llmdoctor.triage.log_input import has_line_over

    short = b"INFO 05-12 19:01:18 [engine.py:310] all fine\n" * 40_000
    for where in (0, 1, len(short) // 2):
        log = tmp_path / f"long-{where}.log"
        log.write_bytes(short[:where] + b"x" * (3 << 20) + b"\n" + short[where:])
        with open(log, "rb") as fh:
            assert has_line_over(fh.fileno())
    plain = tmp_path / "plain.log"
    plain.write_bytes(short * 3)
    with open(plain, "rb") as fh:
        assert not has_line_over(fh.fileno())
    # a line of 200 KiB (a big JSON body) is long, but no over-long line
    near = tmp_path / "near.log"
    near.write_bytes(short + b"y" * (200 << 10) + b"\n" + short)
    with open(near, "rb") as fh:
        assert not has_line_over(fh.fileno())


def test_line_capping_keeps_every_short_line_exact():
    import io

    from llmdoctor.triage.log_input import LogStream

    text = b"".join(b"x" * n + b"\n" for n in (0, 5, 30, 31, 64, 65, 200, 3)) + b"tail"
    stream = LogStream(io.BufferedReader(io.BytesIO(text)), "t", max_line=64)
    got = b""
    while chunk := stream.read(7):
        got += chunk
    lines = got.split(b"\n")
    # a line over 64 bytes keeps its first 48 and its last 9, " [...] " between them: 64
    assert [len(x) for x in lines] == [0, 5, 30, 31, 64, 64, 64, 3, 4]
    assert lines[5] == b"x" * 48 + b" [...] " + b"x" * 9
    assert stream.lines_cut == 2


@pytest.mark.parametrize("newline", [b"\n", b""])
def test_an_error_at_the_end_of_an_over_long_line_is_still_read(capsys, tmp_path, newline):
    # a JSON record or an echoed prompt of 3 MiB that ends in the error (the log's last line
    # with or without its newline)
    log = tmp_path / "long-record.log"
    log.write_bytes(b"INFO start\n" + b"y" * (3 << 20) + b" " + OOM_LINE.encode() + newline)
    code, out, err = explain_cli(capsys, str(log), "--json")
    assert code == 2 and json.loads(out)["matches"][0]["id"] == "cuda-oom-runtime"
    assert (
        "not read: the middle of 1 line(s) longer than 1 MiB (only their beginning and their end"
        " were read)" in err
    )


def test_a_copytruncated_log_file_with_a_long_nul_run_is_still_read(capsys, tmp_path, monkeypatch):
    from llmdoctor.triage import log_input

    monkeypatch.setattr(log_input, "MAX_NUL_PREFIX", 1 << 20)
    log = tmp_path / "vllm.log"
    log.write_bytes(b"\0" * (3 << 20) + (OOM_LINE + "\n").encode())
    code, out, _ = explain_cli(capsys, str(log), "--json")
    assert code == 2 and json.loads(out)["matches"][0]["id"] == "cuda-oom-runtime"
