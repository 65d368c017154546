"""A second runtime: OpenVINO runs what gridsample-lower writes, and refuses what it replaces.

OpenVINO runs GridSample only for 4-D inputs; after lowering, 5-D and 3-D models run there
too and match the reference. With --target openvino the 4-D nodes stay native.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_close, gridsample_model, make_grid

from gridsample_lower import lower, supported_specs
from gridsample_lower.check.reference import grid_sample

ov = pytest.importorskip("openvino")


def _compile(model):
    core = ov.Core()
    return core.compile_model(core.read_model(model.SerializeToString(), b""), "CPU")


@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
@pytest.mark.parametrize(
    "shape", [((1, 3, 4, 5, 6), (1, 2, 3, 4, 3)), ((2, 3, 7), (2, 5, 1))], ids=["5-D", "3-D"]
)
def test_models_openvino_refuses_run_after_lowering(mode, shape, rng):
    x_shape, grid_shape = shape
    model = gridsample_model(list(x_shape), list(grid_shape), mode, "reflection", 1)
    # OpenVINO's ONNX frontend refuses the node while reading the model (op/grid_sample.cpp)
    # and raises a plain RuntimeError naming the check.
    refusal = rf"GridSample is only supported for 4D input tensors\. Got rank: {len(x_shape)}\b"
    with pytest.raises(RuntimeError, match=refusal):
        _compile(model)
    compiled = _compile(lower(model, target="openvino"))
    x = rng.standard_normal(x_shape).astype(np.float32)
    grid = make_grid(rng, grid_shape, far=True)
    y = compiled({"X": x, "grid": grid})[compiled.outputs[0]]
    assert_close(y, grid_sample(x, grid, mode, "reflection", 1).astype(np.float32), mode)


def test_openvino_target_keeps_native_4d_nodes(rng):
    model = gridsample_model([2, 3, 5, 6], [2, 4, 3, 2], "cubic", "border", 0)
    kept = lower(model, target="openvino")
    assert [n.op_type for n in kept.graph.node] == ["GridSample"]
    lowered = lower(model, target="openvino", lower_all=True)
    x = rng.standard_normal((2, 3, 5, 6)).astype(np.float32)
    grid = make_grid(rng, (2, 4, 3, 2))
    expected = grid_sample(x, grid, "cubic", "border", 0).astype(np.float32)
    for candidate in (kept, lowered):
        compiled = _compile(candidate)
        assert_close(compiled({"X": x, "grid": grid})[compiled.outputs[0]], expected, "cubic")


@pytest.mark.parametrize(
    ("x_dtype", "grid_dtype", "kept"),
    [
        (np.float32, np.float64, True),  # TorchScript's Deformable DETR and Mask2Former
        (np.float16, np.float64, True),
        (np.float64, np.float64, False),  # OpenVINO computes it in float32: lowered
    ],
)
def test_openvino_target_keeps_a_double_grid_it_runs(x_dtype, grid_dtype, kept, rng):
    """OpenVINO runs float X with a double grid, which onnxruntime cannot: kept native."""
    model = gridsample_model(
        [1, 3, 7, 9], [1, 5, 4, 2], "linear", "zeros", 0, x_dtype=x_dtype, grid_dtype=grid_dtype
    )
    result = lower(model, target="openvino")
    assert ([n.op_type for n in result.graph.node] == ["GridSample"]) == kept
    x = rng.standard_normal((1, 3, 7, 9)).astype(x_dtype)
    grid = make_grid(rng, (1, 5, 4, 2), dtype=grid_dtype)
    compiled = ov.Core().compile_model(
        ov.Core().read_model(result.SerializeToString(), b""),
        "CPU",
        {"INFERENCE_PRECISION_HINT": "f32"},
    )
    expected = grid_sample(x.astype(np.float64), grid.astype(np.float64), "linear", "zeros", 0)
    actual = compiled({"X": x, "grid": grid})[compiled.outputs[0]]
    # OpenVINO's CPU plugin computes double in float32, lowered or not: float32's tolerance.
    tolerance_type = np.float32 if x_dtype == np.float64 else x_dtype
    assert_close(actual.astype(tolerance_type), expected.astype(tolerance_type), "linear")


@pytest.mark.parametrize("target", ["generic", "openvino"])
@pytest.mark.parametrize(
    ("x_shape", "grid_shape", "mode"),
    [((1, 32, 6, 6, 6), (1, 8, 8, 8, 3), "linear"), ((1, 16, 8, 8), (1, 16, 16, 2), "cubic")],
    ids=["3-D-linear-32ch", "2-D-cubic-16ch"],
)
def test_many_taps_and_channels_stay_exact_at_openvinos_default_precision(
    target, x_shape, grid_shape, mode, rng
):
    """OpenVINO's CPU plugin runs MatMul in bfloat16 where the CPU has it (its default
    precision hint): a MatMul summing the taps erred by 5e-2 here. These targets sum them with
    the Mul and Add chain, which it keeps in float32."""
    model = gridsample_model(list(x_shape), list(grid_shape), mode, "zeros", 0)
    lowered = lower(model, target=target, lower_all=True)
    assert "MatMul" not in {n.op_type for n in lowered.graph.node}
    compiled = _compile(lowered)
    x = rng.standard_normal(x_shape).astype(np.float32)
    grid = make_grid(rng, grid_shape)
    y = compiled({"X": x, "grid": grid})[compiled.outputs[0]]
    assert_close(y, grid_sample(x, grid, mode, "zeros", 0).astype(np.float32), mode)


@pytest.mark.parametrize("spec", supported_specs(), ids=lambda s: s.label.replace(" ", "-"))
def test_every_configuration_matches_on_openvino(spec, rng):
    """Every configuration, with few channels (GatherElements) and many (channels-last rows), in
    float32 and float16, lowered for OpenVINO and run there at its default precision."""
    r = spec.rank
    for channels, dtype in [(3, np.float32), (40, np.float32), (3, np.float16), (40, np.float16)]:
        x_shape = [2, channels, *[6, 5, 4][:r]]
        grid_shape = [2, *([9, 9, 7][:r] if channels > 3 else [3, 4, 2][:r]), r]
        x = rng.standard_normal(x_shape).astype(dtype)
        grid = make_grid(rng, grid_shape, far=True, dtype=dtype)
        model = gridsample_model(
            x_shape, grid_shape, spec.mode, spec.padding_mode, spec.align_corners,
            x_dtype=dtype, grid_dtype=dtype,
        )  # fmt: skip
        compiled = _compile(lower(model, target="openvino", lower_all=True))
        y = compiled({"X": x, "grid": grid})[compiled.outputs[0]]
        args = (spec.mode, spec.padding_mode, spec.align_corners)
        expected = grid_sample(x.astype(np.float64), grid.astype(np.float64), *args)
        assert_close(y, expected.astype(dtype), spec.mode, dtype)
