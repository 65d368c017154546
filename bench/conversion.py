"""Time the conversion itself: lowering a model with many GridSample nodes, and the CLI's start.

Run: ``python bench/conversion.py [--nodes 500] [--runs 5]``. Reports the model size before and
after, which must not depend on the tensors' sizes (no per-element tables); the median time of
``gridsample-lower --help`` and ``--version`` beside a bare ``python -c pass`` in the same
rounds; and ``gridsample-lower lower --no-verify`` on the 500-node model, end to end.
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import subprocess
import sys
import tempfile
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


def _median_seconds(commands: dict[str, list[str]], runs: int) -> dict[str, float]:
    """Each command's median wall time, the commands run in turns, ``runs`` rounds."""
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, command in commands.items():
            start = time.perf_counter()
            subprocess.run(command, check=True, capture_output=True)
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def command_line(nodes: int, runs: int) -> None:
    """The installed command's start-up and an end-to-end lowering, beside a bare interpreter."""
    script = pathlib.Path(sys.executable).with_name("gridsample-lower")  # not a pyenv shim
    cli = [str(script)] if script.exists() else [sys.executable, "-m", "gridsample_lower"]
    with tempfile.TemporaryDirectory() as folder:
        model = pathlib.Path(folder, "chain.onnx")
        onnx.save(chain(nodes, 16), model)
        out = str(pathlib.Path(folder, "lowered.onnx"))
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "gridsample-lower --help": [*cli, "--help"],
            "gridsample-lower --version": [*cli, "--version"],
            f"lower --no-verify ({nodes} nodes)": [
                *cli,
                "lower",
                str(model),
                "-o",
                out,
                "--no-verify",
            ],
        }
        for name, seconds in _median_seconds(commands, runs).items():
            print(f"{name}: {seconds:.3f} s (median of {runs})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    command_line(args.nodes, args.runs)
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
