"""The driver <-> CUDA table reaches the newest toolkits whose GA driver a source names
(llmdoctor/data/SOURCES.md), and says nothing it does not know."""

from __future__ import annotations

from llmdoctor.gpus.tables import family_min_driver, max_cuda_for_driver, toolkit_driver


def test_cuda_13_4_needs_the_615_driver_of_its_ga_run_file():
    # 13.4.1 is the 13.4 GA release; its run file carries driver 615.71.09
    assert toolkit_driver("13.4") == "615.71.09"
    assert toolkit_driver("13.4.1") == "615.71.09"


def test_a_615_driver_supports_cuda_13_4_and_a_610_driver_13_3():
    # the newest toolkit whose GA driver is not newer than the driver
    assert max_cuda_for_driver("615.71.09") == "13.4"
    assert max_cuda_for_driver("610.43.02") == "13.3"


def test_cuda_13_5_without_a_known_ga_driver_falls_back_to_the_13_family_minimum():
    # no source gave 13.5's Table 3 row: no number is made up, the family floor still holds
    assert toolkit_driver("13.5") is None
    assert family_min_driver("13.5") == "580.65.06"
