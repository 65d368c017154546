"""Time ``--target openvino --lower-all`` against OpenVINO's own GridSample (f32, one thread).

Every static case of ``bench/run.py`` (its shapes and configurations, the constant grids and
3-D, which OpenVINO runs only lowered) is compiled for the CPU with ``INFERENCE_PRECISION_HINT:
f32`` and ``INFERENCE_NUM_THREADS: 1``: native, lowered by this checkout, and optionally the
lowered models of an earlier checkout saved with ``--save`` (``--before DIR``), timed in
interleaved rounds in one process (``common.median_ms``); each lowered output is checked
against onnxruntime's kernel, within float32's tolerance plus twice what OpenVINO's own kernel
errs. ``--profile`` prints, per case, where the lowered graph spends its time (OpenVINO's
per-node ``PERF_COUNT``: node, type, kernel). Column "Gathers / native": the lowered graph's
Gather kernels alone against the native kernel, both from ``PERF_COUNT`` in alternating runs: a
floor under any lowering that gathers every tap of every channel, as this one does.

Run: ``python bench/openvino_speed.py [--before DIR] [--save DIR] [--only TEXT]
[--rounds 7] [--budget 0.1] [--profile] [--out bench/results/openvino_f32/speed.md]``.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re

import numpy as np
import onnx
import openvino as ov
from common import before_after_options, median_ms  # (bench/ is on the path)
from run import Case, cases, session

from gridsample_lower import lower
from gridsample_lower.check.tolerances import tolerance

F32_ONE_THREAD = {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": 1}


def compiled(model: onnx.ModelProto, profile: bool = False):
    core = ov.Core()
    config = {**F32_ONE_THREAD, **({"PERF_COUNT": True} if profile else {})}
    return core.compile_model(core.read_model(model.SerializeToString(), b""), "CPU", config)


def runner(model: onnx.ModelProto, feeds: dict):
    request = compiled(model).create_infer_request()
    return lambda: request.infer(feeds)


def slug(case: Case) -> str:
    return re.sub(r"[^0-9a-z]+", "_", case.label.lower()).strip("_")


def case_model(case: Case, arrays: dict) -> tuple[onnx.ModelProto, dict]:
    """The static one-node model and its feeds (a constant grid is an initializer)."""
    grid = arrays["grid"] if case.constant_grid else None
    feeds = {"X": arrays["X"]} if case.constant_grid else arrays
    return case.model("static", grid), feeds


def profile(model: onnx.ModelProto, feeds: dict, runs: int = 25, top: int = 12) -> list[str]:
    """Each executed node's mean time (us), by node and by kernel, largest first."""
    request = compiled(model, profile=True).create_infer_request()
    per_node: dict[str, float] = collections.defaultdict(float)
    kind = {}
    for run in range(runs + 5):
        request.infer(feeds)
        if run < 5:  # warm-up
            continue
        for p in request.profiling_info:
            if p.status == p.Status.EXECUTED:
                per_node[p.node_name] += p.real_time.total_seconds() * 1e6 / runs
                kind[p.node_name] = f"{p.node_type} {p.exec_type}"
    by_kind: dict[str, float] = collections.defaultdict(float)
    for name, us in per_node.items():
        by_kind[kind[name]] += us
    lines = [
        f"  total {sum(per_node.values()):.0f} us; by kernel: "
        + ", ".join(f"{k} {v:.0f}" for k, v in sorted(by_kind.items(), key=lambda kv: -kv[1])[:8])
    ]
    for name, us in sorted(per_node.items(), key=lambda kv: -kv[1])[:top]:
        lines.append(f"  {us:8.1f} us  {kind[name]:32s} {name}")
    return lines


def gathers_over_native(native: onnx.ModelProto, lowered: onnx.ModelProto, feeds, runs=25):
    """Median time of the lowered graph's Gather kernels over the native kernel's (PERF_COUNT)."""
    requests = [compiled(m, profile=True).create_infer_request() for m in (native, lowered)]
    ratios = []
    for run in range(runs + 5):
        spent = []
        for request, kinds in zip(requests, (None, {"Gather"}), strict=True):
            request.infer(feeds)
            spent.append(
                sum(
                    p.real_time.total_seconds()
                    for p in request.profiling_info
                    if p.status == p.Status.EXECUTED and (kinds is None or p.node_type in kinds)
                )
            )
        if run >= 5:  # warm-up
            ratios.append(spent[1] / spent[0])
    return float(np.median(ratios))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    before_after_options(parser, rounds=7)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    rows = []
    columns = ["case", "shape", "native ms", "before ms", "after ms"]
    columns += ["before / native", "after / native", "after / before", "Gathers / native"]
    lines = ["| " + " | ".join(columns) + " |", "|---" * len(columns) + "|"]
    print(f"OpenVINO {ov.__version__}, f32, 1 thread; load average {os.getloadavg()}")
    print("\n".join(lines), flush=True)
    for case in cases(quick=False):
        if args.only and not any(text in case.label for text in args.only):
            continue
        arrays = case.inputs(np.random.default_rng(0))
        model, feeds = case_model(case, arrays)
        lowered = lower(model, target="openvino", lower_all=True)
        if args.save:
            args.save.mkdir(parents=True, exist_ok=True)
            onnx.save(lowered, str(args.save / f"{slug(case)}.onnx"))
        variants = {"after": lowered}
        if args.before:
            variants["before"] = onnx.load(str(args.before / f"{slug(case)}.onnx"))
        native = len(case.x_shape) == 4
        expected = session(model).run(None, feeds)[0]  # onnxruntime's kernel judges
        # OpenVINO rewrites the coordinate arithmetic ((g + 1) s -> g s + s), its own kernel's
        # too: at 224x224 native errs by 1.2e-4, the lowered graphs as much.
        off = float(np.max(np.abs(compiled(model)(feeds)[0] - expected))) if native else 0.0
        atol, _ = tolerance(np.float32, case.mode)
        for name, m in variants.items():
            error = float(np.max(np.abs(compiled(m)(feeds)[0] - expected)))
            assert error <= atol + 2 * off, (case.label, name, error, off)
        if native:
            variants = {"native": model, **variants}
        calls = {name: runner(m, feeds) for name, m in variants.items()}
        ms = median_ms(calls, args.rounds, args.budget)
        floor = f"{gathers_over_native(model, lowered, feeds):.2f}" if native else "-"

        def cell(a, b=None, ms=ms):
            if a not in ms or (b is not None and b not in ms):
                return "-"
            return f"{ms[a]:.3f}" if b is None else f"{ms[a] / ms[b]:.2f}"

        what, shape = case.label.split(" | ")
        row = (
            f"| {what} | {shape} | {cell('native')} | {cell('before')} | {cell('after')} | "
            f"{cell('before', 'native')} | {cell('after', 'native')} | {cell('after', 'before')} | "
            f"{floor} |"
        )
        lines.append(row)
        print(row, flush=True)
        if args.profile:
            print("\n".join(profile(lowered, feeds)), flush=True)
        rows.append({"case": case.label, "ms": ms, "gathers_over_native": floor})
    ratios = [r["ms"]["after"] / r["ms"]["native"] for r in rows if "native" in r["ms"]]
    if ratios:
        summary = (
            f"after / native: geomean {float(np.exp(np.mean(np.log(ratios)))):.2f}, "
            f"{min(ratios):.2f}-{max(ratios):.2f}; load average {os.getloadavg()}"
        )
        floors = [float(r["gathers_over_native"]) for r in rows if "native" in r["ms"]]
        over = sum(f > 1.5 for f in floors)
        summary += (
            f"; its Gathers alone take over 1.5x the native kernel in {over}"
            f" of {len(floors)} cases ({min(floors):.2f}-{max(floors):.2f})"
        )
        lines += ["", summary]
        print(summary)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("\n".join([*lines, ""]))
        args.out.with_suffix(".json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
