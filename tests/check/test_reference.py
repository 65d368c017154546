"""gridsample_lower.check.reference, the oracle for what onnxruntime cannot run, is checked here
against onnxruntime (4-D/5-D) and the ONNX reference (1-D, 5-D cubic), where they agree with each
other.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_close, gridsample_model, make_grid, run_onnx_reference, run_ort

from gridsample_lower.check.reference import grid_sample
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


def lattice_grid(rng, sizes, points, align, dtype=np.float32, n=2):
    """A grid of X's exact sample positions and the ties half-way between them, past the
    borders too, for X's spatial ``sizes`` (tensor order): computed in float64, then rounded to
    ``dtype`` as an exporter's arithmetic would (W = 7: float32(3/7) lands on a tie)."""
    grid = np.empty((n, *points, len(sizes)))
    for c, size in enumerate(reversed(sizes)):  # grid component c indexes axis -1 - c
        pixels = rng.integers(-4, 2 * size + 4, size=(n, *points)) / 2.0
        if align:
            values = 2 * pixels / max(size - 1, 1) - 1
        else:
            values = (2 * pixels + 1) / size - 1
        grid[..., c] = values
    return grid.astype(dtype)


NOT_POWERS_OF_TWO = [((7, 10), (9, 11)), ((100, 224), (13, 17)), ((10, 7, 5), (3, 4, 5))]


def _same(actual, expected, mode):
    """Nearest moves values: bit for bit. Linear and cubic: within the tolerance table."""
    if mode == "nearest":
        np.testing.assert_array_equal(actual, expected)
    else:
        assert_close(actual, expected, mode)


def _cases(shapes, keep):
    return [
        pytest.param(sizes, points, mode, id=f"{mode}-{'x'.join(map(str, sizes))}")
        for sizes, points in shapes
        for mode in MODES
        if keep(len(sizes), mode)
    ]


# onnxruntime runs 2-D and 3-D, but no 3-D cubic: onnx.reference judges that and ranks 1 and 4.
ORT_RUNS = _cases(NOT_POWERS_OF_TWO, lambda rank, mode: rank == 2 or mode != "cubic")
# onnx.reference clamps cubic's coordinate under border padding (the documented disagreement).
REFERENCE_RUNS = [
    pytest.param(*case.values, padding, id=f"{case.id}-{padding}")
    for case in _cases(
        [((7,), (9,)), ((10,), (12,)), ((5, 6, 7, 10), (2, 3, 2, 3)), ((7, 10, 5), (3, 4, 2))],
        lambda rank, mode: rank != 3 or mode == "cubic",
    )
    for padding in PADDING_MODES
    if not (case.values[2] == "cubic" and padding == "border")
]


@pytest.mark.parametrize("sizes,points,mode", ORT_RUNS)
@pytest.mark.parametrize("padding", PADDING_MODES)
@pytest.mark.parametrize("align", ALIGN_CORNERS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
def test_lattice_points_and_ties_agree_with_onnxruntime(
    sizes, points, mode, padding, align, dtype, rng
):
    """The oracle unnormalizes in the kernel's precision and order: with sizes that are not
    powers of two, lattice points and half-way ties fall where float32 and float64 round apart
    (nearest's ties, linear's and cubic's floors). The lowered graph must agree too."""
    from gridsample_lower import lower

    x = rng.standard_normal((2, 3, *sizes)).astype(dtype)
    grid = lattice_grid(rng, sizes, points, align, dtype)
    model = gridsample_model(
        list(x.shape), list(grid.shape), mode, padding, align, x_dtype=dtype, grid_dtype=dtype
    )
    native = run_ort(model, {"X": x, "grid": grid})
    _same(grid_sample(x, grid, mode, padding, align).astype(dtype), native, mode)
    lowered = lower(model, lower_all=True)
    _same(run_ort(lowered, {"X": x, "grid": grid}), native, mode)


@pytest.mark.parametrize("sizes,points,mode,padding", REFERENCE_RUNS)
@pytest.mark.parametrize("align", ALIGN_CORNERS)
def test_lattice_points_and_ties_agree_with_the_onnx_reference_where_onnxruntime_cannot_run(
    sizes, points, mode, padding, align, rng
):
    """Ranks 1 and 4, and 3-D cubic: onnx.reference (float32 coordinates) is the other judge
    (not of cubic with border padding, which it gets wrong)."""
    from gridsample_lower import lower

    x = rng.standard_normal((2, 2, *sizes)).astype(np.float32)
    grid = lattice_grid(rng, sizes, points, align)
    model = gridsample_model(list(x.shape), list(grid.shape), mode, padding, align)
    expected = run_onnx_reference(model, {"X": x, "grid": grid})
    _same(grid_sample(x, grid, mode, padding, align).astype(np.float32), expected, mode)
    _same(run_ort(lower(model), {"X": x, "grid": grid}), expected, mode)


@pytest.mark.parametrize(
    "dtype,shape,padding,align",
    [
        (np.uint8, (1, 1, 224, 224), "zeros", 0),
        (np.int64, (1, 1, 100, 100), "border", 1),
        (np.int32, (1, 1, 10, 10), "reflection", 0),
        (np.float16, (1, 2, 7, 10), "reflection", 1),
    ],
    ids=["uint8-224", "int64-100-border", "int32-10-reflection", "float16-7x10"],
)
def test_nearest_of_other_types_is_the_float32_kernel_on_their_values(
    dtype, shape, padding, align, rng
):
    """Labels and half precision: what onnxruntime's float32 kernel gives on the values widened,
    exactly; the oracle and the lowered graph (which gathers them in their own type) agree."""
    from gridsample_lower import lower

    x = rng.integers(0, 200, size=shape).astype(dtype)
    grid = lattice_grid(rng, shape[2:], (shape[2], 31), align, n=1)
    model = gridsample_model(
        list(shape), list(grid.shape), "nearest", padding, align, x_dtype=dtype
    )
    single = gridsample_model(list(shape), list(grid.shape), "nearest", padding, align)
    widened = run_ort(single, {"X": x.astype(np.float32), "grid": grid}).astype(dtype)
    np.testing.assert_array_equal(grid_sample(x, grid, "nearest", padding, align), widened)
    np.testing.assert_array_equal(run_ort(lower(model), {"X": x, "grid": grid}), widened)


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.int16, np.uint8])
def test_integer_results_truncate_toward_zero(mode, dtype, rng):
    """Integer X: float math, then truncation (the spec's cast). On quarter-pixel positions every
    weight is exact, so the float64 kernel on the widened values is exact and so must we be:
    2.75 -> 2 and -2.75 -> -2, where rounding would give 3 and -3."""
    from gridsample_lower import lower

    sizes = (9, 5)  # align_corners=1: L - 1 = 8 and 4, so quarter pixels are exact grid values
    low = 0 if np.dtype(dtype).kind == "u" else -100
    x = rng.integers(low, 100, size=(2, 3, *sizes)).astype(dtype)
    grid = np.empty((2, 6, 7, 2))
    for c, size in enumerate(reversed(sizes)):
        quarters = rng.integers(0, 4 * (size - 1) + 1, size=(2, 6, 7)) / 4.0
        grid[..., c] = 2 * quarters / (size - 1) - 1
    grid = grid.astype(np.float32)
    double = gridsample_model(
        [2, 3, *sizes], [2, 6, 7, 2], mode, "border", 1, x_dtype=np.float64, grid_dtype=np.float64
    )
    exact = run_ort(double, {"X": x.astype(np.float64), "grid": grid.astype(np.float64)})
    fractions = exact - np.trunc(exact)
    assert (np.abs(fractions) > 0.5).any()  # the cases rounding would get wrong are there
    expected = np.trunc(exact).astype(dtype)
    model = gridsample_model([2, 3, *sizes], [2, 6, 7, 2], mode, "border", 1, x_dtype=dtype)
    np.testing.assert_array_equal(grid_sample(x, grid, mode, "border", 1), expected)
    np.testing.assert_array_equal(run_ort(lower(model), {"X": x, "grid": grid}), expected)
