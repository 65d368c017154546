"""Time lowered GridSample against onnxruntime's native kernel (and torch) on one CPU thread.

For each case: build the one-node model, lower it for the onnxruntime target (everything, and
with the MatMul only that target uses) with static shapes, with batch and spatial sizes
symbolic (the usual export) and with every size symbolic, check the lowered graphs against native
onnxruntime, then time each lowered graph side by side with native (the two in turns), then
torch.nn.functional.grid_sample on its own, and report medians and ratios (lowered / native:
< 1 means the lowered graph is faster). Writes a markdown table and JSON.

Run: ``pip install -e ".[bench]" && python bench/run.py [--quick] [--out bench/results]``;
``--every-config`` times every mode, padding and align_corners onnxruntime's kernel runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import platform
import statistics
import time

import numpy as np
import onnx
import onnxruntime as ort
from common import CONFIGS_2D, SHAPE_3D, SHAPES_2D  # (bench/ is on the path)

from gridsample_lower import lower
from gridsample_lower.check.tolerances import tolerance
from gridsample_lower.models import gridsample_model
from gridsample_lower.spec import ALIGN_CORNERS, MODES, PADDING_MODES

# Lowered forms timed: static shapes; batch and spatial sizes symbolic with the channel count
# static (the usual export); every size symbolic.
SHAPE_KINDS = ("static", "symbolic", "all symbolic")
CONFIGS_3D = [("linear", "zeros", 0), ("nearest", "zeros", 0), ("linear", "border", 0)]
# --every-config: every configuration onnxruntime's kernel runs (2-D: all; 3-D: no cubic).
EVERY_2D = [(m, p, a) for m in MODES for p in PADDING_MODES for a in ALIGN_CORNERS]
EVERY_3D = [c for c in EVERY_2D if c[0] != "cubic"]
# A grid stored in the model (a fixed warp): onnxruntime folds the lowered coordinate math.
CONSTANT_GRID = [(("linear", "zeros", 0), SHAPES_2D[0]), (("cubic", "zeros", 0), SHAPES_2D[0])]
CONSTANT_GRID += [(("linear", "zeros", 0), SHAPES_2D[1])]
TORCH_MODE = {"linear": "bilinear", "nearest": "nearest", "cubic": "bicubic"}


@dataclasses.dataclass
class Case:
    """One configuration and shape to time."""

    mode: str
    padding: str
    align: int
    x_shape: tuple
    out_shape: tuple
    constant_grid: bool = False

    @property
    def label(self) -> str:
        shape = ",".join(map(str, self.x_shape))
        out = "x".join(map(str, self.out_shape))
        grid = " (constant grid)" if self.constant_grid else ""
        return f"{self.mode} {self.padding} ac={self.align} | {shape} -> {out}{grid}"

    def model(self, shapes: str, grid: np.ndarray | None = None) -> onnx.ModelProto:
        """The one-node model, its shapes one of SHAPE_KINDS.

        With ``grid``, that grid is an initializer, not an input.
        """
        r = len(self.x_shape) - 2
        x = list(self.x_shape)
        g = [self.x_shape[0], *self.out_shape, r]
        if shapes != "static":
            channels = "C" if shapes == "all symbolic" else x[1]
            x = ["N", channels, *[f"d{i}" for i in range(r)]]
            g = ["N", *[f"o{i}" for i in range(r)], r]
        model = gridsample_model(x, g, self.mode, self.padding, self.align)
        if grid is not None:
            del model.graph.input[1]
            model.graph.initializer.append(onnx.numpy_helper.from_array(grid, "grid"))
        return model

    def inputs(self, rng, grid: str = "random") -> dict:
        x = rng.standard_normal(self.x_shape).astype(np.float32)
        return {"X": x, "grid": make_grid(grid, self.x_shape[0], self.out_shape, rng)}


GRIDS = ("random", "warp")


def make_grid(kind: str, batch: int, out_shape: tuple, rng, dtype=np.float32) -> np.ndarray:
    """A grid of ``kind``: ``random`` or ``warp``.

    ``random`` is uniform in [-1.1, 1.1], every point anywhere: the worst case for caches.
    ``warp`` is smooth, as spatial transformers and flow warps make: the identity turned by
    0.3 rad in the x-y plane, scaled by 1.05, plus noise of 0.01.
    """
    r = len(out_shape)
    if kind == "random":
        return rng.uniform(-1.1, 1.1, (batch, *out_shape, r)).astype(dtype)
    axes = np.meshgrid(*[np.linspace(-1, 1, n) for n in out_shape], indexing="ij")
    coords = np.stack(axes[::-1], axis=-1)  # innermost-first: x (width) first
    if r >= 2:
        turn = np.eye(r)
        turn[:2, :2] = [[np.cos(0.3), -np.sin(0.3)], [np.sin(0.3), np.cos(0.3)]]
        coords = coords @ turn.T
    grid = 1.05 * coords + rng.normal(0.0, 0.01, (batch, *out_shape, r))
    return grid.astype(dtype)


def cases(quick: bool, every_config: bool = False) -> list[Case]:
    shapes = SHAPES_2D[:2] if quick else SHAPES_2D
    configs_2d, configs_3d = (EVERY_2D, EVERY_3D) if every_config else (CONFIGS_2D, CONFIGS_3D)
    out = [Case(m, p, a, x, o) for (x, o) in shapes for (m, p, a) in configs_2d]
    out += [Case(m, p, a, *SHAPE_3D) for (m, p, a) in configs_3d]
    if not every_config:
        out += [Case(m, p, a, x, o, constant_grid=True) for (m, p, a), (x, o) in CONSTANT_GRID]
    return out


def session(model: onnx.ModelProto) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def torch_runner(case: Case, feeds: dict):
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(1)
    x, grid = torch.from_numpy(feeds["X"]), torch.from_numpy(feeds["grid"])
    if case.mode == "cubic" and x.dim() == 5:
        return None
    return lambda: torch.nn.functional.grid_sample(
        x,
        grid,
        mode=TORCH_MODE[case.mode],
        padding_mode=case.padding,
        align_corners=bool(case.align),
    )


def measure(
    case: Case,
    rng,
    budget: float,
    target: str = "onnxruntime",
    grid_kind: str = "random",
    alone: bool = False,
) -> dict:
    arrays = case.inputs(rng, grid_kind)
    grid = arrays["grid"] if case.constant_grid else None
    feeds = {"X": arrays["X"]} if case.constant_grid else arrays
    native = session(case.model("static", grid))
    expected = native.run(None, feeds)[0]
    runners = {"native": lambda: native.run(None, feeds)}
    nodes = {}
    for kind in SHAPE_KINDS:
        lowered = lower(case.model(kind, grid), target=target, lower_all=True)
        nodes[kind] = len(lowered.graph.node)
        sess = session(lowered)
        got = sess.run(None, feeds)[0]
        atol, rtol = tolerance(np.float32, case.mode)
        np.testing.assert_allclose(got, expected, atol=atol, rtol=rtol)
        runners[kind] = lambda sess=sess: sess.run(None, feeds)
    times = one_by_one(runners, budget) if alone else in_pairs(runners, budget)
    torch_fn = torch_runner(case, arrays)
    if torch_fn is not None:  # on its own: see interleaved
        times.update(interleaved({"torch": torch_fn}, budget / 2))
    med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    # The native time each form ran beside (in_pairs), else the one native time.
    beside = {kind: med.get(f"native beside {kind}", med["native"]) for kind in SHAPE_KINDS}
    return {
        "case": case.label,
        "ms": med,
        "nodes": nodes,
        "ratio_static": med["static"] / beside["static"],
        "ratio_symbolic": med["symbolic"] / beside["symbolic"],
        "ratio_all_symbolic": med["all symbolic"] / beside["all symbolic"],
        "ratio_torch": med["static"] / med["torch"] if "torch" in med else None,
        "samples": len(times["native"]),
    }


def interleaved(runners: dict, budget: float) -> dict[str, list[float]]:
    """Seconds per call of each runner, taking turns, for about ``budget`` seconds.

    torch is never in the same rotation as onnxruntime: a torch call just before an
    onnxruntime run slowed that run up to 2x here (native 2-D cubic: 5.6 -> 11.1 ms, lowered
    5.5 -> 6.9 ms), which flattered the ratios.
    """
    times = {k: [] for k in runners}
    for fn in runners.values():
        fn()  # warm up
    start = time.perf_counter()
    while time.perf_counter() - start < budget or min(map(len, times.values())) < 5:
        for name, fn in runners.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return times


def in_pairs(runners: dict, budget: float) -> dict[str, list[float]]:
    """Seconds per call of each lowered form in turns with ``native``, one pair after another.

    Side by side, two at a time: in one rotation with the other lowered forms, each run
    started with their intermediates in the cache, which no deployment does (1x64x64x64 fast
    path: native 0.46 -> 0.58 ms, lowered 0.60 -> 0.98). ``native`` is the pair with
    the static form; ``native beside <form>`` every pair's.
    """
    native, forms = runners["native"], [k for k in runners if k != "native"]
    times = {}
    for form in forms:
        pair = interleaved({"native": native, form: runners[form]}, budget / len(forms))
        times[form], times[f"native beside {form}"] = pair[form], pair["native"]
    times["native"] = times["native beside static"]
    return times


def one_by_one(runners: dict, budget: float) -> dict[str, list[float]]:
    """Seconds per call of each runner, each timed in a block of its own (``--alone``).

    A deployed model runs alone, its data still in cache from its last run; in turns, each run
    starts with the other runner's data in cache, which costs native most where the tensors
    fill the caches (8x32x64x64: 2.0 ms alone, 2.4-2.8 in turns with a lowered form).
    """
    times = {}
    for name, fn in runners.items():
        times.update(interleaved({name: fn}, budget / len(runners)))
    return times


def markdown(rows: list[dict]) -> str:
    lines = [
        "| case | shape | native ms | lowered static (ratio) | symbolic N, spatial (ratio) "
        "| all symbolic (ratio) | torch ms | lowered / torch | nodes |",
        "|---" * 9 + "|",
    ]
    for r in rows:
        ms = r["ms"]
        torch_ms = f"{ms['torch']:.2f}" if "torch" in ms else "-"
        vs_torch = f"{r['ratio_torch']:.2f}" if r["ratio_torch"] else "-"
        lines.append(
            f"| {r['case']} | {ms['native']:.2f} | {ms['static']:.2f} "
            f"({r['ratio_static']:.2f}) | {ms['symbolic']:.2f} ({r['ratio_symbolic']:.2f}) "
            f"| {ms['all symbolic']:.2f} ({r['ratio_all_symbolic']:.2f}) | {torch_ms} "
            f"| {vs_torch} | {r['nodes']['static']} |"
        )
    return "\n".join(lines)


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as info:
            names = [
                line.split(":", 1)[1].strip() for line in info if line.startswith("model name")
            ]
        return f"{names[0]} ({len(names)} cores)" if names else platform.processor() or "cpu"
    except OSError:
        return platform.processor() or "cpu"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="Two 2-D shapes only.")
    parser.add_argument(
        "--every-config",
        action="store_true",
        help="Every mode, padding and align_corners onnxruntime runs natively (102 cases).",
    )
    parser.add_argument("--budget", type=float, default=0.6, help="Seconds per case.")
    parser.add_argument("--filter", default="", help="Only cases whose label contains this.")
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("bench/results"))
    parser.add_argument(
        "--target", default="onnxruntime", help="Whose lowering to time (all of it is lowered)."
    )
    parser.add_argument("--grid", choices=GRIDS, default="random", help="The grids' kind.")
    parser.add_argument(
        "--alone",
        action="store_true",
        help="Time each form in a block of its own, not in turns with native.",
    )
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    rows = []
    for case in cases(args.quick, args.every_config):
        if args.filter in case.label:
            rows.append(measure(case, rng, args.budget, args.target, args.grid, args.alone))
            print(markdown(rows[-1:]).splitlines()[-1], flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    machine = f"{_cpu_name()}, {platform.machine()}, onnxruntime {ort.__version__}"
    timing = "each form alone" if args.alone else "each form in turns with native"
    summary = {
        "machine": machine,
        "target": args.target,
        "grid": args.grid,
        "timing": timing,
        "rows": rows,
    }
    (args.out / "results.json").write_text(json.dumps(summary, indent=1))
    table = markdown(rows)
    header = (
        f"Machine: {machine}, 1 thread; lowered for --target {args.target}; {args.grid} grids; "
        f"timed {timing}. native ms: beside the static form; each ratio divides by the native "
        "time of its own pair."
    )
    (args.out / "results.md").write_text(f"{header}\n\n{table}\n")
    print(table)


if __name__ == "__main__":
    main()
