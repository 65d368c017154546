"""The verifier passes correct rewrites, catches wrong ones and names the node responsible."""

from __future__ import annotations

import json
import warnings

import ml_dtypes
import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime
import pytest
from conftest import gridsample_model, make_grid, run_ort
from onnx import helper
from test_passes import IF_LOOP

from gridsample_lower import lower
from gridsample_lower.inventory import find_gridsamples
from gridsample_lower.spec import GridSampleSpec
from gridsample_lower.tolerances import tolerance
from gridsample_lower.verify import (
    VerificationError,
    VerificationReport,
    VerificationSetupError,
    verify,
)
from gridsample_lower.verify_inputs import InputPlan
from gridsample_lower.verify_report import compare

FLOAT32_LINEAR = tolerance(np.float32, "linear")  # (atol, rtol) the verifier takes


def two_warps(padding_b="zeros", name_b="warp_b"):
    """Two GridSamples on one X, their outputs summed into one graph output."""
    grid_info = [helper.make_tensor_value_info(g, 1, [1, 3, 4, 2]) for g in ("grid_a", "grid_b")]
    nodes = [
        helper.make_node("GridSample", ["X", "grid_a"], ["ya"], name="warp_a", mode="linear"),
        helper.make_node(
            "GridSample", ["X", "grid_b"], ["yb"], name=name_b, padding_mode=padding_b
        ),
        helper.make_node("Add", ["ya", "yb"], ["out"]),
    ]
    graph = helper.make_graph(
        nodes,
        "two_warps",
        [helper.make_tensor_value_info("X", 1, [1, 2, 5, 6]), *grid_info],
        [helper.make_tensor_value_info("out", 1, [1, 2, 3, 4])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)], ir_version=9)


def test_correct_rewrite_passes_against_onnxruntime():
    model = gridsample_model(["N", 2, 5, 6], ["N", 3, 4, 2], "cubic", "reflection", 1)
    report = verify(model, lower(model), samples=2, dims={"N": 2})
    assert report.ok and report.oracle == "onnxruntime", report.table()
    assert report.candidate_runtime == "onnxruntime" and report.samples == 2
    (output,) = report.outputs
    assert (output.name, output.dtype, output.shape) == ("Y", "float32", [2, 2, 3, 4])
    assert output.elements == 2 * 48 and output.atol == FLOAT32_LINEAR[0]
    (node,) = report.nodes
    assert node.checked and node.oracle == "onnxruntime" and node.elements == 2 * 48
    assert node.configuration == "r2 cubic reflection align_corners=1"
    assert "1 output(s) and 1 GridSample node(s) match" in report.summary()


@pytest.mark.parametrize(
    "x_shape,grid_shape,mode",
    [([2, 2, 5], [2, 4, 1], "linear"), ([1, 2, 4, 3, 3], [1, 2, 2, 2, 3], "cubic")],
    ids=["1d-linear", "3d-cubic"],
)
def test_reference_onnxruntime_cannot_run(x_shape, grid_shape, mode):
    model = gridsample_model(x_shape, grid_shape, mode, "border", 0)
    report = verify(model, lower(model), samples=1)
    assert report.ok and report.oracle == "onnx.reference", report.table()
    assert report.nodes[0].oracle == "onnx.reference"


def test_wrong_node_is_caught_and_named():
    reference = two_warps()
    assert verify(reference, lower(reference), samples=1).ok
    impostor = lower(two_warps(padding_b="border"))
    report = verify(reference, impostor, samples=2)
    assert not report.ok and report.culprits == ["warp_b"]
    assert [n.ok for n in report.nodes] == [True, False]
    assert not report.outputs[0].ok and report.outputs[0].mismatches > 0
    summary = report.summary()
    assert "output 'out'" in summary and "responsible: 'warp_b'" in summary
    assert "MISMATCH" in report.table()
    with pytest.raises(VerificationError, match="warp_b") as caught:
        raise VerificationError(report)
    assert caught.value.report is report


def test_difference_outside_any_gridsample_is_not_blamed_on_one():
    reference = two_warps()
    candidate = lower(reference)
    (add,) = [n for n in candidate.graph.node if n.op_type == "Add" and n.output == ["out"]]
    add.op_type = "Sub"
    report = verify(reference, candidate, samples=1)
    assert not report.ok and report.culprits == []
    assert "every GridSample matches alone" in report.summary()


def test_shape_or_dtype_change_is_caught():
    model = gridsample_model([1, 2, 5, 6], [1, 3, 4, 2], "nearest", "zeros", 0)
    other = gridsample_model([1, 2, 5, 6], [1, 3, 4, 2], "nearest", "zeros", 0)
    cast = onnx.helper.make_node("Cast", ["Y"], ["Y2"], to=onnx.TensorProto.DOUBLE)
    other.graph.node.append(cast)
    other.graph.output[0].name = "Y2"
    other.graph.output[0].type.tensor_type.elem_type = onnx.TensorProto.DOUBLE
    report = verify(model, other, samples=1)
    assert not report.ok and "expected float32[1, 2, 3, 4], got float64" in report.summary()
    assert "compared by position" in report.notes[0]


def test_a_candidate_that_cannot_run_fails():
    model = gridsample_model([1, 2, 5, 6], [1, 3, 4, 2])
    broken = lower(model)
    broken.graph.node[-1].op_type = "NoSuchOp"
    report = verify(model, broken, samples=1)
    assert not report.ok and "cannot be loaded" in report.outputs[0].problem


@pytest.mark.parametrize(
    "dtype,mode,atol",
    [(np.float16, "cubic", 1e-3), (ml_dtypes.bfloat16, "linear", 8e-3), (np.int32, "linear", 1)],
    ids=["float16", "bfloat16", "int32"],
)
def test_half_and_integer_models(dtype, mode, atol):
    grid_dtype = np.float32 if np.dtype(dtype).kind == "i" else dtype
    model = gridsample_model(
        [1, 2, 4, 5], [1, 3, 2, 2], mode, "reflection", 0, x_dtype=dtype, grid_dtype=grid_dtype
    )
    report = verify(model, lower(model), samples=2)
    assert report.ok and report.oracle == "onnx.reference", report.table()
    assert report.outputs[0].atol == atol and report.nodes[0].atol == atol


def test_nearest_is_held_exact():
    model = gridsample_model([1, 2, 4, 5], [1, 3, 2, 2], "nearest", "border", 1, x_dtype=np.int64)
    report = verify(model, lower(model), samples=1)
    assert report.ok and (report.outputs[0].atol, report.outputs[0].rtol) == (0, 0)


def test_nearest_and_arithmetic_in_two_runtimes_is_held_to_the_linear_tolerance():
    model = gridsample_model([1, 2, 5], [1, 4, 1], "nearest", "zeros", 0)
    model.graph.initializer.append(onnx.numpy_helper.from_array(np.float32(0.1), "k"))
    model.graph.node.append(helper.make_node("Mul", ["Y", "k"], ["Z"]))
    model.graph.output[0].name = "Z"
    report = verify(model, lower(model), samples=1)
    assert report.ok and report.outputs[0].atol == FLOAT32_LINEAR[0] and "Mul" in report.notes[0]
    assert report.nodes[0].atol == 0  # the node alone is still held exact


def test_given_inputs_from_a_mapping_and_an_npz(tmp_path, rng):
    model = gridsample_model([1, 2, 5, 6], [1, 3, 4, 2], "linear", "zeros", 1)
    feeds = {
        "X": rng.standard_normal((1, 2, 5, 6)).astype(np.float32),
        "grid": rng.uniform(-1, 1, (1, 3, 4, 2)).astype(np.float32),
    }
    report = verify(model, lower(model), feeds, samples=5)
    assert report.ok and report.samples == 1  # nothing left to draw
    np.savez(tmp_path / "feeds.npz", grid=feeds["grid"])
    report = verify(model, lower(model), tmp_path / "feeds.npz", samples=2)
    assert report.ok and report.samples == 2  # X is drawn anew for each sample


@pytest.mark.parametrize(
    "inputs,message",
    [
        ({"image": np.zeros(3)}, "no graph input named 'image'"),
        ({"X": np.zeros((1, 2, 5, 6))}, "input 'X' is float32, the value given is float64"),
        ({"X": np.zeros((1, 2, 5), np.float32)}, "input 'X' has shape [1,2,5,6]"),
        ("missing.npz", "missing.npz: no such file"),
    ],
)
def test_unusable_inputs_are_named(inputs, message):
    model = gridsample_model([1, 2, 5, 6], [1, 3, 4, 2])
    with pytest.raises(VerificationSetupError, match=message.replace("[", r"\[")):
        verify(model, lower(model), inputs)


def test_symbolic_dims_from_the_option_or_the_given_inputs(rng):
    model = gridsample_model(["batch", 2, "h", "w"], ["batch", 3, 4, 2], "linear", "border", 0)
    report = verify(model, lower(model), samples=1, dims={"batch": 2, "h": 4})
    assert report.ok and report.outputs[0].shape == [2, 2, 3, 4]
    x = rng.standard_normal((4, 2, 6, 7)).astype(np.float32)
    report = verify(model, lower(model), {"X": x}, samples=1)
    assert report.ok and report.outputs[0].shape == [4, 2, 3, 4]
    with pytest.raises(VerificationSetupError, match="no symbolic dimension 'btach'"):
        verify(model, lower(model), dims={"btach": 2})


def test_invented_grids_hit_lattice_points_and_ties():
    model = gridsample_model([1, 1, 4, 5], [1, 40, 40, 2], "nearest", "zeros", 0)
    ir_model = ir.serde.deserialize_model(model)
    grid = InputPlan(ir_model, find_gridsamples(ir_model)).draw(np.random.default_rng(0))["grid"]
    assert grid.dtype == np.float32 and np.abs(grid).max() <= 1.25
    # align_corners=0: pixel p sits at (2p + 1) / L - 1; ties are half-way between pixels.
    for component, size in ((0, 5), (1, 4)):
        pixels = ((grid[..., component].astype(np.float64) + 1) * size - 1) / 2
        assert np.isclose(pixels, np.round(pixels)).sum() > 50  # on a sample
        assert np.isclose(pixels, np.floor(pixels) + 0.5).sum() > 50  # half-way tie


def test_a_shape_tensor_is_asked_for():
    model = gridsample_model([1, 2, 5, 6], [1, 3, 4, 2])
    model.graph.input.append(helper.make_tensor_value_info("new_shape", 7, [4]))
    model.graph.node.append(helper.make_node("Reshape", ["Y", "new_shape"], ["Z"]))
    model.graph.output.append(helper.make_tensor_value_info("Z", 1, None))
    with pytest.raises(VerificationSetupError, match="shape .* provide input 'new_shape'"):
        verify(model, lower(model))
    report = verify(model, lower(model), {"new_shape": np.array([1, 2, 12, 1])}, samples=1)
    assert report.ok, report.table()


@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
def test_nan_in_the_grid(padding, rng):
    model = gridsample_model([1, 2, 5, 6], [1, 3, 4, 2], "nearest", padding, 0)
    grid = rng.uniform(-1, 1, (1, 3, 4, 2)).astype(np.float32)
    grid[0, :2, 1, :] = np.nan
    report = verify(model, lower(model), {"grid": grid}, samples=2)
    assert report.ok, report.table()
    # onnxruntime's result is undefined for NaN coordinates: the reference kernel judges.
    assert report.oracle == "onnx.reference" and "NaN" in report.notes[0]


def test_nan_outputs_match_nan_outputs(rng):
    model = gridsample_model([1, 2, 5, 6], [1, 3, 4, 2], "cubic", "border", 0)
    x = rng.standard_normal((1, 2, 5, 6)).astype(np.float32)
    x[0, 0, 1:3, 1:4] = np.nan
    feeds = {"X": x, "grid": make_grid(rng, (1, 3, 4, 2))}
    assert np.isnan(run_ort(lower(model), feeds)).any()
    report = verify(model, lower(model), feeds)
    assert report.ok and report.outputs[0].max_abs < 1e-5, report.table()


def test_nan_matches_nan_only():
    nan = np.float32(np.nan)
    same = compare("y", np.array([1, nan, np.inf]), np.array([1, nan, np.inf]), 0, 0)
    assert same.ok and same.max_abs == 0
    differ = compare("y", np.array([1.0, nan, 2.0]), np.array([1.0, 2.0, nan]), 1, 1)
    assert differ.mismatches == 2 and differ.max_abs == np.inf


def test_large_integers_compare_exactly():
    big = np.array([2**62 + 1, -(2**62)], dtype=np.int64)
    check = compare("y", big, big + 1, 1, 0)
    assert check.ok and check.max_abs == 1


def test_tolerance_overrides_globally_and_per_name():
    reference, impostor = two_warps(), lower(two_warps(padding_b="border"))
    report = verify(reference, impostor, samples=1, atol=1e-4)
    assert report.outputs[0].atol == 1e-4 and report.nodes[0].atol == 1e-4
    assert report.outputs[0].rtol == FLOAT32_LINEAR[1]  # rtol from the table
    loose = {"out": 100.0, "warp_b": 100.0, "*": 1e-3}
    report = verify(reference, impostor, samples=1, atol=loose)
    assert report.ok and report.nodes[0].atol == 1e-3
    with pytest.raises(VerificationSetupError, match="no output or GridSample node named 'oops'"):
        verify(reference, impostor, atol={"oops": 1.0})


@pytest.mark.parametrize(
    "x_shape,grid_shape,runtime",
    [
        ([1, 2, 5, 6], [1, 3, 4, 2], "onnxruntime"),
        ([1, 1, 3, 4, 4], [1, 2, 2, 2, 3], "onnx.reference"),
    ],
    ids=["2d", "3d-cubic"],
)
def test_a_gridsample_the_candidate_kept_is_checked_alone(x_shape, grid_shape, runtime):
    """A partial lowering or an opset conversion keeps GridSample nodes: compare them as they are."""
    model = gridsample_model(x_shape, grid_shape, "cubic", "zeros", 0)
    report = verify(model, model, samples=1)
    assert report.ok and report.candidate_runtime == runtime, report.table()
    assert report.nodes[0].checked and report.nodes[0].elements > 0


FUNCTION_3D_CUBIC = """
<ir_version: 8, opset_import: ["" : 20, "local" : 1]>
g (float[1,2,4,4,4] X, float[1,2,2,2,3] grid) => (float[1,2,2,2,2] A) {
  A = local.Warp (X, grid)
}
<domain: "local", opset_import: ["" : 20]>
Warp <mode: string = "cubic"> (x, gr) => (y) {
  y = GridSample <mode: string = @mode, padding_mode="border"> (x, gr)
}
"""


def test_onnx_reference_takes_over_when_onnxruntime_fails_at_run_time():
    """A function hides the mode until the call: onnxruntime loads the model, then refuses it."""
    model = onnx.parser.parse_model(FUNCTION_3D_CUBIC)
    report = verify(model, lower(model), samples=1)
    assert report.ok and report.oracle == "onnx.reference", report.table()
    assert "Only support GridSample Cubic mode in 4-D" in report.notes[0]
    assert "function local::Warp" in report.nodes[0].note


def test_subgraph_nodes_fall_back_to_the_whole_model():
    model = onnx.parser.parse_model(IF_LOOP)
    report = verify(model, lower(model), samples=2)
    assert report.ok, report.table()
    checked = {n.name: n.checked for n in report.nodes}
    assert sum(checked.values()) == 1 and len(checked) == 5  # the one in the main graph
    assert all("checked through the whole model only" in n.note for n in report.nodes if n.note)
    assert "not checked alone" in report.summary() and "not checked" in report.table()


def test_unnamed_nodes_are_named_as_the_pass_names_them():
    model = gridsample_model([1, 2, 4, 5], [1, 3, 2, 2], "cubic", opset=16, name="")
    report = verify(model, lower(model), samples=1)
    assert report.ok and [(n.name, n.checked) for n in report.nodes] == [("GridSample_0", True)]


def test_models_as_paths_and_ir_models(tmp_path):
    model = gridsample_model([1, 2, 5, 6], [1, 3, 4, 2])
    onnx.save(model, tmp_path / "m.onnx")
    report = verify(tmp_path / "m.onnx", lower(ir.serde.deserialize_model(model)), samples=1)
    assert report.ok


def test_report_round_trips_through_json():
    report = verify(two_warps(), lower(two_warps(padding_b="border")), samples=1)
    report.outputs[0].max_rel = float("inf")
    data = json.loads(report.to_json())
    assert data["ok"] is False and data["outputs"][0]["max_rel"] == "inf"
    assert data["nodes"][1]["name"] == "warp_b"
    assert VerificationReport.from_dict(data) == report


def test_progress_is_reported():
    steps = []
    verify(two_warps(), lower(two_warps()), samples=2, progress=lambda *a: steps.append(a))
    assert len(steps) == 2 * (2 + 2) and steps[0][:2] == (0, 8)
    assert [s[0] for s in steps] == list(range(8)) and "warp_b" in steps[-1][2]


def test_unreadable_npz_files_are_setup_errors(tmp_path):
    model = gridsample_model([1, 2, 5, 6], [1, 3, 4, 2])
    np.savez(tmp_path / "objects.npz", X=np.array([1, "a", None], dtype=object))
    np.save(tmp_path / "plain.npy", np.zeros((1, 2, 5, 6), np.float32))
    (tmp_path / "plain.npy").rename(tmp_path / "renamed.npz")
    with pytest.raises(VerificationSetupError, match="objects.npz: not readable .*Object arr"):
        verify(model, lower(model), tmp_path / "objects.npz")
    with pytest.raises(VerificationSetupError, match="renamed.npz: not an .npz archive"):
        verify(model, lower(model), str(tmp_path / "renamed.npz"))


@pytest.mark.parametrize(
    "options,error,message",
    [
        ({"seed": -1}, VerificationSetupError, "seed must be at least 0, not -1"),
        ({"samples": 1.5}, TypeError, "samples must be an int, not float"),
        ({"dims": {"N": -1}}, VerificationSetupError, "dimension 'N' must be at least 1"),
        ({"dims": {"N": 0}}, VerificationSetupError, "dimension 'N' must be at least 1"),
        ({"dims": {"N": "3"}}, TypeError, "dimension 'N' must be an int, not str"),
        ({"dims": {"N": 10**11}}, VerificationSetupError, "inputs too large to invent"),
        ({"atol": "x"}, TypeError, "atol must be a number or a mapping"),
        ({"rtol": 1e400}, VerificationSetupError, "rtol must be finite and >= 0, not inf"),
        ({"atol": {"Y": float("nan")}}, VerificationSetupError, "atol for 'Y' must be finite"),
        ({"inputs": [np.zeros(3)]}, TypeError, "inputs must be a mapping"),
    ],
)
def test_bad_arguments_raise_type_or_setup_errors(options, error, message):
    model = gridsample_model(["N", 2, 5, 6], ["N", 3, 4, 2])
    with pytest.raises(error, match=message):
        verify(model, lower(model), **options)


def test_nothing_compared_is_not_a_pass(tmp_path):
    (tmp_path / "empty.onnx").write_bytes(b"")
    with pytest.raises(VerificationSetupError, match="empty.onnx: not an ONNX model"):
        verify(tmp_path / "empty.onnx", tmp_path / "empty.onnx")
    with pytest.raises(VerificationSetupError, match="nothing to compare: no output"):
        verify(onnx.ModelProto(), onnx.ModelProto())
    model = gridsample_model(["N", 2, 5, 6], ["N", 3, 4, 2])
    empty = {"X": np.zeros((0, 2, 5, 6), np.float32), "grid": np.zeros((0, 3, 4, 2), np.float32)}
    with pytest.raises(VerificationSetupError, match="every output is empty"):
        verify(model, lower(model), empty)


ORT_VERSION = tuple(int(part) for part in onnxruntime.__version__.split(".")[:2])


def test_an_empty_spatial_axis_is_judged_by_onnx_reference_without_warnings(rng):
    model = gridsample_model([1, 2, "H", 6], [1, 3, 4, 2])
    ir_model = ir.serde.deserialize_model(model)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no division by the axis size
        InputPlan(ir_model, find_gridsamples(ir_model), dims={"H": 0}).draw(rng)
        given = {"X": np.zeros((1, 2, 0, 6), np.float32)}
        report = verify(model, lower(model), given, samples=1)
    if ORT_VERSION < (1, 29):  # it returned zeros for an empty axis then: nothing to fall back
        assert report.ok and report.oracle == "onnxruntime", report.table()
        return
    # onnxruntime refuses the empty axis at run time: onnx.reference judges, whole and alone.
    assert report.ok and report.oracle == "onnx.reference", report.table()
    assert report.nodes[0].checked and report.nodes[0].oracle == "onnx.reference"
    assert report.nodes[0].elements == report.outputs[0].elements == 24
    refusal = "Dimension 2 has size 0); onnx.reference ran it"
    assert [note.endswith(refusal) for note in report.notes] == [True, True], report.notes
    assert "GridSample 'gs' alone" in report.notes[1]


def test_grid_values_too_far_for_onnxruntime_are_judged_by_onnx_reference(rng):
    model = gridsample_model([1, 2, 5, 6], [1, 3, 4, 2])
    grid = rng.choice([-1e30, 1e30, 0.5], size=(1, 3, 4, 2)).astype(np.float32)
    report = verify(model, lower(model), {"grid": grid}, samples=1)
    assert report.ok and report.oracle == "onnx.reference", report.table()
    assert "beyond 2**23 pixels" in report.notes[0]
    near = verify(model, lower(model), {"grid": np.clip(grid, -1e4, 1e4)}, samples=1)
    assert near.ok and near.oracle == "onnxruntime" and not near.notes


@pytest.mark.parametrize(
    "x_shape,grid_shape,mode,refusal",
    [
        ([1, 2, 5], [1, 4, 1], "linear", "Only 4-D or 5-D tensor is supported"),
        ([1, 1, 3, 3, 3], [1, 1, 2, 2, 3], "cubic", "Only support GridSample Cubic mode in 4-D"),
    ],
    ids=["1d-linear", "3d-cubic"],
)
def test_a_node_onnxruntime_refuses_at_run_time_is_judged_by_onnx_reference(
    x_shape, grid_shape, mode, refusal, monkeypatch
):
    """As the whole model does, a node onnxruntime loads but then refuses goes to onnx.reference.

    A native table that promises more than the installed onnxruntime runs (as a table written for
    another version would) hands each node to onnxruntime, which loads it and fails at run time.
    """
    model = gridsample_model(x_shape, grid_shape, mode, "border", 0)
    candidate = lower(model)
    impostor = lower(gridsample_model(x_shape, grid_shape, mode, "zeros", 0))
    monkeypatch.setattr(GridSampleSpec, "onnxruntime_native", property(lambda spec: True))
    report = verify(model, candidate, samples=1)
    assert report.ok and report.oracle == "onnx.reference", report.table()
    (node,) = report.nodes
    assert node.checked and node.oracle == "onnx.reference" and node.elements > 0
    alone = [note for note in report.notes if "GridSample 'gs' alone" in note]
    assert len(alone) == 1 and refusal in alone[0], report.notes
    report = verify(model, impostor, samples=2)
    assert not report.ok and report.culprits == ["gs"], report.table()
    assert report.nodes[0].oracle == "onnx.reference" and report.nodes[0].mismatches > 0
