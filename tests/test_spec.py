"""Reading a node: spellings per opset, defaults, and clear reasons for what cannot be lowered."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest
from conftest import assert_close, gridsample_model, make_grid, run_ort

from gridsample_lower import lower
from gridsample_lower.check.reference import grid_sample
from gridsample_lower.spec import (
    GridSampleSpec,
    UnsupportedGridSample,
    compute_dtype,
    spelling_matches_opset,
)


def _node(**attrs):
    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([1, 1, 3, 3]))
    g = ir.Value(name="g", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([1, 2, 2, 2]))
    return ir.node("GridSample", [x, g], attributes=attrs)


@pytest.mark.parametrize(
    "spelled,mode",
    [
        ("bilinear", "linear"),
        ("linear", "linear"),
        ("bicubic", "cubic"),
        ("cubic", "cubic"),
        ("nearest", "nearest"),
    ],
)
def test_both_spellings_are_read(spelled, mode):
    assert GridSampleSpec.from_node(_node(mode=spelled)).mode == mode


def test_defaults():
    spec = GridSampleSpec.from_node(_node())
    assert (spec.rank, spec.mode, spec.padding_mode, spec.align_corners) == (
        2,
        "linear",
        "zeros",
        0,
    )


def test_spelling_mismatch_is_detectable():
    assert not spelling_matches_opset(_node(mode="linear"), 16)
    assert not spelling_matches_opset(_node(mode="bicubic"), 20)
    assert spelling_matches_opset(_node(mode="bilinear"), 19)


@pytest.mark.parametrize(
    "attrs,reason",
    [
        ({"mode": "quintic"}, "unknown mode"),
        ({"padding_mode": "wrap"}, "unknown padding_mode"),
        ({"align_corners": 2}, "align_corners must be 0 or 1"),
    ],
)
def test_bad_attributes(attrs, reason):
    with pytest.raises(UnsupportedGridSample, match=reason):
        GridSampleSpec.from_node(_node(**attrs))


def test_unknown_rank_and_mismatched_rank():
    node = _node()
    node.inputs[0].shape = None
    node.inputs[1].shape = None
    with pytest.raises(UnsupportedGridSample, match="rank of X and grid is unknown"):
        GridSampleSpec.from_node(node)
    node.inputs[0].shape = ir.Shape([1, 1, 3, 3, 3])
    node.inputs[1].shape = ir.Shape([1, 2, 2, 2])
    with pytest.raises(UnsupportedGridSample, match="disagree on the spatial rank"):
        GridSampleSpec.from_node(node)


def test_compute_dtype():
    assert (
        compute_dtype(GridSampleSpec(2, "linear", "zeros", 0, ir.DataType.FLOAT16))
        == ir.DataType.FLOAT
    )
    assert (
        compute_dtype(GridSampleSpec(2, "linear", "zeros", 0, ir.DataType.INT32))
        == ir.DataType.DOUBLE
    )
    assert (
        compute_dtype(GridSampleSpec(2, "nearest", "zeros", 0, ir.DataType.INT64))
        == ir.DataType.FLOAT
    )
    assert (
        compute_dtype(GridSampleSpec(2, "nearest", "zeros", 0, grid_dtype=ir.DataType.DOUBLE))
        == ir.DataType.DOUBLE
    )


@pytest.mark.parametrize("padding", ["border", "reflection"])
def test_an_empty_spatial_axis_has_no_pixel_to_pad_with(padding):
    """Border and reflection read pixels that an empty axis lacks: refused (onnxruntime's kernel
    refuses it too), where zeros padding has a defined result, all zeros."""
    node = _node(padding_mode=padding)
    node.inputs[0].shape = ir.Shape([1, 1, 0, 3])
    with pytest.raises(UnsupportedGridSample, match="empty spatial axis"):
        GridSampleSpec.from_node(node)


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_an_empty_spatial_axis_reads_zeros_with_zeros_padding(mode, rng):
    x = np.zeros((1, 2, 0, 3), np.float32)
    grid = make_grid(rng, (1, 4, 5, 2))
    model = gridsample_model(list(x.shape), list(grid.shape), mode, "zeros", 0)
    actual = run_ort(lower(model, lower_all=True), {"X": x, "grid": grid})
    assert_close(actual, grid_sample(x, grid, mode, "zeros", 0), mode)
