"""Values worked out once and read back from the cache folder (llmdoctor.wiki.derived_cache):
the same answers as working them out, never a stale or broken file's."""

from __future__ import annotations

import marshal
import os
import subprocess
import sys
from pathlib import Path

from llmdoctor.render import fix_text
from llmdoctor.triage.explain import SALIENT_ID, SALIENT_KEPT, _salient_entry
from llmdoctor.wiki import derived_cache
from llmdoctor.wiki.derived_cache import kept_values
from llmdoctor.wiki.digit_blind import digit_blind
from llmdoctor.wiki.signatures import SignatureSet, _is_facts, _work_out_facts, literal_weight


class Calls:
    def __init__(self):
        self.asked: list[list] = []

    def __call__(self, keys: list) -> list:
        self.asked.append(list(keys))
        return [(len(k), k.upper()) if isinstance(k, str) else ("not text",) for k in keys]


def is_pair(value) -> bool:
    return isinstance(value, tuple) and len(value) in (1, 2)


def cache_file(kind: str) -> Path:
    return Path(os.environ["XDG_CACHE_HOME"]) / "llmdoctor" / f"{kind}.marshal"


def fresh_process() -> None:
    derived_cache._held.clear()  # what a new process starts with


def test_values_are_worked_out_once_then_read_back(tmp_path):
    source = tmp_path / "code.py"
    source.write_text("x = 1\n")
    work = Calls()
    first = kept_values("t", ["ab", "c", "ab"], work, [str(source)], is_pair)
    fresh_process()
    again = kept_values("t", ["c", "ab", "new"], work, [str(source)], is_pair)
    assert first == [(2, "AB"), (1, "C"), (2, "AB")]
    assert again == [(1, "C"), (2, "AB"), (3, "NEW")]
    assert work.asked == [["ab", "c"], ["new"]]  # each text worked out once


def test_changed_code_works_the_values_out_again(tmp_path):
    source = tmp_path / "code.py"
    source.write_text("x = 1\n")
    work = Calls()
    kept_values("t", ["ab"], work, [str(source)], is_pair)
    source.write_text("x = 22\n")  # another size: another version of the code
    fresh_process()
    kept_values("t", ["ab"], work, [str(source)], is_pair)
    assert work.asked == [["ab"], ["ab"]]


def test_a_broken_file_is_worked_around(tmp_path):
    work = Calls()
    kept_values("t", ["ab"], work, [], is_pair)
    for garbage in (b"", b"\x00\xff not marshal", b"\xe9" * 10):
        cache_file("t").write_bytes(garbage)
        fresh_process()
        assert kept_values("t", ["ab"], work, [], is_pair) == [(2, "AB")]
    assert len(work.asked) == 4


def test_keys_that_are_not_text_are_never_kept():
    work = Calls()
    odd = ["x", 7, None]
    assert kept_values("t", odd, work, [], is_pair) == [(1, "X"), ("not text",), ("not text",)]
    fresh_process()
    assert kept_values("t", odd, work, [], is_pair) == [(1, "X"), ("not text",), ("not text",)]
    assert work.asked == [["x"], [7, None], [7, None]]


def test_a_file_that_cannot_be_written_costs_only_the_work():
    # a folder where the file should be: neither read nor replaced (root ignores modes)
    cache_file("t").parent.mkdir(parents=True, exist_ok=True)
    cache_file("t").mkdir()
    work = Calls()
    assert kept_values("t", ["ab"], work, [], is_pair) == [(2, "AB")]
    fresh_process()
    assert kept_values("t", ["ab"], work, [], is_pair) == [(2, "AB")]
    assert work.asked == [["ab"], ["ab"]]
    assert [p.name for p in cache_file("t").parent.iterdir()] == ["t.marshal"]  # no tmp left


def test_a_signature_set_from_kept_facts_is_the_one_worked_out(entries):
    built = [*entries.values(), _salient_entry()]
    first = SignatureSet(built, tail_ids=[SALIENT_ID], tail_keep=SALIENT_KEPT)
    assert cache_file("signature-facts").exists()
    fresh_process()
    second = SignatureSet(built, tail_ids=[SALIENT_ID], tail_keep=SALIENT_KEPT)
    assert second.patterns == first.patterns and second.weak == first.weak
    assert second._blind == first._blind and second.weights == first.weights
    assert second._literals == first._literals
    # and what was kept is what each signature is
    for (_, sig), blind, weight in zip(second.patterns, second._blind, second.weights, strict=True):
        assert (blind, weight) == (digit_blind(sig), literal_weight(sig)), sig


def test_an_unusable_signature_is_kept_as_such(entries):
    (facts,) = kept_values("signature-facts", ["(unclosed"], _work_out_facts, [], _is_facts)
    fresh_process()
    (again,) = kept_values("signature-facts", ["(unclosed"], _work_out_facts, [], _is_facts)
    assert facts == again and facts[0].startswith("RE2 cannot compile it")


def test_fix_steps_read_back_equal_the_parsed_ones(entries):
    for entry in entries.values():
        parsed = fix_text._parsed_steps(entry.fix)
        assert fix_text.steps_of(entry.fix) == parsed, entry.id
        fresh_process()
        assert fix_text.steps_of(entry.fix) == parsed, entry.id  # from the file


def test_values_of_the_wrong_shape_are_worked_out_again(entries):
    # a file of this code's version whose values were edited by hand: the work, not a crash
    built = [*entries.values(), _salient_entry()]
    first = SignatureSet(built, tail_ids=[SALIENT_ID], tail_keep=SALIENT_KEPT)
    fix = entries["cuda-oom-runtime"].fix
    parsed = fix_text.steps_of(fix)
    for kind, bad in (
        ("signature-facts", [5, (None,), ("x", "no", "", 0), (None, True, "", 0, 9)]),
        ("fix-steps", [5, "abc", ((None, (("p",),)),), (("pod", (("c", 1, ""),)),)]),
    ):
        for value in bad:
            stored = marshal.loads(cache_file(kind).read_bytes())
            stored["values"] = dict.fromkeys(stored["values"], value)
            cache_file(kind).write_bytes(marshal.dumps(stored))
            fresh_process()
            again = SignatureSet(built, tail_ids=[SALIENT_ID], tail_keep=SALIENT_KEPT)
            assert (again._blind, again.weights, again.patterns) == (
                first._blind,
                first.weights,
                first.patterns,
            )
            assert fix_text.steps_of(fix) == parsed, (kind, value)


def test_a_fifo_or_a_device_in_place_of_the_file_is_not_read(tmp_path):
    # opening a FIFO without a writer would wait forever; /dev/zero would never end
    cache_file("t").parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(cache_file("t"))
    (tmp_path / "zero").symlink_to("/dev/zero")
    code = (
        "from llmdoctor.wiki.derived_cache import kept_values\n"
        "from llmdoctor.wiki.cache import read_kept\n"
        "import sys\n"
        "assert read_kept(sys.argv[1]) is None\n"
        "print(kept_values('t', ['ab'], lambda ks: [(len(k),) for k in ks], [], lambda v: isinstance(v, tuple)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "zero")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and done.stdout == "[(2,)]\n", done.stderr


def test_every_file_of_the_deriving_code_keys_the_values(entries):
    SignatureSet(entries.values())
    fix_text.steps_of(entries["cuda-oom-runtime"].fix)
    facts = str(marshal.loads(cache_file("signature-facts").read_bytes())["version"])
    steps = str(marshal.loads(cache_file("fix-steps").read_bytes())["version"])
    for name in ("signatures.py", "digit_blind.py", "signature_text.py", "re2_patterns.py"):
        assert name in facts, name
    for name in ("fix_text.py", "fix_params.py", "markdown_it"):
        assert name in steps, name
