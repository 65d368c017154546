"""Time ``verify`` on 20 GridSample nodes on 64x64 maps, and where onnx.reference is needed.

Cases: the chain in float32 (onnxruntime runs the reference), the same chain in float16 and a
3-D cubic node (both need ``onnx.reference``). For each: the time to lower, the time of
``verify`` (whole model plus every node alone, ``--samples`` input sets), and the time of one
run of the reference model in onnxruntime and in ``onnx.reference`` (with our GridSample kernel).
Run: ``python bench/verify_speed.py [--samples 3]``; prints a markdown table.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import onnx
from onnx import helper

from gridsample_lower import lower
from gridsample_lower.verify import verify
from gridsample_lower.verify_nodes import model_runner

MODES = ["linear", "nearest", "cubic"]
PADDINGS = ["zeros", "border", "reflection"]


def chain(elem_type: int, nodes: int = 20, size: int = 64, channels: int = 4) -> onnx.ModelProto:
    """``nodes`` GridSamples in a chain, each warping the last one's output by one shared grid."""
    graph_nodes, previous = [], "X"
    for k in range(nodes):
        attrs = {"mode": MODES[k % 3], "padding_mode": PADDINGS[k % 3], "align_corners": k % 2}
        graph_nodes.append(
            helper.make_node("GridSample", [previous, "grid"], [f"y{k}"], name=f"warp{k}", **attrs)
        )
        previous = f"y{k}"
    x_shape, grid_shape = [1, channels, size, size], [1, size, size, 2]
    return _model(graph_nodes, elem_type, x_shape, grid_shape, previous)


def cubic_3d(size: int = 16, channels: int = 4) -> onnx.ModelProto:
    node = helper.make_node("GridSample", ["X", "grid"], ["Y"], name="warp3d", mode="cubic")
    x_shape, grid_shape = [1, channels, size, size, size], [1, size, size, size, 3]
    return _model([node], onnx.TensorProto.FLOAT, x_shape, grid_shape, "Y")


def _model(nodes, elem_type, x_shape, grid_shape, output) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "bench",
        [
            helper.make_tensor_value_info("X", elem_type, x_shape),
            helper.make_tensor_value_info("grid", elem_type, grid_shape),
        ],
        [helper.make_tensor_value_info(output, elem_type, None)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)], ir_version=9)


def measure(label: str, model: onnx.ModelProto, samples: int) -> dict[str, str]:
    start = time.perf_counter()
    lowered = lower(model)
    lowering = time.perf_counter() - start
    start = time.perf_counter()
    report = verify(model, lowered, samples=samples)
    verifying = time.perf_counter() - start
    assert report.ok, report.table()
    dtype = onnx.helper.tensor_dtype_to_np_dtype(model.graph.input[0].type.tensor_type.elem_type)
    rng = np.random.default_rng(0)
    feeds = {
        "X": rng.standard_normal(_shape(model, 0)).astype(dtype),
        "grid": rng.uniform(-1.25, 1.25, _shape(model, 1)).astype(dtype),
    }
    return {
        "case": label,
        "oracle": report.oracle,
        "lower": f"{lowering:.2f} s",
        f"verify ({samples} samples)": f"{verifying:.2f} s",
        "one run, onnxruntime": (
            _one_run(model, feeds, native=True) if report.oracle == "onnxruntime" else "-"
        ),
        "one run, onnx.reference": _one_run(model, feeds, native=False),
    }


def _shape(model: onnx.ModelProto, k: int) -> list[int]:
    return [d.dim_value for d in model.graph.input[k].type.tensor_type.shape.dim]


def _one_run(model: onnx.ModelProto, feeds: dict, *, native: bool) -> str:
    run = model_runner(model, native=native)[0]
    start = time.perf_counter()
    run(feeds)
    return f"{time.perf_counter() - start:.3f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=3)
    args = parser.parse_args()
    rows = [
        measure("20 nodes, 1x4x64x64, float32", chain(onnx.TensorProto.FLOAT), args.samples),
        measure("20 nodes, 1x4x64x64, float16", chain(onnx.TensorProto.FLOAT16), args.samples),
        measure("3-D cubic, 1x4x16x16x16", cubic_3d(), args.samples),
    ]
    columns = list(rows[0])
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for row in rows:
        print("| " + " | ".join(row[c] for c in columns) + " |")


if __name__ == "__main__":
    main()
