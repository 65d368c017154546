"""Check the onnxruntime target's choices: is what it keeps native really the faster form?

``--target onnxruntime`` keeps a GridSample where onnxruntime's kernel beats the lowering
(gridsample_lower/lowering/targets.py). For cases on both sides of each of its rules (channel
counts, a grid given as input or stored in the model, float32 and float64), this times native
and the fully lowered graph interleaved on one thread, and says whether the target picked the
faster.
Run: ``python bench/target_choices.py [--budget 1.0]``; prints and writes a markdown table.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import pathlib
import statistics

import numpy as np
import onnx
import onnx_ir as ir
from run import GRIDS, interleaved, make_grid, session

from gridsample_lower import lower
from gridsample_lower.lowering.targets import native_cubic_channels
from gridsample_lower.models import gridsample_model

SIZES_2D = [(64, 64), (224, 224), (480, 640)]  # input and output both (H, W)
CUBIC_SIZES = [(64, 64), (224, 224), (320, 320), (384, 384), (480, 640)]  # each cubic bound
TILED_SIZES = [(320, 320), (720, 1280)]  # the fast kernel against the lowering in tiles


@dataclasses.dataclass(frozen=True)
class Choice:
    """One node to decide on: keep it native, or lower it?"""

    mode: str
    padding: str
    align: int
    x_shape: tuple
    dtype: type = np.float32
    constant_grid: bool = False

    @property
    def label(self) -> str:
        grid = ", constant grid" if self.constant_grid else ""
        shape = "x".join(map(str, self.x_shape))
        name = np.dtype(self.dtype).name
        return f"{self.mode} {self.padding} ac={self.align}, {shape} {name}{grid}"

    def model_and_feeds(self, rng, grid_kind: str) -> tuple[onnx.ModelProto, dict]:
        r = len(self.x_shape) - 2
        grid_shape = (self.x_shape[0], *self.x_shape[2:], r)  # as many points as pixels
        model = gridsample_model(
            self.x_shape, grid_shape, self.mode, self.padding, self.align,
            x_dtype=self.dtype, grid_dtype=self.dtype,
        )  # fmt: skip
        grid = make_grid(grid_kind, self.x_shape[0], self.x_shape[2:], rng, self.dtype)
        feeds = {"X": rng.standard_normal(self.x_shape).astype(self.dtype), "grid": grid}
        if self.constant_grid:
            del model.graph.input[1]
            model.graph.initializer.append(onnx.numpy_helper.from_array(feeds.pop("grid"), "grid"))
        return model, feeds


def choices() -> list[Choice]:
    out = []
    for h, w in SIZES_2D:
        for c in (1, 3, 4, 8):  # the fast kernel; lowered with a constant grid up to 4
            for constant in (False, True):
                out.append(Choice("linear", "zeros", 0, (1, c, h, w), constant_grid=constant))
        out.append(Choice("cubic", "reflection", 0, (1, 1, h, w)))
        for padding in ("zeros", "border", "reflection"):  # float64 cubic: by points too
            kept = native_cubic_channels(h * w, ir.DataType.DOUBLE, padding)
            for c in (1, 6) if kept == math.inf else (kept, kept + 1, 6):
                out.append(Choice("cubic", padding, 0, (1, c, h, w), dtype=np.float64))
        out.append(Choice("linear", "zeros", 0, (1, 3, h, w), np.float64, constant_grid=True))
    for h, w in CUBIC_SIZES:  # float32 cubic: kept up to native_cubic_channels(points)
        for padding in ("zeros", "border"):
            kept = native_cubic_channels(h * w, ir.DataType.FLOAT, padding)
            for c in sorted({1, 3, kept, kept + 1}):
                out.append(Choice("cubic", padding, 0, (1, c, h, w)))
            out.append(Choice("cubic", padding, 0, (1, max(kept, 1), h, w), constant_grid=True))
    for h, w in TILED_SIZES:  # TILED_FAST_PATH: 1 channel from 2**16 points, 4 from 2**19
        for c in (1, 2, 4, 5, 8):
            out.append(Choice("linear", "zeros", 0, (1, c, h, w)))
    for c in (1, 16):  # 3-D: always lowered
        out.append(Choice("linear", "zeros", 0, (1, c, 24, 24, 24)))
    return out


def measure(choice: Choice, rng, budget: float, grid_kind: str) -> dict:
    model, feeds = choice.model_and_feeds(rng, grid_kind)
    kept = any(n.op_type == "GridSample" for n in lower(model, target="onnxruntime").graph.node)
    native = session(model)
    lowered = session(lower(model, target="onnxruntime", lower_all=True))
    times = interleaved({"native": lambda: native.run(None, feeds),
                         "lowered": lambda: lowered.run(None, feeds)}, budget)  # fmt: skip
    ms = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    ratio = ms["lowered"] / ms["native"]
    return {"case": choice.label, **ms, "ratio": ratio, "kept": kept, "right": kept == (ratio > 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=1.0, help="Seconds per case.")
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("bench/results"))
    parser.add_argument("--grid", choices=GRIDS, default="random", help="The grids' kind.")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    lines = ["| case | native ms | lowered ms | ratio | onnxruntime target | faster? |"]
    lines.append("|---" * 6 + "|")
    rows = []
    for choice in choices():
        row = measure(choice, rng, args.budget, args.grid)
        rows.append(row)
        lines.append(
            f"| {row['case']} | {row['native']:.3f} | {row['lowered']:.3f} | {row['ratio']:.2f} "
            f"| {'keeps' if row['kept'] else 'lowers'} | {'yes' if row['right'] else 'NO'} |"
        )
        print(lines[-1], flush=True)
    wrong = [r for r in rows if not r["right"]]
    worst = max((max(r["ratio"], 1 / r["ratio"]) for r in wrong), default=1.0)
    summary = (
        f"{args.grid} grids: {len(rows) - len(wrong)} of {len(rows)} choices are the faster form"
    )
    summary += f"; the wrong ones cost at most {worst - 1:.0%}." if wrong else "."
    args.out.mkdir(parents=True, exist_ok=True)
    name = "target_choices.md" if args.grid == "random" else f"target_choices_{args.grid}.md"
    (args.out / name).write_text("\n".join([*lines, "", summary, ""]))
    print(summary)


if __name__ == "__main__":
    main()
