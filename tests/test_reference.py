"""gridsample_lower.reference, the oracle for what onnxruntime cannot run, is checked here
against onnxruntime (4-D/5-D) and the ONNX reference (1-D, 5-D cubic), where they agree with each
other.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_close, gridsample_model, make_grid, run_onnx_reference, run_ort

from gridsample_lower.reference import grid_sample
from gridsample_lower.spec import ALIGN_CORNERS, MODES, PADDING_MODES

_SHAPES_4D = ((2, 3, 5, 7), (2, 4, 6, 2))
_SHAPES_5D = ((1, 2, 3, 4, 5), (1, 2, 3, 4, 3))


# onnxruntime runs cubic for 4-D only: 5-D cubic is test_5d_cubic_matches_the_onnx_reference.
@pytest.mark.parametrize(
    "mode,shapes",
    [
        *[pytest.param(mode, _SHAPES_4D, id=f"{mode}-4-D") for mode in MODES],
        *[pytest.param(mode, _SHAPES_5D, id=f"{mode}-5-D") for mode in MODES if mode != "cubic"],
    ],
)
@pytest.mark.parametrize("padding", PADDING_MODES)
@pytest.mark.parametrize("align", ALIGN_CORNERS)
def test_matches_onnxruntime_in_float64(mode, padding, align, shapes, rng):
    x_shape, grid_shape = shapes
    x = rng.standard_normal(x_shape)
    grid = make_grid(rng, grid_shape, far=True, dtype=np.float64)
    model = gridsample_model(
        list(x_shape),
        list(grid_shape),
        mode,
        padding,
        align,
        x_dtype=np.float64,
        grid_dtype=np.float64,
    )
    assert_close(
        grid_sample(x, grid, mode, padding, align), run_ort(model, {"X": x, "grid": grid}), mode
    )


@pytest.mark.parametrize("padding", PADDING_MODES)
@pytest.mark.parametrize("align", ALIGN_CORNERS)
def test_5d_cubic_matches_the_onnx_reference(padding, align, rng):
    """onnxruntime has no 5-D cubic; the ONNX reference evaluator runs it (slowly: tiny shapes).

    Under border padding the ONNX reference clamps the continuous coordinate before taking the
    taps (the documented disagreement), which only matters for points outside the bounds: keep
    that grid within [-1, 1], where both clamp each tap alike (taps still fall outside near the
    edges). The other paddings see far-out points too.
    """
    x_shape, grid_shape = (1, 2, 3, 4, 3), (1, 2, 2, 3, 3)
    x = rng.standard_normal(x_shape).astype(np.float32)
    grid = make_grid(rng, grid_shape, far=padding != "border")
    if padding == "border":
        grid = np.clip(grid, -1, 1)
    model = gridsample_model(list(x_shape), list(grid_shape), "cubic", padding, align)
    expected = run_onnx_reference(model, {"X": x, "grid": grid})
    ours = grid_sample(x, grid, "cubic", padding, align)
    assert ours.shape == (1, 2, 2, 2, 3)
    assert_close(ours.astype(np.float32), expected, "cubic")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("padding", ["zeros", "reflection"])
@pytest.mark.parametrize("align", ALIGN_CORNERS)
def test_matches_the_onnx_reference_in_one_dimension(mode, padding, align, rng):
    x = rng.standard_normal((2, 2, 5)).astype(np.float32)
    grid = make_grid(rng, (2, 7, 1), far=True)
    model = gridsample_model([2, 2, 5], [2, 7, 1], mode, padding, align)
    expected = run_onnx_reference(model, {"X": x, "grid": grid})
    assert_close(grid_sample(x, grid, mode, padding, align).astype(np.float32), expected, mode)


def test_cubic_border_follows_onnxruntime_not_the_onnx_reference(rng):
    """The documented disagreement: the ONNX reference clamps the coordinate before the taps."""
    x = rng.standard_normal((1, 1, 4, 5)).astype(np.float32)
    grid = np.full((1, 1, 1, 2), 1.12, dtype=np.float32)  # x = 4.8: past the border, within 2 taps
    model = gridsample_model([1, 1, 4, 5], [1, 1, 1, 2], "cubic", "border", 0)
    ours = grid_sample(x, grid, "cubic", "border", 0)
    assert_close(ours, run_ort(model, {"X": x, "grid": grid}), "cubic", np.float32)
    assert not np.allclose(ours, run_onnx_reference(model, {"X": x, "grid": grid}), atol=1e-3)
