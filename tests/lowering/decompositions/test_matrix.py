"""Every supported configuration, lowered, against the best independent oracle.

onnxruntime's native kernel where it runs (4-D, 5-D non-cubic), else the ONNX reference,
else (cubic + border, float64) gridsample_lower.check.reference; see conftest.py.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest
from conftest import (
    assert_close,
    gridsample_model,
    make_grid,
    one_piece_ops,
    oracle,
    run_ort,
    spatial_shapes,
    spec_model,
)

from gridsample_lower import UnsupportedGridSample, lower, supported_specs
from gridsample_lower.check.reference import grid_sample
from gridsample_lower.lowering.costs import (
    ROWS_MIN_CHANNELS,
    SCALED_MAX_VALUES,
    SCALED_MIN_CHANNELS,
    TAPS_MAX_VALUES,
)
from gridsample_lower.lowering.plan import plan_of
from gridsample_lower.lowering.targets import TARGETS, get_target
from gridsample_lower.runtime import onnxruntime_runs


def _run_case(spec, rng, dtype, *, batch=2, channels=2, far=False, target="generic"):
    native = onnxruntime_runs(spec)
    sizes_in, sizes_out = spatial_shapes(spec.rank, small=not native)
    x = rng.standard_normal((batch, channels, *sizes_in)).astype(dtype)
    grid = make_grid(rng, (batch, *sizes_out, spec.rank), far=far, dtype=dtype)
    lowered = lower(spec_model(spec, x, grid), target=target, lower_all=True)
    assert all(n.op_type != "GridSample" for n in lowered.graph.node)
    actual = run_ort(lowered, {"X": x, "grid": grid})
    assert_close(actual, oracle(spec, x, grid), spec.mode)


@pytest.mark.parametrize("spec", supported_specs(), ids=lambda s: s.label.replace(" ", "-"))
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
def test_every_configuration(spec, dtype, rng):
    _run_case(spec, rng, dtype)


@pytest.mark.parametrize("spec", supported_specs(), ids=lambda s: s.label.replace(" ", "-"))
@pytest.mark.parametrize("target", ["generic", "onnxruntime"])
def test_every_configuration_many_channels(spec, target, rng):
    """Many channels gather channels-last rows, summed tap by tap (or, for onnxruntime, all at
    once: by a batched MatMul with 8 taps or more, else scaled by a BatchNormalization)."""
    _run_case(spec, rng, np.float32, channels=ROWS_MIN_CHANNELS, far=True, target=target)


@pytest.mark.parametrize("spec", supported_specs(), ids=lambda s: s.label.replace(" ", "-"))
@pytest.mark.parametrize("channels", [1, 3])
@pytest.mark.parametrize("batch", [1, 2, "N"], ids=["batch-1", "batch-2", "symbolic-batch"])
def test_channel_by_channel(spec, channels, batch, rng):
    """For onnxruntime, one channel, or a few with 8 taps or more, are gathered channel by
    channel, each channel's taps summed by a MatMul; else every channel by one gather."""
    sizes_in, sizes_out = spatial_shapes(spec.rank, small=not onnxruntime_runs(spec))
    x = rng.standard_normal((2 if batch == "N" else batch, channels, *sizes_in)).astype(np.float32)
    grid = make_grid(rng, (x.shape[0], *sizes_out, spec.rank), far=True)
    model = gridsample_model(
        [batch, *x.shape[1:]],
        [batch, *grid.shape[1:]],
        spec.mode,
        spec.padding_mode,
        spec.align_corners,
    )
    lowered = lower(model, target="onnxruntime", lower_all=True)
    ops = [n.op_type for n in lowered.graph.node]
    taps = {"nearest": 1, "linear": 2, "cubic": 4}[spec.mode] ** spec.rank
    by_channel = spec.mode != "nearest" and (channels == 1 or taps >= 8)
    assert ops.count("GatherElements") == (channels if by_channel else 1)
    assert ops.count("MatMul") == (channels if by_channel else 0)
    if by_channel and channels > 1:  # the Concat writes the output: no Reshape copies it after
        output = lowered.graph.output[0].name
        assert next(n.op_type for n in lowered.graph.node if output in n.output) == "Concat"
    assert_close(run_ort(lowered, {"X": x, "grid": grid}), oracle(spec, x, grid), spec.mode)


@pytest.mark.parametrize(("batch", "points", "by_channel"), [(2, 256, True), (2, 128, False)])
def test_channel_by_channel_once_the_gather_moves_2_to_the_21(batch, points, by_channel, rng):
    """With 4 taps (2-D linear), GatherElements' few channels go one by one once the gather moves
    2**21 values or more (N x C x taps x points); below that, all at once."""
    from gridsample_lower.spec import GridSampleSpec

    spec = GridSampleSpec(2, "linear", "zeros", 0)
    x = rng.standard_normal((batch, 4, 9, 7)).astype(np.float32)
    grid = make_grid(rng, (batch, points, points, 2), far=True)
    lowered = lower(spec_model(spec, x, grid), target="onnxruntime", lower_all=True)
    tiles = plan_of(spec, x.shape, grid.shape, get_target("onnxruntime")).point_tiles
    assert [n.op_type for n in lowered.graph.node].count("GatherElements") == (
        4 if by_channel else 1
    ) * tiles  # (each tile of points gathers as the whole would)
    assert_close(run_ort(lowered, {"X": x, "grid": grid}), oracle(spec, x, grid), "linear")


@pytest.mark.parametrize(("channels", "by_channel"), [(4, True), (5, False)])
@pytest.mark.parametrize("padding", ["zeros", "border"])
def test_channel_by_channel_with_int64_indices_and_up_to_4_channels(
    channels, by_channel, padding, rng
):
    """Symbolic sizes make the indices int64, twice as costly to expand over the channels: up to
    4 channels are gathered one by one, for onnxruntime (MatMul sums their taps)."""
    from gridsample_lower.spec import GridSampleSpec

    spec = GridSampleSpec(2, "linear", padding, 0)
    x = rng.standard_normal((2, channels, 5, 6)).astype(np.float32)
    grid = make_grid(rng, (2, 4, 3, 2), far=True)
    model = gridsample_model(["N", channels, "H", "W"], ["N", "h", "w", 2], "linear", padding, 0)
    for target in ("onnxruntime", "generic"):
        lowered = lower(model, target=target, lower_all=True)
        count = one_piece_ops(lowered).count("GatherElements")
        assert count == (channels if by_channel and target == "onnxruntime" else 1), target
        assert_close(run_ort(lowered, {"X": x, "grid": grid}), oracle(spec, x, grid), "linear")


@pytest.mark.parametrize(
    ("x_shape", "points", "tiled"),
    [
        ((2, 40, 16, 32), (24, 20), True),
        ((1, 48, 17, 19), (24, 20), False),
        ((1, 128, 128, 128), (64, 64), False),
    ],
    ids=["rows-of-2-kB-in-tiles", "plain", "past-2-to-the-20-values"],
)
@pytest.mark.parametrize(
    ("mode", "padding", "align"), [("linear", "zeros", 0), ("cubic", "border", 1)]
)
def test_channels_last_rows_on_larger_maps(x_shape, points, tiled, mode, padding, align, rng):
    """X is copied channels-last tile by tile (two Transposes) where each channel's pixels
    take a multiple of 2 kB (16x32 float32, counting zeros padding's ring) and a sample has at
    most 2**20 values, else by one Transpose; for onnxruntime, cubic sums its taps with one
    batched MatMul, and linear scales every row by one BatchNormalization and sums its taps
    with a MatMul by ones."""
    from gridsample_lower.spec import GridSampleSpec

    if padding == "zeros":  # the ring makes 16x32
        x_shape = (*x_shape[:2], x_shape[2] - 2, x_shape[3] - 2)
    spec = GridSampleSpec(2, mode, padding, align)
    x = rng.standard_normal(x_shape).astype(np.float32)
    grid = make_grid(rng, (x_shape[0], *points, 2), far=True)
    lowered = lower(spec_model(spec, x, grid), target="onnxruntime", lower_all=True)
    ops = [n.op_type for n in lowered.graph.node]
    matmul, scaled = (m == mode for m in ("cubic", "linear"))
    assert ("MatMul" in ops) == (matmul or scaled)
    assert ("BatchNormalization" in ops) == scaled
    # grid, X (once or per tile), output; the MatMul's indices and weights
    assert ops.count("Transpose") == 3 + tiled + 2 * matmul
    assert_close(run_ort(lowered, {"X": x, "grid": grid}), oracle(spec, x, grid), mode)


@pytest.mark.parametrize("batch", [1, 2, "N"], ids=["batch-1", "batch-2", "symbolic-batch"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int32], ids=str)
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("rank", [1, 2])
def test_linear_rows_scaled_by_batch_normalization(rank, padding, dtype, batch, rng):
    """For onnxruntime, linear's rows (from SCALED_MIN_CHANNELS channels) are scaled by one
    BatchNormalization and summed by a MatMul with ones, in the compute type (float64 for int32
    X near 2**30, which float32 would round); infinite and NaN pixels, and NaN, infinite and far
    grid values, give what the reference gives. Other targets never use BatchNormalization."""
    from gridsample_lower.spec import GridSampleSpec

    spec = GridSampleSpec(rank, "linear", padding, 0)
    shape = (2 if batch == "N" else batch, SCALED_MIN_CHANNELS, *[6, 5][:rank])
    if dtype == np.int32:
        x = np.clip(rng.standard_normal(shape) * 2**30, -(2**31), 2**31 - 1).astype(dtype)
    else:
        x = rng.standard_normal(shape).astype(dtype)
        x.reshape(-1)[[0, 7, 40]] = [np.inf, -np.inf, np.nan]
    grid = make_grid(rng, (shape[0], *[8, 6][:rank], rank), far=True)
    grid.reshape(-1)[:3] = [np.nan, np.inf, -np.inf]
    model = gridsample_model(
        [batch, *shape[1:]], [batch, *grid.shape[1:]], "linear", padding, 0, x_dtype=x.dtype
    )
    expected = grid_sample(x, grid.astype(np.float64), "linear", padding, 0)
    for target in TARGETS:
        try:
            lowered = lower(model, target=target, lower_all=True)
        except UnsupportedGridSample as error:  # ncnn: float32 X and static sizes only
            assert TARGETS[target].reads_only, (target, error)
            continue
        ops = {n.op_type for n in lowered.graph.node}
        assert ("BatchNormalization" in ops) == (target == "onnxruntime"), target
        if target == "onnxruntime":
            assert "GatherElements" not in ops
        y = run_ort(lowered, {"X": x, "grid": grid})
        assert y.dtype == x.dtype
        truth = expected.astype(x.dtype)
        if padding == "zeros" and dtype != np.int32 and not TARGETS[target].allows("Pad"):
            # No ring of zeros (tinygrad): an infinite pixel beside a masked tap gives NaN, as
            # for integer X (docs/semantics.md); everywhere else the values are the reference's.
            differs = ~np.isclose(y, truth, equal_nan=True, rtol=1e-3)
            assert np.isnan(y[differs]).all(), target
            y, truth = np.where(differs, 0, y), np.where(differs, 0, truth)
        if lowered_by_samples(model, target):
            # A linear sample is normalized again for the target's kernel, a rounding off a
            # whole pixel: beside an infinite or NaN pixel it may read it where the reference
            # weighs it 0 (NaN), or the reverse; every other value is the reference's.
            differs = ~np.isclose(y, truth, equal_nan=True, rtol=1e-3)
            assert (~np.isfinite(y[differs]) | ~np.isfinite(truth[differs])).all(), target
            y, truth = np.where(differs, 0, y), np.where(differs, 0, truth)
        assert_close(y, truth, spec.mode, dtype)


def lowered_by_samples(model, target: str) -> bool:
    """Whether the target's own linear GridSample reads this node's samples (MNN, ncnn)."""
    from gridsample_lower.lowering.inventory import find_gridsamples
    from gridsample_lower.lowering.plan import node_plan

    site = find_gridsamples(ir.serde.deserialize_model(model), infer=True)[0]
    return node_plan(site.spec, site.node, TARGETS[target]).reader == "samples"


@pytest.mark.parametrize("channels", [SCALED_MIN_CHANNELS - 1, SCALED_MIN_CHANNELS])
def test_rows_scaled_from_scaled_min_channels(channels, rng):
    """2-D linear for onnxruntime gathers rows from SCALED_MIN_CHANNELS channels (scaled at
    once), GatherElements below; the per-tap chain of the other targets only from
    ROWS_MIN_CHANNELS."""
    from gridsample_lower.spec import GridSampleSpec

    spec = GridSampleSpec(2, "linear", "zeros", 0)
    x = rng.standard_normal((1, channels, 8, 8)).astype(np.float32)
    grid = make_grid(rng, (1, 8, 8, 2), far=True)
    for target in ("onnxruntime", "generic"):
        lowered = lower(spec_model(spec, x, grid), target=target, lower_all=True)
        ops = {n.op_type for n in lowered.graph.node}
        rows = target == "onnxruntime" and channels >= SCALED_MIN_CHANNELS
        assert ("GatherElements" in ops) != rows, target
        assert_close(run_ort(lowered, {"X": x, "grid": grid}), oracle(spec, x, grid), "linear")


@pytest.mark.parametrize(
    ("channels", "points", "scaled"),
    [
        (SCALED_MIN_CHANNELS, (100, 100), True),
        (SCALED_MIN_CHANNELS, (128, 86), False),
        (ROWS_MIN_CHANNELS, (128, 86), True),
    ],
)
def test_rows_scaled_while_few_channels_gather_at_most_2_to_the_21(channels, points, scaled, rng):
    """Below ROWS_MIN_CHANNELS rows are scaled at once while N x C x taps x points stays within
    SCALED_MAX_VALUES; past it, GatherElements goes channel by channel. With more channels
    they are scaled at any size."""
    from gridsample_lower.spec import GridSampleSpec

    spec = GridSampleSpec(2, "linear", "border", 0)
    x = rng.standard_normal((2, channels, 16, 16)).astype(np.float32)
    grid = make_grid(rng, (2, *points, 2))
    assert (2 * channels * 4 * np.prod(points) <= SCALED_MAX_VALUES) == (points == (100, 100))
    lowered = lower(spec_model(spec, x, grid), target="onnxruntime", lower_all=True)
    ops = [n.op_type for n in lowered.graph.node]
    assert ("BatchNormalization" in ops) == scaled
    assert ops.count("GatherElements") == (0 if scaled else channels)
    assert_close(run_ort(lowered, {"X": x, "grid": grid}), oracle(spec, x, grid), "linear")


def test_taps_gathered_one_by_one_past_taps_max_values(rng):
    """One Gather of every tap would hold more than TAPS_MAX_VALUES values: cubic's taps are
    gathered and summed one by one instead, without MatMul."""
    from gridsample_lower.spec import GridSampleSpec

    spec = GridSampleSpec(2, "cubic", "border", 0)
    x = rng.standard_normal((1, 512, 5, 5)).astype(np.float32)
    grid = make_grid(rng, (1, 64, 65, 2))
    assert 512 * 16 * 64 * 65 > TAPS_MAX_VALUES
    lowered = lower(spec_model(spec, x, grid), target="onnxruntime", lower_all=True)
    ops = [n.op_type for n in lowered.graph.node]
    assert "MatMul" not in ops and ops.count("Gather") >= 16
    assert_close(run_ort(lowered, {"X": x, "grid": grid}), oracle(spec, x, grid), "cubic")


@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("channels", [31, 32, 128, 129])
def test_3d_linear_rows_matmul_from_256_values_per_point(channels, padding, rng):
    """3-D linear gathers 8 taps: for onnxruntime its rows are summed by one MatMul once each
    point gathers 256 values (32 channels), with any more channels; else tap by tap or by
    GatherElements. The other targets never use MatMul (runtimes reduce its precision)."""
    from gridsample_lower.spec import GridSampleSpec

    spec = GridSampleSpec(3, "linear", padding, 1)
    x = rng.standard_normal((2, channels, 3, 4, 5)).astype(np.float32)
    grid = make_grid(rng, (2, 4, 4, 4, 3), far=True)
    for target in TARGETS:
        lowered = lower(spec_model(spec, x, grid), target=target, lower_all=True)
        uses_matmul = any(n.op_type == "MatMul" for n in lowered.graph.node)
        if not TARGETS[target].centre_reader_ranks:  # (readers: 0/1 MatMuls, exact anywhere)
            assert uses_matmul == (target == "onnxruntime" and channels >= 32), target
        assert_close(run_ort(lowered, {"X": x, "grid": grid}), oracle(spec, x, grid), "linear")


@pytest.mark.parametrize(
    "spec", supported_specs(ranks=(2, 3)), ids=lambda s: s.label.replace(" ", "-")
)
def test_far_out_of_range_grid(spec, rng):
    """|g| up to 1e4 for every padding: many reflections, long clamps, all-zero taps."""
    _run_case(spec, rng, np.float64 if spec.mode == "cubic" else np.float32, far=True)


@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
def test_four_spatial_dims(mode, rng):
    """Rank 4 spatial (input rank 6) through the same rank-generic code."""
    from gridsample_lower.spec import GridSampleSpec

    spec = GridSampleSpec(4, mode, "reflection" if mode != "cubic" else "zeros", 0)
    x = rng.standard_normal((1, 2, 3, 2, 3, 2)).astype(np.float32)
    grid = make_grid(rng, (1, 2, 1, 2, 2, 4))
    model = gridsample_model(list(x.shape), list(grid.shape), mode, spec.padding_mode, 0)
    actual = run_ort(lower(model), {"X": x, "grid": grid})
    assert_close(actual, oracle(spec, x, grid), mode)


@pytest.mark.parametrize("points", [2, 9, "symbolic"], ids=["few", "many", "symbolic"])
@pytest.mark.parametrize("rank", [1, 2, 3])
def test_nearest_zeros_masks_or_reads_a_zero_slot(rank, points, rng):
    """Nearest with zeros padding: points outside X, NaN and infinite ones included, read a zero
    appended to X (Pad) while X is at most 4x the points (or either size is unknown), else are
    masked once gathered; X's own infinities and NaNs pass through untouched either way."""
    from gridsample_lower.spec import GridSampleSpec

    spec = GridSampleSpec(rank, "nearest", "zeros", 0)
    x = rng.standard_normal((2, 3, *[6] * rank)).astype(np.float32)
    x.reshape(-1)[:4] = [np.inf, -np.inf, np.nan, 1.0]
    size = 5 if points == "symbolic" else points
    grid = make_grid(rng, (2, *[size] * rank, rank), far=True)
    grid.reshape(-1)[:4] = [np.nan, np.inf, -np.inf, 1e30]
    model = spec_model(spec, x, grid)
    if points == "symbolic":
        model = gridsample_model(
            ["N", 3, *[f"d{i}" for i in range(rank)]],
            ["N", *[f"o{i}" for i in range(rank)], rank],
            "nearest",
            "zeros",
            0,
        )
    lowered = lower(model, target="onnxruntime", lower_all=True)
    ops = one_piece_ops(lowered)
    assert ("Pad" in ops) == (points == "symbolic" or 6**rank <= 4 * points**rank)
    assert ops.count("Where") == ("Pad" not in ops)  # the values' if no slot (index: by Max)
    np.testing.assert_array_equal(
        run_ort(lowered, {"X": x, "grid": grid}), grid_sample(x, grid, "nearest", "zeros", 0)
    )


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: d.__name__)
def test_infinite_edge_pixels_under_border_padding_far_outside(mode, dtype, rng):
    """Far outside X, border padding clamps every tap onto the edge pixel, weighted by the
    coordinate's own fraction: an infinite edge gives what onnxruntime gives (inf, NaN only
    where a weight is 0), not the NaN of a coordinate bounded to a whole number."""
    from gridsample_lower.spec import GridSampleSpec

    spec = GridSampleSpec(2, mode, "border", 0)
    x = rng.standard_normal((2, 3, 5, 4)).astype(dtype)
    x[:, :, :, 0], x[:, :, 0, :] = np.inf, -np.inf
    grid = make_grid(rng, (2, 6, 5, 2), far=True, dtype=dtype)
    grid[..., 0] = np.where(rng.random(grid.shape[:-1]) < 0.5, -37.3, grid[..., 0])
    for target in ("generic", "onnxruntime"):
        lowered = lower(spec_model(spec, x, grid), target=target, lower_all=True)
        assert_close(run_ort(lowered, {"X": x, "grid": grid}), oracle(spec, x, grid), mode)


ZEROS_INTERPOLATED = [
    s for s in supported_specs() if s.padding_mode == "zeros" and s.mode != "nearest"
]


@pytest.mark.parametrize("spec", ZEROS_INTERPOLATED, ids=lambda s: s.label.replace(" ", "-"))
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16], ids=lambda d: d.__name__)
def test_infinite_pixels_under_zeros_padding(spec, dtype, rng):
    """A tap outside X reads a zero of the ring around it, never a clamped pixel with weight 0:
    X's edge infinities give what the reference gives (inf * 0 would be NaN)."""
    r = spec.rank
    x = rng.standard_normal((2, 3, *[5, 4, 3][:r])).astype(dtype)
    edge = (slice(None), slice(None), *[[0, -1]] * 1, *[slice(None)] * (r - 1))
    x[edge] = np.inf
    x[(..., 0)] = -np.inf
    grid = make_grid(rng, (2, *[6, 5, 4][:r], r), dtype=dtype)
    expected = grid_sample(x, grid, spec.mode, "zeros", spec.align_corners).astype(dtype)
    for target in ("generic", "onnxruntime"):
        lowered = lower(spec_model(spec, x, grid), target=target, lower_all=True)
        assert_close(run_ort(lowered, {"X": x, "grid": grid}), expected, spec.mode, dtype)
