"""A deformable attention lowered as one unit is checked as one region, and named when wrong."""

from __future__ import annotations

import onnx
import pytest

from gridsample_lower import lower, verify
from gridsample_lower.models import deformable_attention_model

LEVELS = [(7, 9), (4, 5), (2, 3)]


@pytest.mark.parametrize("symbolic", [False, True])
def test_the_fused_region_is_checked_against_the_original_subgraph(symbolic):
    model = deformable_attention_model(LEVELS, symbolic=symbolic)
    report = verify(model, lower(model, target="onnxruntime", lower_all=True), samples=2)
    assert report.ok, report.table()
    (region,) = [c for c in report.nodes if c.members]
    assert region.name == "sample0+" and region.members == ["sample0", "sample1", "sample2"]
    assert region.checked and region.elements > 0 and region.oracle == "onnxruntime"
    assert region.configuration == "deformable attention of 3 x r2 linear zeros align_corners=0"
    for member in (c for c in report.nodes if not c.members):
        assert not member.checked and "deformable attention 'sample0+'" in member.note
    assert "1 deformable attention(s) of 3 GridSamples as one region each" in report.summary()


def test_a_wrong_fused_region_is_named():
    """One Floor of the fused region made a Ceil: its check, not the members', fails."""
    model = deformable_attention_model(LEVELS)
    candidate = lower(model, target="onnxruntime", lower_all=True)
    (floor, *_) = [n for n in candidate.graph.node if n.op_type == "Floor"]
    floor.op_type = "Ceil"
    report = verify(model, candidate, samples=1)
    assert not report.ok
    assert report.culprits == ["sample0+"]
    assert "'sample0+'" in report.summary()


def test_a_region_onnxruntime_cannot_run_is_judged_by_the_reference():
    """TorchScript's static exports give float X a double grid: onnxruntime has no kernel."""
    model = deformable_attention_model(LEVELS)
    for value in model.graph.input:
        if value.name.startswith("grid"):
            value.type.tensor_type.elem_type = onnx.TensorProto.DOUBLE
    report = verify(model, lower(model, target="onnxruntime", lower_all=True), samples=1)
    assert report.ok, report.table()
    (region,) = [c for c in report.nodes if c.members]
    assert region.checked and region.oracle == "onnx.reference"


def test_a_region_reading_the_split_values_is_checked_from_them():
    """Where the lowering reads the values the levels were split from, so does the check."""
    model = deformable_attention_model(LEVELS, batch=4, heads=2)
    report = verify(model, lower(model, target="onnxruntime", lower_all=True), samples=1)
    assert report.ok, report.table()
    (region,) = [c for c in report.nodes if c.members]
    assert region.checked and region.elements > 0
