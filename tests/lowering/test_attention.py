"""Deformable attention lowered as one unit: found where exporters write it, exact, else node by node.

Judged by onnxruntime running the original model (its native GridSample), or, for NaN grids,
float16 X and what onnxruntime cannot run, by the check's oracle (onnx.reference with the
reference GridSample kernel).
"""

from __future__ import annotations

import itertools

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from conftest import ort_outputs, square_if_branch
from onnx import helper
from test_passes import INVENTORY

from gridsample_lower import lower, verify
from gridsample_lower.check.oracle import Oracle
from gridsample_lower.check.tolerances import tolerance
from gridsample_lower.lowering import costs
from gridsample_lower.lowering.options import LoweringOptions
from gridsample_lower.lowering.passes import LowerGridSamplePass
from gridsample_lower.models import deformable_attention_model
from gridsample_lower.runtime import onnxruntime_runner

LEVELS = [(7, 9), (4, 5), (2, 3)]  # not powers of two, not square
BATCH, CHANNELS, QUERIES, POINTS = 2, 3, 12, 3  # (12: the openvino target fuses)


def feeds(model: onnx.ModelProto, dtype=np.float32, seed: int = 0, far: bool = False) -> dict:
    """Inputs for ``deformable_attention_model(LEVELS, ...)``: grids past [-1, 1], softmax weights."""
    rng = np.random.default_rng(seed)
    values = {}
    for level, (height, width) in enumerate(LEVELS):
        values[f"X{level}"] = rng.standard_normal((BATCH, CHANNELS, height, width)).astype(dtype)
        grid = rng.uniform(-1.3, 1.3, (BATCH, QUERIES, POINTS, 2))
        lattice = rng.integers(-4, 5, grid.shape) / 4.0  # taps on pixel centres and edges
        grid = np.where(rng.random(grid.shape) < 0.3, lattice, grid)
        if far:
            grid = np.where(
                rng.random(grid.shape) < 0.2, rng.choice([-517.25, 60.125], grid.shape), grid
            )
        values[f"grid{level}"] = grid.astype(dtype)
    weights = rng.random((BATCH, 1, QUERIES, len(LEVELS) * POINTS))
    values["weights"] = (weights / weights.sum(-1, keepdims=True)).astype(dtype)
    return values


def truth(model: onnx.ModelProto, values: dict) -> np.ndarray:
    """The original model's output: onnxruntime's kernel, else the check's reference."""
    finite = all(np.isfinite(v.astype(np.float64)).all() for v in values.values())
    native = finite and values["weights"].dtype in (np.float32, np.float64)
    return Oracle(model, native=native)(values)[0]


def fused(model: onnx.ModelProto, target: str = "onnxruntime") -> tuple[onnx.ModelProto, dict]:
    """The model lowered by the pass (every node), and the attentions it lowered as one unit."""
    lowered = ir.serde.deserialize_model(model)
    result = LowerGridSamplePass(target=target)(lowered)
    return ir.serde.serialize_model(result.model), result.attentions


def assert_close(actual, expected, dtype, mode):
    atol, rtol = tolerance(np.dtype(dtype), mode)
    np.testing.assert_allclose(actual, expected, atol=atol, rtol=rtol)


def openvino_runner(model: onnx.ModelProto):
    """OpenVINO's CPU plugin in float32 (the openvino target's runtime), one thread."""
    import openvino as ov

    core = ov.Core()
    config = {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": 1}
    compiled = core.compile_model(core.read_model(model.SerializeToString(), b""), "CPU", config)
    return lambda values: [compiled(values)[compiled.outputs[0]]]


FUSING = {"onnxruntime": [onnxruntime_runner], "openvino": [onnxruntime_runner, openvino_runner]}


@pytest.mark.parametrize("target", FUSING)
@pytest.mark.parametrize(
    "mode,padding,align",
    list(itertools.product(["linear", "cubic"], ["zeros", "border", "reflection"], [0, 1])),
)
def test_fused_attention_is_the_original(mode, padding, align, target):
    """The onnxruntime target's rows and MatMul; the openvino target's planes (zeros padding
    on a ring), run in onnxruntime and in OpenVINO."""
    model = deformable_attention_model(
        LEVELS, BATCH, CHANNELS, QUERIES, POINTS, mode, padding, align
    )
    candidate, attentions = fused(model, target)
    assert attentions == {"sample0+": ["sample0", "sample1", "sample2"]}
    assert "GridSample" not in {n.op_type for n in candidate.graph.node}
    assert ("Pad" in {n.op_type for n in candidate.graph.node}) == (
        target == "openvino" and padding == "zeros"
    )
    for seed, far in ((0, False), (1, True)):
        values = feeds(model, seed=seed, far=far)
        for runner in FUSING[target]:
            actual = runner(candidate)(values)[0]
            assert_close(actual, truth(model, values), np.float32, mode)


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("symbolic", [False, True])
def test_both_exporters_spellings_and_keepdims(symbolic, keepdims):
    """Dynamo's constant Reshape, TorchScript's Reshape to the stack's own shape, symbolic."""
    model = deformable_attention_model(
        LEVELS, BATCH, CHANNELS, QUERIES, POINTS, symbolic=symbolic, keepdims=keepdims
    )
    candidate, attentions = fused(model)
    assert len(attentions) == 1
    used = {name for node in candidate.graph.node for name in node.input}
    outputs = {o.name for o in candidate.graph.output}
    dead = [n.name for n in candidate.graph.node if not set(n.output) & (used | outputs)]
    assert not dead  # the stack's Shape and the Slice of it went with it
    assert {n.op_type for n in candidate.graph.node} <= INVENTORY  # docs/lowered-graph.md's ops
    values = feeds(model)
    assert_close(
        ort_outputs(candidate, values)[0],
        truth(model, values),
        np.float32,
        "linear",
    )


@pytest.mark.parametrize("target", FUSING)
@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_other_float_types(dtype, target):
    model = deformable_attention_model(LEVELS, BATCH, CHANNELS, QUERIES, POINTS, dtype=dtype)
    candidate, attentions = fused(model, target)
    assert attentions
    values = feeds(model, dtype=dtype)
    actual = ort_outputs(candidate, values)[0]
    assert actual.dtype == dtype
    assert_close(actual, truth(model, values), dtype, "linear")


@pytest.mark.parametrize("target", FUSING)
def test_non_finite_grid_gives_what_the_reference_gives(target):
    """A NaN or infinite coordinate makes its query NaN, as the kernel does; the rest stay
    (on the openvino target's ring, its tap index clamped once an integer)."""
    model = deformable_attention_model(LEVELS, BATCH, CHANNELS, QUERIES, POINTS)
    candidate, _ = fused(model, target)
    values = feeds(model)
    values["grid1"][0, 2, 1, 0] = np.nan
    values["grid2"][1, 4, 0, 1] = np.inf
    expected = truth(model, values)
    assert np.isnan(expected[0, :, 2]).all() and np.isnan(expected[1, :, 4]).all()
    for runner in FUSING[target]:
        np.testing.assert_allclose(runner(candidate)(values)[0], expected, atol=1e-5)


def _edited(model: onnx.ModelProto, edit) -> onnx.ModelProto:
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    edit(copy.graph)
    return copy


def _channel_weights(graph):  # weights (N, C, Q, L*P): one per channel, not foldable
    graph.input[-1].type.tensor_type.shape.dim[1].dim_value = CHANNELS


def _nearest_level(graph):
    (mode,) = [a for a in graph.node[2].attribute if a.name == "mode"]
    mode.s = b"nearest"  # one level's (sample1's) mode differs


def _stack_read_twice(graph):
    graph.output.append(helper.make_tensor_value_info("stack", onnx.TensorProto.FLOAT, None))


@pytest.mark.parametrize("edit", [_channel_weights, _nearest_level, _stack_read_twice])
def test_what_departs_from_the_pattern_is_lowered_node_by_node(edit):
    model = _edited(deformable_attention_model(LEVELS, BATCH, CHANNELS, QUERIES, POINTS), edit)
    candidate, attentions = fused(model)
    assert not attentions
    values = feeds(model)
    if edit is _channel_weights:
        values["weights"] = np.repeat(values["weights"], CHANNELS, axis=1) * [
            [[[1.0]], [[0.5]], [[2.0]]]
        ]
        values["weights"] = values["weights"].astype(np.float32)
    actual = ort_outputs(candidate, values)
    expected = Oracle(model, native=True)(values)
    for a, e in zip(actual, expected, strict=True):
        np.testing.assert_allclose(a, e, atol=1e-5)


def test_only_the_onnxruntime_and_openvino_targets_fuse_and_the_api_agrees():
    model = deformable_attention_model(LEVELS, BATCH, CHANNELS, QUERIES, POINTS)
    assert fused(model, "generic")[1] == {}
    for target in FUSING:
        names = {
            n.name.rpartition("/")[0]
            for n in lower(model, target=target, lower_all=True).graph.node
        }
        assert "sample0+" in names


def test_the_openvino_target_fuses_static_levels_exact_in_bfloat16_only():
    """OpenVINO stores its kernels' float outputs in bfloat16 by default: the planes' tap
    positions are exact there only while each level's padded axis stays within 256 pixels,
    and known. Past that, or with symbolic sizes, each level is lowered alone; and without
    --lower-all the target keeps every level (OpenVINO's own kernel is faster)."""
    static = deformable_attention_model(LEVELS, BATCH, CHANNELS, QUERIES, POINTS)
    assert fused(static, "openvino")[1]
    assert _by_default(static, target="openvino")[1] == {}
    for width, fits in ((252, True), (253, False)):  # (linear: a ring of 2 either side)
        wide = deformable_attention_model([(7, width), (4, 5)], BATCH, CHANNELS, 400, POINTS)
        assert bool(fused(wide, "openvino")[1]) == fits
        assert fused(wide, "onnxruntime")[1]
    # Planes of every value pay from 4 taps a value (costs.attention_planes_pay): 89 values,
    # 36 taps a query (3 levels of 3 points, 4 taps each)
    for queries, fits in ((9, False), (10, True)):
        model = deformable_attention_model(LEVELS, BATCH, CHANNELS, queries, POINTS)
        assert bool(fused(model, "openvino")[1]) == fits
        assert fused(model, "onnxruntime")[1]
    symbolic = deformable_attention_model(LEVELS, BATCH, CHANNELS, QUERIES, POINTS, symbolic=True)
    assert fused(symbolic, "openvino")[1] == {}


def batch_of_unknown_size(padding: str = "zeros") -> onnx.ModelProto:
    """The attention with static levels and a symbolic batch, as TorchScript exports it."""
    args = (LEVELS, BATCH, CHANNELS, QUERIES, POINTS, "linear", padding)
    static = deformable_attention_model(*args)
    model = deformable_attention_model(*args, symbolic=True)
    for value, known in zip(
        [*model.graph.input, *model.graph.output],
        [*static.graph.input, *static.graph.output],
        strict=True,
    ):
        dims = zip(value.type.tensor_type.shape.dim, known.type.tensor_type.shape.dim, strict=True)
        for dim, size in list(dims)[1:]:
            dim.dim_value = size.dim_value
    del model.graph.value_info[:]
    return model


def test_the_openvino_target_fuses_static_levels_of_a_batch_of_unknown_size():
    """TorchScript's exports name the batch: the planes' sample offsets come from a Range."""
    model = batch_of_unknown_size()
    candidate, attentions = fused(model, "openvino")
    nodes = ir.traversal.RecursiveGraphIterator(ir.serde.deserialize_model(candidate).graph)
    assert attentions and "Range" in {n.op_type for n in nodes}
    for batch in (BATCH, 1):
        values = {k: v[:batch] for k, v in feeds(model).items()}
        for runner in FUSING["openvino"]:
            assert_close(runner(candidate)(values)[0], truth(model, values), np.float32, "linear")


@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
def test_a_batch_of_unknown_size_widens_the_rows_once(padding):
    """The onnxruntime target: each tap's row within its sample is int32 (static levels), and
    one Cast to int64 widens it before the samples' starts, of unknown number, are added."""
    model = batch_of_unknown_size(padding)
    candidate, attentions = fused(model, "onnxruntime")
    assert attentions
    widened = [
        n
        for n in candidate.graph.node
        if n.op_type == "Cast" and n.attribute[0].i == onnx.TensorProto.INT64
    ]
    assert len(widened) == 1
    for batch in (BATCH, 1):
        values = {k: v[:batch] for k, v in feeds(model, far=True).items()}
        assert_close(ort_outputs(candidate, values)[0], truth(model, values), np.float32, "linear")


HEADS = 2


def feeds_from_values(model: onnx.ModelProto, seed: int = 0, heads: int = HEADS) -> dict:
    """Inputs for the model ``heads=heads`` builds: one ``value`` the levels are split from."""
    values = feeds(model, seed=seed)
    rng = np.random.default_rng(seed)
    total = sum(h * w for h, w in LEVELS)
    for level in range(len(LEVELS)):
        del values[f"X{level}"]
    values["value"] = rng.standard_normal((BATCH // heads, total, heads, CHANNELS)).astype(
        np.float32
    )
    return values


@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
def test_levels_split_from_one_value_are_read_from_it(padding):
    """Dynamo's ``value.split`` per level: the rows are the values themselves, not a copy."""
    model = deformable_attention_model(
        LEVELS, BATCH, CHANNELS, QUERIES, POINTS, "linear", padding, heads=HEADS
    )
    candidate, attentions = fused(model)
    assert attentions
    assert "Split" not in [n.op_type for n in candidate.graph.node]
    readers = [n.op_type for n in candidate.graph.node if "value" in n.input]
    assert readers == ["Reshape"]  # its rows as they are: no Transpose, no copy per level
    for seed in (0, 1):
        values = feeds_from_values(model, seed)
        actual = ort_outputs(candidate, values)[0]
        assert_close(actual, truth(model, values), np.float32, "linear")


def test_values_of_another_rank_are_not_taken_for_the_split_values():
    """A ``(B, S, C)`` value split per level (no heads axis): the levels' rows are copied."""
    model = deformable_attention_model(LEVELS, BATCH, CHANNELS, QUERIES, POINTS, heads=1)
    total = sum(h * w for h, w in LEVELS)
    del model.graph.value_info[:]
    (value,) = [v for v in model.graph.input if v.name == "value"]
    value.CopyFrom(
        helper.make_tensor_value_info("value", onnx.TensorProto.FLOAT, [BATCH, total, CHANNELS])
    )
    model = onnx.shape_inference.infer_shapes(model)
    candidate, attentions = fused(model)
    assert attentions
    assert "Split" in [n.op_type for n in candidate.graph.node]  # read through the levels
    values = feeds_from_values(model, seed=0, heads=1)
    values["value"] = values["value"].reshape(BATCH, total, CHANNELS)
    assert_close(
        ort_outputs(candidate, values)[0],
        truth(model, values),
        np.float32,
        "linear",
    )


def _by_default(model: onnx.ModelProto, **options) -> tuple[onnx.ModelProto, dict]:
    """``model`` lowered as ``lower`` does with ``options``, and the attentions made one unit."""
    lowering = LoweringOptions(**options).lowering_pass()
    result = lowering(ir.serde.deserialize_model(model))
    return ir.serde.serialize_model(result.model), result.attentions


@pytest.mark.parametrize("channels,expected", [(32, True), (16, False)])
def test_the_onnxruntime_target_fuses_what_it_keeps_where_heads_have_32_channels(
    channels, expected
):
    """The onnxruntime target keeps 2-D linear zeros GridSample (its kernel beats the lowering
    node by node), but one unit beats it with heads of 32+ channels: fused without
    --lower-all then, and still the original; --skip naming one level keeps them all."""
    model = deformable_attention_model(LEVELS, BATCH, channels, QUERIES, POINTS)
    candidate, attentions = _by_default(model, target="onnxruntime")
    remaining = [n.op_type for n in candidate.graph.node].count("GridSample")
    assert (bool(attentions), remaining) == (expected, 0 if expected else len(LEVELS))
    rng = np.random.default_rng(0)
    values = feeds(model)
    for level, (height, width) in enumerate(LEVELS):
        x = rng.standard_normal((BATCH, channels, height, width)).astype(np.float32)
        values[f"X{level}"] = x
    actual = ort_outputs(candidate, values)[0]
    assert_close(actual, truth(model, values), np.float32, "linear")
    skipped, attentions = _by_default(model, target="onnxruntime", skip=["sample1"])
    assert attentions == {}
    assert [n.op_type for n in skipped.graph.node].count("GridSample") == len(LEVELS)


@pytest.mark.parametrize("heads", [0, HEADS])  # the levels as inputs, or split from one value
@pytest.mark.parametrize("mode,padding", [("linear", "zeros"), ("cubic", "border")])
def test_the_queries_in_tiles_are_the_original(mode, padding, heads, monkeypatch):
    """Static queries lowered as one unit in tiles (``costs.attention_tiles``): tiles of 200
    gathered rows here, so linear's 864 rows (2 samples x 12 queries x 36 taps) make 4 tiles of
    3 queries, cubic's 3456 one tile a query; each reads its own grids and weights."""
    monkeypatch.setattr(costs, "ATTENTION_TILE_ROWS", 200)
    model = deformable_attention_model(
        LEVELS, BATCH, CHANNELS, QUERIES, POINTS, mode, padding, heads=heads
    )
    candidate, attentions = fused(model)
    assert attentions
    ops = [n.op_type for n in candidate.graph.node]
    tiles = min(
        QUERIES, BATCH * QUERIES * len(LEVELS) * POINTS * {"linear": 4, "cubic": 16}[mode] // 200
    )
    assert "GridSample" not in ops and ops.count("MatMul") == tiles == (
        4 if mode == "linear" else 12
    )
    for seed, far in ((0, False), (1, True)):
        values = feeds_from_values(model, seed) if heads else feeds(model, seed=seed, far=far)
        assert_close(ort_outputs(candidate, values)[0], truth(model, values), np.float32, mode)


@pytest.mark.parametrize("mode,padding", [("linear", "zeros"), ("cubic", "reflection")])
def test_the_openvino_target_gathers_from_planes_in_tiles_of_the_queries(
    mode, padding, monkeypatch
):
    """``costs.plane_tiles``: here tiles of 300 values gathered, so linear's 2592 (3 channels x
    2 samples x 12 queries x 36 taps) make 8 tiles of 1-2 queries, cubic's 12 of one query;
    each gathers, weighs and sums its own, run in onnxruntime and in OpenVINO."""
    monkeypatch.setattr(costs, "PLANE_TILE_VALUES", 300)
    model = deformable_attention_model(LEVELS, BATCH, CHANNELS, QUERIES, POINTS, mode, padding)
    candidate, attentions = fused(model, "openvino")
    assert attentions
    taps = {"linear": 4, "cubic": 16}[mode]
    gathered = CHANNELS * BATCH * QUERIES * len(LEVELS) * POINTS * taps
    tiles = min(QUERIES, gathered // 300)
    assert (
        [n.op_type for n in candidate.graph.node].count("ReduceSum")
        == tiles
        == (8 if mode == "linear" else 12)
    )
    for seed, far in ((0, False), (1, True)):
        values = feeds(model, seed=seed, far=far)
        for runner in FUSING["openvino"]:
            assert_close(runner(candidate)(values)[0], truth(model, values), np.float32, mode)


@pytest.mark.parametrize("queries", [1, 5, 20])
def test_the_openvino_target_tiles_queries_of_unknown_count(queries, monkeypatch):
    """Static levels, a symbolic batch and count of queries (TorchScript's encoders): the
    values are gathered in SYMBOLIC_PLANE_TILES tiles of ceil(Q / 4) queries here, the last
    ones empty where the queries are fewer; run in onnxruntime and in OpenVINO."""
    monkeypatch.setattr(costs, "SYMBOLIC_PLANE_TILES", 4)
    model = batch_of_unknown_size()
    for value in (*model.graph.input, *model.graph.output):  # (N, Q, P, 2), (N, 1, Q, M), (N, C, Q)
        axis = 1 if value.name.startswith("grid") else 2 if value.name in ("weights", "Y") else 0
        if axis:
            value.type.tensor_type.shape.dim[axis].dim_param = "queries"
    candidate, attentions = fused(model, "openvino")
    assert attentions
    assert [n.op_type for n in _all_nodes(candidate)].count("ReduceSum") == 4
    rng = np.random.default_rng(queries)
    values = feeds(model)
    for level in range(len(LEVELS)):
        grid = rng.uniform(-1.3, 1.3, (BATCH, queries, POINTS, 2))
        values[f"grid{level}"] = grid.astype(np.float32)
    weights = rng.random((BATCH, 1, queries, len(LEVELS) * POINTS))
    values["weights"] = (weights / weights.sum(-1, keepdims=True)).astype(np.float32)
    for runner in FUSING["openvino"]:
        assert_close(runner(candidate)(values)[0], truth(model, values), np.float32, "linear")


def _all_nodes(model: onnx.ModelProto) -> list[ir.Node]:
    """Every node of ``model``, subgraphs' too (the fenced Loop's body)."""
    return list(ir.traversal.RecursiveGraphIterator(ir.serde.deserialize_model(model).graph))


def _queries_unknown(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` (every size symbolic) with its points static, as TorchScript exports them."""
    for value in model.graph.input:
        dims = value.type.tensor_type.shape.dim
        if value.name.startswith("grid"):
            dims[2].dim_value = POINTS
        elif value.name == "weights":
            dims[3].dim_value = len(LEVELS) * POINTS
    return model


@pytest.mark.parametrize("queries", [12, 13, 20, 41])
def test_queries_of_unknown_count_take_their_tiles_behind_an_if(queries, monkeypatch):
    """TorchScript's encoders: the queries' count is symbolic. An If takes 4 tiles here from
    13 queries (two tiles' rows of 200, 36 taps a query, and none empty), one piece below."""
    monkeypatch.setattr(costs, "ATTENTION_TILE_ROWS", 200)
    monkeypatch.setattr(costs, "SYMBOLIC_POINT_TILES", 4)
    model = _queries_unknown(
        deformable_attention_model(LEVELS, BATCH, CHANNELS, QUERIES, POINTS, symbolic=True)
    )
    candidate, attentions = fused(model)
    assert attentions and "If" in {n.op_type for n in candidate.graph.node}
    rng = np.random.default_rng(queries)
    values = feeds(model)
    for level in range(len(LEVELS)):
        values[f"grid{level}"] = rng.uniform(-1.3, 1.3, (BATCH, queries, POINTS, 2)).astype(
            np.float32
        )
    weights = rng.random((BATCH, 1, queries, len(LEVELS) * POINTS))
    values["weights"] = (weights / weights.sum(-1, keepdims=True)).astype(np.float32)
    assert_close(ort_outputs(candidate, values)[0], truth(model, values), np.float32, "linear")


@pytest.mark.parametrize("branch", ["then_branch", "else_branch"])
def test_the_check_runs_both_forms_of_an_attention_in_tiles(branch, monkeypatch):
    """The check runs the fused region on the queries it drew and on the other form's (cut to
    one query, or repeated past the If's count): a fault in either branch fails it."""
    monkeypatch.setattr(costs, "ATTENTION_TILE_ROWS", 200)
    monkeypatch.setattr(costs, "SYMBOLIC_POINT_TILES", 4)
    model = _queries_unknown(
        deformable_attention_model(LEVELS, BATCH, CHANNELS, QUERIES, POINTS, symbolic=True)
    )
    lowered = lower(model, target="onnxruntime", lower_all=True)
    assert verify(model, lowered, samples=1).ok
    square_if_branch(lowered, branch)
    report = verify(model, lowered, samples=1)
    assert not report.ok and any(c.members and not c.ok for c in report.nodes), report.table()
