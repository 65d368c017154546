"""An output off past its tolerance matches where the original's own rounding moves it as far.

A model can turn the last-bit differences of a lowered GridSample into a larger error downstream
(RAFT at its deployment size): every GridSample matches alone, and the original's outputs move
as far when each GridSample's output moves at random by as much as its lowered form differed.
A difference the model does not make of its own rounding still fails.
"""

from __future__ import annotations

import pathlib

import numpy as np
import onnx
from conftest import after_gridsample, make_grid, run_ort, sensitive_to_rounding
from onnx import TensorProto, helper

from gridsample_lower import lower, verify
from gridsample_lower.check.spread import perturbed
from gridsample_lower.check.tolerances import SPREAD_FACTOR

CORPUS = pathlib.Path(__file__).parents[2] / "testdata" / "corpus"


def _lowered(model: onnx.ModelProto) -> onnx.ModelProto:
    """The openvino target's lowering: its linear weights (``hi + lo``) differ from
    onnxruntime's kernel in the last bit at a few values (the others match it bit for bit)."""
    return lower(model, target="openvino", lower_all=True)


def _changed(model: onnx.ModelProto, op: str, value: float) -> onnx.ModelProto:
    """``_lowered(model)`` with its output Z passed through ``op`` with ``value``."""
    changed = _lowered(model)
    (last,) = [n for n in changed.graph.node if "Z" in n.output]
    last.output[0] = "Z_exact"
    changed.graph.initializer.append(helper.make_tensor("off", TensorProto.FLOAT, [], [value]))
    changed.graph.node.append(helper.make_node(op, ["Z_exact", "off"], ["Z"]))
    return changed


def test_an_output_the_model_makes_sensitive_matches_within_the_originals_spread():
    model = sensitive_to_rounding()
    report = verify(model, _lowered(model), samples=2)
    (output,), (node,) = report.outputs, report.nodes
    assert node.ok and 0 < node.max_abs < 1e-5, report.table()  # a last-bit difference
    assert output.mismatches and output.max_abs > 1e-3, report.table()  # past the table
    assert output.within_spread and report.ok, report.table()
    assert output.max_abs <= SPREAD_FACTOR * output.spread
    assert "'Z' within the original's own spread" in report.summary()
    assert any(
        "within 2x how far the original's own output moves" in n for n in report.note_lines()
    )


def test_a_difference_the_model_does_not_make_of_its_rounding_still_fails():
    """The GridSample's region is as lowered, so it matches alone; the output is 0.1% off."""
    model = after_gridsample(helper.make_node("Identity", ["Y"], ["Z"]))
    report = verify(model, _changed(model, "Mul", 1.001), samples=1)
    (output,), (node,) = report.outputs, report.nodes
    assert node.ok, report.table()
    assert not report.ok and not output.within_spread and output.unexplained == 1
    assert 0 < SPREAD_FACTOR * output.spread < output.max_abs, report.table()
    assert "past 2x the original's own spread" in report.summary()


def test_a_changed_output_of_an_exact_gridsample_is_not_excused():
    """Nearest matches alone exactly: the original does not move, and any difference fails."""
    model = after_gridsample(helper.make_node("Identity", ["Y"], ["Z"]), mode="nearest")
    report = verify(model, _changed(model, "Add", 1e-3), samples=1)
    assert report.nodes[0].max_abs == 0 and not report.ok, report.table()
    assert report.outputs[0].spread == 0 and report.outputs[0].unexplained == 1


def test_the_moved_original_moves_each_gridsample_by_at_most_its_scale(rng):
    model = after_gridsample(helper.make_node("Identity", ["Y"], ["Z"]))
    moved = perturbed(model, {"warp": "scale_warp"})
    feeds = {
        "X": rng.standard_normal((1, 3, 24, 20)).astype(np.float32),
        "grid": make_grid(rng, (1, 16, 18, 2)),
    }
    exact = run_ort(model, feeds)
    still = run_ort(moved, {**feeds, "scale_warp": np.array(0.0, np.float32)})
    np.testing.assert_array_equal(still, exact)
    shifted = run_ort(moved, {**feeds, "scale_warp": np.array(1e-3, np.float32)})
    assert 1e-4 < np.abs(shifted - exact).max() <= 1e-3 * (1 + 1e-6)


def test_raft_at_its_deployment_size_matches_within_the_originals_spread():
    """RAFT-small (the corpus' TorchScript export) on 440x1024 frames (Sintel's, padded): its
    flow, refined through eight lookups, is off past the table at a few values near 0, by no
    more than the original's own spread there (every lookup matches alone)."""
    model = onnx.load(CORPUS / "raft_small_torchscript.onnx")
    dims = {"batch": 1, "height": 440, "width": 1024}
    report = verify(model, lower(model), samples=1, dims=dims)
    (flow,) = report.outputs
    assert all(node.ok for node in report.nodes) and report.ok, report.table()
    assert flow.mismatches and flow.within_spread, report.table()


def test_a_tolerance_given_for_an_output_is_kept():
    """The caller's word on an output stands: no spread excuses it."""
    model = sensitive_to_rounding()
    report = verify(model, _lowered(model), samples=2, atol={"Z": 1e-3}, rtol={"Z": 0.0})
    (output,) = report.outputs
    assert output.mismatches and not report.ok and output.spread == 0, report.table()


IN_A_BRANCH = """
<ir_version: 10, opset_import: ["" : 20]>
g (float[1,3,24,20] X, float[1,16,18,2] grid, bool c) => (float[1,3,16,18] Z) {
  Y = If (c) <
    then_branch = t () => (float[1,3,16,18] a) { a = GridSample <mode="linear"> (X, grid) },
    else_branch = e () => (float[1,3,16,18] b) { b = GridSample <mode="linear"> (X, grid) }>
  scale = Constant <value = float {1000000}> ()
  scaled = Mul (Y, scale)
  Z = Sin (scaled)
}
"""


def test_gridsamples_in_a_branch_move_too():
    """sin(1e6 y) of a GridSample in an If's branch: each branch's GridSample is checked alone on
    synthetic inputs, and moved by that error in the original's run."""
    model = onnx.parser.parse_model(IN_A_BRANCH)
    report = verify(model, _lowered(model), samples=2, inputs={"c": np.array(True)})
    (output,) = report.outputs
    assert all(node.ok and node.checked for node in report.nodes), report.table()
    assert output.mismatches and output.within_spread and report.ok, report.table()
