"""Time the conversion itself: lowering a model with many GridSample nodes.

Run: ``python bench/conversion.py [--nodes 500]``. Also reports the model size before and after,
which must not depend on the tensors' sizes (no per-element tables).
"""

from __future__ import annotations

import argparse
import time

import onnx
from onnx import helper

from gridsample_lower import lower


def chain(nodes: int, size: int) -> onnx.ModelProto:
    """``nodes`` GridSamples in a chain, cycling through modes and paddings."""
    modes, paddings = ["linear", "nearest", "cubic"], ["zeros", "border", "reflection"]
    graph_nodes, previous = [], "X"
    for k in range(nodes):
        graph_nodes.append(
            helper.make_node(
                "GridSample",
                [previous, "grid"],
                [f"y{k}"],
                name=f"gs{k}",
                mode=modes[k % 3],
                padding_mode=paddings[(k // 3) % 3],
                align_corners=k % 2,
            )
        )
        previous = f"y{k}"
    graph = helper.make_graph(
        graph_nodes,
        "chain",
        [
            helper.make_tensor_value_info("X", 1, [1, 8, size, size]),
            helper.make_tensor_value_info("grid", 1, [1, size, size, 2]),
        ],
        [helper.make_tensor_value_info(previous, 1, [1, 8, size, size])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)], ir_version=9)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=500)
    args = parser.parse_args()
    for size in (16, 256):
        model = chain(args.nodes, size)
        start = time.perf_counter()
        lowered = lower(model)
        seconds = time.perf_counter() - start
        print(
            f"{args.nodes} nodes, {size}x{size} maps: lowered in {seconds:.2f} s; "
            f"{len(lowered.graph.node)} nodes, {lowered.ByteSize() / 1e6:.2f} MB "
            f"(was {model.ByteSize() / 1e3:.1f} kB)"
        )


if __name__ == "__main__":
    main()
