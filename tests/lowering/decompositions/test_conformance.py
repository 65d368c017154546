"""The ONNX backend conformance cases for GridSample, lowered and run in onnxruntime.

The expected outputs are the ONNX project's own, published with the operator.
"""

from __future__ import annotations

import importlib

import numpy as np
import onnx
import pytest
from conftest import run_ort

from gridsample_lower import lower


def _gridsample_cases() -> list:
    """The ONNX package's GridSample cases, built by importing its GridSample module alone:
    ``collect_testcases`` imports every operator's module, which computes every operator's
    expected outputs (15 s of each pytest worker's collection, pooling's most of it)."""
    import onnx.backend.test.case.node as node_cases

    before = len(node_cases._NodeTestCases)
    importlib.import_module("onnx.backend.test.case.node.gridsample")  # its cases register
    return [
        c
        for c in node_cases._NodeTestCases[before:]
        if c.model.graph.node[0].op_type == "GridSample"
    ]


CASES = _gridsample_cases()


def test_cases_were_collected():
    assert len(CASES) >= 15


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_conformance_case(case):
    lowered = lower(case.model)
    onnx.checker.check_model(lowered, full_check=True)
    assert "GridSample" not in {n.op_type for n in lowered.graph.node}
    for inputs, outputs in case.data_sets:
        feeds = {
            info.name: value for info, value in zip(case.model.graph.input, inputs, strict=True)
        }
        (actual,) = [run_ort(lowered, feeds)]
        np.testing.assert_allclose(actual, outputs[0], rtol=1e-4, atol=1e-4)
