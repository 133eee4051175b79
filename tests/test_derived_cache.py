"""Values worked out once and read back from the cache folder (llmdoctor.wiki.derived_cache):
the same answers as working them out, never a stale or broken file's."""

from __future__ import annotations

import os
from pathlib import Path

from llmdoctor.render import fix_text
from llmdoctor.triage.explain import SALIENT_ID, SALIENT_KEPT, _salient_entry
from llmdoctor.wiki import derived_cache
from llmdoctor.wiki.derived_cache import kept_values
from llmdoctor.wiki.digit_blind import digit_blind
from llmdoctor.wiki.signatures import SignatureSet, _work_out_facts, literal_weight


class Calls:
    def __init__(self):
        self.asked: list[list] = []

    def __call__(self, keys: list) -> list:
        self.asked.append(list(keys))
        return [(len(k), k.upper()) if isinstance(k, str) else ("not text",) for k in keys]


def cache_file(kind: str) -> Path:
    return Path(os.environ["XDG_CACHE_HOME"]) / "llmdoctor" / f"{kind}.marshal"


def fresh_process() -> None:
    derived_cache._held.clear()  # what a new process starts with


def test_values_are_worked_out_once_then_read_back(tmp_path):
    source = tmp_path / "code.py"
    source.write_text("x = 1\n")
    work = Calls()
    first = kept_values("t", ["ab", "c", "ab"], work, [str(source)])
    fresh_process()
    again = kept_values("t", ["c", "ab", "new"], work, [str(source)])
    assert first == [(2, "AB"), (1, "C"), (2, "AB")]
    assert again == [(1, "C"), (2, "AB"), (3, "NEW")]
    assert work.asked == [["ab", "c"], ["new"]]  # each text worked out once


def test_changed_code_works_the_values_out_again(tmp_path):
    source = tmp_path / "code.py"
    source.write_text("x = 1\n")
    work = Calls()
    kept_values("t", ["ab"], work, [str(source)])
    source.write_text("x = 22\n")  # another size: another version of the code
    fresh_process()
    kept_values("t", ["ab"], work, [str(source)])
    assert work.asked == [["ab"], ["ab"]]


def test_a_broken_file_is_worked_around(tmp_path):
    work = Calls()
    kept_values("t", ["ab"], work, [])
    for garbage in (b"", b"\x00\xff not marshal", b"\xe9" * 10):
        cache_file("t").write_bytes(garbage)
        fresh_process()
        assert kept_values("t", ["ab"], work, []) == [(2, "AB")]
    assert len(work.asked) == 4


def test_keys_that_are_not_text_are_never_kept():
    work = Calls()
    odd = ["x", 7, None]
    assert kept_values("t", odd, work, []) == [(1, "X"), ("not text",), ("not text",)]
    fresh_process()
    assert kept_values("t", odd, work, []) == [(1, "X"), ("not text",), ("not text",)]
    assert work.asked == [["x"], [7, None], [7, None]]


def test_a_file_that_cannot_be_written_costs_only_the_work():
    # a folder where the file should be: neither read nor replaced (root ignores modes)
    cache_file("t").parent.mkdir(parents=True, exist_ok=True)
    cache_file("t").mkdir()
    work = Calls()
    assert kept_values("t", ["ab"], work, []) == [(2, "AB")]
    fresh_process()
    assert kept_values("t", ["ab"], work, []) == [(2, "AB")]
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
    (facts,) = kept_values("signature-facts", ["(unclosed"], _work_out_facts, [])
    fresh_process()
    (again,) = kept_values("signature-facts", ["(unclosed"], _work_out_facts, [])
    assert facts == again and facts[0].startswith("RE2 cannot compile it")


def test_fix_steps_read_back_equal_the_parsed_ones(entries):
    for entry in entries.values():
        parsed = fix_text._parsed_steps(entry.fix)
        assert fix_text.steps_of(entry.fix) == parsed, entry.id
        fresh_process()
        assert fix_text.steps_of(entry.fix) == parsed, entry.id  # from the file
