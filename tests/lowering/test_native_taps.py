"""The mnn and ncnn targets' tap readers: their own GridSample where it is right, nothing else.

MNN and ncnn themselves run in bench/mnn_ncnn.py (their own venv); here the lowered graphs run
in onnxruntime against its kernel or the numpy reference, and their structure is checked
against what pnnx maps to ncnn layers (written out from pnnx 20261020's conversions, not read
from targets.py).
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from conftest import assert_close, gridsample_model, make_grid, run_ort

from gridsample_lower import UnsupportedGridSample, lower, supported_specs
from gridsample_lower.check.reference import grid_sample
from gridsample_lower.lowering.costs import SAMPLES_MAX_SIZE
from gridsample_lower.lowering.plan import plan_of
from gridsample_lower.lowering.targets import TARGETS
from gridsample_lower.spec import GridSampleSpec

# What the ncnn lowering may contain: each converts to an ncnn layer that computes it right
# (UnaryOp, BinaryOp, Clip, MatMul, Reshape, MemoryData, GridSample).
NCNN_OPS = {"Abs", "Add", "Clip", "Constant", "Div", "Floor", "GridSample", "MatMul", "Max",
            "Min", "Mul", "Reshape", "Sub"}  # fmt: skip
SIZES_IN, SIZES_OUT = [7, 5, 6], [3, 4, 2]


def _model(spec, channels=2, batch=1):
    r = spec.rank
    x_shape, grid_shape = [batch, channels, *SIZES_IN[:r]], [batch, *SIZES_OUT[:r], r]
    return gridsample_model(x_shape, grid_shape, spec.mode, spec.padding_mode, spec.align_corners)


@pytest.mark.parametrize("spec", supported_specs(), ids=lambda s: s.label.replace(" ", "-"))
def test_ncnn_graph_is_what_pnnx_maps_and_at_most_4d(spec):
    """Every value is at most 4-D (ncnn's Mat holds 4 dims; pnnx drops the batch of the inputs
    only), but the node's own X, grid and Y at rank 3; only ops pnnx maps right."""
    for channels, batch in ((2, 1), (33, 2)):
        model = _model(spec, channels, batch=batch)
        lowered = lower(model, target="ncnn", lower_all=True)
        assert {n.op_type for n in lowered.graph.node} <= NCNN_OPS
        inferred = onnx.shape_inference.infer_shapes(lowered, strict_mode=True)
        graph = inferred.graph
        own = {v.name for v in [*graph.input, *graph.output]}
        constants = {o for n in graph.node if n.op_type == "Constant" for o in n.output}
        for value in [*graph.value_info, *graph.input, *graph.output]:
            dims = value.type.tensor_type.shape.dim
            assert len(dims) <= (5 if value.name in own else 4), (value.name, len(dims))
            if value.name not in constants:  # pnnx takes axis 0 for the batch, and drops it
                assert dims[0].dim_value == batch, (value.name, dims)
        for node in graph.node:
            if node.op_type == "GridSample":
                assert node.input[0] == "X" or spec.rank != 2, "the 2-D reader reads X itself"


@pytest.mark.parametrize("target", ["mnn", "ncnn"])
@pytest.mark.parametrize("align", [0, 1])
def test_nearest_ties_go_to_even(target, align, rng):
    """Every point a tie (MNN's and ncnn's own nearest rounds them away from zero)."""
    size = 7
    k = np.arange(-3, 2 * size + 3) / 2.0
    g = k * 2 / (size - 1) - 1 if align else (2 * k + 1) / size - 1
    grid = np.stack(np.meshgrid(g, g[::2]), axis=-1)[None].astype(np.float32)
    x = rng.standard_normal((1, 3, size, size)).astype(np.float32)
    for padding in ("zeros", "border", "reflection"):
        model = gridsample_model(list(x.shape), list(grid.shape), "nearest", padding, align)
        lowered = lower(model, target=target, lower_all=True)
        feeds = {"X": x, "grid": grid}
        assert_close(run_ort(lowered, feeds), run_ort(model, feeds), "nearest")


@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [0, 1])
@pytest.mark.parametrize("size", [SAMPLES_MAX_SIZE, SAMPLES_MAX_SIZE + 1])
def test_cubic_samples_up_to_their_size_then_centres(size, padding, align, rng):
    """Cubic's linear samples are normalized again for the kernel (about L * 2**-24 pixels of
    position): up to SAMPLES_MAX_SIZE they stay within float32's tolerance; past it every tap
    is read whole at its centre, exactly."""
    x = rng.standard_normal((1, 2, size - 7, size)).astype(np.float32)
    grid = rng.uniform(-1.1, 1.1, (1, 48, 64, 2)).astype(np.float32)
    model = gridsample_model(list(x.shape), list(grid.shape), "cubic", padding, align)
    lowered = lower(model, target="mnn")
    plan = plan_of(GridSampleSpec(2, "cubic", padding, align), x.shape, grid.shape, TARGETS["mnn"])
    assert plan.reader == ("samples" if size <= SAMPLES_MAX_SIZE else "centres")
    feeds = {"X": x, "grid": grid}
    assert_close(run_ort(lowered, feeds), run_ort(model, feeds), "cubic")


def test_ncnn_refuses_what_its_gridsample_cannot_read():
    spec = supported_specs(ranks=(2,))[0]
    target = TARGETS["ncnn"]
    assert "symbolic spatial sizes" in plan_of(spec, [1, 2, "H", "W"], [1, 3, 4, 2], target).refusal
    int_spec = type(spec)(2, "nearest", "zeros", 0, x_dtype=ir.DataType.INT32)
    assert "int32 X" in plan_of(int_spec, [1, 2, 5, 6], [1, 3, 4, 2], target).refusal
    rank4 = supported_specs(ranks=(4,))[0]
    refusal = plan_of(rank4, [1, 2, 3, 3, 3, 3], [1, 2, 2, 2, 2, 4], target).refusal
    assert "rank 4" in refusal
    with pytest.raises(UnsupportedGridSample, match="rank 4"):
        lower(gridsample_model([1, 2, 3, 3, 3, 3], [1, 2, 2, 2, 2, 4], "linear", "zeros", 0),
              target="ncnn")  # fmt: skip


def test_mnn_keeps_what_it_computes_right_and_reads_the_rest():
    kept = [s.label for s in supported_specs(ranks=(1, 2, 3))
            if TARGETS["mnn"].keeps(s, None)]  # fmt: skip
    assert all(
        ("linear zeros" in k or "linear border" in k) and not k.startswith("r1") for k in kept
    )
    assert len(kept) == 8  # 2-D and 3-D, two paddings, two align_corners


def test_readers_are_lowered_again_by_other_targets(rng):
    """The readers carry no mark into the file: lowering the result for another target lowers
    them too, and the whole still matches."""
    spec = next(s for s in supported_specs(ranks=(2,)) if s.mode == "cubic")
    model = _model(spec, batch=2)
    for_mnn = lower(model, target="mnn")
    assert all(not n.metadata_props for n in for_mnn.graph.node)
    generic = lower(for_mnn)
    assert not any(n.op_type == "GridSample" for n in generic.graph.node)
    x = rng.standard_normal((2, 2, 7, 5)).astype(np.float32)
    grid = make_grid(rng, (2, 3, 4, 2), far=True)
    expected = grid_sample(x, grid, spec.mode, spec.padding_mode, spec.align_corners)
    assert_close(run_ort(generic, {"X": x, "grid": grid}), expected.astype(np.float32), "cubic")


@pytest.mark.parametrize("target", ["mnn", "ncnn"])
@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
def test_readers_are_spelled_for_the_models_opset(target, mode, rng):
    """A GridSample-16 model (bilinear, bicubic) gets readers it can hold: onnxruntime's kernel
    refuses ``linear`` at opsets 16-19 (TorchScript's GLM-4V embedding at opset 17 did)."""
    model = gridsample_model([1, 2, 7, 5], [1, 3, 4, 2], mode, "reflection", 0, opset=17)
    lowered = lower(model, target=target, lower_all=True)
    assert "GridSample" in {n.op_type for n in lowered.graph.node}  # the readers
    x = rng.standard_normal((1, 2, 7, 5)).astype(np.float32)
    grid = make_grid(rng, (1, 3, 4, 2))
    feeds = {"X": x, "grid": grid}
    assert_close(run_ort(lowered, feeds), run_ort(model, feeds), mode)
