"""Targets: every profile's lowered graphs stay within its ops and index type, and still match."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import ORT_REFUSAL, assert_close, gridsample_model, make_grid, run_ort
from onnxscript import rewriter

from gridsample_lower import lower, supported_specs
from gridsample_lower.check.reference import grid_sample
from gridsample_lower.lowering.costs import ROWS_MIN_CHANNELS
from gridsample_lower.lowering.plan import plan_of
from gridsample_lower.lowering.rule import gridsample_rule
from gridsample_lower.lowering.targets import TARGETS, Target, get_target

GATHERS = {"Gather": 1, "GatherElements": 1, "GatherND": 1}
_SIZES_IN, _SIZES_OUT = [4, 3, 5, 3], [3, 2, 2, 2]  # H != W, not powers of two where it counts


def _lowered(spec, target, channels=2, symbolic=False):
    r = spec.rank
    x_shape = [2, channels, *_SIZES_IN[:r]]
    grid_shape = [2, *_SIZES_OUT[:r], r]
    if symbolic:
        x_shape = ["N", channels, *[f"d{i}" for i in range(r)]]
        grid_shape = ["N", *[f"o{i}" for i in range(r)], r]
    model = gridsample_model(x_shape, grid_shape, spec.mode, spec.padding_mode, spec.align_corners)
    return rewriter.rewrite(model, [gridsample_rule(target=target)])


def _index_types(model: onnx.ModelProto, ops=GATHERS) -> set[int]:
    inferred = onnx.shape_inference.infer_shapes(model)
    types = {vi.name: vi.type.tensor_type.elem_type for vi in inferred.graph.value_info}
    return {types[n.input[1]] for n in inferred.graph.node if n.op_type in ops}


# What each runtime cannot take, written out from its documentation and our measurements (not
# read from targets.py, whose sets a test must not trust): WebNN has no GatherND,
# GatherElements, And, Mod, Round or Clip; MatMul is reduced precision outside onnxruntime's
# CPU; BatchNormalization with computed parameters is onnxruntime's alone.
MUST_AVOID = {
    "generic": {"MatMul", "BatchNormalization"},
    "onnxruntime": set(),
    "openvino": {"MatMul", "BatchNormalization", "GatherElements"},
    "tensorrt": {"MatMul", "BatchNormalization"},
    "webnn": {
        "GatherND",
        "GatherElements",
        "And",
        "Mod",
        "Round",
        "Clip",
        "MatMul",
        "BatchNormalization",
    },
    "int32": {"MatMul", "BatchNormalization"},
    # tract takes only constant BatchNormalization parameters ("Params are not const").
    "tract": {"BatchNormalization"},
    "iree": set(),
    "tinygrad": set(),
    # MNN 3.6.1 (bench/mnn_ncnn.py): GatherElements is a loop over the indices, 40x its kernel;
    # Round is half away from zero and gives -0, which its Equal tells from 0; a computed
    # BatchNormalization scale fails to convert; MatMul may run in reduced precision.
    "mnn": {"GatherElements", "Round", "BatchNormalization", "MatMul"},
    # pnnx 20261020 to ncnn 1.0.20261020: no layer for any data-dependent gather, comparison,
    # Where, logical op, Cast, Round or Mod; Pad with tensor pads stays unmapped; Slice and
    # Concat on the last axis and a ReduceSum over one axis come out on the wrong axes.
    "ncnn": {
        "Gather",
        "GatherElements",
        "GatherND",
        "Where",
        "Equal",
        "Greater",
        "GreaterOrEqual",
        "Less",
        "LessOrEqual",
        "And",
        "Not",
        "Cast",
        "Round",
        "Mod",
        "Pad",
        "Slice",
        "Concat",
        "ReduceSum",
        "BatchNormalization",
    },  # fmt: skip
    # TVM 0.27's relax importer cannot reduce a shape (ReduceProd of a ShapeExpr), and sizes a
    # Range up to a symbolic size by a symbol of its own.
    "tvm": {"ReduceProd", "Range"},
    # onnx2tf: GatherElements and GatherND become GATHER_ND over built index tables (20x
    # slower than row Gathers), And and Mod have no fast TFLite kernel; Clip's int32 form is a
    # Flex op.
    "litert": {
        "GatherND",
        "GatherElements",
        "And",
        "Mod",
        "Clip",
        "MatMul",
        "BatchNormalization",
    },
}


def _readers_only_as_planned(model: onnx.ModelProto, target: Target) -> None:
    """GridSample nodes left in a lowered graph are the target's tap readers: nearest or
    linear, align_corners=0, zeros or border padding (what MNN and ncnn compute right)."""
    for node in model.graph.node:
        if node.op_type != "GridSample":
            continue
        assert target.centre_reader_ranks, (target.name, "kept a GridSample")
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        assert attrs.get("mode", b"linear") in (b"nearest", b"linear"), attrs  # (the default)
        assert attrs["padding_mode"] in (b"zeros", b"border"), attrs
        assert attrs["align_corners"] == 0, attrs


def test_every_target_avoids_what_its_runtime_lacks():
    assert set(TARGETS) == set(MUST_AVOID)
    for name, avoided in MUST_AVOID.items():
        assert avoided <= TARGETS[name].avoids, name


@pytest.mark.parametrize("name", list(TARGETS))
@pytest.mark.parametrize("spec", supported_specs(), ids=lambda s: s.label.replace(" ", "-"))
def test_lowered_graph_stays_within_the_profile(name, spec):
    target = get_target(name)
    for channels in (2, ROWS_MIN_CHANNELS):
        lowered = _lowered(spec, target, channels)
        ops = {n.op_type for n in lowered.graph.node}
        _readers_only_as_planned(lowered, target)
        assert not ops & (target.avoids | MUST_AVOID[name]), (name, ops & target.avoids)
        if target.index_dtype is not None and ops & set(GATHERS):
            assert _index_types(lowered) == {target.index_dtype}


@pytest.mark.parametrize("name", list(TARGETS))
@pytest.mark.parametrize(
    "spec", supported_specs(ranks=(1, 2, 3, 4)), ids=lambda s: s.label.replace(" ", "-")
)
def test_every_target_computes_the_same_in_every_mode_and_rank(name, spec, rng):
    """Each target's forms (Floor-based rounding, Min/Max clamps, row gathers, int32 indices,
    MatMul and BatchNormalization sums) agree with the reference, with few and many channels."""
    r = spec.rank
    if get_target(name).reads_only and r > 3:  # (ncnn: X would be over 5-D)
        plan = plan_of(spec, [2, 2, *_SIZES_IN[:r]], [2, *_SIZES_OUT[:r], r], get_target(name))
        assert plan.refusal.startswith(f"the {name} target reads only"), plan.refusal
        return
    for channels in (2, ROWS_MIN_CHANNELS):
        lowered = _lowered(spec, name, channels)
        x = rng.standard_normal((2, channels, *_SIZES_IN[:r])).astype(np.float32)
        grid = make_grid(rng, (2, *_SIZES_OUT[:r], r), far=True)
        expected = grid_sample(x, grid, spec.mode, spec.padding_mode, spec.align_corners)
        assert_close(
            run_ort(lowered, {"X": x, "grid": grid}), expected.astype(np.float32), spec.mode
        )


@pytest.mark.parametrize("symbolic", [False, True], ids=["static", "symbolic"])
@pytest.mark.parametrize("rank", [1, 2, 3])
def test_openvino_moves_x_and_y_by_the_one_perm_it_runs_fast(rank, symbolic, rng):
    """OpenVINO's CPU plugin runs a Transpose as a fast oneDNN reorder only for a 4-D perm of
    (0, 3, 1, 2) (measured: X's channels-last copy 2-3x slower as (0, 2, 3, 1), or in tiles):
    every Transpose of X's values, its copy and the output's, takes that perm, any rank."""
    sizes_out = [20, 9, 7][:rank]  # far more taps than X's pixels: rows, not X's planes
    x_shape, grid_shape = [2, ROWS_MIN_CHANNELS, *_SIZES_IN[:rank]], [2, *sizes_out, rank]
    if symbolic:  # (run in a Loop's body: OpenVINO keeps it in float32)
        x_shape = ["N", ROWS_MIN_CHANNELS, *[f"d{i}" for i in range(rank)]]
        grid_shape = ["N", *[f"o{i}" for i in range(rank)], rank]
    model = gridsample_model(x_shape, grid_shape, "linear", "zeros", 0)
    lowered = rewriter.rewrite(model, [gridsample_rule(target="openvino")])
    from_x, transposes = {"X"}, []

    def walk(nodes):  # (each graph topologically sorted; a body reads X by its name)
        for node in nodes:
            for graph in (a.g for a in node.attribute if a.type == onnx.AttributeProto.GRAPH):
                walk(graph.node)
            if from_x & set(node.input):
                from_x.update(node.output)
                if node.op_type == "Transpose":
                    transposes.append(list(onnx.helper.get_attribute_value(node.attribute[0])))

    walk(lowered.graph.node)
    assert transposes == [[0, 3, 1, 2], [0, 3, 1, 2]]
    x = rng.standard_normal((2, ROWS_MIN_CHANNELS, *_SIZES_IN[:rank])).astype(np.float32)
    grid = make_grid(rng, (2, *sizes_out, rank), far=True)
    expected = grid_sample(x, grid, "linear", "zeros", 0).astype(np.float32)
    assert_close(run_ort(lowered, {"X": x, "grid": grid}), expected, "linear")


@pytest.mark.parametrize("batch", [2, "N"], ids=["two", "symbolic"])
@pytest.mark.parametrize(
    ("mode", "padding"), [("nearest", "zeros"), ("linear", "zeros"), ("cubic", "border")]
)
@pytest.mark.parametrize("rank", [1, 2, 3])
def test_openvino_reads_several_samples_planes_in_place(rank, mode, padding, batch, rng):
    """Several samples (or an unknown batch) of few channels are read from X flattened, each
    channel's plane at its offset: OpenVINO copies X for any Transpose, 0.44 ms at 3x480x640
    where its own GridSample of 48x64 points takes 0.21. Sizes symbolic too: X large or small at
    run time, its taps masked once gathered."""
    sizes_in, sizes_out = [[41, 30, 9][:rank], [2, 3, 2][:rank]], [5, 4, 3][:rank]
    x_shape = [batch, 3, *[f"d{i}" if batch == "N" else sizes_in[0][i] for i in range(rank)]]
    grid_shape = [batch, *sizes_out, rank]
    model = gridsample_model(x_shape, grid_shape, mode, padding, 0)
    lowered = rewriter.rewrite(model, [gridsample_rule(target="openvino")])
    moved = [n.op_type for n in _nodes_reading_x(lowered) if n.op_type == "Transpose"]
    assert not moved
    for spatial in sizes_in[: 1 if batch == 2 else 2]:
        x = rng.standard_normal((2, 3, *spatial)).astype(np.float32)
        grid = make_grid(rng, (2, *sizes_out, rank), far=True)
        expected = grid_sample(x, grid, mode, padding, 0).astype(np.float32)
        assert_close(run_ort(lowered, {"X": x, "grid": grid}), expected, mode)


def _nodes_reading_x(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    """Every node whose input derives from X through moves alone (bodies' nodes included)."""
    from_x, found = {"X"}, []
    moves = {"Transpose", "Reshape", "Flatten", "Pad", "Concat", "Identity", "Squeeze"}

    def walk(nodes):  # (each graph topologically sorted; a body reads X by its name)
        for node in nodes:
            for graph in (a.g for a in node.attribute if a.type == onnx.AttributeProto.GRAPH):
                walk(graph.node)
            if from_x & set(node.input):
                found.append(node)
                if node.op_type in moves:
                    from_x.update(node.output)

    walk(model.graph.node)
    return found


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_webnn_gathers_rows_with_every_size_symbolic(mode, rng):
    """Without GatherElements even an unknown channel count gathers channels-last rows."""
    model = gridsample_model(["N", "C", "H", "W"], ["N", "h", "w", 2], mode, "zeros", 0)
    lowered = rewriter.rewrite(model, [gridsample_rule(target="webnn")])
    x = rng.standard_normal((2, 5, 4, 3)).astype(np.float32)
    grid = make_grid(rng, (2, 3, 2, 2), far=True)
    expected = grid_sample(x, grid, mode, "zeros", 0).astype(np.float32)
    assert_close(run_ort(lowered, {"X": x, "grid": grid}), expected, mode)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("align", [0, 1])
def test_webnn_rounding_breaks_ties_to_even(align, dtype, rng):
    size = 8 if not align else 5
    k = np.arange(-3, size + 3, dtype=np.float64)
    g = (k + 0.5) * 2 / (size - 1) - 1 if align else (2 * k + 2) / size - 1
    grid = np.stack(np.meshgrid(g, g[::2]), axis=-1)[None].astype(dtype)
    x = rng.standard_normal((1, 2, size, size)).astype(dtype)
    spec = next(
        s for s in supported_specs(ranks=(2,)) if s.mode == "nearest" and s.align_corners == align
    )
    model = gridsample_model(
        [1, 2, size, size], list(grid.shape), "nearest", spec.padding_mode, align,
        x_dtype=dtype, grid_dtype=dtype,
    )  # fmt: skip
    lowered = rewriter.rewrite(model, [gridsample_rule(target="webnn")])
    assert_close(
        run_ort(lowered, {"X": x, "grid": grid}), run_ort(model, {"X": x, "grid": grid}), "nearest"
    )


def _scalar_branches(model: onnx.ModelProto) -> int:
    """Where inputs 1 and 2 that are 0-D (as shape inference sees them)."""
    inferred = onnx.shape_inference.infer_shapes(model)
    ranks = {
        vi.name: len(vi.type.tensor_type.shape.dim)
        for vi in [*inferred.graph.value_info, *inferred.graph.input]
        if vi.type.tensor_type.HasField("shape")
    }
    wheres = [n for n in inferred.graph.node if n.op_type == "Where"]
    return sum(ranks.get(n.input[k]) == 0 for n in wheres for k in (1, 2))


@pytest.mark.parametrize("symbolic", [False, True], ids=["static", "symbolic"])
def test_webnn_gives_where_no_scalar_branch(symbolic):
    """mlprodict's Where refuses a 0-D branch beside a larger one (bench/mlprodict_check.py):
    webnn's constants there are (1,) (``where_scalars=False``); generic's stay 0-D."""
    nearest_border = next(
        s for s in supported_specs(ranks=(2,)) if (s.mode, s.padding_mode) == ("nearest", "border")
    )
    assert _scalar_branches(_lowered(nearest_border, "generic", symbolic=symbolic)) > 0
    for spec in supported_specs(ranks=(1, 2, 3)):
        assert _scalar_branches(_lowered(spec, "webnn", symbolic=symbolic)) == 0, spec.label
    for mode in ("linear", "cubic"):  # integer X: NaN -> 0 by a Where before the cast
        model = gridsample_model([2, 3, 4, 5], [2, 3, 2, 2], mode, "zeros", 0, x_dtype=np.int32)
        lowered = rewriter.rewrite(model, [gridsample_rule(target="webnn")])
        assert _scalar_branches(lowered) == 0, mode


def test_index_type_follows_the_sizes_unless_the_target_fixes_it():
    spec = supported_specs(ranks=(2,))[0]
    data_gather = {"GatherElements"}
    assert _index_types(_lowered(spec, "generic", symbolic=True), data_gather) == {7}  # int64
    assert _index_types(_lowered(spec, "generic"), data_gather) == {6}  # int32: sizes are known
    assert _index_types(_lowered(spec, "int32", symbolic=True)) == {6}


def test_unknown_target_lists_the_known_ones():
    with pytest.raises(ValueError, match="known: generic, onnxruntime"):
        get_target("tpu9000")


# onnxruntime's CPU kernel (core/providers/cpu/tensor/grid_sample.cc) refuses these at run time
# with status FAIL, which its Python API raises as ``Fail``, naming the check that failed.
_ORT_RANK_REFUSAL = r"Only 4-D or 5-D tensor is supported"
_ORT_CUBIC_REFUSAL = r"Only support GridSample Cubic mode in 4-D cases"


@pytest.mark.parametrize(
    "x_shape,grid_shape,mode,refusal",
    [
        ((2, 2, 5), (2, 4, 1), "linear", _ORT_RANK_REFUSAL),  # 1-D spatial
        ((1, 2, 3, 2, 3, 2), (1, 2, 1, 2, 2, 4), "nearest", _ORT_RANK_REFUSAL),  # 4 spatial dims
        ((1, 2, 3, 4, 3), (1, 2, 2, 2, 3), "cubic", _ORT_CUBIC_REFUSAL),  # 3-D cubic
    ],
    ids=["1-D", "4-spatial-D", "3-D-cubic"],
)
def test_onnxruntime_target_runs_what_onnxruntime_cannot(x_shape, grid_shape, mode, refusal, rng):
    """After --target onnxruntime lowering these run in onnxruntime and match the ONNX reference."""
    from conftest import run_onnx_reference

    from gridsample_lower import lower

    model = gridsample_model(list(x_shape), list(grid_shape), mode, "reflection", 0)
    feeds = {
        "X": rng.standard_normal(x_shape).astype(np.float32),
        "grid": make_grid(rng, grid_shape),
    }
    with pytest.raises(ORT_REFUSAL, match=refusal):  # onnxruntime refuses the original
        run_ort(model, feeds)
    lowered = lower(model, target="onnxruntime")
    assert "GridSample" not in {n.op_type for n in lowered.graph.node}
    assert_close(run_ort(lowered, feeds), run_onnx_reference(model, feeds), mode)


def test_a_target_judging_by_the_spec_alone_still_works():
    """A ``keeps`` written before targets saw the node (one argument) gets the spec."""
    mine = Target("mine", "keeps nearest", keeps=lambda spec: spec.mode == "nearest")
    for mode, kept in [("nearest", True), ("linear", False)]:
        model = gridsample_model([1, 3, 4, 4], [1, 2, 2, 2], mode)
        ops = {n.op_type for n in lower(model, target=mine).graph.node}
        assert ("GridSample" in ops) is kept


@pytest.mark.parametrize(
    "spec",
    [s for s in supported_specs(ranks=(1, 2)) if s.mode != "nearest"],
    ids=lambda s: s.label.replace(" ", "-"),
)
def test_generic_floors_past_256_pixels_leave_as_two_integers_and_agree(spec, rng):
    """Generic's linear and cubic with an axis past 252 pixels take their floors from the grid
    as 256 hi + lo (exact in bfloat16, ``sampling.positions_exact``) and their fractions from a
    region of their own: the same samples as the reference, far, NaN and infinite points too
    (reflection folds its coordinate within twice the axis: past 126 already)."""
    r = spec.rank
    x_shape = (
        (2, 3, *[260, 300][-r:]) if spec.padding_mode != "reflection" else (2, 3, *[127, 130][-r:])
    )
    grid = make_grid(rng, (2, *[5, 7][-r:], r), far=True)
    grid.flat[:3] = [np.nan, np.inf, -np.inf]
    model = gridsample_model(
        list(x_shape), list(grid.shape), spec.mode, spec.padding_mode, spec.align_corners
    )
    lowered = lower(model, target="generic", lower_all=True)
    ops = [n.op_type for n in lowered.graph.node]
    assert ops.count("Floor") >= 4, ops  # the hi, lo and fractions' regions
    x = rng.standard_normal(x_shape).astype(np.float32)
    expected = grid_sample(x, grid, spec.mode, spec.padding_mode, spec.align_corners)
    assert_close(run_ort(lowered, {"X": x, "grid": grid}), expected.astype(np.float32), spec.mode)


@pytest.mark.parametrize(
    "spec",
    [
        s
        for s in supported_specs(ranks=(2,))
        if s.mode != "nearest" and s.padding_mode != "reflection"
    ],
    ids=lambda s: s.label.replace(" ", "-"),
)
def test_generic_from_the_grid_keeps_overflowing_and_infinite_points_apart(spec, rng):
    """A finite grid value whose coordinate overflows to infinity samples the edge (bounded to
    2**23), an infinite or NaN one gives NaN: generic's floors and fractions, taken from the
    grid as it is, must tell them apart (the floors' region once ran unbounded: 3.4e38 read 0).
    Reflection folds an infinite coordinate into NaN, as it did before (onnxruntime, the
    reference and the lowering differ there)."""
    x = rng.standard_normal((1, 2, 3, 4)).astype(np.float32)
    grid = make_grid(rng, (1, 2, 4, 2))
    grid[0, 0, :, 1] = [3.4e38, -3.4e38, np.inf, np.nan]
    grid[0, 1, :, 0] = [-3.4e38, 3.4e38, -np.inf, 0.5]
    model = gridsample_model(
        [1, 2, 3, 4], list(grid.shape), spec.mode, spec.padding_mode, spec.align_corners
    )
    expected = grid_sample(x, grid, spec.mode, spec.padding_mode, spec.align_corners)
    lowered = lower(model, target="generic", lower_all=True)
    assert_close(run_ort(lowered, {"X": x, "grid": grid}), expected.astype(np.float32), spec.mode)
