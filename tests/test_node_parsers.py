"""Node parsers on real captures: nvidia-smi XML, Xid lines in every known format, PyTorch OOMs."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmdoctor.engine.textsource import TextSource
from llmdoctor.parsers import xid as xid_parser
from llmdoctor.parsers.nvidia_smi_xml import parse_nvidia_smi_xml
from llmdoctor.parsers.pci import pci_display, pci_key
from llmdoctor.parsers.torch_oom import parse_torch_oom
from llmdoctor.parsers.xid import parse_xid_line, scan_xid

FIXTURES = Path(__file__).parent / "fixtures"
SMI = FIXTURES / "nvidia-smi"
KERNEL = FIXTURES / "kernel"


def smi(name: str) -> dict:
    return parse_nvidia_smi_xml((SMI / name).read_text())


def kernel(name: str) -> TextSource:
    return TextSource.from_file("node/kernel.log", KERNEL / name)


# --- PCI bus ids -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("00000000:3B:00.0", "0000:3b:00"),  # NVML / nvidia-smi form
        ("0000:3b:00", "0000:3b:00"),  # Xid line form
        ("PCI:0018:01:00", "0018:01:00"),  # NVLink5 Xid with a non-zero domain
        ("00000018:01:00.0", "0018:01:00"),  # the same device as NVML prints it
        ("not a bus id", None),
    ],
)
def test_pci_bus_ids_from_every_tool_reduce_to_one_key(text, key):
    # Xid lines and NVML must meet on the same key, or no Xid could be mapped to its GPU
    assert pci_key(text) == key


def test_pci_display_adds_the_function():
    assert pci_display("00000000:C1:00.0") == "0000:c1:00.0"


# --- nvidia-smi -q -x -------------------------------------------------------------------------


def test_l4_pair_parses_driver_cuda_and_both_gpus():
    doc = smi("l4x2-555.42.06.xml")
    assert (doc["driver_version"], doc["cuda_driver_version"]) == ("555.42.06", "12.5")
    first, second = doc["gpus"]
    assert first["name"] == "NVIDIA L4" and first["compute_capability"] == "8.9"
    assert first["uuid"] == "GPU-c5533cd4-5a60-059e-348d-b6d7466932e4"
    assert first["memory_mib"] == {"total": 23034, "reserved": 434, "used": 1, "free": 22601}
    assert first["ecc"]["volatile_uncorrected"] == 0 and first["ecc"]["enabled"] is True
    assert first["remapped_rows"] == {
        "correctable": 0,
        "uncorrectable": 0,
        "pending": False,
        "failure": False,
    }
    assert second["pci_bus_id"] == "0000:c1:00.0"
    assert second["pcie"] == {"current_gen": 4, "max_gen": 4, "current_width": 1, "max_width": 16}
    assert first["clock_event_reasons"] == ["gpu_idle"]
    assert first["persistence_mode"] is False


def test_gtx1080_pre_ampere_layout_reads_the_ffmpeg_process_and_old_ecc_tags():
    doc = smi("gtx1080-495.29.05.xml")
    gpu = doc["gpus"][0]
    assert gpu["processes"] == [
        {"pid": 18179, "name": "/usr/local/bin/ffmpeg", "used_mib": 916, "type": "C"}
    ]
    assert gpu["ecc"]["volatile_uncorrected"] is None  # N/A on GeForce, not zero
    assert gpu["compute_capability"] == "6.1"
    assert gpu["clock_event_reasons"] is not None  # clocks_throttle_reasons (old name) is read


def test_t4_lists_xorg_and_python_processes_and_a_x8_link():
    gpu = smi("tesla-t4-515.105.01.xml")["gpus"][0]
    assert [(p["pid"], p["name"], p["used_mib"]) for p in gpu["processes"]] == [
        (675, "/usr/lib/xorg/Xorg", 22),
        (5762, "python", 1005),
    ]
    assert gpu["pci_bus_id"] == "0000:00:1e.0"
    assert gpu["retired_pages"] == {"single_bit": 0, "double_bit": 0, "pending": False}
    assert gpu["remapped_rows"] is None  # pre-Ampere: "N/A"


def test_a100_with_mig_enabled_is_marked_as_mig():
    gpu = smi("a100-sxm4-80gb-mig-535.54.03.xml")["gpus"][0]
    assert gpu["mig_mode"] is True
    assert gpu["compute_capability"] == "8.0"
    assert gpu["drain_and_reset_recommended"] is False


def test_blackwell_v13_layout_reads_instant_power_and_the_llama_server_process():
    doc = smi("rtx-pro-6000-blackwell-590.44.01-llama-server.xml")
    gpu = doc["gpus"][0]
    assert doc["cuda_driver_version"] == "13.1"
    assert gpu["compute_capability"] == "12.0"
    assert gpu["power_draw_w"] == 3.99
    assert gpu["processes"][0]["used_mib"] == 65710
    assert gpu["recovery_action"] is None  # "None" in the XML means no action


def test_rtx4090_multiline_clock_reason_text_is_still_read():
    # the capture wraps "Not Active" over two lines for one reason; it must not read as active
    gpu = smi("rtx4090-535.86.05.xml")["gpus"][0]
    assert gpu["clock_event_reasons"] == ["gpu_idle"]


def test_a_document_that_is_not_nvidia_smi_xml_is_refused():
    with pytest.raises(ValueError, match="nvidia_smi_log"):
        parse_nvidia_smi_xml("<html><body>proxy error</body></html>")
    with pytest.raises(ValueError, match="not valid XML"):
        parse_nvidia_smi_xml("Failed to initialize NVML: Driver/library version mismatch")


# --- Xid lines: every format ------------------------------------------------------------------


def test_classic_xid79_without_pid():
    e = parse_xid_line(
        "May 18 19:02:39 kernel: NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus."
    )
    assert (e.kind, e.code, e.pci, e.pid, e.time) == (
        "xid",
        79,
        "0000:2b:00",
        None,
        "May 18 19:02:39",
    )


def test_very_old_xid_without_pci_prefix():
    # gpu_facts §1.1 (pastebin.com/gn6mYmM4): no "PCI:" before the bus id
    e = parse_xid_line(
        "NVRM: Xid (0000:01:00): 13, 0001 00000000 0000a097 00001b0c 00000000 00000000"
    )
    assert (e.code, e.pci) == (13, "0000:01:00")


def test_pid_and_name_unknown_form_leaves_both_empty():
    line = (KERNEL / "xid13-109-peermem-dmesg-ctime.log").read_text().splitlines()[1]
    e = parse_xid_line(line)
    assert (e.code, e.pid, e.process, e.time) == (13, None, None, "Fri Aug 30 11:43:09 2024")


def test_pid_name_and_old_channel_form():
    line = (KERNEL / "xid13-109-peermem-dmesg-ctime.log").read_text().splitlines()[4]
    e = parse_xid_line(line)
    assert (e.code, e.pid, e.process, e.channel) == (109, 1797828, "pt_main_thread", "00000008")


def test_new_channel_form_of_driver_595():
    # gpu_facts §1.1 example 4 (open-gpu-kernel-modules#1030), verbatim
    line = (
        "[  365.969681] NVRM: Xid (PCI:0000:01:00): 31, pid=13705, name=UnrealEditor, channel "
        "0x0000000c, intr 00000000. MMU Fault: ENGINE GRAPHICS GPC2 GPCCLIENT_PROP_0 faulted @ "
        "0x0_00000000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ"
    )
    e = parse_xid_line(line)
    assert (e.code, e.pid, e.process, e.channel) == (31, 13705, "UnrealEditor", "0000000c")


def test_mig_gpu_instance_in_the_parentheses():
    lines = (KERNEL / "xid94-95-error-containment-driver-source.log").read_text().splitlines()
    mig, plain, uncontained = (parse_xid_line(t) for t in lines)
    assert (mig.code, mig.pci, mig.gpu_instance, mig.pid) == (94, "0000:01:00", 5, 7194)
    assert plain.gpu_instance is None
    assert uncontained.code == 95


def test_nvlink5_lines_carry_fatality_and_domain():
    lines = (KERNEL / "xid144-145-149-nvlink5-gpud-pr1160-1174.log").read_text().splitlines()
    events = [parse_xid_line(t) for t in lines]
    assert [(e.code, e.fatality) for e in events] == [
        (144, "Nonfatal"),
        (149, "Fatal"),
        (149, "Fatal"),
        (149, "Fatal"),
        (145, "Nonfatal"),
    ]
    assert events[3].pci == "0019:01:00"


def test_xid45_names_the_xid_that_caused_it():
    line = (KERNEL / "xid45-after-xid149-145-journalctl-590.48.01.log").read_text().splitlines()[0]
    assert parse_xid_line(line).caused_by == 149


def test_xid154_recovery_action_is_read_from_its_hex_value():
    # gpu_facts §1.1 example 13 [secondary]: the action text varies, the hex value does not
    e = parse_xid_line(
        "NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 "
        "(Node Reboot Required)"
    )
    assert (e.code, e.recovery_action) == (154, 2)


def test_nvswitch_sxid_from_dmesg_iso_decode():
    line = (KERNEL / "sxid12028-nvswitch-dmesg-iso-gpud-pr338.log").read_text().strip()
    e = parse_xid_line(line)
    assert (e.kind, e.code, e.pci, e.time) == ("sxid", 12028, "0000:84:00", "2025-01-25T10:34:54")


@pytest.mark.parametrize(
    "line",
    [
        "May 18 19:02:39 kernel: NVRM: GPU 0000:2b:00.0: GPU has fallen off the bus.",
        "… kernel: [ 269.516977] NVRM: GPU at 0000:01:00.0 has fallen off the bus.",
    ],
)
def test_one_line_fallen_off_the_bus_forms(line):
    # both real forms (open-gpu-kernel-modules#1151; pastebin xJaypMZt) count as the GPU lost
    e = parse_xid_line(line)
    assert (e.kind, e.code) == ("fallen-off-bus", 79)


def test_lines_without_xid_are_not_events():
    assert parse_xid_line("[Sun Feb 23 16:24:30 2025] clocksource: Long readout interval") is None
    assert parse_xid_line("NVRM: GPU4 RPC history (CPU -> GSP):") is None


# --- streaming scan ---------------------------------------------------------------------------


def test_scan_counts_per_gpu_and_code_with_first_and_last_line():
    scan = scan_xid(kernel("xid119-gsp-rpc-timeout-dell-xe9680.log")).to_json("k")
    (group,) = scan["groups"]
    assert (group["code"], group["pci"], group["count"]) == (119, "0000:9b:00", 5)
    assert (group["first"]["line"], group["last"]["line"]) == (3, 43)
    assert group["processes"][:2] == ["nvidia-smi (pid 2024380)", "cache_mgr_main (pid 1263500)"]
    assert scan["lines"] == 43


def test_multiline_fallen_off_bus_without_xid_is_found_at_its_first_line():
    scan = scan_xid(kernel("fallen-off-bus-without-xid-570-nvsentinel155.log")).to_json("k")
    (group,) = scan["groups"]
    assert (group["kind"], group["pci"], group["first"]["line"]) == (
        "fallen-off-bus",
        "0000:b3:00",
        1,
    )
    assert "not responding to commands" in group["first"]["text"]


def _mixed_log(tmp_path) -> Path:
    text = "\n".join(
        (KERNEL / f).read_text().rstrip("\n")
        for f in (
            "xid119-gsp-rpc-timeout-dell-xe9680.log",
            "fallen-off-bus-without-xid-570-nvsentinel155.log",
            "xid45-after-xid149-145-journalctl-590.48.01.log",
            "sxid12028-nvswitch-dmesg-iso-gpud-pr338.log",
        )
    )
    path = tmp_path / "kernel.log"
    path.write_text(text + "\n")
    return path


def test_scan_is_the_same_when_blocks_split_lines_and_multiline_messages(tmp_path, monkeypatch):
    # a tiny block size forces every boundary case: a line split across blocks, a line longer
    # than a block, and the 3-line fallen-off message split so its head is in the previous block
    path = _mixed_log(tmp_path)
    whole = scan_xid(TextSource.from_text("k", path.read_text())).to_json("k")
    monkeypatch.setattr(xid_parser, "BLOCK_BYTES", 37)
    small = scan_xid(TextSource.from_file("k", path)).to_json("k")
    assert small["groups"] == whole["groups"]
    assert small["lines"] == whole["lines"] == len(path.read_text().splitlines())


def test_parallel_ranges_give_the_same_result_as_one_pass(tmp_path):
    # the file is cut at line starts for worker processes; merged line numbers, counts, first
    # and last occurrences must equal the serial scan
    path = _mixed_log(tmp_path)
    path.write_text(path.read_text() * 40)
    serial = scan_xid(TextSource.from_file("k", path), workers=1).to_json("k")
    parallel = scan_xid(TextSource.from_file("k", path), workers=3).to_json("k")
    assert parallel == serial
    assert serial["groups"][0]["count"] == 5 * 40


def test_scan_of_a_log_without_xid_reports_the_lines_it_read():
    scan = scan_xid(TextSource.from_text("k", "a\nb\nc")).to_json("k")
    assert (scan["lines"], scan["events"], scan["groups"]) == (3, 0, [])


def test_a_line_that_mentions_xid_in_an_unknown_form_is_kept_raw():
    scan = scan_xid(TextSource.from_text("k", "NVRM: Xid (PCI:zz): garbled\n")).to_json("k")
    assert scan["unparsed"] == [{"line": 1, "text": "NVRM: Xid (PCI:zz): garbled"}]


# --- PyTorch OOM messages ---------------------------------------------------------------------


def test_new_oom_message_numbers_in_mib():
    line = (
        FIXTURES / "logs" / "oom-1.83gib-reserved-unallocated-compressed-tensors-pr587.log"
    ).read_text()
    oom = parse_torch_oom(line)
    assert round(oom.tried) == round(1.96 * 1024)
    assert round(oom.unallocated) == round(1.83 * 1024)
    assert round(oom.total) == round(79.18 * 1024)
    assert oom.fragmented_would_fit


def test_old_oom_message_derives_unallocated_from_reserved_minus_allocated():
    line = (FIXTURES / "logs" / "pytorch-old-message-format-issue783.log").read_text()
    oom = parse_torch_oom(line)
    assert round(oom.unallocated) == round((27.93 - 27.91) * 1024)
    assert not oom.fragmented_would_fit


def test_process_has_wording_is_parsed_too():
    text = (
        FIXTURES / "logs" / "vllm-v0-mq-engine-oom-during-completion-echo-issue10596.log"
    ).read_text()
    ooms = [o for o in map(parse_torch_oom, text.splitlines()) if o]
    assert ooms and round(ooms[0].unallocated) == 75
