"""The driver <-> CUDA table reaches the newest toolkits whose GA driver a source names
(llmdoctor/data/SOURCES.md), and says nothing it does not know."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_node_checks import facts_with, findings

from llmdoctor.gpus.tables import family_min_driver, load_table, max_cuda_for_driver, toolkit_driver

FIXTURES = Path(__file__).parent / "fixtures"
H200_VERSIONS = "h200-torch2.11.0-cu130-driver580.159.04.json"


def test_cuda_13_4_needs_the_615_driver_of_its_ga_run_file():
    # 13.4.1 is the 13.4 GA release; NVIDIA's 615.71.09 driver redist is dated its GA day
    assert toolkit_driver("13.4") == "615.71.09"
    assert toolkit_driver("13.4.1") == "615.71.09"


def test_cuda_13_5_needs_the_620_driver_published_with_it():
    # redistrib_620.70.06.json (2026-11-04) carries the CUDA 13.5 cuda-compat package
    assert toolkit_driver("13.5") == "620.70.06"
    assert toolkit_driver("13.5.0") == "620.70.06"


def test_a_615_driver_supports_cuda_13_4_and_a_610_driver_13_3():
    # the newest toolkit whose GA driver is not newer than the driver
    assert max_cuda_for_driver("615.71.09") == "13.4"
    assert max_cuda_for_driver("610.43.02") == "13.3"


def test_a_620_driver_supports_cuda_13_5_and_a_later_615_driver_still_13_4():
    # 615.71.10 (an R615 update, 2026-10-19) is newer than 13.4's driver but older than 13.5's
    assert max_cuda_for_driver("620.70.06") == "13.5"
    assert max_cuda_for_driver("615.71.10") == "13.4"


def test_a_toolkit_without_a_known_ga_driver_falls_back_to_the_13_family_minimum():
    # no source names a 13.6 GA driver: no number is made up, the family floor still holds
    assert toolkit_driver("13.6") is None
    assert family_min_driver("13.6") == "580.65.06"


def test_rows_read_from_nvidia_listings_name_that_source():
    # 13.3-13.5 come from the redist manifests, not from a Table 3 that was never read
    table = load_table("cuda_drivers")
    assert table["sources"]["ga_driver_listings"]["rows"] == ["13.3", "13.4", "13.5"]
    assert all(row in table["toolkit_driver"] for row in ("13.3", "13.4", "13.5"))


def _torch_for_cuda_13_5() -> dict:
    # the project's H200 probe, with torch's CUDA set to 13.5 as a cu135 build reports it;
    # libcuda unset so only the driver version (no cuda-compat) decides
    versions = json.loads((FIXTURES / "versions" / H200_VERSIONS).read_text())
    versions.update(torch_cuda="13.5", libcuda_version=None, libcuda_path=None)
    return versions


def _driver_cuda_finding(driver: str):
    # NVML gives the driver version only: the table turns it into the CUDA it supports
    gpus = {"source": "nvml", "driver_version": driver, "gpus": [{"name": "NVIDIA H200"}]}
    (finding,), _ = findings(
        facts_with(versions=_torch_for_cuda_13_5(), gpus_json=gpus), "driver-cuda"
    )
    return finding


@pytest.mark.parametrize("driver", ["615.71.09", "615.71.10", "610.43.02"])
def test_a_cuda_13_5_torch_on_a_driver_below_620_70_06_is_flagged(driver):
    # below 13.5's driver: starts through minor-version compatibility, newer PTX cannot JIT
    finding = _driver_cuda_finding(driver)
    assert finding.severity == "warning" and finding.runbooks == ["driver-cuda-mismatch"]
    assert "driver >= 620.70.06 supports CUDA 13.5 fully" in finding.summary


def test_a_cuda_13_5_torch_on_the_620_70_06_driver_is_fine():
    # 13.5's own driver: nothing is missing
    finding = _driver_cuda_finding("620.70.06")
    assert finding.severity == "ok"
    assert "runs on driver 620.70.06 (CUDA 13.5)" in finding.summary
