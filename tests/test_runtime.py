"""What onnxruntime runs, found by trying its kernel, and how it runs the types it lacks."""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import onnx_ir as ir
import onnxruntime as ort
import pytest
from conftest import make_grid, ort_outputs

from gridsample_lower.models import gridsample_model
from gridsample_lower.runtime import onnxruntime_runs
from gridsample_lower.spec import MODES, GridSampleSpec

D = ir.DataType
# onnxruntime's CPU GridSample, as its kernel registers it: float and double X with a grid of the
# same type, 4-D and 5-D X, cubic 4-D only; float16 runs through the float32 kernel (Casts).
KERNEL_RUNS = {
    (rank, mode, x, grid)
    for rank, mode in [(2, "linear"), (2, "nearest"), (2, "cubic"), (3, "linear"), (3, "nearest")]
    for x, grid in [(D.FLOAT, D.FLOAT), (D.DOUBLE, D.DOUBLE), (D.FLOAT16, D.FLOAT16)]
}
TYPES = [
    (D.FLOAT, D.FLOAT),
    (D.DOUBLE, D.DOUBLE),
    (D.FLOAT16, D.FLOAT16),
    (D.BFLOAT16, D.BFLOAT16),
    (D.UINT8, D.FLOAT),
    (D.INT64, D.FLOAT),
    (D.FLOAT, D.DOUBLE),
]


@pytest.mark.parametrize("rank", [1, 2, 3, 4])
@pytest.mark.parametrize("mode", MODES)
def test_onnxruntime_runs_what_its_kernel_registers(rank, mode):
    for x, grid in TYPES:
        spec = GridSampleSpec(rank, mode, "zeros", 0, x, grid)
        assert onnxruntime_runs(spec) == ((rank, mode, x, grid) in KERNEL_RUNS), (spec, x, grid)


@pytest.mark.parametrize(
    ("mode", "padding", "align"), itertools.product(MODES, ["zeros", "reflection"], [0, 1])
)
def test_float16_runs_as_the_float32_kernel_rounded(mode, padding, align, rng):
    """What the oracle assumes for float16 (reference.coordinate_dtype), and what the runner
    spells out: onnxruntime itself, given the float16 model, runs the float32 kernel on the
    values widened and rounds its result to float16."""
    x = rng.standard_normal((2, 3, 7, 10)).astype(np.float16)
    grid = make_grid(rng, (2, 5, 6, 2), dtype=np.float16)
    half = gridsample_model(
        [2, 3, 7, 10], [2, 5, 6, 2], mode, padding, align, x_dtype=np.float16, grid_dtype=np.float16
    )
    single = gridsample_model([2, 3, 7, 10], [2, 5, 6, 2], mode, padding, align)
    session = ort.InferenceSession(half.SerializeToString(), providers=["CPUExecutionProvider"])
    (y,) = session.run(None, {"X": x, "grid": grid})  # onnxruntime as it is, not our runner
    (y32,) = ort_outputs(single, {"X": x.astype(np.float32), "grid": grid.astype(np.float32)})
    assert y.dtype == np.float16 and np.array_equal(y, y32.astype(np.float16), equal_nan=True)


def test_bfloat16_inputs_and_outputs_pass_as_float32():
    """onnxruntime's Python API has no bfloat16: the runner exchanges them as float32, exactly."""
    from onnx import TensorProto, helper

    node = helper.make_node("Identity", ["a"], ["b"])
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("a", TensorProto.BFLOAT16, [3])],
        [helper.make_tensor_value_info("b", TensorProto.BFLOAT16, [3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)], ir_version=9)
    a = np.array([1.5, -3.25, 1e30], dtype=ml_dtypes.bfloat16)
    (b,) = ort_outputs(model, {"a": a})
    assert b.dtype == ml_dtypes.bfloat16 and np.array_equal(a, b)


def test_a_grid_the_model_rounds_to_float16_is_sampled_rounded(rng):
    """onnxruntime drops the model's Cast to float16 with the Cast to float32 it inserts before
    its float32 kernel (a float16 STN from dynamo: 0.0137 apart); the runner spells its Casts
    out, so the model is run as written, and the check no longer cries wolf on it."""
    from onnx import TensorProto, helper

    from gridsample_lower import lower, verify

    nodes = [
        helper.make_node("Cast", ["g32"], ["g16"], to=TensorProto.FLOAT16),
        helper.make_node("GridSample", ["x", "g16"], ["y"], name="gs"),
    ]
    graph = helper.make_graph(
        nodes,
        "half_grid",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT16, [1, 2, 28, 28]),
            helper.make_tensor_value_info("g32", TensorProto.FLOAT, [1, 28, 28, 2]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [1, 2, 28, 28])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)], ir_version=9)
    x = rng.standard_normal((1, 2, 28, 28)).astype(np.float16)
    g32 = rng.uniform(-1, 1, (1, 28, 28, 2)).astype(np.float32)
    single = gridsample_model([1, 2, 28, 28], [1, 28, 28, 2])
    rounded = g32.astype(np.float16).astype(np.float32)
    (expected,) = ort_outputs(single, {"X": x.astype(np.float32), "grid": rounded})
    (y,) = ort_outputs(model, {"x": x, "g32": g32})
    np.testing.assert_array_equal(y, expected.astype(np.float16))
    assert verify(model, lower(model)).ok
