"""Every X dtype and grid dtype: output type is X's, values match a float64 onnxruntime run."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from conftest import assert_close, gridsample_model, make_grid, run_ort, spec_model

from gridsample_lower import lower, supported_specs
from gridsample_lower.check.reference import grid_sample
from gridsample_lower.lowering.costs import ROWS_MIN_CHANNELS
from gridsample_lower.spec import MODES

INTEGERS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
HALVES = [np.float16, ml_dtypes.bfloat16]


def _expected(x, grid, mode, padding, dtype):
    """Onnxruntime in float64, then X's type: integers truncate toward zero and saturate."""
    model = gridsample_model(
        list(x.shape), list(grid.shape), mode, padding, 0, x_dtype=np.float64, grid_dtype=np.float64
    )
    y = run_ort(model, {"X": x.astype(np.float64), "grid": grid.astype(np.float64)})
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return np.clip(np.trunc(y), float(info.min), np.nextafter(float(info.max), 0)).astype(dtype)
    return y.astype(dtype)


def _lower_and_run(x, grid, mode, padding):
    model = gridsample_model(
        list(x.shape), list(grid.shape), mode, padding, 0, x_dtype=x.dtype, grid_dtype=grid.dtype
    )
    y = run_ort(lower(model), {"X": x, "grid": grid})
    assert y.dtype == x.dtype
    return y


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", INTEGERS, ids=lambda d: np.dtype(d).name)
def test_integer_x(dtype, mode, rng):
    info = np.iinfo(dtype)
    low, high = max(info.min, -1000), min(info.max, 1000)
    x = rng.integers(low, high, size=(2, 2, 5, 6)).astype(dtype)
    grid = make_grid(rng, (2, 4, 3, 2))
    padding = "border" if mode == "cubic" else "zeros"
    assert_close(
        _lower_and_run(x, grid, mode, padding), _expected(x, grid, mode, padding, dtype), mode
    )


def test_nearest_moves_int64_values_exactly(rng):
    """2**40 + 7 would not survive a float32 round trip; nearest never computes on values."""
    x = (2**40 + 7 + rng.integers(0, 1000, size=(1, 1, 3, 4))).astype(np.int64)
    x[0, 0, 0, 0] = np.iinfo(np.int64).max
    grid = make_grid(rng, (1, 5, 5, 2))
    y = _lower_and_run(x, grid, "nearest", "border")
    native = gridsample_model(list(x.shape), list(grid.shape), "nearest", "border", 0)
    picks = run_ort(
        native, {"X": np.arange(12, dtype=np.float32).reshape(1, 1, 3, 4), "grid": grid}
    )
    np.testing.assert_array_equal(y, x.reshape(-1)[picks.astype(np.int64)])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", HALVES, ids=["float16", "bfloat16"])
def test_half_x_and_grid(dtype, mode, rng):
    x = rng.standard_normal((2, 3, 5, 4)).astype(dtype)
    grid = make_grid(rng, (2, 3, 4, 2), dtype=dtype)
    assert_close(
        _lower_and_run(x, grid, mode, "reflection"),
        _expected(x, grid, mode, "reflection", dtype),
        mode,
    )


@pytest.mark.parametrize("x_dtype", [np.float16, np.float32, np.int16])
@pytest.mark.parametrize("grid_dtype", [np.float16, np.float64])
def test_mixed_x_and_grid_types(x_dtype, grid_dtype, rng):
    x = (rng.standard_normal((1, 2, 4, 5)) * 50).astype(x_dtype)
    grid = make_grid(rng, (1, 3, 3, 2), dtype=grid_dtype)
    assert_close(
        _lower_and_run(x, grid, "linear", "zeros"),
        _expected(x, grid, "linear", "zeros", x_dtype),
        "linear",
        x_dtype,
    )


def test_bool_x_nearest(rng):
    x = rng.random((2, 1, 4, 5)) < 0.5
    grid = make_grid(rng, (2, 3, 3, 2))
    y = _lower_and_run(x, grid, "nearest", "zeros")
    expected = _expected(x.astype(np.float64), grid, "nearest", "zeros", np.float64)
    np.testing.assert_array_equal(y, expected.astype(bool))


ALL_DTYPES = [*HALVES, *INTEGERS]


@pytest.mark.parametrize("spec", supported_specs(), ids=lambda s: s.label.replace(" ", "-"))
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: np.dtype(d).name)
def test_every_configuration_every_dtype(spec, dtype, rng):
    """Every (rank, mode, padding, align_corners) x X dtype, against the float64 reference kernel
    (onnxruntime cannot take these types; the ONNX reference mishandles integers).
    """
    shape = (2, 2, *[4, 3, 5][: spec.rank])
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        x = rng.integers(max(info.min, -100), min(info.max, 100), size=shape).astype(dtype)
    else:
        x = rng.standard_normal(shape).astype(dtype)
    grid_dtype = dtype if np.dtype(dtype).kind not in "iu" else np.float32
    grid = make_grid(rng, (2, *[3, 2, 2][: spec.rank], spec.rank), far=True, dtype=grid_dtype)
    actual = run_ort(lower(spec_model(spec, x, grid)), {"X": x, "grid": grid})
    expected = grid_sample(
        x, grid.astype(np.float64), spec.mode, spec.padding_mode, spec.align_corners
    )
    assert actual.dtype == expected.dtype
    assert_close(actual, expected, spec.mode)


@pytest.mark.parametrize("batch", [2, "N"], ids=["static-batch", "symbolic-batch"])
@pytest.mark.parametrize("dtype", [np.int16, ml_dtypes.bfloat16], ids=["int16", "bfloat16"])
@pytest.mark.parametrize("mode", MODES)
def test_channels_last_rows_with_a_zero_slot(mode, dtype, batch, rng):
    """Many channels gather rows, with batch offsets added to the integer indices (static or
    symbolic batch). Nearest reads a zero row past every sample's data for the types Where
    cannot mask; linear and cubic mask their weights instead."""
    x = rng.integers(-100, 100, size=(2, ROWS_MIN_CHANNELS, 4, 3)).astype(dtype)
    grid = make_grid(rng, (2, 6, 4, 2), far=True)
    model = gridsample_model(
        [batch, ROWS_MIN_CHANNELS, 4, 3], [batch, 6, 4, 2], mode, "zeros", 0, x_dtype=x.dtype
    )
    lowered = lower(model)
    assert "GatherElements" not in {n.op_type for n in lowered.graph.node}
    y = run_ort(lowered, {"X": x, "grid": grid})
    expected = grid_sample(x, grid.astype(np.float64), mode, "zeros", 0)
    assert y.dtype == expected.dtype
    assert_close(y, expected, mode)


@pytest.mark.parametrize("dtype", [np.uint8, np.float16, np.int32], ids=lambda d: np.dtype(d).name)
def test_channel_by_channel_in_the_compute_type(dtype, rng):
    """Few channels, summed channel by channel (onnxruntime): each gathered channel is
    cast to the compute type, float64 for 32-bit integers, before it is weighted."""
    scale = 2**30 if dtype == np.int32 else 50
    x = np.clip(rng.standard_normal((1, 3, 5, 6)) * scale, 0, 2**31 - 1).astype(dtype)
    grid = make_grid(rng, (1, 4, 7, 2), far=True)
    model = gridsample_model(list(x.shape), list(grid.shape), "cubic", "border", 0, x_dtype=dtype)
    lowered = lower(model, target="onnxruntime")
    assert [n.op_type for n in lowered.graph.node].count("MatMul") == 3
    y = run_ort(lowered, {"X": x, "grid": grid})
    assert y.dtype == x.dtype
    assert_close(y, grid_sample(x, grid.astype(np.float64), "cubic", "border", 0), "cubic", dtype)


@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
@pytest.mark.parametrize(
    "dtype", [np.float64, np.int32, np.float16], ids=lambda d: np.dtype(d).name
)
def test_cubic_rows_matmul_in_each_compute_type(dtype, index_dtype, rng):
    """From 16 channels onnxruntime sums cubic rows with one MatMul: in float64 for double and
    32-bit integer X (values near 2**30, which float32 would round by up to 64), in float32
    (then cast back) for halves; with int32 or int64 gather indices."""
    scale = 2**30 if np.dtype(dtype).kind == "i" else 1
    x = np.clip(rng.standard_normal((2, 16, 5, 6)) * scale, -(2**31), 2**31 - 1).astype(dtype)
    grid = make_grid(rng, (2, 8, 7, 2), far=True)
    model = gridsample_model(list(x.shape), list(grid.shape), "cubic", "zeros", 0, x_dtype=dtype)
    lowered = lower(model, target="onnxruntime", index_dtype=index_dtype)
    matmuls = [n for n in lowered.graph.node if n.op_type == "MatMul"]
    assert len(matmuls) == 1
    y = run_ort(lowered, {"X": x, "grid": grid})
    assert y.dtype == x.dtype
    assert_close(y, _expected(x, grid, "cubic", "zeros", dtype), "cubic", dtype)
