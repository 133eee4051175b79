"""Blocks of whole lines (signatures.read_blocks): a regular file is read block by block up to
the end of the line each block stops in, with the same cuts as a stream read with readline.
"""

from __future__ import annotations

import io
import os

from hypothesis import example, given, settings
from hypothesis import strategies as st

from llmdoctor.wiki.signatures import LINE_END_WINDOW, read_blocks


def stream_blocks(data: bytes, size: int) -> list[bytes]:
    return list(read_blocks(io.BytesIO(data), size))


def file_blocks(tmp_path, data: bytes, size: int) -> tuple[list[bytes], int]:
    path = tmp_path / "log"
    path.write_bytes(data)
    with open(path, "rb") as fh:
        blocks = list(read_blocks(fh, size))
        return blocks, fh.tell()


lines = st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=30)


@settings(max_examples=200, deadline=None)
@given(lines=lines, ended=st.booleans(), size=st.integers(1, 64))
@example(lines=[b"ab", b"cd"], ended=True, size=3)  # a block ends on a newline exactly
@example(lines=[], ended=False, size=4)
def test_a_file_is_cut_where_a_stream_is(tmp_path_factory, lines, ended, size):
    data = b"\n".join(lines) + (b"\n" if ended and lines else b"")
    blocks, position = file_blocks(tmp_path_factory.mktemp("blocks"), data, size)
    assert blocks == stream_blocks(data, size)
    assert b"".join(blocks) == data
    assert all(block.endswith(b"\n") for block in blocks[:-1])
    assert position == len(data)


def test_a_line_longer_than_the_window_stays_one_line(tmp_path):
    long = b"x" * (3 * LINE_END_WINDOW + 5)
    data = b"first\n" + long + b"\nlast line without newline"
    blocks, position = file_blocks(tmp_path, data, 4)
    assert blocks == [b"first\n", long + b"\n", b"last line without newline"]
    assert blocks == stream_blocks(data, 4)
    assert position == len(data)


def test_a_file_read_from_the_middle_starts_where_it_was(tmp_path):
    path = tmp_path / "log"
    path.write_bytes(b"skipped\none\ntwo\n")
    with open(path, "rb") as fh:
        fh.readline()
        assert list(read_blocks(fh, 3)) == [b"one\n", b"two\n"]


def test_a_last_line_a_writer_is_finishing_is_read_whole(tmp_path, monkeypatch):
    # A live log: its last line is half written when the block is read, and finished before the
    # next read; the block is read again, never split in two lines.
    path = tmp_path / "live.log"
    path.write_bytes(b"first\nsecond half")
    real_pread = os.pread
    appended = []

    def pread(fd, n, offset):
        data = real_pread(fd, n, offset)
        if data.endswith(b"half") and not appended:
            with open(path, "ab") as out:
                out.write(b" written\nthird\n")
            appended.append(True)
        return data

    monkeypatch.setattr(os, "pread", pread)
    with open(path, "rb") as fh:
        blocks = list(read_blocks(fh, 8))
        position = fh.tell()
    assert blocks == [b"first\nsecond half written\n", b"third\n"]
    assert position == path.stat().st_size
