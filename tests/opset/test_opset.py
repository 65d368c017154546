"""upgrade() and downgrade(): GridSample respelled everywhere, other ops converted, nothing lost."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import onnx_ir as ir
import pytest
from conftest import gridsample_model, make_grid, ort_outputs

from gridsample_lower import LowerGridSamplePass
from gridsample_lower.lowering.inventory import find_gridsamples
from gridsample_lower.opset import OpsetConversionError, downgrade, upgrade


def assert_same_outputs(model, other, feeds):
    """Opset conversion changes no kernel: onnxruntime must give the very same values."""
    for got, want in zip(ort_outputs(other, feeds), ort_outputs(model, feeds), strict=True):
        np.testing.assert_array_equal(got, want)


def modes(model: onnx.ModelProto) -> list[str]:
    """The mode attribute of every GridSample (graph, subgraphs, functions), as spelled."""
    sites = find_gridsamples(ir.serde.deserialize_model(model))
    attrs = [site.node.attributes.get("mode") for site in sites]
    return [a.value if a is not None and not a.is_ref() else "-" for a in attrs]


def checked(model: onnx.ModelProto) -> onnx.ModelProto:
    onnx.checker.check_model(model, full_check=True)
    return model


def gs_feeds(rng, x_shape=(1, 2, 4, 5), grid_shape=(1, 3, 3, 2)):
    return {
        "X": rng.standard_normal(x_shape).astype(np.float32),
        "grid": make_grid(rng, grid_shape),
    }


@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
def test_round_trip_16_20_16(mode, padding, rng):
    model = gridsample_model([1, 2, 4, 5], [1, 3, 3, 2], mode, padding, 1, opset=16, ir_version=8)
    up = checked(upgrade(model))
    back = checked(downgrade(up, 16))
    spelled16 = {"linear": "bilinear", "cubic": "bicubic"}.get(mode, mode)
    assert (modes(up), modes(back)) == ([mode], [spelled16])
    assert [o.version for o in up.opset_import] == [20] and back.opset_import[0].version == 16
    assert up.ir_version == back.ir_version == 8
    feeds = gs_feeds(rng)
    assert_same_outputs(model, up, feeds)
    assert_same_outputs(model, back, feeds)


MIXED_16 = """
<ir_version: 8, opset_import: ["" : 16]>
g (float[1,2,4,6] X, float[1,3,3,2] grid, bool c)
  => (float[1,1,3,3] M, float[1,2,2,6] A, float[1,2,2,6] B, float[1,2,6,8] P, float[1,2,8,12] R,
      float[1,2,3,3] Y) {
  S = GridSample <mode="bilinear", padding_mode="reflection"> (X, grid)
  M = ReduceMean <axes=[1]> (S)
  A, B = Split <axis=2> (X)
  pads = Constant <value = int64[8] {0,0,1,1,0,0,1,1}> ()
  P = Pad <mode="reflect"> (X, pads)
  scales = Constant <value = float[4] {1,1,2,2}> ()
  R = Resize <mode="linear"> (X, , scales)
  Y = If (c) <
    then_branch = t () => (float[1,2,3,3] a) { a = GridSample <mode="bicubic"> (X, grid) },
    else_branch = e () => (float[1,2,3,3] b) {
      b0 = GridSample <mode="nearest"> (X, grid)
      b = ReduceMax <axes=[0], keepdims=1> (b0)
    }>
}
"""


@pytest.mark.parametrize("target", [20, 21, 22])
def test_ops_changed_between_16_and_22_convert_both_ways(target, rng):
    model = onnx.parser.parse_model(MIXED_16)
    up = checked(upgrade(model, target))
    ops = {n.op_type: n for n in up.graph.node}
    assert len(ops["ReduceMean"].input) == 2 and not ops["ReduceMean"].attribute  # axes input
    assert [a.name for a in ops["Split"].attribute] == ["axis", "num_outputs"]
    assert modes(up) == ["linear", "cubic", "nearest"]
    for c in (True, False):
        assert_same_outputs(model, up, {**gs_feeds(rng, (1, 2, 4, 6)), "c": np.array(c)})
    for down in (16, 17, 18, 19):
        back = checked(downgrade(up, down))
        assert modes(back) == ["bilinear", "bicubic", "nearest"]
        for c in (True, False):
            assert_same_outputs(model, back, {**gs_feeds(rng, (1, 2, 4, 6)), "c": np.array(c)})


MODEL_22 = """
<ir_version: 10, opset_import: ["" : 22]>
g (float[1,2,5,6] X, float[1,3,3,2] grid)
  => (float[1,2,3,6] A, float[1,2,2,6] B, float[2,3] Z, float[1,2,3,3] Y, float[1,1,5,6] M) {
  A, B = Split <axis=2, num_outputs=2> (X)
  shape = Constant <value = int64[2] {2,3}> ()
  Z = ConstantOfShape <value = float[1] {1.5}> (shape)
  Y = GridSample <mode="cubic", align_corners=1> (X, grid)
  axes = Constant <value = int64[1] {1}> ()
  M = ReduceMean (X, axes)
}
"""


def test_gaps_of_onnx_converter_downward_from_22(rng):
    """ConstantOfShape 20->19, Split 18->17 (uneven num_outputs) and GridSample 20->19."""
    model = onnx.parser.parse_model(MODEL_22)
    down = checked(downgrade(model, 16))
    split = next(n for n in down.graph.node if n.op_type == "Split")
    assert len(split.input) == 2 and [a.name for a in split.attribute] == ["axis"]
    assert modes(down) == ["bicubic"] and down.ir_version == 10
    assert_same_outputs(model, down, gs_feeds(rng, (1, 2, 5, 6)))


IF_LOOP_16 = """
<ir_version: 8, opset_import: ["" : 16]>
g (float[2,3,5,6] X, float[2,4,7,2] grid, bool c, int64 trips)
  => (float[2,3,4,7] Y, float[2,3,4,7] L) {
  Y = If (c) <
    then_branch = t () => (float[2,3,4,7] a) { a = GridSample <mode="bicubic"> (X, grid) },
    else_branch = e () => (float[2,3,4,7] b) {
      b = If (c) <
        then_branch = t2 () => (float[2,3,4,7] a2) { a2 = GridSample (X, grid) },
        else_branch = e2 () => (float[2,3,4,7] b2) {
          b2 = GridSample <mode="bilinear", padding_mode="reflection", align_corners=1> (X, grid)
        }>
    }>
  init = GridSample <padding_mode="border"> (X, grid)
  keep_going = Constant <value = bool {1}> ()
  L = Loop (trips, keep_going, init) <body = body (int64 i, bool cond, float[2,3,4,7] acc)
        => (bool cond_out, float[2,3,4,7] acc_out) {
    cond_out = Identity (cond)
    s = GridSample <mode="nearest"> (X, grid)
    acc_out = Add (acc, s)
  }>
}
"""


def test_gridsample_in_if_and_loop_bodies(rng):
    model = onnx.parser.parse_model(IF_LOOP_16)
    up = checked(upgrade(model, 22))
    assert modes(up) == ["cubic", "-", "linear", "-", "nearest"]  # "-": the default, linear
    back = checked(downgrade(up, 16))
    assert modes(back) == modes(model)
    for c in (True, False):
        feeds = {**gs_feeds(rng, (2, 3, 5, 6), (2, 4, 7, 2)), "c": np.array(c)}
        feeds["trips"] = np.array(2)
        assert_same_outputs(model, up, feeds)
        assert_same_outputs(model, back, feeds)


FUNCTIONS_16 = """
<ir_version: 8, opset_import: ["" : 16, "local" : 1]>
g (float[2,3,5,6] X, float[2,4,7,2] grid)
  => (float[2,3,4,7] A, float[2,3,4,7] B, float[2,3,4,7] C, float[2,1,4,7] K) {
  A = local.Warp (X, grid)
  B = local.Warp <mode="nearest", align_corners=0> (X, grid)
  C = local.Outer <m="bilinear"> (X, grid)
  K = local.Mean (A)
}
<domain: "local", opset_import: ["" : 16]>
Warp <mode: string = "bicubic", align_corners: int = 1> (x, gr) => (y) {
  y = GridSample <mode: string = @mode, align_corners: int = @align_corners, padding_mode="border"> (x, gr)
}
<domain: "local", opset_import: ["" : 16, "local" : 1]>
Outer <m> (x, gr) => (y) {
  y = local.Warp <mode: string = @m> (x, gr)
}
<domain: "local", opset_import: ["" : 16]>
Mean (x) => (y) {
  y = ReduceMean <axes=[1]> (x)
}
"""


def _function_view(model):
    """Per function: its onnx opset and its string attribute defaults; the call-site modes."""
    functions = {
        f.name: (
            {o.domain: o.version for o in f.opset_import}[""],
            {a.name: a.s.decode() for a in f.attribute_proto if a.s},
        )
        for f in model.functions
    }
    calls = [{a.name: a.s.decode() for a in n.attribute if a.s} for n in model.graph.node]
    return functions, calls


def test_functions_are_kept_and_follow(rng):
    model = onnx.parser.parse_model(FUNCTIONS_16)
    up = checked(upgrade(model, 20))
    assert _function_view(up) == (
        {"Warp": (20, {"mode": "cubic"}), "Outer": (20, {}), "Mean": (20, {})},
        [{}, {"mode": "nearest"}, {"m": "linear"}, {}],
    )
    mean = next(f for f in up.functions if f.name == "Mean")
    assert [n.op_type for n in mean.node] == ["Constant", "ReduceMean"]  # axes became an input
    back = checked(downgrade(up, 16))
    assert _function_view(back) == _function_view(model)
    feeds = gs_feeds(rng, (2, 3, 5, 6), (2, 4, 7, 2))
    assert_same_outputs(model, up, feeds)
    assert_same_outputs(model, back, feeds)


MIXED_RANKS = """
<ir_version: 9, opset_import: ["" : 20, "local" : 1]>
g (float[1,2,4,5] X, float[1,3,3,2] grid, float[1,2,3,4,5] V, float[1,2,2,2,3] vgrid)
  => (float[1,2,3,3] Y, float[1,2,2,2,2] W) {
  [flat] Y = GridSample <mode="cubic"> (X, grid)
  W = local.Warp <mode="linear"> (V, vgrid)
}
<domain: "local", opset_import: ["" : 20]>
Warp <mode> (x, gr) => (y) {
  [volumetric] y = GridSample <mode: string = @mode, padding_mode="border"> (x, gr)
}
"""


def test_5d_refused_with_the_node_named():
    model = onnx.parser.parse_model(MIXED_RANKS)
    with pytest.raises(OpsetConversionError) as caught:
        downgrade(model, 17)
    message = str(caught.value)
    assert "'volumetric' (function local::Warp)" in message and "spatial rank is 3" in message
    assert "gridsample-lower lower" in message and "--lower-rest" in message


def test_lower_rest_lowers_exactly_the_nodes_that_cannot_exist(rng):
    model = onnx.parser.parse_model(MIXED_RANKS)
    down = checked(downgrade(model, 16, lower_rest=True))
    assert [s.name for s in find_gridsamples(ir.serde.deserialize_model(down))] == ["flat"]
    assert modes(down) == ["bicubic"] and down.opset_import[0].version == 16
    feeds = {
        **gs_feeds(rng),
        "V": rng.standard_normal((1, 2, 3, 4, 5)).astype(np.float32),
        "vgrid": make_grid(rng, (1, 2, 2, 2, 3)),
    }
    for got, want in zip(ort_outputs(down, feeds), ort_outputs(model, feeds), strict=True):
        np.testing.assert_allclose(got, want, atol=2e-5, rtol=2e-5)


def test_bfloat16_gridsample_cannot_go_below_22():
    model = gridsample_model(
        [1, 1, 3, 3], [1, 2, 2, 2], opset=22, name="bf", x_dtype=ml_dtypes.bfloat16
    )
    with pytest.raises(OpsetConversionError, match="'bf'.*bfloat16"):
        downgrade(model, 19)


INEXPRESSIBLE = {
    "does not exist": ("Y = Gelu (X)", 19, "Gelu producing 'Y' (main graph) does not exist"),
    "attribute": (
        "Y = AveragePool <kernel_shape=[1,2], dilations=[1,2]> (X)",
        18,
        "AveragePool producing 'Y' (main graph): attribute dilations",
    ),
    "value": (
        'p = Constant <value = int64[4] {0,1,0,1}> ()\n Y = Pad <mode="wrap"> (X, p)',
        18,
        "mode='wrap' cannot be expressed at opset 18",
    ),
    "input": (
        "p = Constant <value = int64[2] {1,1}> ()\n v = Constant <value = float {0}> ()\n"
        " a = Constant <value = int64[1] {1}> ()\n Y = Pad (X, p, v, a)",
        17,
        "Pad producing 'Y' (main graph): input axes cannot be expressed at opset 17",
    ),
    "no adapter": (
        "Y = LpPool <kernel_shape=[1,2]> (X)",
        17,
        "LpPool producing 'Y' (main graph): onnx's version converter cannot convert it",
    ),
}


@pytest.mark.parametrize("case", list(INEXPRESSIBLE))
def test_ops_that_cannot_be_expressed_are_named(case):
    body, target, message = INEXPRESSIBLE[case]
    text = f'<ir_version: 10, opset_import: ["" : 20]> g (float[1,1,2,4] X) => (Y) {{ {body} }}'
    with pytest.raises(OpsetConversionError, match=message.replace("(", r"\(").replace(")", r"\)")):
        downgrade(onnx.parser.parse_model(text), target)


def test_attribute_bound_to_a_function_parameter_on_a_changed_op():
    text = """
    <ir_version: 8, opset_import: ["" : 16, "local" : 1]>
    g (float[2,3] X) => (float[2,1] Y) { Y = local.Mean <ax = [1]> (X) }
    <domain: "local", opset_import: ["" : 16]>
    Mean <ax> (x) => (y) { y = ReduceMean <axes: ints = @ax> (x) }
    """
    with pytest.raises(OpsetConversionError, match="function local::Mean.*function parameters"):
        upgrade(onnx.parser.parse_model(text), 20)


def misspelled(mode: str, opset: int) -> onnx.ModelProto:
    model = gridsample_model([1, 1, 3, 3], [1, 2, 2, 2], opset=opset)
    (attr,) = [a for a in model.graph.node[0].attribute if a.name == "mode"]
    attr.s = mode.encode()
    return model


def test_spelling_for_the_wrong_opset_is_repaired_at_the_same_opset():
    wrong16, wrong20 = misspelled("cubic", 16), misspelled("bilinear", 20)
    for model in (wrong16, wrong20):  # what inspect flags
        assert not find_gridsamples(ir.serde.deserialize_model(model))[0].spelling_ok
    assert modes(downgrade(wrong16, 16)) == ["bicubic"]
    assert modes(upgrade(wrong16, 20)) == ["cubic"]
    assert modes(upgrade(wrong20, 20)) == ["linear"]


def test_nothing_else_is_lost():
    text = """
    <ir_version: 7, opset_import: ["" : 16, "com.example" : 1], producer_name: "me",
     producer_version: "3", doc_string: "model doc", model_version: 7, domain: "dom">
    g (float[2,3,4] X) => (float[2,1,4] Y) <float[3] w = {1, 2, 3}> {
      R = Relu (X)
      M = ReduceMean <axes=[1]> (R)
      Y = Identity (M)
    }
    """
    model = onnx.parser.parse_model(text)
    model.graph.node[0].name, model.graph.node[0].doc_string = "relu", "node doc"
    model.graph.node[0].metadata_props.add(key="k", value="v")
    model.graph.doc_string = "graph doc"
    model.graph.metadata_props.add(key="gk", value="gv")
    model.graph.value_info.append(onnx.helper.make_tensor_value_info("R", 1, [2, 3, 4]))
    model.metadata_props.add(key="author", value="x")
    up = checked(upgrade(model, 21))
    for field in ("ir_version", "producer_name", "producer_version", "doc_string", "domain"):
        assert getattr(up, field) == getattr(model, field), field
    assert up.model_version == 7 and list(up.metadata_props) == list(model.metadata_props)
    assert {(o.domain, o.version) for o in up.opset_import} == {("", 21), ("com.example", 1)}
    relu, original = up.graph.node[0], model.graph.node[0]
    assert (relu.name, relu.doc_string, relu.metadata_props) == (
        "relu",
        "node doc",
        original.metadata_props,
    )
    assert up.graph.doc_string == "graph doc" and list(up.graph.metadata_props)[0].key == "gk"
    # Nothing inferred is added (onnx_ir writes value_info for initializers, as lower() does).
    infos = [info for info in up.graph.value_info if info.name != "w"]
    assert infos == list(model.graph.value_info)
    assert list(up.graph.initializer) == list(model.graph.initializer)


def test_ir_model_in_ir_model_out_and_input_untouched():
    proto = gridsample_model([1, 1, 3, 3], [1, 2, 2, 2], opset=16)
    before = proto.SerializeToString()
    assert isinstance(upgrade(proto), onnx.ModelProto)
    assert proto.SerializeToString() == before
    model = ir.serde.deserialize_model(proto)
    out = downgrade(upgrade(model), 17)
    assert isinstance(out, ir.Model) and out is not model
    assert out.opset_imports[""] == 17 and model.opset_imports[""] == 16


@pytest.mark.parametrize(
    "convert,message",
    [
        (lambda m: upgrade(m, 19), "opset 19 is not one of 20, 21, 22"),
        (lambda m: downgrade(m, 20), "opset 20 is not one of 16, 17, 18, 19"),
        (lambda m: downgrade(m, 19), "at opset 18: use upgrade for 19"),
        (lambda m: upgrade(upgrade(m, 22), 21), "at opset 22: use downgrade for 21"),
    ],
)
def test_targets_outside_the_range_or_the_direction_are_refused(convert, message):
    model = gridsample_model([1, 1, 3, 3], [1, 2, 2, 2], opset=18)
    with pytest.raises(OpsetConversionError, match=message):
        convert(model)


@pytest.mark.parametrize(
    "convert,message",
    [
        (lambda m: upgrade(m, "20"), "opset must be an int, not str"),
        (lambda m: downgrade(m, 16.0), "opset must be an int, not float"),
        (lambda m: upgrade("m.onnx"), "upgrade expects an onnx.ModelProto or an onnx_ir.Model"),
        (lambda m: downgrade("m.onnx"), "downgrade expects an onnx.ModelProto or an onnx_ir"),
    ],
)
def test_arguments_of_the_wrong_type_are_type_errors(convert, message):
    model = gridsample_model([1, 1, 3, 3], [1, 2, 2, 2], opset=18)
    with pytest.raises(TypeError, match=message):
        convert(model)


def test_pass_select_lowers_only_the_selected_nodes(rng):
    model = ir.serde.deserialize_model(onnx.parser.parse_model(MIXED_RANKS))
    result = LowerGridSamplePass(select=lambda _name, spec: spec.rank == 3)(model)
    assert result.modified and result.lowered == {"r3 linear border align_corners=0": 1}
    assert [s.name for s in find_gridsamples(model)] == ["flat"]
    assert LowerGridSamplePass(select=lambda _name, spec: spec.rank == 3)(model).modified is False
