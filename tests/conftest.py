"""Model factories, input generators and oracles shared by the tests.

``gridsample_model`` (the one-node model factory) comes from the package. Oracles, in order of preference: onnxruntime's native kernel (4-D, 5-D non-cubic, float/double),
the ONNX reference evaluator (everything else, slow: keep shapes tiny), and
``gridsample_lower.check.reference`` only where the ONNX reference is known to be wrong (cubic + border,
integer X, size-1 axes under reflection); that kernel is itself checked in test_reference.py.
"""

from __future__ import annotations

import json
import math
import pathlib

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from onnxruntime.capi.onnxruntime_pybind11_state import Fail, RuntimeException

from gridsample_lower.check import reference
from gridsample_lower.check.tolerances import tolerance
from gridsample_lower.models import gridsample_model
from gridsample_lower.runtime import onnxruntime_runner
from gridsample_lower.spec import GridSampleSpec

# How onnxruntime refuses a GridSample its kernel lacks, when run (RuntimeException before 1.27).
ORT_REFUSAL = (Fail, RuntimeException)


def inspect_rows(stdout: str) -> list[dict]:
    """The GridSample records of ``inspect --json``'s document (every model's, in order)."""
    document = json.loads(stdout)
    return [row for model in document["models"] for row in model.get("gridsamples", [])]


def make_grid(rng, shape, *, far=False, dtype=np.float32):
    """Random grid in [-1.2, 1.2] with lattice points k/8 mixed in; ``far`` adds |g| up to 1e4."""
    grid = rng.uniform(-1.2, 1.2, size=shape)
    mask = rng.random(shape) < 0.3
    grid = np.where(mask, rng.integers(-8, 9, size=shape) / 8.0, grid)
    if far:
        far_values = rng.choice([-1e4, -517.25, -3.5, 2.75, 60.125, 9999.0], size=shape)
        grid = np.where(rng.random(shape) < 0.3, far_values, grid)
    return grid.astype(dtype)


def ort_outputs(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    """onnxruntime's outputs, one thread a session: pytest-xdist runs a worker on every core."""
    return onnxruntime_runner(model, threads=1)(feeds)


def one_piece_ops(model: onnx.ModelProto) -> list[str]:
    """The main graph's op types, an If of point tiles standing as its one-piece branch.

    Symbolic points on the onnxruntime target are lowered twice, in tiles and in one piece,
    an If picking by the points (``Plan.tiles_from``): the forms are the one piece's.
    """
    ops = []
    for node in model.graph.node:
        branches = {a.name: a.g for a in node.attribute if a.type == onnx.AttributeProto.GRAPH}
        then = branches.get("then_branch")
        if node.op_type == "If" and then and any(n.op_type == "Slice" for n in then.node):
            ops += [inner.op_type for inner in branches["else_branch"].node]
        else:
            ops.append(node.op_type)
    return ops


def run_ort(model: onnx.ModelProto, feeds: dict) -> np.ndarray:
    return ort_outputs(model, feeds)[0]


def run_onnx_reference(model: onnx.ModelProto, feeds: dict) -> np.ndarray:
    return ReferenceEvaluator(model).run(None, feeds)[0]


def spec_model(spec: GridSampleSpec, x: np.ndarray, grid: np.ndarray) -> onnx.ModelProto:
    """The one-node model of ``spec`` for these inputs' shapes and dtypes."""
    return gridsample_model(
        list(x.shape),
        list(grid.shape),
        spec.mode,
        spec.padding_mode,
        spec.align_corners,
        x_dtype=x.dtype,
        grid_dtype=grid.dtype,
    )


def oracle(spec: GridSampleSpec, x: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """The best independent reference for ``spec`` on these inputs (float32 or float64 x)."""
    model = spec_model(spec, x, grid)
    feeds = {"X": x, "grid": grid}
    native = spec.rank == 2 or (spec.rank == 3 and spec.mode != "cubic")
    if native and x.dtype == grid.dtype and x.dtype in (np.float32, np.float64):
        return run_ort(model, feeds)
    reference_is_wrong = (spec.mode == "cubic" and spec.padding_mode == "border") or (
        spec.padding_mode == "reflection" and 1 in x.shape[2:]
    )
    # The ONNX reference computes coordinates in float32 and integer weights for integer X.
    if reference_is_wrong or x.dtype != np.float32 or grid.dtype != np.float32:
        return reference.grid_sample(x, grid, spec.mode, spec.padding_mode, spec.align_corners)
    return run_onnx_reference(model, feeds)


def assert_close(actual, expected, mode, dtype=None):
    """Compare with the project's tolerance table (nearest: exact; NaN equals NaN)."""
    dtype = np.dtype(dtype or actual.dtype)
    atol, rtol = tolerance(dtype, mode)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    a, e = actual.astype(np.float64), expected.astype(np.float64)
    if atol == rtol == 0:
        same = (a == e) | (np.isnan(a) & np.isnan(e))
        assert same.all(), (
            f"{(~same).sum()} of {a.size} differ; first {a[~same][:5]} vs {e[~same][:5]}"
        )
        return
    np.testing.assert_allclose(a, e, atol=atol, rtol=rtol, equal_nan=True)


def spatial_shapes(rank: int, *, small: bool):
    """(input spatial, output spatial) sizes: tiny for the slow reference, H != W always."""
    sizes_in = [3, 4, 5, 6][:rank] if small else [5, 6, 7][:rank]
    sizes_out = [2, 3, 4][:rank] if small else [4, 5, 3][:rank]
    return sizes_in, sizes_out


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def numel(shape) -> int:
    return math.prod(shape)


# A model with weights, on disk: for model_io and the CLI's file-safety tests.
X_SHAPE, GRID_SHAPE = (1, 3, 16, 16), (1, 8, 8, 2)


def weighted_model(seed: int = 0) -> onnx.ModelProto:
    """GridSample(X0 * W, G): W (3 kB) and the grid G (512 B) are initializers."""
    rng = np.random.default_rng(seed)
    model = gridsample_model(list(X_SHAPE), list(GRID_SHAPE), "cubic", "border", 1)
    weights = rng.standard_normal(X_SHAPE).astype(np.float32)
    model.graph.initializer.extend(
        [
            numpy_helper.from_array(weights, "W"),
            numpy_helper.from_array(make_grid(rng, GRID_SHAPE), "G"),
        ]
    )
    model.graph.node.insert(0, helper.make_node("Mul", ["X0", "W"], ["X"]))
    model.graph.node[1].input[1] = "G"
    model.graph.input[0].name = "X0"
    del model.graph.input[1]
    return model


def save_external(model: onnx.ModelProto, path: pathlib.Path, location="weights.bin") -> None:
    onnx.save_model(model, path, save_as_external_data=True, location=location, size_threshold=0)


def run_path(path: pathlib.Path, x: np.ndarray) -> np.ndarray:
    """onnxruntime on the file itself: external data resolved as a user's runtime would."""
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return session.run(None, {"X0": x})[0]


def snapshot(directory: pathlib.Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


@pytest.fixture
def external(tmp_path) -> pathlib.Path:
    """A model whose weights live in ``weights.bin`` beside it."""
    path = tmp_path / "m.onnx"
    save_external(weighted_model(), path)
    return path


@pytest.fixture
def x(rng):
    return rng.standard_normal(X_SHAPE).astype(np.float32)


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


def needs_real_sizes() -> onnx.ModelProto:
    """A model whose own arithmetic breaks at some sizes: its grid is a pooled flow divided by
    (size - 1), infinite where the pooled size is 1 (an image of 8 to 15 pixels)."""
    nodes = [
        helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[8, 8], strides=[8, 8]),
        helper.make_node("Shape", ["p"], ["ps"]),
        helper.make_node("Slice", ["ps", "two", "four"], ["hw"]),
        helper.make_node("Cast", ["hw"], ["hwf"], to=1),
        helper.make_node("Sub", ["hwf", "one"], ["hm1"]),
        helper.make_node("Transpose", ["p"], ["pt"], perm=[0, 2, 3, 1]),
        helper.make_node("Div", ["pt", "hm1"], ["grid"]),
        helper.make_node("GridSample", ["p", "grid"], ["y"], name="warp", align_corners=1),
    ]
    constants = [
        onnx.numpy_helper.from_array(np.array([2]), "two"),
        onnx.numpy_helper.from_array(np.array([4]), "four"),
        onnx.numpy_helper.from_array(np.float32(1), "one"),
    ]
    graph = helper.make_graph(
        nodes,
        "needs_real_sizes",
        [helper.make_tensor_value_info("x", 1, ["N", 2, "H", "W"])],
        [helper.make_tensor_value_info("y", 1, None)],
        constants,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)], ir_version=9)


# Models in ONNX text with GridSample in If branches at any depth, a Loop body, a Scan body and a
# model-local function (its mode bound to a function attribute).
IF_LOOP = """
<ir_version: 9, opset_import: ["" : 20]>
g (float[2,3,5,6] X, float[2,4,7,2] grid, bool c, int64 trips) => (float[2,3,4,7] Y, float[2,3,4,7] L) {
  Y = If (c) <
    then_branch = t () => (float[2,3,4,7] a) { a = GridSample <mode="cubic"> (X, grid) },
    else_branch = e () => (float[2,3,4,7] b) {
      b = If (c) <
        then_branch = t2 () => (float[2,3,4,7] a2) { a2 = GridSample (X, grid) },
        else_branch = e2 () => (float[2,3,4,7] b2) {
          b2 = GridSample <mode="nearest", padding_mode="reflection", align_corners=1> (X, grid)
        }>
    }>
  init = GridSample <padding_mode="border"> (X, grid)
  keep_going = Constant <value = bool {1}> ()
  L = Loop (trips, keep_going, init) <body = body (int64 i, bool cond, float[2,3,4,7] acc)
        => (bool cond_out, float[2,3,4,7] acc_out) {
    cond_out = Identity (cond)
    s = GridSample <mode="linear", padding_mode="zeros"> (X, grid)
    acc_out = Add (acc, s)
  }>
}
"""

FUNCTION = """
<ir_version: 8, opset_import: ["" : 16, "local" : 1]>
g (float[2,3,5,6] X, float[2,4,7,2] grid) => (float[2,3,4,7] A, float[2,3,4,7] B, float[2,3,4,7] K) {
  A = local.Warp (X, grid)
  B = local.Warp <mode="nearest", align_corners=0> (X, grid)
  K = Relu (A)
}
<domain: "local", opset_import: ["" : 16]>
Warp <mode: string = "bicubic", align_corners: int = 1> (x, gr) => (y) {
  y = GridSample <mode: string = @mode, align_corners: int = @align_corners, padding_mode="border"> (x, gr)
}
"""

SCAN = """
<ir_version: 9, opset_import: ["" : 20]>
g (float[1,2,4,5] X, float[3,1,2,2,2] grids) => (float[3,1,2,2,2] out) {
  out = Scan <num_scan_inputs = 1, body = step (float[1,2,2,2] gr) => (float[1,2,2,2] y) {
    y = GridSample <mode="cubic", padding_mode="reflection"> (X, gr)
  }> (grids)
}
"""


def with_attributes(model: onnx.ModelProto, **attrs) -> onnx.ModelProto:
    (node,) = model.graph.node
    for attr in node.attribute:
        if attr.name in attrs:
            attr.CopyFrom(helper.make_attribute(attr.name, attrs[attr.name]))
    return model


def retyped(model: onnx.ModelProto, x=None, grid=None) -> onnx.ModelProto:
    if x is not None:
        model.graph.input[0].type.tensor_type.elem_type = x
        model.graph.output[0].type.tensor_type.elem_type = x
    if grid is not None:
        model.graph.input[1].type.tensor_type.elem_type = grid
    return model


def one_warp(x_shape=(1, 2, 4, 5), grid_shape=(1, 3, 3, 2), mode="linear"):
    return gridsample_model(list(x_shape), list(grid_shape), mode, name="warp9")


BAD_NODES = {
    "unknown mode": (with_attributes(one_warp(), mode="quintic"), "unknown mode 'quintic'"),
    "unknown padding": (
        with_attributes(one_warp(), padding_mode="wrap"),
        "unknown padding_mode 'wrap'",
    ),
    "grid rank": (one_warp(grid_shape=(1, 3, 3, 3)), "disagree on the spatial rank"),
    "X rank 2": (one_warp(x_shape=(1, 2), grid_shape=(1, 3, 1)), "X must have rank >= 3"),
    "integer grid": (
        retyped(one_warp(), grid=TensorProto.INT32),
        "grid must be a float tensor, not INT32",
    ),
    "string X": (retyped(one_warp(), x=TensorProto.STRING), "X of type STRING needs mode nearest"),
}


def after_gridsample(*tail: onnx.NodeProto, mode: str = "linear") -> onnx.ModelProto:
    """X (1, 3, 24, 20) sampled on a (1, 16, 18) grid (zeros padding), then ``tail`` (Y -> Z)."""
    nodes = [
        helper.make_node("GridSample", ["X", "grid"], ["Y"], name="warp", mode=mode),
        *tail,
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [
            helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 3, 24, 20]),
            helper.make_tensor_value_info("grid", TensorProto.FLOAT, [1, 16, 18, 2]),
        ],
        [helper.make_tensor_value_info("Z", TensorProto.FLOAT, [1, 3, 16, 18])],
        [helper.make_tensor("scale", TensorProto.FLOAT, [], [1e6])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    model.ir_version = 10
    return model


def sensitive_to_rounding() -> onnx.ModelProto:
    """Z = sin(1e6 Y): a last-bit change of Y (|Y| ~ 1) moves Z by ~0.1."""
    return after_gridsample(
        helper.make_node("Mul", ["Y", "scale"], ["scaled"]),
        helper.make_node("Sin", ["scaled"], ["Z"]),
    )


def square_if_branch(model: onnx.ModelProto, branch: str) -> None:
    """Fault ``model``'s one If: its ``branch`` ("then_branch", "else_branch") squares its output.

    A check must find it whichever form its inputs take (the other form is run too).
    """
    (choice,) = [node for node in model.graph.node if node.op_type == "If"]
    body = next(a.g for a in choice.attribute if a.name == branch)
    output = body.output[0].name
    body.node.append(helper.make_node("Mul", [output, output], [output + "_squared"]))
    body.output[0].name = output + "_squared"
