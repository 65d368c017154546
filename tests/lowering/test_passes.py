"""The pass and lower(): every place a GridSample can live, and everything else left alone."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from conftest import (
    FUNCTION,
    IF_LOOP,
    SCAN,
    assert_close,
    gridsample_model,
    make_grid,
    ort_outputs,
    run_ort,
)
from onnxscript import rewriter

from gridsample_lower import (
    LowerGridSamplePass,
    UnsupportedGridSample,
    gridsample_rule,
    lower,
    lower_with_report,
)
from gridsample_lower.lowering.costs import ROWS_MIN_CHANNELS
from gridsample_lower.lowering.registry import supported_specs
from gridsample_lower.lowering.targets import TARGETS

# Ops a lowered graph may contain: plain standard-domain ops every runtime has.
INVENTORY = {
    "Abs",
    "Add",
    "And",
    "BatchNormalization",
    "Cast",
    "Clip",
    "Concat",
    "Constant",
    "Equal",
    "Expand",
    "Flatten",
    "Floor",
    "Gather",
    "GatherElements",
    "Greater",
    "GreaterOrEqual",
    "If",
    "MatMul",
    "Max",
    "Min",
    "Sign",
    "Div",
    "Mul",
    "Pad",
    "Range",
    "ReduceProd",
    "ReduceSum",
    "Reshape",
    "Round",
    "Shape",
    "Sub",
    "Transpose",
    "Unsqueeze",
    "Where",
}


def _all_nodes(model: onnx.ModelProto):
    return list(ir.traversal.RecursiveGraphIterator(ir.serde.deserialize_model(model).graph))


def _feeds(rng, x_shape, grid_shape):
    return {
        "X": rng.standard_normal(x_shape).astype(np.float32),
        "grid": make_grid(rng, grid_shape),
    }


@pytest.mark.parametrize("spec", supported_specs(), ids=lambda s: s.label.replace(" ", "-"))
@pytest.mark.parametrize(
    ("symbolic", "channels"),
    [(False, 3), (False, ROWS_MIN_CHANNELS), (True, "C")],
    ids=["static", "static-rows", "symbolic"],
)
@pytest.mark.parametrize("target", TARGETS)
def test_op_inventory_and_checker(spec, symbolic, channels, target):
    """Only inventory ops, no custom domain, every node read; passes the full checker."""
    r = spec.rank
    x_shape = (
        ["N", channels, *[f"d{i}" for i in range(r)]]
        if symbolic
        else [2, channels, *range(4, 4 + r)]
    )
    grid_shape = ["N", *[f"o{i}" for i in range(r)], r] if symbolic else [2, *range(2, 2 + r), r]
    model = gridsample_model(x_shape, grid_shape, spec.mode, spec.padding_mode, spec.align_corners)
    if symbolic and TARGETS[target].reads_only:  # (ncnn: pnnx converts at fixed shapes)
        with pytest.raises(UnsupportedGridSample, match="symbolic spatial sizes"):
            lower(model, target=target, lower_all=True)
        return
    lowered = lower(model, target=target, lower_all=True)
    onnx.checker.check_model(lowered, full_check=True)
    nodes = _all_nodes(lowered)
    # The tap readers (MNN, ncnn); MNN copies the grid's components by Slice, and onnxruntime
    # slices symbolic points into tiles (behind an If).
    readers = {"GridSample", "Slice"} if TARGETS[target].centre_reader_ranks else set()
    tiles = {"Slice"} if TARGETS[target].point_tiles else set()
    assert {n.op_type for n in nodes} <= INVENTORY | readers | tiles
    assert {n.domain for n in nodes} <= {""}
    assert all(n.name.startswith("gs/") for n in nodes)
    unread = [n.name for n in nodes if not any(v.uses() or v.is_graph_output() for v in n.outputs)]
    assert not unread  # (a size computed and never used: the runtime drops it, the file keeps it)


@pytest.mark.parametrize("spec", supported_specs(), ids=lambda s: s.label.replace(" ", "-"))
@pytest.mark.parametrize("target", ["generic", "onnxruntime"])
def test_static_shapes_leave_nothing_to_fold(spec, target):
    """With static shapes every shape-dependent scalar is a constant already: no shape op is
    left, and no node computes from constants alone (a runtime would redo it at every start)."""
    r = spec.rank
    for batch, channels in [(2, 3), (1, ROWS_MIN_CHANNELS), (2, 2 * ROWS_MIN_CHANNELS)]:
        x_shape, grid_shape = [batch, channels, *range(6, 6 + r)], [batch, *range(3, 3 + r), r]
        model = gridsample_model(
            x_shape, grid_shape, spec.mode, spec.padding_mode, spec.align_corners
        )
        nodes = _all_nodes(lower(model, target=target, lower_all=True))
        assert not {n.op_type for n in nodes} & {"Shape", "Size", "ConstantOfShape", "Range"}
        folds = [
            n.name
            for n in nodes
            if n.op_type != "Constant"
            and all(v is None or ir.convenience.get_const_tensor(v) is not None for v in n.inputs)
        ]
        assert not folds, (batch, channels, folds)


@pytest.mark.parametrize("x_dtype", [np.float16, np.int16, np.bool_])
@pytest.mark.parametrize(
    ("small", "large"),
    [((1, 3), (256, 3)), ((1, ROWS_MIN_CHANNELS), (1, 8 * ROWS_MIN_CHANNELS))],
    ids=["gather-elements", "rows"],
)
def test_the_zero_slot_stores_no_table(x_dtype, small, large):
    """Types onnxruntime's Pad lacks append zeros built at run time: the model's size does not
    grow with the batch or the channels (no per-element tables)."""

    def size(batch, channels):
        model = gridsample_model(
            [batch, channels, 4, 4], [batch, 8, 8, 2], "nearest", "zeros", 0, x_dtype=x_dtype
        )
        return lower(model, target="onnxruntime", lower_all=True).ByteSize()

    assert abs(size(*large) - size(*small)) < 64


@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
@pytest.mark.parametrize("channels", ["C", ROWS_MIN_CHANNELS], ids=["C-symbolic", "rows"])
def test_symbolic_dims_run_at_new_sizes(mode, channels, rng):
    model = gridsample_model(["N", channels, "H", "W"], ["N", "h", "w", 2], mode, "zeros", 0)
    lowered = lower(model)
    c = 4 if channels == "C" else channels
    for x_shape, grid_shape in [((1, c, 3, 7), (1, 2, 5, 2)), ((3, c, 9, 2), (3, 6, 1, 2))]:
        feeds = _feeds(rng, x_shape, grid_shape)
        assert_close(run_ort(lowered, feeds), run_ort(model, feeds), mode)


@pytest.mark.parametrize(
    "shape", [(0, 2, 4, 5), (2, 0, 4, 5), (2, 2, 4, 5)], ids=["N0", "C0", "P0"]
)
@pytest.mark.parametrize("mode", ["linear", "nearest"])
def test_empty_tensors(shape, mode, rng):
    grid_shape = (shape[0], 0 if shape[1] == 2 and shape[0] else 3, 4, 2)
    batch_symbolic = (["N", *shape[1:]], ["N", *grid_shape[1:]])
    everything = (["N", "C", "H", "W"], ["N", "h", "w", 2])
    for dims, gdims in [(list(shape), list(grid_shape)), batch_symbolic, everything]:
        model = gridsample_model(dims, gdims, mode, "zeros", 0)
        feeds = _feeds(rng, shape, grid_shape)
        y = run_ort(lower(model), feeds)
        assert y.shape == (shape[0], shape[1], *grid_shape[1:3])


def test_twenty_nodes_in_a_chain(rng):
    nodes = []
    prev = "X"
    for k in range(20):
        mode = ["bilinear", "nearest", "bicubic"][k % 3]
        padding = ["zeros", "border", "reflection"][k % 3]
        nodes.append(
            onnx.helper.make_node(
                "GridSample",
                [prev, "grid"],
                [f"y{k}"],
                name=f"gs{k}",
                mode=mode,
                padding_mode=padding,
                align_corners=k % 2,
            )
        )
        prev = f"y{k}"
    graph = onnx.helper.make_graph(
        nodes,
        "chain",
        [
            onnx.helper.make_tensor_value_info("X", 1, [1, 2, 6, 6]),
            onnx.helper.make_tensor_value_info("grid", 1, [1, 6, 6, 2]),
        ],
        [onnx.helper.make_tensor_value_info(prev, 1, [1, 2, 6, 6])],
    )
    model = onnx.helper.make_model(
        graph, opset_imports=[onnx.helper.make_opsetid("", 16)], ir_version=8
    )
    lowered, report = lower_with_report(model)
    assert sum(report.values()) == 20
    assert {n.name.split("/")[0] for n in lowered.graph.node} == {f"gs{k}" for k in range(20)}
    feeds = _feeds(rng, (1, 2, 6, 6), (1, 6, 6, 2))
    assert_close(run_ort(lowered, feeds), run_ort(model, feeds), "cubic")


def test_if_branches_at_any_depth_and_loop_body(rng):
    model = onnx.parser.parse_model(IF_LOOP)
    onnx.checker.check_model(model, full_check=True)
    lowered, report = lower_with_report(model)
    assert sum(report.values()) == 5
    onnx.checker.check_model(lowered, full_check=True)
    assert not [n for n in _all_nodes(lowered) if n.op_type == "GridSample"]
    for c in (True, False):
        feeds = {**_feeds(rng, (2, 3, 5, 6), (2, 4, 7, 2)), "c": np.array(c), "trips": np.array(3)}
        for got, want in zip(ort_outputs(lowered, feeds), ort_outputs(model, feeds), strict=True):
            assert_close(got, want, "cubic")


def test_untyped_inputs_from_an_enclosing_graph_take_their_inferred_types(rng):
    """A branch's GridSamples read values the main graph computes and declares no type for:
    their types come from shape inference, looked up in the branch and then around it."""
    model = onnx.parser.parse_model("""
    <ir_version: 9, opset_import: ["" : 20]>
    g (float[2,3,5,6] X, float[2,4,7,2] grid, bool c) => (float[2,3,4,7] Y) {
        Xs = Relu(X)
        Gs = Identity(grid)
        Y = If(c) <
            then_branch = t () => (float[2,3,4,7] yt) { yt = GridSample<mode="cubic">(Xs, Gs) },
            else_branch = e () => (float[2,3,4,7] ye) { ye = GridSample<mode="nearest">(Xs, Gs) }
        >
    }
    """)
    assert not model.graph.value_info
    lowered, report = lower_with_report(model)
    assert sum(report.values()) == 2
    assert not [n for n in _all_nodes(lowered) if n.op_type == "GridSample"]
    for c in (True, False):
        feeds = {**_feeds(rng, (2, 3, 5, 6), (2, 4, 7, 2)), "c": np.array(c)}
        (got,), (want,) = ort_outputs(lowered, feeds), ort_outputs(model, feeds)
        assert_close(got, want, "cubic" if c else "nearest")


def test_function_with_default_and_call_site_attributes(rng):
    model = onnx.parser.parse_model(FUNCTION)
    lowered, report = lower_with_report(model)
    assert report == {"r2 cubic border align_corners=1": 1, "r2 nearest border align_corners=0": 1}
    assert not lowered.functions  # inlined: the only function held a GridSample
    onnx.checker.check_model(lowered, full_check=True)
    feeds = _feeds(rng, (2, 3, 5, 6), (2, 4, 7, 2))
    for got, want in zip(ort_outputs(lowered, feeds), ort_outputs(model, feeds), strict=True):
        assert_close(got, want, "cubic")


@pytest.mark.parametrize("opset", [16, 17, 19, 20, 22])
@pytest.mark.parametrize("ir_version", [8, 9, 10])
def test_opsets_and_ir_versions_are_kept(opset, ir_version, rng):
    model = gridsample_model(
        [1, 2, 4, 5], [1, 3, 3, 2], "cubic", "zeros", 0, opset=opset, ir_version=ir_version
    )
    model.metadata_props.add(key="author", value="me")
    model.doc_string = "doc"
    lowered = lower(model)
    assert lowered.ir_version == ir_version
    assert [(o.domain, o.version) for o in lowered.opset_import] == [("", opset)]
    assert lowered.metadata_props[0].value == "me" and lowered.doc_string == "doc"
    assert [i.name for i in lowered.graph.input] == ["X", "grid"]
    assert lowered.graph.input[0].type == model.graph.input[0].type
    assert lowered.graph.output[0].type == model.graph.output[0].type
    feeds = _feeds(rng, (1, 2, 4, 5), (1, 3, 3, 2))
    assert_close(run_ort(lowered, feeds), run_ort(model, feeds), "cubic")


def test_other_nodes_and_initializers_untouched():
    text = """
    <ir_version: 9, opset_import: ["" : 20]>
    g (float[1,2,4,5] X, float[1,3,3,2] G) => (float[1,2,3,3] Y) <float[1] bias = {0.5}> {
      R = Relu (X)
      S = GridSample (R, G)
      Y = Add (S, bias)
    }
    """
    model = onnx.parser.parse_model(text)
    lowered = lower(model)
    assert [i.name for i in lowered.graph.initializer] == ["bias"]
    assert not lowered.graph.value_info  # none before, none added
    others = [n for n in lowered.graph.node if not n.name.startswith("GridSample")]
    assert [(n.op_type, n.name, list(n.input), list(n.output)) for n in others] == [
        ("Relu", "", ["X"], ["R"]),
        ("Add", "", ["S", "bias"], ["Y"]),
    ]


def test_pass_reports_modified_honestly():
    model = ir.serde.deserialize_model(gridsample_model([1, 1, 3, 3], [1, 2, 2, 2]))
    assert LowerGridSamplePass()(model).modified is True
    assert LowerGridSamplePass()(model).modified is False


def test_pass_composes_with_a_pass_manager(rng):
    from onnx_ir.passes.common import RemoveUnusedNodesPass

    proto = gridsample_model([1, 2, 4, 5], [1, 3, 3, 2], "linear", "border", 1)
    model = ir.serde.deserialize_model(proto)
    manager = ir.passes.PassManager([LowerGridSamplePass(), RemoveUnusedNodesPass()])
    result = manager(model)
    assert result.modified
    feeds = _feeds(rng, (1, 2, 4, 5), (1, 3, 3, 2))
    assert_close(
        run_ort(ir.serde.serialize_model(result.model), feeds), run_ort(proto, feeds), "linear"
    )


def test_rule_works_with_onnxscript_rewrite(rng):
    proto = gridsample_model([1, 2, 4, 5], [1, 3, 3, 2], "nearest", "reflection", 0)
    lowered = rewriter.rewrite(proto, pattern_rewrite_rules=[gridsample_rule()])
    assert "GridSample" not in {n.op_type for n in lowered.graph.node}
    feeds = _feeds(rng, (1, 2, 4, 5), (1, 3, 3, 2))
    assert_close(run_ort(lowered, feeds), run_ort(proto, feeds), "nearest")


def test_ir_model_in_ir_model_out_and_input_untouched():
    proto = gridsample_model([1, 1, 3, 3], [1, 2, 2, 2])
    model = ir.serde.deserialize_model(proto)
    out = lower(model)
    assert isinstance(out, ir.Model) and out is not model
    assert [n.op_type for n in model.graph] == ["GridSample"]
    before = proto.SerializeToString()
    assert isinstance(lower(proto), onnx.ModelProto)
    assert proto.SerializeToString() == before


def test_unlowerable_node_is_named_with_the_reason():
    model = gridsample_model([1, 1, 3, 3], [1, 2, 2, 2], name="bad")
    (mode,) = [a for a in model.graph.node[0].attribute if a.name == "mode"]
    mode.s = b"quintic"
    with pytest.raises(UnsupportedGridSample, match="'bad'.*unknown mode 'quintic'"):
        lower(model)
    lowered = lower(model, strict=False)
    assert [n.op_type for n in lowered.graph.node] == ["GridSample"]


def test_scan_body(rng):
    model = onnx.parser.parse_model(SCAN)
    lowered, report = lower_with_report(model)
    assert report == {"r2 cubic reflection align_corners=0": 1}
    onnx.checker.check_model(lowered, full_check=True)
    feeds = {
        "X": rng.standard_normal((1, 2, 4, 5)).astype(np.float32),
        "grids": make_grid(rng, (3, 1, 2, 2, 2)),
    }
    assert_close(run_ort(lowered, feeds), run_ort(model, feeds), "cubic")


@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
@pytest.mark.parametrize("symbolic", [False, True])
def test_the_pass_builds_what_the_rule_builds_through_onnxscript(mode, symbolic):
    """The pass records nodes itself; onnxscript's rewriter, given the rule, makes the same."""
    dims = ["N", 2, "H", "W"] if symbolic else [2, 2, 4, 5]
    proto = gridsample_model(dims, [2, 3, 3, 2], mode, "reflection", 1)
    by_pass = lower(proto)
    model = ir.serde.deserialize_model(proto)
    assert rewriter.RewriteRuleSet([gridsample_rule()]).apply_to_model(model) == 1
    by_rule = ir.serde.serialize_model(model)

    def described(graph):
        return [
            (n.op_type, n.name, list(n.input), list(n.output), list(n.attribute))
            for n in graph.node
        ]

    assert described(by_pass.graph) == described(by_rule.graph)


def test_the_original_nodes_metadata_goes_to_every_node_replacing_it():
    model = gridsample_model([1, 2, 4, 5], [1, 3, 3, 2], name="warp")
    model.graph.node[0].metadata_props.add(key="pkg.torch.onnx.stack_trace", value="model.py:7")
    lowered = lower(model)
    assert len(lowered.graph.node) > 10
    for node in lowered.graph.node:
        assert {p.key: p.value for p in node.metadata_props} == {
            "pkg.torch.onnx.stack_trace": "model.py:7"
        }, node.name


TAIL_GRAPHS = {  # (graph text, whether the GridSample reaches the output through the tail ops)
    "straight": ('y = GridSample <mode = "nearest"> (X, grid)', True),
    "relu, add": (
        's = GridSample <mode = "nearest"> (X, grid)\n r = Relu (s)\n y = Add (r, s)',
        True,
    ),
    "conv": ('s = GridSample <mode = "nearest"> (X, grid)\n y = Conv (s, W)', False),
    "conv on one path, relu on another": (
        's = GridSample <mode = "nearest"> (X, grid)\n c = Conv (s, W)\n r = Relu (s)\n'
        " y = Add (c, r)",
        True,
    ),
}


@pytest.mark.parametrize("case", TAIL_GRAPHS, ids=list(TAIL_GRAPHS))
def test_a_path_to_the_output_through_the_float32_tail(case):
    """OpenVINO keeps in float32 what reaches a model output through no Conv or MatMul: the
    openvino target then takes planar coordinates for nearest and cubic. Bodies never count."""
    from gridsample_lower.lowering.inventory import find_gridsamples

    body, expected = TAIL_GRAPHS[case]
    model = onnx.parser.parse_model(
        '<ir_version: 10, opset_import: ["" : 20]>\n'
        "g (float[1,3,8,8] X, float[1,4,4,2] grid, float[3,3,1,1] W) => (float[1,3,4,4] y)\n"
        "{\n " + body + "\n}"
    )
    (site,) = find_gridsamples(ir.serde.deserialize_model(model))
    assert site.reaches_output_through(TARGETS["openvino"].float32_tail) is expected
    assert not site.reaches_output_through(TARGETS["generic"].float32_tail)
    nested = find_gridsamples(ir.serde.deserialize_model(onnx.parser.parse_model(IF_LOOP)))
    assert not any(s.reaches_output_through(TARGETS["openvino"].float32_tail) for s in nested)


def test_a_function_body_is_never_planned_as_the_float32_tail():
    """Lowered as a function, a GridSample's outputs may feed a Conv wherever it is called:
    its body keeps the bfloat16-safe interleaved coordinates, where the same node, lowered
    in place as the model's output, reads its grid planar (one Transpose of the grid first)."""
    model = gridsample_model([1, 3, 8, 8], [1, 4, 4, 2], "nearest", "zeros", 0)
    in_place = lower(model, target="openvino", lower_all=True)
    first = next(n for n in in_place.graph.node if n.op_type == "Transpose")
    assert first.input[0] == "grid"
    called = lower(model, target="openvino", lower_all=True, as_functions=True)
    (function,) = called.functions
    grid = function.input[1]
    assert not [n for n in function.node if n.op_type == "Transpose" and n.input[0] == grid]
