"""OpenVINO on a GridSample of symbolic sizes before a Conv, its grid a model input: as exported.

The model a user exports with dynamic axes: X and grid of symbolic sizes, GridSample -> 1x1
Conv (``tests/openvino_models.conv_case``), at bench/run.py's 2-D shapes and configurations.
OpenVINO runs such a model op by op; ``--target openvino --lower-all`` lowers the node into the
body of a Loop run once, which OpenVINO keeps in float32 (``plan.fenced``). Per case: the time of
native and lowered (this checkout; ``--before DIR``: the lowered models an earlier checkout
saved with ``--save``), f32 and one thread, in interleaved rounds (``common.median_ms``), as
exported and reshaped to static sizes before compiling; and each one's max error at OpenVINO's
default precision (bfloat16 where the CPU has it) against the float64 truth, with the goal's
bound, twice native's error + 1e-3 (issue 24).

Run: ``python bench/openvino_exported.py [--before DIR] [--save DIR] [--only TEXT]
[--rounds 5] [--budget 0.1] [--out bench/results/openvino_exported.md]``.
"""

from __future__ import annotations

import argparse
import datetime
import os
import pathlib
import re
import sys

import numpy as np
import onnx
import openvino as ov
from common import CONFIGS_2D, SHAPES_2D, before_after_options, median_ms  # (bench/ is on the path)

from gridsample_lower import lower

sys.path.insert(0, str(pathlib.Path(__file__).parents[1] / "tests"))
from openvino_models import conv_case  # noqa: E402  (the suite's models)

F32_ONE_THREAD = {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": 1}


def symbolic(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with every axis of X, grid and Y but the channels symbolic."""
    model = type(model).FromString(model.SerializeToString())
    for value in [*model.graph.input, *model.graph.output]:
        for k, dim in enumerate(value.type.tensor_type.shape.dim):
            if k != 1:
                dim.dim_param = f"{value.name}{k}"
    return model


def compiled(model: onnx.ModelProto, feeds: dict, config: dict, static: bool):
    core = ov.Core()
    read = core.read_model(model.SerializeToString(), b"")
    if static:
        read.reshape({name: list(value.shape) for name, value in feeds.items()})
    return core.compile_model(read, "CPU", config)


def error(model: onnx.ModelProto, feeds: dict, truth: np.ndarray) -> float:
    """Max error at OpenVINO's default settings, as exported."""
    result = compiled(model, feeds, {}, static=False)(feeds)
    return float(np.max(np.abs(result[0] - truth)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    before_after_options(parser, rounds=5)
    args = parser.parse_args()
    variants = ["after", *(["before"] if args.before else [])]
    columns = ["case", "mode"] + [f"{v} / native" for v in variants]
    columns += ["native error", *[f"{v} error" for v in variants], "bound"]
    lines = ["| " + " | ".join(columns) + " |", "|---" * len(columns) + "|"]
    print("\n".join(lines), flush=True)
    for (x_shape, out), config in [(s, c) for s in SHAPES_2D for c in CONFIGS_2D]:
        label = f"{'/'.join(map(str, config))} {'x'.join(map(str, x_shape))} -> {out[0]}x{out[1]}"
        if args.only and not any(text in label for text in args.only):
            continue
        rng = np.random.default_rng(0)
        model, feeds, truth, _ = conv_case(rng, config, x_shape, (x_shape[0], *out, 2))
        model = symbolic(model)
        models = {"native": model, "after": lower(model, target="openvino", lower_all=True)}
        slug = re.sub(r"[^0-9a-z]+", "_", label.lower()).strip("_")
        if args.save:
            args.save.mkdir(parents=True, exist_ok=True)
            onnx.save(models["after"], str(args.save / f"{slug}.onnx"))
        if args.before:
            models["before"] = onnx.load(str(args.before / f"{slug}.onnx"))
        errors = {name: error(m, feeds, truth) for name, m in models.items()}
        for static in (False, True):
            calls = {}
            for name, m in models.items():
                request = compiled(m, feeds, F32_ONE_THREAD, static).create_infer_request()
                calls[name] = lambda request=request, feeds=feeds: request.infer(feeds)
            ms = median_ms(calls, args.rounds, args.budget)
            cells = [label, "reshaped" if static else "as exported"]
            cells += [f"{ms[v] / ms['native']:.2f}" for v in variants]
            cells += [f"{errors[name]:.4f}" for name in ("native", *variants)]
            cells.append(f"{2 * errors['native'] + 1e-3:.4f}")
            lines.append("| " + " | ".join(cells) + " |")
            print(lines[-1], flush=True)
    if args.out:
        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        head = (
            f"OpenVINO {ov.__version__}, f32 and 1 thread for the times, its default settings for "
            f"the errors; `python bench/openvino_exported.py` ({now}; load average "
            f"{os.getloadavg()[0]:.1f}). Ratios: median time / native's, as exported (symbolic "
            "sizes) and reshaped to static sizes before compiling.\n\n"
        )
        args.out.write_text(head + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
