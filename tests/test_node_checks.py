"""Every node check on real data: nvidia-smi captures, kernel logs, probe reports, OOM lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from llmdoctor.checks.gpu_arch import kernel_support
from llmdoctor.checks.gpu_memory import process_role
from llmdoctor.checks.torch_vllm_versions import satisfies

from llmdoctor.engine.facts import Facts
from llmdoctor.engine.registry import all_checks
from llmdoctor.engine.textsource import TextSource
from llmdoctor.usecases.diagnose import diagnose

FIXTURES = Path(__file__).parent / "fixtures"
NODE_CHECKS = {
    "nvml-status",
    "driver-cuda",
    "gpu-arch",
    "torch-vllm-versions",
    "dtype-support",
    "gpu-memory",
    "memory-fragmentation",
    "xid",
    "gpu-health",
    "gpu-fabric",
}


def facts_with(
    *,
    smi: str | None = None,
    kernel: str | list[str] | None = None,
    versions: str | dict | None = None,
    gpus_json: dict | None = None,
    logs: dict[str, str] | None = None,
    serving_args: dict | None = None,
) -> Facts:
    facts = Facts({"time/now": 0, "target": "node"})
    if smi:
        facts.set("node/nvidia-smi.xml", (FIXTURES / "nvidia-smi" / smi).read_text())
    if gpus_json:
        facts.set("node/gpus.json", gpus_json)
    if kernel:
        names = [kernel] if isinstance(kernel, str) else kernel
        text = "\n".join((FIXTURES / "kernel" / n).read_text().rstrip("\n") for n in names)
        facts.set("node/kernel.log", TextSource.from_text("node/kernel.log", text + "\n"))
    if isinstance(versions, str):
        versions = json.loads((FIXTURES / "versions" / versions).read_text())
    if versions is not None:
        facts.set("node/versions.json", versions)
    for name, fixture in (logs or {}).items():
        facts.set(
            f"logs/{name}.log",
            TextSource.from_file(f"logs/{name}.log", FIXTURES / "logs" / fixture),
        )
    if serving_args is not None:
        facts.set("serving/args", serving_args)
    return facts


def findings(facts: Facts, check_id: str, **settings):
    report = diagnose([facts], "node", scopes=("node", "logs"), only=[check_id], settings=settings)
    return report.findings, {s["check"]: s["reason"] for s in report.skipped}


def test_all_node_checks_are_registered_with_node_or_logs_scope():
    # `llmdoctor node` runs scopes node+logs; a check in another scope would never run there
    scopes = {c.id: c.scope for c in all_checks() if c.id in NODE_CHECKS}
    assert set(scopes) == NODE_CHECKS
    assert set(scopes.values()) <= {"node", "logs"}


# --- driver-cuda --------------------------------------------------------------------------------


def test_cu128_torch_on_a_550_driver_warns_about_minor_version_compatibility():
    # vllm#31700: torch 2.9.0+cu128 on driver 550.144.03 (CUDA 12.4) failed with
    # "the provided PTX was compiled with an unsupported toolchain"
    gpus = {
        "source": "nvml",
        "driver_version": "550.144.03",
        "gpus": [{"name": "NVIDIA H100 PCIe"}],
    }
    facts = facts_with(versions="h100-torch2.9.0-cu128-driver550-vllm31700.json", gpus_json=gpus)
    (f,), _ = findings(facts, "driver-cuda")
    assert f.severity == "warning" and f.runbooks == ["driver-cuda-mismatch"]
    assert "unsupported toolchain" in f.summary and "570.26" in f.summary


def test_cu121_torch_on_a_535_driver_is_fine():
    # vllm#13497: torch 2.5.1+cu121 on an RTX 4090; a 535 driver supports CUDA 12.2
    facts = facts_with(
        smi="rtx4090-535.86.05.xml", versions="rtx4090-torch2.5.1-cu121-driver535-vllm13497.json"
    )
    (f,), _ = findings(facts, "driver-cuda")
    assert f.severity == "ok"


def test_cu130_torch_on_a_cuda_12_8_driver_is_critical_and_names_the_driver_needed():
    # pytorch#162531: "found version 12080" -> CUDA cannot start; needs a 580 driver
    facts = facts_with(
        smi="rtx3060-570.124.04.xml",
        versions="torch-cu130-driver-cuda12.8-too-old-pytorch162531.json",
    )
    (f,), _ = findings(facts, "driver-cuda")
    assert f.severity == "critical" and "580.65.06" in f.summary


def test_major_mismatch_is_critical_even_without_torchs_error_text():
    # the same torch on the same 570 driver, probed without CUDA starting: still cannot work
    versions = json.loads(
        (FIXTURES / "versions/torch-cu130-driver-cuda12.8-too-old-pytorch162531.json").read_text()
    )
    versions.update(cuda_error=None, libcuda_version=None)
    (f,), _ = findings(facts_with(smi="rtx3060-570.124.04.xml", versions=versions), "driver-cuda")
    assert f.severity == "critical" and "CUDA 12.8 at most" in f.summary


def test_cpu_only_torch_with_vllm_is_critical():
    # vllm#6655: torch 2.3.1+cpu -> vLLM cannot use the GPU at all
    (f,), _ = findings(facts_with(versions="torch2.3.1-cpu-with-vllm-vllm6655.json"), "driver-cuda")
    assert f.severity == "critical" and "CPU-only" in f.summary


def test_error_804_means_cuda_compat_on_unsupported_hardware():
    # TorchPod#43 (GTX 1650): the real 804 text in torch's CUDA-initialization warning
    versions = json.loads(
        (FIXTURES / "versions/rtx4090-torch2.5.1-cu121-driver535-vllm13497.json").read_text()
    )
    versions["cuda_error"] = (
        "CUDA initialization: Unexpected error from cudaGetDeviceCount(). Did you run some cuda "
        "functions before calling NumCudaDevices() that might have already set an error? Error "
        "804: forward compatibility was attempted on non supported HW"
    )
    (f,), _ = findings(facts_with(smi="rtx4090-535.86.05.xml", versions=versions), "driver-cuda")
    assert f.severity == "critical" and "804" in f.summary


def test_forward_compatibility_on_a_datacenter_gpu_is_information_not_a_fault():
    # cuda-compat: libcuda in the serving process is 12.8 while the A100's 535 driver is 12.2
    versions = json.loads(
        (FIXTURES / "versions/h100-torch2.9.0-cu128-driver550-vllm31700.json").read_text()
    )
    versions.update(libcuda_version=12080, libcuda_path="/usr/local/cuda/compat/libcuda.so.1")
    (f,), _ = findings(
        facts_with(smi="a100-sxm4-80gb-mig-535.54.03.xml", versions=versions), "driver-cuda"
    )
    assert f.severity == "info" and "forward-compatibility" in f.summary


def test_no_torch_in_the_probed_python_skips_with_how_to_fix_it():
    # a real probe run on a machine without torch: skipped, and says to pass --python
    _, skipped = findings(facts_with(versions="probe-no-torch-python3.11.json"), "driver-cuda")
    assert (
        "No module named 'torch'" in skipped["driver-cuda"] and "--python" in skipped["driver-cuda"]
    )


# --- gpu-arch -----------------------------------------------------------------------------------


def test_rtx5070ti_sm120_with_an_sm90_torch_is_no_kernel_image():
    # vllm#21633: "sm_120 is not compatible with the current PyTorch installation"
    (f,), _ = findings(
        facts_with(versions="rtx5070ti-sm120-torch-sm50-sm90-vllm21633.json"), "gpu-arch"
    )
    assert f.severity == "critical" and f.runbooks == ["no-kernel-image"]
    assert "sm_120" in f.summary


def test_h100_with_a_cu128_torch_has_sm90_kernels():
    # the cu128 list contains sm_90 exactly
    (f,), _ = findings(
        facts_with(versions="h100-torch2.9.0-cu128-driver550-vllm31700.json"), "gpu-arch"
    )
    assert f.severity == "ok" and "sm_90" in f.summary


@pytest.mark.parametrize(
    ("capability", "arch_list", "how"),
    [
        ("12.1", ["sm_90", "sm_100", "sm_120", "compute_120"], "cubin"),  # sm_120 runs on 12.1
        ("10.3", ["sm_80", "sm_90", "sm_100", "sm_120"], "cubin"),  # B300 uses sm_100 cubins
        ("12.0", ["sm_80", "sm_86", "sm_90", "compute_90"], "ptx"),  # cu124 +PTX builds
        ("9.0", ["sm_80", "sm_86"], "none"),  # sm_8x cubins never run on 9.0
        ("10.0", ["sm_90a"], "none"),  # arch-specific cubins run on 9.0 only
    ],
)
def test_kernel_support_follows_cuda_binary_compatibility(capability, arch_list, how):
    assert kernel_support(capability, arch_list)[0] == how


def test_gpu_capability_comes_from_node_gpus_when_torch_cannot_see_devices():
    # torch on a too-old driver lists no devices; the XML still names the RTX 3060 (8.6)
    (f,), _ = findings(
        facts_with(
            smi="rtx3060-570.124.04.xml",
            versions="torch-cu130-driver-cuda12.8-too-old-pytorch162531.json",
        ),
        "gpu-arch",
    )
    assert f.severity == "ok" and "sm_86" in f.summary


# --- torch-vllm-versions ------------------------------------------------------------------------


def test_torch_older_than_vllm_requires_is_a_warning():
    # LMCache#520: "latest vllm requires torch 2.6.0" with torch 2.5.1 installed
    (f,), _ = findings(
        facts_with(versions="torch2.5.1-vllm-requires-2.6.0-lmcache520.json"), "torch-vllm-versions"
    )
    assert f.severity == "warning" and "2.5.1+cu124" in f.summary


def test_torch_matching_the_pin_is_ok_despite_the_local_cuda_suffix():
    # 2.5.1+cu121 satisfies ==2.5.1: the +cu121 local part is not part of the pin
    (f,), _ = findings(
        facts_with(versions="rtx4090-torch2.5.1-cu121-driver535-vllm13497.json"),
        "torch-vllm-versions",
    )
    assert f.severity == "ok"


def test_no_vllm_installed_skips_the_version_check():
    versions = json.loads(
        (FIXTURES / "versions/rtx4090-torch2.5.1-cu121-driver535-vllm13497.json").read_text()
    )
    versions["vllm"] = None
    _, skipped = findings(facts_with(versions=versions), "torch-vllm-versions")
    assert "vLLM is not installed" in skipped["torch-vllm-versions"]


@pytest.mark.parametrize(
    ("version", "spec", "fits"),
    [
        ("2.7.0+cu128", "==2.7.0", True),
        ("2.7.1", "==2.7.0", False),
        ("2.5.1", ">=2.4,<2.6", True),
        ("2.6.0", ">=2.4,<2.6", False),
        ("2.8.0a0+git123", "==2.8.*", True),
        ("2.5.0", "~=2.4", True),
        ("3.0", "~=2.4", False),
    ],
)
def test_requirement_specifiers(version, spec, fits):
    assert satisfies(version, spec) is fits


# --- dtype-support ------------------------------------------------------------------------------


def test_bfloat16_on_a_t4_is_critical_as_vllm_refuses_it():
    # vLLM: "Bfloat16 is only supported on GPUs with compute capability of at least 8.0.
    # Your Tesla T4 GPU has compute capability 7.5."
    (f,), _ = findings(facts_with(smi="tesla-t4-515.105.01.xml"), "dtype-support", dtype="bfloat16")
    assert f.severity == "critical" and "--dtype half" in f.summary


def test_fp8_on_an_a100_runs_weight_only_through_marlin():
    # fp8.py: min capability 80, FP8 hardware from 89; the A100 (8.0) gets the Marlin path
    (f,), _ = findings(
        facts_with(smi="a100-sxm4-80gb-mig-535.54.03.xml"), "dtype-support", quantization="fp8"
    )
    assert f.severity == "warning" and "Marlin" in f.summary


def test_fp8_on_an_l4_is_native():
    findings_, _ = findings(
        facts_with(smi="l4x2-555.42.06.xml"), "dtype-support", quantization="fp8"
    )
    assert {f.severity for f in findings_} == {"ok"}


def test_awq_on_a_gtx1080_is_below_vllms_minimum_capability_75():
    # vLLM: "The quantization method awq is not supported for the current GPU. Minimum capability: 75."
    (f,), _ = findings(facts_with(smi="gtx1080-495.29.05.xml"), "dtype-support", quantization="awq")
    assert f.severity == "critical" and "7.5" in f.summary


def test_pod_arguments_are_used_and_a_flag_overrides_them():
    # serving/args from the pod says bfloat16; the user's --dtype half wins
    facts = facts_with(smi="tesla-t4-515.105.01.xml", serving_args={"dtype": "bfloat16"})
    (f,), _ = findings(facts, "dtype-support")
    assert f.severity == "critical" and "from the pod's --dtype argument" in f.evidence[0]["text"]
    facts = facts_with(smi="tesla-t4-515.105.01.xml", serving_args={"dtype": "bfloat16"})
    (f,), _ = findings(facts, "dtype-support", dtype="half")
    assert f.severity == "ok"


def test_unknown_dtype_and_quantization_skip_the_check():
    _, skipped = findings(facts_with(smi="tesla-t4-515.105.01.xml"), "dtype-support")
    assert "--dtype/--quantization" in skipped["dtype-support"]


# --- gpu-memory ---------------------------------------------------------------------------------


def test_llama_server_holding_65gb_blocks_vllm_and_is_named():
    # real capture: llama-server holds 65710 of 97887 MiB; 0.9 x 97250 MiB cannot fit
    findings_, _ = findings(
        facts_with(smi="rtx-pro-6000-blackwell-590.44.01-llama-server.xml"),
        "gpu-memory",
        gpu_memory_utilization=0.9,
    )
    taken = next(f for f in findings_ if "not vLLM hold" in f.summary)
    assert taken.severity == "warning" and "llama-server: 65710 MiB" in taken.summary
    assert taken.runbooks == ["gpu-memory-taken-by-other-process"]
    assert taken.params == {"pid": 116860}  # the one other process: `kill {pid}` names it
    startup = next(f for f in findings_ if "would refuse to start" in f.summary)
    assert startup.severity == "critical"
    assert "85.47 GiB" in startup.summary and "30.79 GiB is free" in startup.summary
    # memory held by another process: free it or ask for less, never "raise it to 0.95"
    assert startup.runbooks == ["gpu-memory-taken-by-other-process"]
    assert startup.params == {
        "gpu_memory_utilization": 0.32,
        "pid": 116860,
    }  # the "lower it to 0.32" it says


def test_default_utilization_is_checked_but_only_warns():
    # without --gpu-memory-utilization the check uses vLLM's default 0.9, and says so
    findings_, _ = findings(
        facts_with(smi="rtx-pro-6000-blackwell-590.44.01-llama-server.xml"), "gpu-memory"
    )
    startup = next(f for f in findings_ if "would refuse to start" in f.summary)
    assert startup.severity == "warning"
    assert "vLLM's default 0.9" in startup.evidence[1]["text"]


def test_pod_argument_utilization_is_used():
    # 0.3 x 97250 MiB = 28.5 GiB fits in 30.79 GiB free
    facts = facts_with(
        smi="rtx-pro-6000-blackwell-590.44.01-llama-server.xml",
        serving_args={"gpu_memory_utilization": 0.3},
    )
    findings_, _ = findings(facts, "gpu-memory")
    fit = next(f for f in findings_ if f.severity == "ok")
    assert "0.3 asks" in fit.summary


def test_ffmpeg_on_a_gtx1080_takes_enough_to_block_the_default_start():
    # datarhei capture: ffmpeg holds 916 MiB of 8119 MiB; 0.9 no longer fits
    findings_, _ = findings(facts_with(smi="gtx1080-495.29.05.xml"), "gpu-memory")
    assert {f.severity for f in findings_} == {"warning"}
    assert any("/usr/local/bin/ffmpeg: 916 MiB" in f.summary for f in findings_)


def test_memory_used_with_no_visible_process_is_said_as_such():
    # telegraf RTX 3080 capture: 9184 MiB used, empty process list (other PID namespace)
    findings_, _ = findings(
        facts_with(smi="rtx3080-595.58.03-memory-used-no-process.xml"),
        "gpu-memory",
        gpu_memory_utilization=0.9,
    )
    unseen = next(f for f in findings_ if "no process is visible" in f.summary)
    assert unseen.severity == "info"
    startup = next(f for f in findings_ if "would refuse to start" in f.summary)
    # the invisible holder might be the running server itself: a warning, not a critical
    assert startup.severity == "warning" and "not visible from here" in startup.summary


def test_a_bare_python_process_is_reported_as_unidentified_not_as_an_intruder():
    # T4 capture: `python` with 1005 MiB could be the server; Xorg's 22 MiB is minor
    findings_, _ = findings(facts_with(smi="tesla-t4-515.105.01.xml"), "gpu-memory")
    summaries = {f.severity: f.summary for f in findings_ if f.severity != "ok"}
    assert set(summaries) == {"info"}
    assert any("cannot tell whether" in f.summary for f in findings_)
    xorg = next(f for f in findings_ if "Xorg" in f.summary)
    # 22 MiB is not "the other process": no `kill <pid>` fix under it
    assert "too little to matter" in xorg.summary and xorg.runbooks == []
    assert any(f.severity == "ok" and "would be free" in f.summary for f in findings_)


def test_mig_gpu_is_not_judged_on_whole_gpu_memory():
    findings_, _ = findings(facts_with(smi="a100-sxm4-80gb-mig-535.54.03.xml"), "gpu-memory")
    assert [f.severity for f in findings_] == ["info"] and "MIG" in findings_[0].summary


@pytest.mark.parametrize(
    ("name", "role"),
    [
        ("VLLM::EngineCore", "server"),  # vLLM V1's process title
        ("/usr/bin/python3", "unknown"),
        ("pt_main_thread", "unknown"),  # PyTorch's thread name, as in the Xid 109 line
        ("/usr/lib/xorg/Xorg", "other"),
        (None, "unknown"),  # NVML could not name a pid from another PID namespace
    ],
)
def test_process_roles(name, role):
    assert process_role({"name": name}) == role


# --- memory-fragmentation -------------------------------------------------------------------------


def test_oom_with_large_reserved_unallocated_is_fragmentation():
    # compressed-tensors#587: 1.83 GiB unallocated + 1.08 GiB free would have held 1.96 GiB
    (f,), _ = findings(
        facts_with(logs={"vllm": "oom-1.83gib-reserved-unallocated-compressed-tensors-pr587.log"}),
        "memory-fragmentation",
    )
    assert f.severity == "critical" and f.runbooks == ["gpu-memory-fragmentation"]
    assert "expandable_segments:True" in f.summary and "1.83 GiB" in f.summary


@pytest.mark.parametrize(
    "fixture",
    [
        "vllm-v0-async-engine-oom-under-benchmark-load-issue13152.log",  # 488 MiB: 0.6 % of GPU
        "vllm-v0-mq-engine-oom-during-completion-echo-issue10596.log",
        "vllm-v1-tp-worker-oom-issue17835.log",
        "pytorch-old-message-format-issue783.log",
    ],
)
def test_oom_without_much_unallocated_memory_is_a_plain_shortage(fixture):
    (f,), _ = findings(facts_with(logs={"vllm": fixture}), "memory-fragmentation")
    assert f.runbooks == ["cuda-oom-runtime"] and "not fragmentation" in f.summary


def test_expandable_segments_already_set_changes_the_advice():
    versions = json.loads(
        (FIXTURES / "versions/h100-torch2.9.0-cu128-driver550-vllm31700.json").read_text()
    )
    versions["env"] = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    facts = facts_with(
        logs={"vllm": "oom-1.83gib-reserved-unallocated-compressed-tensors-pr587.log"},
        versions=versions,
    )
    (f,), _ = findings(facts, "memory-fragmentation")
    assert "already set" in f.summary


def test_logs_without_oom_are_ok():
    facts = Facts({"time/now": 0, "target": "t"})
    facts.set("logs/vllm.log", TextSource.from_text("logs/vllm.log", "INFO started\n"))
    (f,), _ = findings(facts, "memory-fragmentation")
    assert f.severity == "ok"


# --- xid ------------------------------------------------------------------------------------------


def xid_findings(kernel, gpus_json=None, smi=None):
    found, skipped = findings(facts_with(kernel=kernel, gpus_json=gpus_json, smi=smi), "xid")
    return found, skipped


def test_xid79_is_critical_once_with_the_fallen_off_line_as_supporting_evidence():
    (f,), _ = xid_findings("xid79-journal-595-ogkm1151.log")
    assert f.severity == "critical" and f.runbooks == ["xid-fallen-off-bus"]
    assert "once" in f.summary and "drain the node and reboot" in f.summary
    assert any("fallen off the bus' message" in e["text"] for e in f.evidence)


def test_fallen_off_bus_without_an_xid_line_is_still_critical():
    (f,), _ = xid_findings("fallen-off-bus-without-xid-570-nvsentinel155.log")
    assert f.severity == "critical" and f.subject == "GPU at 0000:b3:00.0"


def test_xid119_is_mapped_to_gpu4_and_its_uuid():
    # the log itself says GPU4 at 0000:9b:00 is GPU-509665ad-...; NVML prints that bus id as
    # 00000000:9B:00.0
    gpus = {
        "gpus": [
            {
                "index": 4,
                "name": "NVIDIA H100 80GB HBM3",
                "uuid": "GPU-509665ad-b600-ac93-3616-d754b23d636d",
                "pci_bus_id": "0000:9b:00.0",
            }
        ]
    }
    (f,), _ = xid_findings("xid119-gsp-rpc-timeout-dell-xe9680.log", gpus_json=gpus)
    assert f.subject == "GPU 4 (0000:9b:00.0)" and f.runbooks == ["gsp-timeout"]
    assert (
        "5 times" in f.summary
        and "Sun Feb 23 16:24:18 2025 .. Sun Feb 23 16:30:13 2025" in f.summary
    )
    assert any("GPU-509665ad" in e["text"] for e in f.evidence)
    lines = [e.get("line") for e in f.evidence if e.get("source") == "node/kernel.log"]
    assert lines[0] == 3 and lines[-1] in (43, None)


def test_xid48_then_63_is_ecc_critical_then_remap_warning():
    found, _ = xid_findings("xid48-63-dbe-page-retired-nvidia-docker849.log")
    assert [(f.severity, f.runbooks) for f in found] == [
        ("critical", ["xid-ecc-memory"]),
        ("warning", ["xid-ecc-memory"]),
    ]


def test_xid74_nvlink_is_critical_and_links_the_nvlink_entry():
    (f,), _ = xid_findings("xid74-nvlink-nvsentinel-design022.log")
    assert f.severity == "critical" and f.runbooks == ["xid-nvlink-error"]
    assert f.subject == "GPU at 0003:00:00.0"


def test_xid94_contained_is_a_warning_and_95_uncontained_is_critical_with_mig_instance():
    found, _ = xid_findings("xid94-95-error-containment-driver-source.log")
    by_code = {f.summary.split()[1].rstrip(":"): f for f in found}
    assert by_code["94"].severity == "warning" and by_code["95"].severity == "critical"
    assert any("MIG GPU instance(s): 5" in e["text"] for e in by_code["94"].evidence)


def test_nvlink5_fatal_149_is_critical_and_nonfatal_144_145_are_warnings():
    found, _ = xid_findings("xid144-145-149-nvlink5-gpud-pr1160-1174.log")
    severities = {(f.summary.split()[1].rstrip(":"), f.subject): f.severity for f in found}
    assert severities[("149", "GPU at 0000:00:00.0")] == "critical"
    assert severities[("144", "GPU at 0000:01:00.0")] == "warning"
    assert severities[("145", "GPU at 0018:01:00.0")] == "warning"


def test_xid45_follows_the_nvlink_xid_that_caused_it():
    found, _ = xid_findings("xid45-after-xid149-145-journalctl-590.48.01.log")
    assert len(found) == 4  # four GPUs
    assert all(
        f.runbooks == ["xid-nvlink-error"] and "caused by Xid 14" in f.summary for f in found
    )


def test_app_level_xids_13_and_31_are_warnings_linking_illegal_memory_access():
    found, _ = xid_findings(
        ["xid13-109-peermem-dmesg-ctime.log", "xid31-mmu-fault-journalctl-rtx2080-450.80.02.log"]
    )
    by_code = {f.summary.split()[1].rstrip(":"): f for f in found}
    assert by_code["13"].severity == "warning" and by_code["13"].runbooks == [
        "illegal-memory-access"
    ]
    assert by_code["31"].severity == "warning"
    assert by_code["109"].severity == "critical"  # context switch timeout: reset the GPU
    texts = [e["text"] for e in by_code["109"].evidence]
    assert any("pt_main_thread (pid 1797828)" in t for t in texts)
    assert texts[-1].startswith("decided by the NVIDIA Xid catalog: Xid 109")
    assert "RESET_GPU / CONTACT_SUPPORT" in texts[-1]


def test_nvswitch_sxid_is_reported_against_the_switch():
    (f,), _ = xid_findings("sxid12028-nvswitch-dmesg-iso-gpud-pr338.log")
    assert f.subject == "NVSwitch 0000:84:00.0" and f.runbooks == ["xid-nvlink-error"]
    assert f.evidence[-1]["text"].startswith("decided by llmdoctor from the line's Fatal")


def test_xid154_node_reboot_required_is_critical():
    # gpu_facts §1.1 example 13 [secondary]: the driver's own verdict after Xid 79
    text = (
        "NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus.\n"
        "NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 "
        "(Node Reboot Required)\n"
    )
    facts = Facts({"time/now": 0, "target": "t"})
    facts.set("node/kernel.log", TextSource.from_text("node/kernel.log", text))
    found, _ = findings(facts, "xid")
    xid154 = next(f for f in found if f.summary.startswith("Xid 154"))
    assert xid154.severity == "critical" and "Node Reboot Required" in xid154.summary


def test_an_xid_nvidia_lists_as_unused_is_a_warning_with_its_line():
    # a public troubleshooting note quotes this Xid 51 line; NVIDIA's catalog lists 51 as unused
    line = "NVRM: Xid (PCI:0000:0d:00): 51, BAD_TSG encountered on runlist: 0 with error code: 4"
    facts = Facts({"time/now": 0, "target": "t"})
    facts.set("node/kernel.log", TextSource.from_text("node/kernel.log", line + "\n"))
    (f,), _ = findings(facts, "xid")
    assert f.severity == "warning" and "NVIDIA: Unused" in f.summary
    assert f.evidence[0]["text"] == line


def test_an_xid_code_missing_from_the_catalog_is_still_reported_with_its_line():
    # synthetic: no code above NVIDIA's published 172 has been seen in a public log yet
    line = "NVRM: Xid (PCI:0000:0d:00): 201, pid=1, name=python3, Channel 0x00000008"
    facts = Facts({"time/now": 0, "target": "t"})
    facts.set("node/kernel.log", TextSource.from_text("node/kernel.log", line + "\n"))
    (f,), _ = findings(facts, "xid")
    assert f.severity == "warning" and "not in NVIDIA's published Xid catalog" in f.summary
    assert f.evidence[0]["text"] == line


def test_clean_kernel_log_is_ok_and_says_how_much_was_read():
    facts = Facts({"time/now": 0, "target": "t"})
    facts.set("node/kernel.log", TextSource.from_text("node/kernel.log", "a\nb\n"))
    (f,), _ = findings(facts, "xid")
    assert f.severity == "ok" and "2 lines" in f.summary


def test_unreadable_kernel_log_skips_the_xid_check_with_the_reason():
    facts = Facts({"time/now": 0, "target": "t"})
    facts.mark_missing("node/kernel.log", "kernel log not readable: dmesg: Operation not permitted")
    _, skipped = findings(facts, "xid")
    assert "Operation not permitted" in skipped["xid"]


# --- gpu-health -----------------------------------------------------------------------------------


def test_l4_second_gpu_at_pcie_x1_is_a_warning_and_persistence_off_is_info():
    found, _ = findings(facts_with(smi="l4x2-555.42.06.xml"), "gpu-health")
    warnings = [f for f in found if f.severity == "warning"]
    assert [f.subject for f in warnings] == ["GPU 1 (0000:c1:00.0)"]
    assert sum(f.severity == "info" and "persistence" in f.summary for f in found) == 2


def test_t4_at_x8_of_x16_is_a_warning():
    found, _ = findings(facts_with(smi="tesla-t4-515.105.01.xml"), "gpu-health")
    assert any(f.severity == "warning" and "x8 of x16" in f.summary for f in found)


def test_idle_rtx4090_link_at_gen1_is_fine():
    (f,), _ = findings(facts_with(smi="rtx4090-535.86.05.xml"), "gpu-health")
    assert f.severity == "ok"
    assert any("idle GPU" in e["text"] for e in f.evidence)


def test_ecc_and_reset_states_from_the_gpu_list():
    # uncorrectable errors since driver load, a failed remap and a reset request are all
    # "drain" situations; the values are set on a real L4 capture's shape
    facts = facts_with(smi="l4x2-555.42.06.xml")
    from llmdoctor.engine.derive import derive_all

    derive_all(facts)
    gpu = facts.get("node/gpus")["gpus"][0]
    gpu["ecc"]["volatile_uncorrected"] = 2
    gpu["remapped_rows"]["failure"] = True
    gpu["reset_required"] = True
    found, _ = findings(facts, "gpu-health")
    critical = [
        f.summary for f in found if f.severity == "critical" and f.subject.startswith("GPU 0")
    ]
    assert len(critical) == 3
