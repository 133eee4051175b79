"""Kubernetes quantities read as the API machinery reads them (kubernetes.utils.parse_quantity)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from kubernetes.utils import parse_quantity

from llmdoctor.parsers.k8s_pod import quantity

K8S = Path(__file__).parent / "fixtures" / "k8s"


def _fixture_quantities() -> set[str]:
    """Every resources/capacity/allocatable/sizeLimit value in the real-format k8s fixtures."""
    found: set[str] = set()

    def walk(node, inside=False):
        if isinstance(node, dict):
            for key, value in node.items():
                here = inside or key in ("limits", "requests", "capacity", "allocatable")
                if key == "sizeLimit" and isinstance(value, str):
                    found.add(value)
                walk(value, here)
        elif isinstance(node, list):
            for item in node:
                walk(item, inside)
        elif inside and isinstance(node, str):
            found.add(node)

    for path in K8S.glob("*.json"):
        walk(json.loads(path.read_text()))
    return found


VALID = ["1e3", ".5", "100n", "5.", "1E3", "1e-3", "10u", "1.5Gi", "2E", "1Ei", "+1", "-1", "0"]


@pytest.mark.parametrize("text", sorted(_fixture_quantities() | set(VALID)))
def test_same_value_as_the_kubernetes_client(text):
    # issue 12: 1e3, .5 and 100n were refused
    assert math.isclose(quantity(text), float(parse_quantity(text)), rel_tol=1e-12)


@pytest.mark.parametrize("text", ["1e", "1ki", "Gi", "1.2.3", "", "ten"])
def test_not_a_quantity_for_either(text):
    with pytest.raises(ValueError):
        parse_quantity(text)
    assert quantity(text) is None


def test_fixtures_hold_quantities():
    assert {"1", "8", "16Gi"} & _fixture_quantities()
