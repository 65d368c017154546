"""Time the openvino target's lowering on OpenVINO with GatherElements and with row Gathers.

OpenVINO runs GridSample natively only for 4-D inputs, so 3-D and 5-D models run lowered
there. This times, on one CPU thread, the lowering with GatherElements (the generic choice
for few channels) against the one with channels-last row Gathers (what ``--target openvino``
emits), and OpenVINO's own kernel where it has one, on 1-D, 2-D and 3-D cases.
Run: ``python bench/openvino_gathers.py [--budget 1.5]``; prints and writes a markdown table.
"""

from __future__ import annotations

import argparse
import dataclasses
import pathlib
import statistics

import numpy as np
import openvino as ov
from run import interleaved

from gridsample_lower import lower
from gridsample_lower.lowering.targets import get_target
from gridsample_lower.models import gridsample_model

CASES = [  # mode, padding, X shape, grid shape
    ("linear", "zeros", (1, 3, 24, 24, 24), (1, 24, 24, 24, 3)),
    ("linear", "zeros", (1, 16, 24, 24, 24), (1, 24, 24, 24, 3)),
    ("linear", "zeros", (1, 1, 32, 32, 32), (1, 32, 32, 32, 3)),
    ("nearest", "zeros", (1, 16, 24, 24, 24), (1, 24, 24, 24, 3)),
    ("nearest", "reflection", (1, 1, 64, 64, 64), (1, 32, 32, 32, 3)),
    ("cubic", "border", (1, 4, 12, 12, 12), (1, 12, 12, 12, 3)),
    ("linear", "reflection", (4, 2, 1000), (4, 3000, 1)),
    ("linear", "zeros", (2, 8, 4096), (2, 4096, 1)),
    ("linear", "zeros", (1, 3, 224, 224), (1, 224, 224, 2)),
    ("linear", "zeros", (1, 32, 64, 64), (1, 64, 64, 2)),
    ("cubic", "zeros", (1, 3, 224, 224), (1, 224, 224, 2)),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=1.5, help="Seconds per case.")
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("bench/results"))
    args = parser.parse_args()
    core, rng = ov.Core(), np.random.default_rng(0)
    rows = get_target("openvino")
    elements = dataclasses.replace(rows, avoids=rows.avoids - {"GatherElements"})

    def compiled(model):
        read = core.read_model(model=model.SerializeToString(), weights=b"")
        return core.compile_model(read, "CPU", {"INFERENCE_NUM_THREADS": 1})

    lines = [f"OpenVINO {ov.__version__}, 1 thread.", ""]
    lines.append("| case | GatherElements ms | row Gathers ms | OpenVINO's kernel ms |")
    lines.append("|---" * 4 + "|")
    print("\n".join(lines))
    for mode, padding, x_shape, grid_shape in CASES:
        model = gridsample_model(x_shape, grid_shape, mode, padding, 0)
        feeds = [
            rng.standard_normal(x_shape).astype(np.float32),
            rng.uniform(-1.1, 1.1, grid_shape).astype(np.float32),
        ]
        runs = {
            "elements": compiled(lower(model, target=elements, lower_all=True)),
            "rows": compiled(lower(model, target=rows, lower_all=True)),
        }
        if len(x_shape) == 4:
            runs["native"] = compiled(model)
        calls = {k: lambda c=c, f=feeds: c(f) for k, c in runs.items()}
        times = interleaved(calls, args.budget)
        ms = {k: statistics.median(v) * 1e3 for k, v in times.items()}
        native = f"{ms['native']:.2f}" if "native" in ms else "-"
        shape = "x".join(map(str, x_shape))
        label = f"{mode} {padding} {shape} -> {'x'.join(map(str, grid_shape[1:-1]))}"
        lines.append(f"| {label} | {ms['elements']:.2f} | {ms['rows']:.2f} | {native} |")
        print(lines[-1], flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "openvino_gathers.md").write_text("\n".join([*lines, ""]))


if __name__ == "__main__":
    main()
