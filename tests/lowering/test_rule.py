"""The onnxscript rule on its own: it infers the types it needs, and says when it declines."""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import pytest
from conftest import assert_close, make_grid, run_ort
from onnxscript import rewriter

from gridsample_lower import gridsample_rule
from gridsample_lower.check.reference import grid_sample
from gridsample_lower.models import gridsample_model

EXAMPLE = "testdata/stn.onnx"


def _gridsamples(model: onnx.ModelProto) -> int:
    return sum(node.op_type == "GridSample" for node in model.graph.node)


def test_the_bundled_example_whose_grid_comes_untyped_from_affinegrid(rng):
    """README's rule example: the grid is AffineGrid's output, with no type until inferred."""
    import pathlib

    model = onnx.load(pathlib.Path(__file__).parents[2] / EXAMPLE)
    lowered = rewriter.rewrite(model, pattern_rewrite_rules=[gridsample_rule()])
    assert _gridsamples(model) == 2 and _gridsamples(lowered) == 0
    feeds = {"image": rng.standard_normal((2, 3, 32, 32)).astype(np.float32)}
    assert_close(run_ort(lowered, feeds), run_ort(model, feeds), "cubic")


def test_both_of_two_chained_nodes(rng):
    """The second node reads the first's output, which carries no type of its own."""
    model = gridsample_model([1, 3, 5, 6], [1, 5, 6, 2], "linear", "zeros", 0)
    second = onnx.helper.make_node("GridSample", ["Y", "grid"], ["Y2"], mode="cubic", name="gs2")
    model.graph.node.append(second)
    model.graph.output[0].name = "Y2"
    lowered = rewriter.rewrite(model, pattern_rewrite_rules=[gridsample_rule()])
    assert _gridsamples(lowered) == 0
    x = rng.standard_normal((1, 3, 5, 6)).astype(np.float32)
    grid = make_grid(rng, (1, 5, 6, 2))
    first = grid_sample(x, grid, "linear", "zeros", 0)
    expected = grid_sample(first, grid, "cubic", "zeros", 0).astype(np.float32)
    assert_close(run_ort(lowered, {"X": x, "grid": grid}), expected, "cubic")


def test_symbolic_sizes_fenced_in_a_loop_for_openvino_still_run(rng):
    """The openvino target runs symbolic sizes in a Loop run once, whose condition is empty:
    onnxscript's rewriter dropped that trailing input, and onnxruntime refused the Loop."""
    model = gridsample_model(["N", 4, "H", "W"], ["N", "h", "w", 2], "linear", "zeros", 0)
    lowered = rewriter.rewrite(model, pattern_rewrite_rules=[gridsample_rule(target="openvino")])
    assert [len(n.input) for n in lowered.graph.node if n.op_type == "Loop"] == [2]
    x = rng.standard_normal((2, 4, 5, 6)).astype(np.float32)
    grid = make_grid(rng, (2, 3, 7, 2), far=True)
    expected = grid_sample(x, grid, "linear", "zeros", 0).astype(np.float32)
    assert_close(run_ort(lowered, {"X": x, "grid": grid}), expected, "linear")


def test_a_node_it_cannot_lower_is_left_with_a_warning():
    model = gridsample_model([1, 3, 5, 6], [1, 4, 3, 2], "linear", "zeros", 0)
    (mode,) = [a for a in model.graph.node[0].attribute if a.name == "mode"]
    mode.s = b"lanczos"
    with pytest.warns(
        UserWarning, match="gridsample_rule left GridSample 'gs': unknown mode 'lanczos'"
    ):
        kept = rewriter.rewrite(model, pattern_rewrite_rules=[gridsample_rule()])
    assert _gridsamples(kept) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warn=False: quiet
        rewriter.rewrite(model, pattern_rewrite_rules=[gridsample_rule(warn=False)])
