"""The points lowered in tiles (``Plan.point_tiles``): every tile samples what the node does.

Forced on tiny shapes (tiles of uneven length, batch 2, far, NaN and infinite grid values) for
every mode and padding at ranks 1-3, against the oracle; with symbolic sizes on both sides of
the If that takes the tiles; and on the corpus' TorchScript STN, against onnxruntime's kernel.
Grids with NaN and infinities are judged by ``check.reference`` (the ONNX reference fails on
them; test_reference.py checks that kernel against onnxruntime's).
"""

from __future__ import annotations

import pathlib

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from conftest import assert_close, make_grid, oracle, run_ort, spec_model
from onnxscript import rewriter

from gridsample_lower import lower, supported_specs
from gridsample_lower.check.reference import grid_sample
from gridsample_lower.lowering import costs
from gridsample_lower.lowering.plan import plan_of
from gridsample_lower.lowering.rule import GridSampleLowering
from gridsample_lower.lowering.targets import get_target
from gridsample_lower.models import gridsample_model
from gridsample_lower.spec import GridSampleSpec

CORPUS = pathlib.Path(__file__).parents[2] / "testdata" / "corpus"
SPECS = [  # ranks 1-3, every mode, padding and align_corners; 3-D cubic's reference is slow
    s
    for s in supported_specs()
    if not (s.rank == 3 and s.mode == "cubic" and s.padding_mode != "zeros")
]


def _tiled(tiles: int):
    def planner(spec, node, target):
        shapes = [value.shape for value in node.inputs[:2]]
        return plan_of(spec, *shapes, target, force={"point_tiles": tiles})

    return planner


def _op_types(model: onnx.ModelProto) -> list[str]:
    ops = []
    for node in model.graph.node:
        ops.append(node.op_type)
        for attribute in node.attribute:
            if attribute.g.node:
                ops += [inner.op_type for inner in attribute.g.node]
    return ops


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.label.replace(" ", "-"))
@pytest.mark.parametrize("target", ["onnxruntime", "generic"])
def test_tiles_of_uneven_length_match_the_oracle(spec, target, rng):
    """5 tiles of 2 samples' 12 points (lengths 2, 3, 2, 3, 2), each lowered alone."""
    x = rng.standard_normal((2, 3, *[7, 5, 6][: spec.rank])).astype(np.float32)
    x.reshape(-1)[[4, 11]] = [np.inf, np.nan]
    grid = make_grid(rng, (2, *{1: [12], 2: [3, 4], 3: [2, 3, 2]}[spec.rank], spec.rank), far=True)
    grid.reshape(-1)[:3] = [np.nan, np.inf, -np.inf]
    plan = plan_of(spec, list(x.shape), list(grid.shape), get_target(target), {"point_tiles": 5})
    assert (plan.point_tiles, plan.tiles_from) == (5, 0)
    rule = GridSampleLowering.rule(target=target, planner=_tiled(5))
    lowered = rewriter.rewrite(spec_model(spec, x, grid), [rule])
    ops = _op_types(lowered)
    assert "GridSample" not in ops and ops.count("Slice") == 5, ops
    expected = grid_sample(x, grid, spec.mode, spec.padding_mode, spec.align_corners)
    assert_close(run_ort(lowered, {"X": x, "grid": grid}), expected, spec.mode)


@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
def test_symbolic_points_take_the_tiles_only_where_a_sample_has_enough(mode, rng, monkeypatch):
    """An If picks the tiles once a sample holds ``tiles_from`` points: 4 tiles from 40
    points here; 39, 40, 41 and 97 points run one piece or 4 tiles, all right."""
    for least in ("POINT_TILES_FROM", "CUBIC_TILES_FROM", "NEAREST_TILES_FROM"):
        monkeypatch.setattr(costs, least, 40)
    spec = GridSampleSpec(2, mode, "zeros", 0)
    model = gridsample_model(["N", 3, "H", "W"], ["N", "h", "w", 2], mode, "zeros", 0)
    rule = GridSampleLowering.rule(target="onnxruntime", planner=_tiled(4))
    lowered = rewriter.rewrite(model, [rule])
    assert _op_types(lowered).count("If") >= 1
    for h, w in ((3, 13), (4, 10), (1, 41), (97, 1)):
        x = rng.standard_normal((2, 3, 6, 7)).astype(np.float32)
        grid = make_grid(rng, (2, h, w, 2), far=True)
        expected = oracle(spec, x, grid)
        assert_close(run_ort(lowered, {"X": x, "grid": grid}), expected, mode)


def test_the_onnxruntime_target_tiles_large_grids():
    """Its default plans, by the taps a point reads: static points in tiles of about
    POINT_TILE (at most POINT_TILES_MAX) from POINT_TILES_FROM points a sample, cubic from
    fewer, nearest from more; symbolic points behind an If; other targets in one piece."""
    ort_target = get_target("onnxruntime")

    def plan(mode, x_shape, grid_shape, target=ort_target):
        return plan_of(GridSampleSpec(2, mode, "zeros", 0), x_shape, grid_shape, target)

    big, grid = [1, 3, 480, 640], [1, 480, 640, 2]
    assert plan("linear", big, grid).point_tiles == costs.POINT_TILES_MAX
    assert plan("cubic", big, grid).point_tiles == costs.POINT_TILES_MAX
    assert plan("nearest", big, grid).point_tiles == 480 * 640 // costs.NEAREST_POINT_TILE
    assert plan("linear", [2, 3, 240, 320], [2, 240, 320, 2]).point_tiles == 18  # 2 x 76,800
    assert plan("cubic", [8, 32, 64, 64], [8, 64, 64, 2]).point_tiles == 8
    for mode, x_shape, grid_shape in (
        ("linear", [8, 32, 64, 64], [8, 64, 64, 2]),  # 4096 points a sample
        ("linear", [1, 3, 224, 224], [1, 224, 224, 2]),  # 50,176: below 2**16
        ("nearest", [2, 3, 240, 320], [2, 240, 320, 2]),
        ("cubic", [1, 16, 64, 64], [1, 64, 64, 2]),
    ):
        assert plan(mode, x_shape, grid_shape).point_tiles == 1, (mode, x_shape)
    for target in ("generic", "openvino", "tract"):
        assert plan("linear", big, grid, get_target(target)).point_tiles == 1, target
    symbolic = plan("linear", ["N", 3, "H", "W"], ["N", "h", "w", 2])
    assert (symbolic.point_tiles, symbolic.tiles_from) == (
        costs.SYMBOLIC_POINT_TILES,
        costs.POINT_TILES_FROM,
    )
    assert "points in 16 tiles where a sample has 65536+ (an If)" in symbolic.describe()


@pytest.mark.parametrize(("height", "width", "tiled"), [(64, 64, False), (240, 320, True)])
def test_the_torchscript_stn_runs_its_tiles_at_a_deployment_size(height, width, tiled, rng):
    """The corpus' STN (symbolic sizes), lowered for onnxruntime with --lower-all: at its
    exported size one piece, at 240x320 (76,800 points) its 16 tiles; both match the original
    as onnxruntime runs it."""
    model = onnx.load(CORPUS / "stn_float32_torchscript.onnx")
    lowered = lower(model, target="onnxruntime", lower_all=True)
    assert "GridSample" not in _op_types(lowered)
    feeds = {model.graph.input[0].name: rng.standard_normal((1, 3, height, width), np.float32)}
    expected, actual = run_ort(model, feeds), run_ort(lowered, feeds)
    (choice,) = [node for node in lowered.graph.node if node.op_type == "If"]
    then = next(a.g for a in choice.attribute if a.name == "then_branch")
    assert [n.op_type for n in then.node].count("Slice") == 16
    (bound,) = [n for n in lowered.graph.node if n.output[0] == choice.input[0]]  # GreaterOrEqual
    (least,) = [n for n in lowered.graph.node if n.output[0] == bound.input[1]]  # its Constant
    tiles_from = int(onnx.numpy_helper.to_array(least.attribute[0].t)[0])
    assert (height * width >= tiles_from) == tiled  # the branch these sizes take
    assert_close(actual, expected, "linear")


@pytest.mark.parametrize(
    ("x_dtype", "grid_dtype"),
    [
        (np.float16, np.float16),
        (np.float64, np.float64),
        (np.float32, np.float64),
        (np.int32, np.float32),
    ],
)
@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
def test_tiles_keep_every_type(mode, x_dtype, grid_dtype, rng):
    """float16, double and integer X, a grid of another type: each tile computes as the node."""
    types = {t: ir.DataType.from_numpy(np.dtype(t)) for t in (x_dtype, grid_dtype)}
    spec = GridSampleSpec(2, mode, "border", 1, types[x_dtype], types[grid_dtype])
    x = (rng.standard_normal((2, 3, 6, 7)) * 20).astype(x_dtype)
    grid = make_grid(rng, (2, 3, 4, 2), dtype=grid_dtype)
    rule = GridSampleLowering.rule(target="onnxruntime", planner=_tiled(5))
    lowered = rewriter.rewrite(spec_model(spec, x, grid), [rule])
    assert _op_types(lowered).count("Slice") == 5
    assert_close(run_ort(lowered, {"X": x, "grid": grid}), oracle(spec, x, grid), mode)
