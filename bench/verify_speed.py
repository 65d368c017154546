"""What the numerical check costs: ``lower`` with the check against ``lower --no-verify``.

Each case is written to a temporary file and lowered by the command line in a fresh process,
with and without the check, in turns; the figures are the fastest wall time of ``--runs`` and
the largest peak RSS (``ru_maxrss``). Cases: one cubic node on a large X (4x32x256x256, where
the lowered graph's taps dominate), a chain of 200 GridSample nodes (every mode, padding and
align_corners, 1x4x128x128), the 20-node chain in float16 (onnxruntime runs it through its
float32 kernel) and a 3-D cubic node (judged by ``onnx.reference``).
Run: ``python bench/verify_speed.py [--runs 3] [--cases cubic,chain200]``; prints a markdown
table (README, "What the check costs").
"""

from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys
import tempfile
import time

import onnx
from onnx import helper

MODES = ["linear", "nearest", "cubic"]
PADDINGS = ["zeros", "border", "reflection"]
# Runs the command line in a fresh process and reports its peak RSS; the parent times it whole,
# start-up included, as a user waits for it.
_RUNNER = """
import json, resource, sys
from gridsample_lower.cli.main import main
try:
    main(sys.argv[1:], standalone_mode=False)
    code = 0
except SystemExit as exit:
    code = exit.code or 0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
print(json.dumps({"peak_gib": peak, "code": code}))
"""


def chain(elem_type: int, nodes: int, size: int, channels: int = 4) -> onnx.ModelProto:
    """``nodes`` GridSamples in a chain, each warping the last one's output by one shared grid."""
    graph_nodes, previous = [], "X"
    for k in range(nodes):
        attrs = {"mode": MODES[k % 3], "padding_mode": PADDINGS[k % 3], "align_corners": k % 2}
        graph_nodes.append(
            helper.make_node("GridSample", [previous, "grid"], [f"y{k}"], name=f"warp{k}", **attrs)
        )
        previous = f"y{k}"
    x_shape, grid_shape = [1, channels, size, size], [1, size, size, 2]
    return _model(graph_nodes, elem_type, x_shape, grid_shape, previous, x_shape)


def cubic(x_shape: list[int], rank: int = 2) -> onnx.ModelProto:
    node = helper.make_node("GridSample", ["X", "grid"], ["Y"], name="warp", mode="cubic")
    grid_shape = [x_shape[0], *x_shape[2:], rank]
    return _model([node], onnx.TensorProto.FLOAT, x_shape, grid_shape, "Y", x_shape)


def _model(nodes, elem_type, x_shape, grid_shape, output, y_shape) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "bench",
        [
            helper.make_tensor_value_info("X", elem_type, x_shape),
            helper.make_tensor_value_info("grid", elem_type, grid_shape),
        ],
        [helper.make_tensor_value_info(output, elem_type, y_shape)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)], ir_version=9)


CASES = {
    "cubic": ("one 2-D cubic node, X 4x32x256x256", lambda: cubic([4, 32, 256, 256])),
    "chain200": ("200 nodes, X 1x4x128x128", lambda: chain(onnx.TensorProto.FLOAT, 200, 128)),
    "half20": ("20 nodes, X 1x4x64x64, float16", lambda: chain(onnx.TensorProto.FLOAT16, 20, 64)),
    "cubic3d": ("one 3-D cubic node, X 1x4x16x16x16", lambda: cubic([1, 4, 16, 16, 16], 3)),
}


def _lower(path: pathlib.Path, out: pathlib.Path, check: bool) -> dict:
    args = ["lower", str(path), "-o", str(out), "-q", *([] if check else ["--no-verify"])]
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _RUNNER, *args], capture_output=True, text=True, check=True
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["seconds"] = time.perf_counter() - start
    if result["code"] != 0:
        raise SystemExit(f"{path.name}: exit {result['code']}: {done.stderr.strip()}")
    return result


def measure(key: str, runs: int, directory: pathlib.Path) -> dict[str, str]:
    label, build = CASES[key]
    path, out = directory / f"{key}.onnx", directory / f"{key}_lowered.onnx"
    onnx.save(build(), path)
    best = {False: {"seconds": float("inf"), "peak_gib": 0.0}}
    best[True] = dict(best[False])
    for _ in range(runs):
        for check in (False, True):
            result = _lower(path, out, check)
            best[check]["seconds"] = min(best[check]["seconds"], result["seconds"])
            best[check]["peak_gib"] = max(best[check]["peak_gib"], result["peak_gib"])
    plain, checked = best[False], best[True]
    return {
        "case": label,
        "--no-verify": f"{plain['seconds']:.2f} s, {plain['peak_gib']:.2f} GiB",
        "with the check": f"{checked['seconds']:.2f} s, {checked['peak_gib']:.2f} GiB",
        "time ratio": f"{checked['seconds'] / plain['seconds']:.1f}x",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cases", default=",".join(CASES), help=f"of {', '.join(CASES)}")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        rows = [measure(key, args.runs, pathlib.Path(directory)) for key in args.cases.split(",")]
    columns = list(rows[0])
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for row in rows:
        print("| " + " | ".join(row[c] for c in columns) + " |")


if __name__ == "__main__":
    main()
