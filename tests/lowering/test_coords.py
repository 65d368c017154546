"""Where lowerings break: half-way ties, exact borders, size-1 axes, far-out grids, NaN."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from conftest import assert_close, gridsample_model, make_grid, oracle, run_ort, spec_model
from onnx import helper
from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import OpRun

from gridsample_lower import lower, supported_specs
from gridsample_lower.check.reference import grid_sample
from gridsample_lower.lowering.costs import ROWS_MIN_CHANNELS
from gridsample_lower.spec import ALIGN_CORNERS, MODES, PADDING_MODES, GridSampleSpec

PADDINGS = list(PADDING_MODES)


def _lowered_and_native(x, grid, mode, padding, align):
    model = gridsample_model(list(x.shape), list(grid.shape), mode, padding, align)
    feeds = {"X": x, "grid": grid}
    return run_ort(lower(model), feeds), run_ort(model, feeds)


def _tie_grid(size: int, align: int) -> np.ndarray:
    """Normalized coordinates whose unnormalized value is exactly k + 0.5, k in [-6, size + 5]."""
    k = np.arange(-6, size + 6, dtype=np.float64)
    if align:  # x = (g + 1) / 2 * (size - 1)
        g = (k + 0.5) * 2 / (size - 1) - 1
    else:  # x = ((g + 1) * size - 1) / 2
        g = (2 * k + 2) / size - 1
    return g


@pytest.mark.parametrize("padding", PADDINGS)
@pytest.mark.parametrize("align", ALIGN_CORNERS)
def test_nearest_half_way_ties_round_to_even_bit_exact(padding, align, rng):
    """Ties inside and beyond every border agree bit for bit with onnxruntime (and are even)."""
    size = 8 if not align else 5  # sizes where every tie is exact in float32
    ties = _tie_grid(size, align)
    gx, gy = np.meshgrid(ties, ties[::3], indexing="xy")
    grid = np.stack([gx, gy], axis=-1)[None].astype(np.float32)
    x = rng.standard_normal((1, 2, size, size)).astype(np.float32)
    lowered, native = _lowered_and_native(x, grid, "nearest", padding, align)
    assert_close(lowered, native, "nearest")
    # and the rule is half-to-even: sample a ramp along width at the in-range ties
    ramp = np.tile(np.arange(size, dtype=np.float32), (1, 1, size, 1))
    inside = grid[:, :1, 6 : 6 + size - 1]
    picked, _ = _lowered_and_native(ramp, inside, "nearest", padding, align)
    assert (picked[0, 0, 0] % 2 == 0).all()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("padding", PADDINGS)
@pytest.mark.parametrize("align", ALIGN_CORNERS)
def test_exact_borders(mode, padding, align, rng):
    """G = -1, 1 and the coordinates of the first/last pixel centres and edges."""
    h, w = 4, 6
    values = [-1.0, 1.0, 0.0, -1 + 1 / w, 1 - 1 / w, -1 - 1 / w, 1 + 1 / w, -1 + 1 / h, 1 - 1 / h]
    pairs = np.array(list(itertools.product(values, values)), dtype=np.float32)
    grid = pairs.reshape(1, 9, 9, 2)
    x = rng.standard_normal((1, 3, h, w)).astype(np.float32)
    lowered, native = _lowered_and_native(x, grid, mode, padding, align)
    assert_close(lowered, native, mode)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("padding", PADDINGS)
@pytest.mark.parametrize("align", ALIGN_CORNERS)
def test_size_one_axes(mode, padding, align, rng):
    """A spatial axis of size 1, in each position; reflection there samples index 0."""
    for shape in [(2, 2, 1, 5), (2, 2, 4, 1), (2, 2, 1, 1)]:
        x = rng.standard_normal(shape).astype(np.float32)
        grid = make_grid(rng, (2, 3, 4, 2), far=True)
        model = gridsample_model(list(x.shape), list(grid.shape), mode, padding, align)
        actual = run_ort(lower(model), {"X": x, "grid": grid})
        if padding == "reflection" and align:  # onnxruntime divides by a zero range here
            expected = grid_sample(x, grid, mode, padding, align)
        else:
            expected = run_ort(model, {"X": x, "grid": grid})
        assert_close(actual, expected, mode)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("padding", PADDINGS)
def test_one_spatial_dim_far_out(mode, padding, rng):
    """1-D sampling with |g| up to 1e4 against the ONNX reference (or ours where it is wrong)."""
    spec = GridSampleSpec(1, mode, padding, 1)
    x = rng.standard_normal((2, 2, 5)).astype(np.float32)
    grid = make_grid(rng, (2, 12, 1), far=True)
    model = gridsample_model(list(x.shape), list(grid.shape), mode, padding, 1)
    assert_close(run_ort(lower(model), {"X": x, "grid": grid}), oracle(spec, x, grid), mode)


@pytest.mark.parametrize("spec", supported_specs(), ids=lambda s: s.label.replace(" ", "-"))
@pytest.mark.parametrize("dtype", [np.float32, np.int16], ids=["float32", "int16"])
def test_nan_and_inf_in_grid(spec, dtype, rng):
    """Non-finite coordinates never crash, and follow the documented rule: linear and cubic give
    NaN (0 for integer X); nearest reads the first pixel (border, reflection) or 0 (zeros);
    +-inf acts as a huge value except under reflection. onnxruntime's own result is undefined."""
    r = spec.rank
    x = (rng.standard_normal((2, 3, *[4, 3, 5][:r])) * 10).astype(dtype)
    grid = make_grid(rng, (2, *[3, 2, 2][:r], r))
    grid.reshape(-1)[:5] = [np.nan, np.inf, -np.inf, np.nan, 1e4]
    actual = run_ort(lower(spec_model(spec, x, grid)), {"X": x, "grid": grid})
    expected = grid_sample(x, grid, spec.mode, spec.padding_mode, spec.align_corners)
    assert_close(actual, expected, spec.mode)


class _AnyIntegerCast(OpRun):
    """ONNX Cast, except that a NaN, infinite or out-of-range float cast to an integer type
    becomes an arbitrary integer (the spec leaves it undefined; runtimes differ, and a value
    wrapped modulo 2**32 may land anywhere)."""

    op_domain = ""

    def _run(self, x, to=None, saturate=None, round_mode=None):
        y = np.asarray(x).astype(helper.tensor_dtype_to_np_dtype(to))  # (NaN: undefined)
        if np.issubdtype(y.dtype, np.integer) and np.issubdtype(np.asarray(x).dtype, np.floating):
            info = np.iinfo(y.dtype)
            with np.errstate(invalid="ignore"):
                undefined = ~((x >= info.min) & (x <= info.max))
            # The extremes, and 1: a value that wrapped into range reads a pixel inside X.
            extremes = np.array([info.min, info.max, -1, 7 * 10**8 % info.max, 1], dtype=y.dtype)
            y[undefined] = extremes[np.arange(undefined.sum()) % len(extremes)]
        return (y,)


_AnyIntegerCast.__name__ = "Cast"


class _InRangeGatherElements(OpRun):
    """ONNX GatherElements that fails on any index outside [0, size) (the ONNX reference's own
    takes at most 64 values along the axis)."""

    op_domain = ""

    def _run(self, data, indices, axis=None):
        axis = (axis or 0) % data.ndim
        size = data.shape[axis]
        assert ((indices >= 0) & (indices < size)).all(), f"an index outside [0, {size})"
        window = tuple(
            slice(0, n) if a != axis else slice(None) for a, n in enumerate(indices.shape)
        )
        return (np.take_along_axis(data[window], indices.astype(np.int64), axis=axis),)


_InRangeGatherElements.__name__ = "GatherElements"


class _InRangeGather(OpRun):
    """ONNX Gather that fails on any index outside [0, size) (numpy's take wraps negatives)."""

    op_domain = ""

    def _run(self, data, indices, axis=None):
        axis = (axis or 0) % data.ndim
        size = data.shape[axis]
        assert ((indices >= 0) & (indices < size)).all(), f"an index outside [0, {size})"
        return (np.take(data, indices.astype(np.int64), axis=axis),)


_InRangeGather.__name__ = "Gather"


@pytest.mark.parametrize("spec", supported_specs(), ids=lambda s: s.label.replace(" ", "-"))
@pytest.mark.parametrize(
    ("symbolic", "channels"),
    [(False, 2), (False, ROWS_MIN_CHANNELS), (True, 2)],
    ids=["static", "static-rows", "symbolic"],
)
@pytest.mark.parametrize("target", ["generic", "litert"])
def test_a_nan_index_stays_in_range_whatever_integer_it_casts_to(
    spec, symbolic, channels, target, rng
):
    """A NaN coordinate's taps are cast to integers undefined by the spec (x86 makes INT_MIN, ARM
    0, others anything): every such integer must still index inside X. The ONNX reference
    evaluator runs the lowered graph with a Cast that makes them the extremes of the type.
    litert computes its indices in float (``Plan.float_index``), where a NaN goes through an
    int32 Cast and back before the float bounds, which would pass a NaN through."""
    r = spec.rank
    x = rng.standard_normal((2, channels, *[4, 3, 5][:r])).astype(np.float32)
    grid = make_grid(rng, (2, *[3, 2, 2][:r], r))
    grid.reshape(-1)[:5] = [np.nan, np.inf, -np.inf, np.nan, 1e4]
    model = spec_model(spec, x, grid)
    if symbolic:
        model = gridsample_model(
            ["N", 2, *[f"d{i}" for i in range(r)]],
            ["N", *[f"o{i}" for i in range(r)], r],
            spec.mode,
            spec.padding_mode,
            spec.align_corners,
        )
    lowered = lower(model, target=target, lower_all=True)
    feeds = {"X": x, "grid": grid}
    evaluator = ReferenceEvaluator(
        lowered, new_ops=[_AnyIntegerCast, _InRangeGatherElements, _InRangeGather]
    )
    with np.errstate(invalid="ignore"):  # NaN in, NaN through
        actual = evaluator.run(None, feeds)[0]
    expected = grid_sample(x, grid, spec.mode, spec.padding_mode, spec.align_corners)
    assert_close(actual, expected, spec.mode)


@pytest.mark.parametrize(
    "spec", supported_specs(ranks=(2,)), ids=lambda s: s.label.replace(" ", "-")
)
@pytest.mark.parametrize(
    ("symbolic", "channels"),
    [(False, 2), (False, ROWS_MIN_CHANNELS), (True, 2)],
    ids=["static", "static-rows", "symbolic"],
)
def test_far_float64_coordinates_stay_in_range_whatever_integer_they_cast_to(
    spec, symbolic, channels, rng
):
    """float64 keeps coordinates up to 2**52, past int32: every tap must be clamped in float
    before a cast whose result the spec leaves undefined out of range (the same Cast as above
    makes them the extremes of the type)."""
    x = rng.standard_normal((2, channels, 4, 3))
    grid = make_grid(rng, (2, 3, 2, 2)).astype(np.float64)
    # Far on one axis, inside on the other: a wrapped tap would read a pixel. (Below 2**52,
    # reflection folds them exactly.)
    grid.reshape(-1)[:10] = [4e15, 0.2, -0.3, -4e15, 3e9, 0.5, 0.1, -3e9, 1e12, -0.6]
    model = spec_model(spec, x, grid)
    if symbolic:
        model = gridsample_model(
            ["N", 2, "H", "W"],
            ["N", "h", "w", 2],
            spec.mode,
            spec.padding_mode,
            spec.align_corners,
            x_dtype=np.float64,
            grid_dtype=np.float64,
        )
    evaluator = ReferenceEvaluator(
        lower(model, lower_all=True),
        new_ops=[_AnyIntegerCast, _InRangeGatherElements, _InRangeGather],
    )
    actual = evaluator.run(None, {"X": x, "grid": grid})[0]
    expected = grid_sample(x, grid, spec.mode, spec.padding_mode, spec.align_corners)
    assert_close(actual, expected, spec.mode)


# Targets whose graphs onnxruntime runs and that never gather rows from an unpadded X of
# unknown size with zeros padding. openvino, webnn, tract, iree and tinygrad do (nearest's
# values masked once gathered, tinygrad's taps without a ring): an X with an empty axis
# fails there at run time, as onnxruntime's own GridSample does (docs/semantics.md).
EMPTY_AXIS_TARGETS = ["generic", "onnxruntime", "tensorrt", "tvm", "int32", "litert"]


@pytest.mark.parametrize("target", EMPTY_AXIS_TARGETS)
@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("align", [0, 1])
def test_an_empty_axis_of_unknown_size_reads_zeros(target, mode, align, rng):
    """X with an empty spatial axis, its sizes symbolic, zeros padding: every tap lies outside,
    Y is zeros (the check's reference kernel: onnxruntime's refuses the axis, onnx.reference's
    nearest indexes it). With align_corners=1 a tap's coordinate can round to -1 or 0, which
    an empty axis' clamp gives too: the mask must not call it inside."""
    for r in (1, 2, 3):
        model = gridsample_model(
            ["N", "C", *[f"d{k}" for k in range(r)]], [2, *[3, 4, 2][:r], r], mode, "zeros", align
        )
        lowered = lower(model, target=target, lower_all=True)
        x = np.zeros((2, 3, *[0, 5, 6][:r]), np.float32)
        grid = rng.uniform(-1.5, 1.5, (2, *[3, 4, 2][:r], r)).astype(np.float32)
        expected = grid_sample(x, grid, mode, "zeros", align).astype(np.float32)
        np.testing.assert_array_equal(run_ort(lowered, {"X": x, "grid": grid}), expected)
