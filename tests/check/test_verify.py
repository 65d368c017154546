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
from conftest import (
    IF_LOOP,
    SCAN,
    gridsample_model,
    make_grid,
    needs_real_sizes,
    run_ort,
    square_if_branch,
    two_warps,
)
from onnx import helper

from gridsample_lower import lower
from gridsample_lower.check import (
    VerificationError,
    VerificationReport,
    VerificationSetupError,
    nodes,
    run,
    verify,
)
from gridsample_lower.check.inputs import InputPlan
from gridsample_lower.check.report import compare
from gridsample_lower.check.tolerances import tolerance
from gridsample_lower.lowering import costs
from gridsample_lower.lowering.inventory import find_gridsamples

FLOAT32_LINEAR = tolerance(np.float32, "linear")  # (atol, rtol) the verifier takes


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
    "dtype,mode,atol,oracle",
    [
        (np.float16, "cubic", 1e-3, "onnxruntime"),  # its float32 kernel, through Casts
        (ml_dtypes.bfloat16, "linear", 8e-3, "onnx.reference"),
        (np.int32, "linear", 1, "onnx.reference"),
    ],
    ids=["float16", "bfloat16", "int32"],
)
def test_half_and_integer_models(dtype, mode, atol, oracle):
    grid_dtype = np.float32 if np.dtype(dtype).kind == "i" else dtype
    model = gridsample_model(
        [1, 2, 4, 5], [1, 3, 2, 2], mode, "reflection", 0, x_dtype=dtype, grid_dtype=grid_dtype
    )
    report = verify(model, lower(model), samples=2)
    assert report.ok and report.oracle == oracle, report.table()
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
    with pytest.raises(VerificationSetupError, match="no symbolic dimension or symbol 'btach'"):
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
    report = verify(model, lower(model))  # the whole model cannot run: each node alone can
    assert report.ok and not report.whole_model, report.table()
    assert not report.outputs[0].checked and report.nodes[0].elements > 0
    assert any("'new_shape' holds a shape" in note for note in report.notes), report.notes
    assert any("--inputs NAME:FILE.npy" in note for note in report.notes), report.notes
    assert "checked alone on 3 synthetic input set(s)" in report.summary()
    impostor = lower(gridsample_model([1, 2, 5, 6], [1, 3, 4, 2], "nearest"))
    impostor.graph.input.append(helper.make_tensor_value_info("new_shape", 7, [4]))
    report = verify(model, impostor, samples=1)
    assert not report.ok and report.culprits == ["gs"], report.table()
    report = verify(model, lower(model), {"new_shape": np.array([1, 2, 12, 1])}, samples=1)
    assert report.ok and report.whole_model, report.table()


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


def test_subgraph_nodes_are_checked_alone_on_synthetic_inputs():
    """Values inside If and Loop bodies cannot be shown by the reference: their nodes are run
    alone on synthetic X and grid of their inferred shapes, as well as through the whole model."""
    model = onnx.parser.parse_model(IF_LOOP)
    report = verify(model, lower(model), samples=2)
    assert report.ok, report.table()
    assert [n.checked and n.elements == 2 * 168 for n in report.nodes] == [True] * 5
    synthetic = [n.name for n in report.nodes if "checked alone on synthetic inputs" in n.note]
    assert synthetic == ["GridSample_0", "GridSample_1", "GridSample_2", "GridSample_4"]
    assert "note: 'GridSample_4' checked alone on synthetic inputs: it lives in" in report.table()
    in_the_loop = IF_LOOP.replace(
        'mode="linear", padding_mode="zeros"', 'mode="linear", padding_mode="border"'
    )
    impostor = lower(onnx.parser.parse_model(in_the_loop))
    report = verify(model, impostor, samples=1)
    assert not report.ok and report.culprits == ["GridSample_4"], report.table()
    scan = onnx.parser.parse_model(SCAN)  # X and grid are the body's own values there
    report = verify(scan, lower(scan), samples=1)
    assert report.ok and all(n.checked and n.elements for n in report.nodes), report.table()


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


def _negated(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` (one GridSample) with its output negated: the node is no longer the whole
    model, so it is also run alone (one that is the whole model is checked by its output)."""
    model.graph.node.append(helper.make_node("Neg", ["Y"], ["Z"]))
    model.graph.output[0].name = "Z"
    return model


def test_an_empty_spatial_axis_is_judged_by_onnx_reference_without_warnings(rng):
    model = _negated(gridsample_model([1, 2, "H", 6], [1, 3, 4, 2]))
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
    model = _negated(gridsample_model(x_shape, grid_shape, mode, "border", 0))
    candidate = lower(model)
    impostor = lower(_negated(gridsample_model(x_shape, grid_shape, mode, "zeros", 0)))
    for module in (run, nodes):
        monkeypatch.setattr(module, "onnxruntime_runs", lambda spec: True)
    report = verify(model, candidate, samples=1)
    assert report.ok and report.oracle == "onnx.reference", report.table()
    (node,) = report.nodes
    assert node.checked and node.oracle == "onnx.reference" and node.elements > 0
    alone = [note for note in report.notes if "GridSample 'gs' alone" in note]
    assert len(alone) == 1 and refusal in alone[0], report.notes
    report = verify(model, impostor, samples=2)
    assert not report.ok and report.culprits == ["gs"], report.table()
    assert report.nodes[0].oracle == "onnx.reference" and report.nodes[0].mismatches > 0


def _scaled(model: onnx.ModelProto, factor: float) -> onnx.ModelProto:
    """``model`` with its output multiplied by ``factor``: a candidate off by a known amount."""
    scaled = onnx.ModelProto()
    scaled.CopyFrom(model)
    out = scaled.graph.output[0].name
    scaled.graph.node[-1].output[0] = "unscaled"
    for node in scaled.graph.node:
        node.input[:] = ["unscaled" if name == out else name for name in node.input]
    scaled.graph.initializer.append(onnx.numpy_helper.from_array(np.float32(factor), "factor"))
    scaled.graph.node.append(helper.make_node("Mul", ["unscaled", "factor"], [out]))
    return scaled


def test_the_check_holds_each_output_to_its_bound_not_a_looser_one():
    """Just inside the float32 bound (5e-5 + 5e-5 |y|) passes; 8x outside it fails."""
    model = gridsample_model([1, 3, 7, 10], [1, 9, 11, 2], "linear", "border", 1)
    candidate = lower(model)
    assert verify(model, _scaled(candidate, 1 + 2e-5), samples=1).ok
    report = verify(model, _scaled(candidate, 1 + 4e-4), samples=1)
    assert not report.ok and report.outputs[0].mismatches > 0, report.table()


def test_compare_draws_the_line_exactly_at_atol_plus_rtol_times_expected():
    expected = np.array([1.0, -2.0])
    bound = 2**-10 + 2**-12 * np.abs(expected)
    assert compare("y", expected, expected + bound, 2**-10, 2**-12).mismatches == 0
    beyond = expected + bound + 2**-30
    assert compare("y", expected, beyond, 2**-10, 2**-12).mismatches == 2


def test_symbolic_image_axes_default_to_sizes_real_models_take():
    model = needs_real_sizes()
    report = verify(model, lower(model), samples=1)
    assert report.ok and report.whole_model, report.table()
    assert report.outputs[0].shape == [3, 2, 16, 16]  # x: 3 x 2 x 128 x 128, pooled by 8
    assert "symbolic sizes chosen: N=3, H=128, W=128" in report.notes


def test_a_grid_the_model_makes_infinite_is_said_and_each_node_checked_alone():
    model = needs_real_sizes()
    report = verify(model, lower(model), samples=2, dims={"H": 9, "W": 12})
    assert report.ok and not report.whole_model, report.table()
    assert not report.outputs[0].checked and report.nodes[0].checked
    assert report.nodes[0].elements > 0 and report.nodes[0].mismatches == 0
    why, how = report.notes[-2:]
    assert "the grid of GridSample 'warp' holds NaN or infinity" in why and "H=9, W=12" in why
    assert "--dim SYMBOL=N" in how and "symbols: N, H, W" in how and "--inputs" in how
    wrong = lower(model)  # a region that computes something else is still caught
    first = next(n for n in wrong.graph.node if n.name.startswith("warp/") and n.op_type == "Add")
    first.op_type = "Sub"
    report = verify(model, wrong, samples=1, dims={"H": 9, "W": 12})
    assert not report.ok and report.culprits == ["warp"], report.table()


def test_a_reference_that_fails_on_invented_inputs_leaves_each_node_checked_alone():
    model = gridsample_model(["N", 2, "H", "W"], ["N", 5, 6, 2], "cubic", "border", 0)
    model.graph.initializer.append(onnx.numpy_helper.from_array(np.array([3, 2, 128, 128]), "s"))
    model.graph.node.append(helper.make_node("Reshape", ["X", "s"], ["flat"]))
    model.graph.output.append(helper.make_tensor_value_info("flat", 1, None))
    assert verify(model, lower(model), samples=1).whole_model  # 3 x 2 x 128 x 128 by default
    report = verify(model, lower(model), samples=1, dims={"H": 10})
    assert report.ok and not report.whole_model, report.table()
    assert any(
        "the original failed on invented inputs (N=3, H=10, W=128)" in n for n in report.notes
    )


def test_a_symbol_sizes_the_expressions_an_exporter_writes():
    """dynamo writes dimensions as expressions of symbols (``32*h``); --dim h=3 sizes them all."""
    model = gridsample_model([1, 2, "32*h", "32*w"], [1, "h", "w", 2], "nearest", "zeros", 0)
    report = verify(model, lower(model), samples=1, dims={"h": 3})
    assert report.ok and report.outputs[0].shape == [1, 2, 3, 4], report.table()
    assert "symbolic sizes chosen: w=4" in report.notes  # 128 pixels
    x = np.zeros((1, 2, 160, 64), np.float32)
    report = verify(model, lower(model), {"X": x}, samples=1)
    assert report.ok and report.outputs[0].shape == [1, 2, 5, 2], report.table()


def _half_stn() -> onnx.ModelProto:
    """A spatial transformer exported in half precision: AffineGrid -> GridSample, float16."""
    nodes = [
        helper.make_node("Shape", ["x"], ["size"]),
        helper.make_node("AffineGrid", ["theta", "size"], ["grid"], align_corners=0),
        helper.make_node("GridSample", ["x", "grid"], ["y"], name="gs", mode="linear"),
    ]
    graph = helper.make_graph(
        nodes,
        "stn16",
        [
            helper.make_tensor_value_info("theta", 10, ["N", 2, 3]),
            helper.make_tensor_value_info("x", 10, ["N", 3, 30, 20]),
        ],
        [helper.make_tensor_value_info("y", 10, ["N", 3, 30, 20])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)], ir_version=9)


def test_a_half_precision_stn_is_judged_by_what_onnxruntime_runs(rng):
    model = _half_stn()
    report = verify(model, lower(model))
    assert report.ok and report.oracle == "onnxruntime", report.table()
    feeds = {
        "theta": rng.standard_normal((2, 2, 3)).astype(np.float16),
        "x": rng.standard_normal((2, 3, 30, 20)).astype(np.float16),
    }
    expected = run_ort(model, feeds)
    np.testing.assert_allclose(run_ort(lower(model), feeds), expected, atol=1e-3, rtol=1e-3)


def test_onnx_reference_keeps_the_types_the_model_declares():
    """Its AffineGrid returns float32 for float16 and float64 theta, its ReduceSumSquare int64
    for int32: the oracle rounds each to the declared type, as onnxruntime computes them."""
    from gridsample_lower.check.oracle import model_runner

    model = _half_stn()
    run, runtime = model_runner(model, native=False)
    feeds = {
        "theta": np.eye(2, 3, dtype=np.float16)[None],
        "x": np.ones((1, 3, 30, 20), np.float16),
    }
    assert runtime == "onnx.reference" and run(feeds)[0].dtype == np.float16
    for node, elem, value in [
        (helper.make_node("AffineGrid", ["a", "size"], ["b"]), 11, np.eye(2, 3)[None] * 0.7),
        (helper.make_node("ReduceSumSquare", ["a"], ["b"], keepdims=0), 6, np.arange(6)),
    ]:
        inputs = [helper.make_tensor_value_info("a", elem, list(value.shape))]
        if node.op_type == "AffineGrid":
            inputs.append(helper.make_tensor_value_info("size", 7, [4]))
        graph = helper.make_graph(
            [node], "g", inputs, [helper.make_tensor_value_info("b", elem, None)]
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)], ir_version=9)
        feeds = {
            "a": value.astype(helper.tensor_dtype_to_np_dtype(elem)),
            "size": np.array([1, 1, 7, 9]),
        }
        feeds = {k: v for k, v in feeds.items() if k in {i.name for i in inputs}}
        (ours,) = model_runner(model, native=False)[0](feeds)
        theirs = run_ort(model, feeds)
        assert ours.dtype == theirs.dtype
        np.testing.assert_array_equal(ours, theirs)


def test_a_node_that_is_the_whole_model_is_checked_by_its_output_at_its_own_bound():
    """One run of each model serves both checks (the lowered cubic on 4x32x256x256 ran twice);
    the node keeps its own tolerance override and its verdict."""
    model = gridsample_model([1, 2, 7, 10], [1, 5, 6, 2], "cubic", "border", 1)
    report = verify(model, lower(model), samples=2, atol={"gs": 0.25})
    (node,) = report.nodes
    assert report.ok and node.checked and node.elements == report.outputs[0].elements == 120
    assert node.atol == 0.25 and report.outputs[0].atol == tolerance(np.float32, "cubic")[0]
    assert node.oracle == report.oracle == "onnxruntime"
    wrong = lower(gridsample_model([1, 2, 7, 10], [1, 5, 6, 2], "cubic", "zeros", 1))
    report = verify(model, wrong, samples=1)
    assert not report.ok and report.culprits == ["gs"], report.table()


@pytest.mark.parametrize("branch", ["then_branch", "else_branch"])
def test_a_region_that_picks_its_form_at_run_time_is_checked_in_both(branch):
    """X of unknown size, a grid of static size: the onnxruntime target's region holds an If
    that picks masked taps or a ring by X's size (``Target.unknown_x``). The check runs the
    form the values did not take too, so a fault in either is found, on the node, whichever
    size the check draws."""
    model = gridsample_model(["N", "C", "H", "W"], ["N", 5, 7, 2], "linear", "zeros", 1)
    model.graph.initializer.append(onnx.numpy_helper.from_array(np.eye(7, dtype=np.float32), "I"))
    model.graph.node.append(helper.make_node("MatMul", ["Y", "I"], ["Z"]))  # (no float32 tail)
    model.graph.output[0].name = "Z"
    _assert_a_fault_in_either_branch_is_found(model, branch)


@pytest.mark.parametrize("branch", ["then_branch", "else_branch"])
def test_points_in_tiles_are_checked_in_both_forms(branch, monkeypatch):
    """Symbolic points: the onnxruntime target's If takes tiles or one piece by the grid's
    points (``Plan.tiles_from``, 64 here). The check also runs the form the drawn grid did not
    take (its points tiled up to 64, or cut to one), so a fault in either branch is found."""
    for least in ("POINT_TILES_FROM", "CUBIC_TILES_FROM", "NEAREST_TILES_FROM"):
        monkeypatch.setattr(costs, least, 64)
    model = gridsample_model(["N", 3, "H", "W"], ["N", "h", "w", 2], "linear", "border", 0)
    _assert_a_fault_in_either_branch_is_found(model, branch)


def _assert_a_fault_in_either_branch_is_found(model: onnx.ModelProto, branch: str) -> None:
    """Lowered for onnxruntime, ``model``'s region holds one If; squaring ``branch``'s output
    must fail the check on the node."""
    lowered = lower(model, target="onnxruntime", lower_all=True)
    assert verify(model, lowered, samples=1).ok
    square_if_branch(lowered, branch)
    report = verify(model, lowered, samples=1)
    assert not report.ok and not report.nodes[0].ok, report.table()
