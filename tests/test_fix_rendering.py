"""Fixes work as printed: every runbook's Fix goes through the terminal report, the markdown
report, `wiki show` and the site, and each code block that comes out is the source's, byte for
byte (indentation included); a step is shown whole or not at all; parameters are filled from
the finding or shown as what they stand for."""

from __future__ import annotations

import html
import io
from pathlib import Path

import pytest
from report_width import lines_past
from rich.console import Console

from llmdoctor.engine.facts import Facts
from llmdoctor.engine.findings import Finding, Severity
from llmdoctor.engine.report import Report
from llmdoctor.render import fix_text
from llmdoctor.render.report import render_markdown, render_terminal
from llmdoctor.wiki.fix_params import fill
from llmdoctor.wiki.library import builtin_dir, load_library

ENTRIES = load_library().entries
IDS = sorted(ENTRIES)
FENCE_CHARS = ("`", "~")


def source_code_blocks(entry_id: str) -> list[str]:
    """The Fix section's fenced code blocks read straight from the runbook file, as CommonMark
    defines their content: the lines between the fences, less the opening fence's indentation."""
    lines = (builtin_dir() / f"{entry_id}.md").read_text(encoding="utf-8").splitlines()
    start = lines.index("## Fix") + 1
    blocks: list[str] = []
    fence = None  # (marker, indentation) of the open fence
    body: list[str] = []
    for line in lines[start:]:
        stripped = line.lstrip(" ")
        indent = len(line) - len(stripped)
        if fence is None:
            if line.startswith("## "):
                break
            if stripped[:3] in ("```", "~~~"):
                marker = stripped[: len(stripped) - len(stripped.lstrip(stripped[0]))]
                fence, body = (marker, indent), []
            continue
        marker, fence_indent = fence
        if stripped.startswith(marker) and not stripped.lstrip(marker[0]).strip():
            blocks.append("".join(f"{ln}\n" for ln in body))
            fence = None
            continue
        cut = min(fence_indent, len(line) - len(line.lstrip(" ")))
        body.append(line[cut:])
    return blocks


def _report(entry_id: str) -> Report:
    finding = Finding("log-signatures", Severity.CRITICAL, "seen", [], [entry_id])
    facts = Facts({"wiki/entries": ENTRIES, "target": "t"})
    return Report(target="t", findings=[finding], skipped=[], errors=[], facts=facts)


def _runs_of(block: str, out_lines: list[str]) -> int:
    """How many times the block's lines appear consecutively in the output, each after one
    shared whitespace prefix (the report's indentation)."""
    code = block.splitlines()
    found = 0
    for i in range(len(out_lines) - len(code) + 1):
        first = out_lines[i]
        if not first.endswith(code[0]) or first[: len(first) - len(code[0])].strip():
            continue
        prefix = first[: len(first) - len(code[0])]
        window = out_lines[i : i + len(code)]
        if all(
            got == (prefix + want if want else "").rstrip()
            for got, want in zip(window, code, strict=True)
        ):
            found += 1
    return found


def _shown_blocks(entry_id: str) -> list[str]:
    steps = fix_text.leading_steps(fix_text.fix_steps(ENTRIES[entry_id]))
    return [block.code for step in steps for block in step.code_blocks]


def test_the_source_reader_finds_the_code_blocks_the_runbooks_have():
    # the test's own reader must see what is there, or every comparison below is empty
    assert len(source_code_blocks("probe-killed-during-load")) == 1
    assert source_code_blocks("probe-killed-during-load")[0].startswith(
        "startupProbe:\n  httpGet: {path: /health, port: 8000}\n"
    )
    assert sum(len(source_code_blocks(i)) for i in IDS) >= 20


@pytest.mark.parametrize("entry_id", IDS)
def test_fix_steps_keep_every_code_block_of_the_source(entry_id):
    # the step parser drops no block and changes none
    steps = fix_text.fix_steps(ENTRIES[entry_id])
    got = [block.code for step in steps for block in step.code_blocks]
    assert got == [fill(b) for b in source_code_blocks(entry_id)]


@pytest.mark.parametrize("entry_id", IDS)
def test_terminal_report_prints_the_code_blocks_of_the_steps_it_shows_byte_for_byte(entry_id):
    # a block of a shown step is there whole; a block of a step left out is not there at all
    out = io.StringIO()
    render_terminal(_report(entry_id), Console(file=out, width=400, color_system=None))
    lines = [line.rstrip() for line in out.getvalue().splitlines()]
    shown = _shown_blocks(entry_id)
    for block in (fill(b) for b in source_code_blocks(entry_id)):
        assert _runs_of(block, lines) == (1 if block in shown else 0), block


@pytest.mark.parametrize("entry_id", IDS)
def test_markdown_report_fences_the_code_blocks_byte_for_byte(entry_id):
    # the markdown report is parsed back as markdown: its fences hold exactly the source's code
    from markdown_it import MarkdownIt

    text = render_markdown(_report(entry_id))
    # the finding has no evidence, so every fence in the report is the Fix's
    fences = [t.content for t in MarkdownIt("commonmark").parse(text) if t.type == "fence"]
    assert fences == _shown_blocks(entry_id)
    assert fences == [fill(b) for b in source_code_blocks(entry_id)][: len(fences)]


def test_wiki_show_prints_every_code_block_of_every_fix_byte_for_byte(monkeypatch):
    # the full Fix in the terminal: rich's markdown keeps code as written
    from typer.testing import CliRunner

    from llmdoctor.cli import app

    monkeypatch.setenv("COLUMNS", "400")
    runner = CliRunner()
    for entry_id in IDS:
        result = runner.invoke(app, ["wiki", "show", entry_id, "--no-color"])
        assert result.exit_code == 0, result.output
        lines = [line.rstrip() for line in result.output.splitlines()]
        for block in source_code_blocks(entry_id):
            assert _runs_of(fill(block), lines) >= 1, (entry_id, block)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    from llmdoctor.wiki.site import build_site

    return build_site(tmp_path_factory.mktemp("site") / "site").path


def test_site_pages_hold_every_code_block_of_every_fix_byte_for_byte(site):
    # the page's <pre><code> in the Fix section, unescaped, is the source's block
    for entry_id in IDS:
        page = (site / f"{entry_id}.html").read_text(encoding="utf-8")
        section = page.split('<section id="fix">', 1)[1].split("</section>", 1)[0]
        codes = [
            html.unescape(part.split(">", 1)[1].split("</code></pre>", 1)[0])
            for part in section.split("<pre><code")[1:]
        ]
        assert codes == [fill(b) for b in source_code_blocks(entry_id)], entry_id


@pytest.mark.parametrize("entry_id", IDS)
def test_an_80_column_terminal_gets_the_prose_reflowed_and_the_code_as_written(entry_id):
    # the runbooks' prose is hard-wrapped at ~100 columns for an editor: printed as written, an
    # 80-column terminal wrapped it again at column 0. Now the prose is re-flowed under its
    # step's text, and the code blocks are still there byte for byte, never wrapped
    out = io.StringIO()
    console = Console(file=out, width=80, color_system=None, force_terminal=True)
    render_terminal(_report(entry_id), console)
    lines = [line.rstrip() for line in out.getvalue().splitlines()]
    shown = _shown_blocks(entry_id)
    for block in (fill(b) for b in source_code_blocks(entry_id)):
        assert _runs_of(block, lines) == (1 if block in shown else 0), block
    code = {line for block in shown for line in fill(block).splitlines()}
    too_long = lines_past(lines, 80, code)
    assert not too_long, too_long


def test_a_code_span_in_the_prose_is_never_split_over_two_lines():
    steps = fix_text.leading_steps(fix_text.fix_steps(ENTRIES["vllm-startup-memory-insufficient"]))
    lines = fix_text.display_lines(steps, 60)
    command = (
        "`llmdoctor capacity --model-config config.json --gpu-memory <the GPU's memory> "
        "--max-model-len <the context you serve>`"
    )
    assert any(command in line for line in lines)
    assert all(line.count("`") % 2 == 0 for line in lines), lines
    # continuation lines hang under the step's text, after its number
    first = next(i for i, line in enumerate(lines) if line.startswith("1. "))
    assert lines[first + 1].startswith("   ") and not lines[first + 1].startswith("    ")
    # in a pipe (no width) the lines are the runbook's, as written
    assert fix_text.display_lines(steps, None) == [x for s in steps for x in s.lines()]


def test_yaml_nesting_survives_the_terminal_report():
    # the probe runbook's startupProbe: then httpGet: was printed at one indent before
    out = io.StringIO()
    render_terminal(
        _report("probe-killed-during-load"), Console(file=out, width=400, color_system=None)
    )
    text = out.getvalue()
    assert "    startupProbe:\n" in text.replace("Fix:     ", "         ")
    assert "      httpGet: {path: /health, port: 8000}\n" in text


@pytest.mark.parametrize("entry_id", IDS)
def test_a_step_is_shown_whole_or_not_at_all(entry_id):
    # the excerpt is the first steps, each with all its lines, never a step cut in half
    steps = fix_text.fix_steps(ENTRIES[entry_id])
    lines = fix_text.terminal_lines(ENTRIES[entry_id])
    whole = [line for step in steps for line in step.lines()]
    assert lines == whole[: len(lines)]
    cut = len(lines)
    assert cut == len(whole) or any(
        cut == sum(len(s.lines()) for s in steps[:n]) for n in range(1, len(steps))
    )


def test_a_reset_step_is_not_cut_before_its_command():
    # gsp-timeout's reset step ends in the nvidia-smi -r command: shown with it or left out
    lines = fix_text.terminal_lines(ENTRIES["gsp-timeout"])
    reset = [i for i, line in enumerate(lines) if line.startswith("2. Reset")]
    assert not reset or "nvidia-smi -r -i <gpu>" in lines[reset[0]]


def test_the_first_step_is_whole_even_when_it_is_long():
    # gpu-not-visible's first step (pod spec YAML + a sentence) is 9 lines: all of them
    step = fix_text.first_step(ENTRIES["gpu-not-visible"])
    assert step.code_blocks[0].code == source_code_blocks("gpu-not-visible")[0]
    assert step.lines()[-1].strip().startswith("Do not set `CUDA_VISIBLE_DEVICES`")
    assert fix_text.terminal_lines(ENTRIES["gpu-not-visible"])[: len(step.lines())] == step.lines()


# --- parameters -----------------------------------------------------------------------------


def test_a_finding_fills_the_max_model_len_its_log_stated():
    # vLLM's "estimated maximum model length is 5632" becomes the command to run
    finding = Finding("log-signatures", Severity.CRITICAL, "s", [], [], None)
    finding.params = {"max_model_len": 5632}
    step = fix_text.first_step(ENTRIES["kv-cache-too-small-for-max-model-len"], finding)
    assert "`--max-model-len 5632`" in step.text


def test_an_unknown_parameter_shows_what_it_stands_for_not_a_stock_number():
    # no finding: the reader sees what to put there, never 32768 as if it were this incident's
    step = fix_text.first_step(ENTRIES["kv-cache-too-small-for-max-model-len"])
    assert "--max-model-len <the estimated maximum model length in vLLM's error>" in step.text
    assert "32768" not in step.text


def test_a_value_of_the_wrong_kind_is_not_printed():
    # values come from logs: a utilization above 1 or a text is shown as its placeholder
    assert fill("--gpu-memory-utilization {gpu_memory_utilization}", {"gpu_memory_utilization": 7})
    assert "7" not in fill("{gpu_memory_utilization}", {"gpu_memory_utilization": 7})
    assert fill("kill {pid}", {"pid": "1; rm -rf /"}) == "kill <the pid holding the memory>"


def test_other_braces_are_text():
    # YAML flow maps, JSON and shell variables are not parameters
    text = "strategy: {type: Recreate} '{\"spec\":{}}' ${HOME} {Recreate}"
    assert fill(text) == text


TAKEN_LOG = (
    Path(__file__).parent
    / "fixtures/runbooks/gpu-memory-taken-by-other-process"
    / "vllm-0.9.1-free-memory-less-than-utilization-issue20305.log"
)


def test_the_step_filled_from_the_log_is_shown_and_other_steps_give_way():
    # vLLM's "Free memory on device (31.44/47.38 GiB)" gives 0.66: step 5, past the 8 lines,
    # is the one that carries it; step 3 (not filled) is left out for it, behind `wiki show`
    from typer.testing import CliRunner

    from llmdoctor.cli import app

    result = CliRunner().invoke(app, ["explain", str(TAKEN_LOG), "--no-color"])
    text = result.stdout
    assert "`--gpu-memory-utilization 0.66`" in text
    assert "1. Stale processes" in text and "5. Lowering the share" in text
    assert "3. Intentional sharing" not in text
    # the steps between, left to wiki show, are named
    assert "more (steps 3-4): llmdoctor wiki show gpu-memory-taken-by-other-process" in text


def test_a_filled_step_is_in_the_report_even_when_the_first_steps_fill_the_budget():
    # the diagnose report (terminal and markdown) shows the same steps as explain
    entry = ENTRIES["gpu-memory-taken-by-other-process"]
    finding = Finding("log-signatures", Severity.CRITICAL, "seen", [], [entry.id])
    finding.params = {"gpu_memory_utilization": 0.66}
    steps = fix_text.leading_steps(fix_text.fix_steps(entry, finding))
    assert steps[-1].filled and steps[-1].text.startswith("Lowering the share")
    facts = Facts({"wiki/entries": ENTRIES, "target": "t"})
    report = Report(target="t", findings=[finding], skipped=[], errors=[], facts=facts)
    out = io.StringIO()
    render_terminal(report, Console(file=out, width=400, color_system=None))
    assert "--gpu-memory-utilization 0.66" in out.getvalue()
    assert "--gpu-memory-utilization 0.66" in render_markdown(report)


FP8_PTXAS = (
    "ptxas /tmp/tmpxft_000003dc_00000000-6_fp8.ptx, line 32; error   : Feature 'cvt with "
    ".e4m3x2/.e5m2x2' requires .target sm_89 or higher"
)  # tests/fixtures/gpu-faults-h200/ptxas-fp8-sm80.log


def _numbers(steps) -> list[str]:
    return [step.lines()[0].split(".", 1)[0].strip() for step in steps]


def test_the_step_written_for_the_incidents_own_wording_comes_first():
    entry = ENTRIES["unsupported-quantization-or-dtype"]
    assert _numbers(fix_text.fix_steps(entry))[:2] == ["1", "2"]
    ordered = _numbers(fix_text.fix_steps(entry, lines=[FP8_PTXAS]))
    assert ordered[:3] == ["5", "1", "2"]  # the FP8 step, then the Fix in its own order
    bf16 = "ptxas /tmp/x.ptx, line 31; error   : Feature '.bf16' requires .target sm_80 or higher"
    assert _numbers(fix_text.fix_steps(entry, lines=[bf16]))[:2] == ["1", "2"]


def test_the_toolkit_validators_own_step_leads_not_the_hosts_driver_check():
    # the GPU Operator's validator checked the driver before the toolkit: step 1 (nvidia-smi on
    # the host) would send the reader after a driver the operator may keep off the host's PATH
    entry = ENTRIES["nvidia-container-toolkit"]
    line = (
        'time="2021-10-07T15:16:34Z" level=info msg="Error: error validating toolkit '
        'installation: exec: \\"nvidia-smi\\": executable file not found in $PATH"'
    )  # tests/fixtures/runbooks/nvidia-container-toolkit/gpu-operator-issue265-toolkit-validation.log
    assert _numbers(fix_text.fix_steps(entry, lines=[line]))[0] == "4"
    assert _numbers(fix_text.fix_steps(entry))[0] == "1"


def test_a_setting_or_a_flag_quoted_by_a_step_is_no_wording_to_lead_with():
    # vLLM's own refusal names the variable that step 3 warns about: step 1 still leads
    entry = ENTRIES["max-model-len-above-model-limit"]
    line = (
        "ValueError: User-specified max_model_len (65536) is greater than the derived "
        "max_model_len (max_position_embeddings=32768 or model_max_length=None in model's "
        "config.json). To allow overriding this maximum, set the env var "
        "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1."
    )
    assert _numbers(fix_text.fix_steps(entry, lines=[line]))[0] == "1"


def test_a_wording_with_an_ellipsis_leads_when_its_parts_come_in_order():
    step = next(
        s
        for s in fix_text.fix_steps(ENTRIES["nvidia-container-toolkit"])
        if "mount error" in s.text
    )
    wording = fix_text.step_wordings(step)[0]
    assert fix_text.for_lines([step], ["x"]) == [step]
    line = (
        "nvidia-container-cli: mount error: file creation failed: /usr/bin/nvidia-smi: file exists"
    )
    other = fix_text.fix_steps(ENTRIES["nvidia-container-toolkit"])[0]
    assert fix_text.for_lines([other, step], [line]) == [step, other], wording
    assert fix_text.for_lines([other, step], ["file exists, then mount error"]) == [other, step]


def test_the_reports_do_now_is_the_step_for_the_rooted_findings_wording():
    finding = Finding(
        "log-signatures",
        Severity.CRITICAL,
        "seen",
        [{"text": FP8_PTXAS, "source": "logs/vllm.log", "line": 1}],
        ["unsupported-quantization-or-dtype"],
    )
    facts = Facts({"wiki/entries": ENTRIES, "target": "t"})
    report = Report(target="t", findings=[finding], skipped=[], errors=[], facts=facts)
    out = io.StringIO()
    render_terminal(report, Console(file=out, width=200, color_system=None))
    (do_now,) = [line for line in out.getvalue().splitlines() if line.startswith("Do now")]
    assert "FP8 e4m3 needs CC ≥ 8.9" in do_now and "--dtype half" not in do_now


def test_a_build_that_refuses_the_architecture_leads_with_the_build_step():
    # nvcc's and ptxas's refusals (tests/fixtures/gpu-faults-h200) are fixed in the build's
    # architecture list, not by another image; the runtime's "no kernel image" keeps step 1
    entry = ENTRIES["no-kernel-image"]
    for line in (
        "nvcc fatal   : Unsupported gpu architecture 'sm_70'",
        "ptxas /tmp/tmpxft_00000200_00000000-6_wgmma.ptx, line 26; error   : Instruction "
        "'wgmma.fence' not supported on .target 'sm_80'",
    ):
        assert _numbers(fix_text.fix_steps(entry, lines=[line]))[0] == "3", line
    runtime = "RuntimeError: CUDA error: no kernel image is available for execution on the device"
    assert _numbers(fix_text.fix_steps(entry, lines=[runtime]))[0] == "1"
