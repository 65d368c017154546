"""Time GridSample on the runtimes that lack a good one: native kernel vs our lowering, per runtime.

For each runtime (tract, IREE, TVM, tinygrad), each shape of ``bench/run.py`` and each
configuration: the runtime's own GridSample where it has one (tract, TVM; IREE only 4-D linear and
nearest with zeros padding), the lowering for the runtime's target and for ``generic``, each
checked against onnxruntime's kernel on the original (a wrong result is marked, not timed away),
then timed in interleaved rounds on one thread: the median of each variant's rounds, and the ratio
lowered / native (< 1: the lowering is faster). Writes a markdown table.

Run: ``pip install -e ".[test]" && python bench/runtimes.py [--quick] [--runtimes tract,tvm]
[--only "1x3x224x224 224x224 linear/border"] [--no-generic] [--out bench/results/runtimes.md]``.
LiteRT (onnx2tf) needs its own environment: ``bench/results/litert/REPORT.md``. tract allocates
its intermediates afresh each run: with glibc, ``GLIBC_TUNABLES=glibc.malloc.trim_threshold=
1000000000:glibc.malloc.mmap_threshold=1000000000`` keeps freed memory for the next run (the
lowered cubic graphs then ran in half the time: bench/results/runtimes.md, 2026-11-28 18:00).
"""

from __future__ import annotations

import argparse
import pathlib
import platform
import sys

import numpy as np
import onnxruntime as ort
from common import SHAPE_3D, SHAPES_2D, median_ms  # (bench/ is on the path)

from gridsample_lower import lower
from gridsample_lower.check.tolerances import tolerance
from gridsample_lower.models import gridsample_model

SHAPES = [*SHAPES_2D, SHAPE_3D]  # (X, output spatial)
CONFIGS = [
    ("linear", "zeros", 0),
    ("linear", "border", 1),
    ("nearest", "zeros", 0),
    ("linear", "reflection", 0),
    ("cubic", "zeros", 0),
]
sys.path.insert(0, str(pathlib.Path(__file__).parents[1] / "tests"))
import other_runtimes as runtimes  # noqa: E402  (the suite's runners, one thread each)

TARGET_OF = {"tract": "tract", "iree": "iree", "tvm": "tvm", "tinygrad": "tinygrad"}
NATIVE = {  # which GridSample each runtime runs itself
    "tract": lambda mode, rank: not (mode == "cubic" and rank != 2),  # (3-D cubic aborts)
    "tvm": lambda mode, rank: True,
    "iree": lambda mode, rank: rank == 2 and mode != "cubic",
    "tinygrad": lambda mode, rank: False,
}


def _timer(runtime: str, model, feeds):
    """A zero-argument call running ``model`` once on ``runtime`` (compiled beforehand)."""
    prepare = getattr(runtimes, f"prepare_{runtime}")
    run = prepare(model, feeds) if runtime != "tinygrad" else prepare(model, feeds, jit=True)
    if runtime == "tinygrad":
        return run.timer(feeds), run
    return (lambda: run(feeds)), run


def _case(runtime, x_shape, out, config, rounds, budget, generic=True) -> dict:
    mode, padding, align = config
    rank = len(x_shape) - 2
    grid_shape = (x_shape[0], *out, rank)
    model = gridsample_model(list(x_shape), list(grid_shape), mode, padding, align)
    rng = np.random.default_rng(0)
    feeds = {
        "X": rng.standard_normal(x_shape).astype(np.float32),
        "grid": rng.uniform(-1.1, 1.1, grid_shape).astype(np.float32),
    }
    if mode == "cubic" and rank == 3:
        truth = None  # onnxruntime has no 3-D cubic; the suite checks it against numpy
    else:
        session = ort.InferenceSession(
            model.SerializeToString(), providers=["CPUExecutionProvider"]
        )
        truth = session.run(None, feeds)[0]
    variants = {}
    if NATIVE[runtime](mode, rank):
        variants["native"] = model
    target = TARGET_OF[runtime]
    variants[f"lowered ({target})"] = lower(model, target=target, lower_all=True)
    if target != "generic" and generic:
        variants["lowered (generic)"] = lower(model, lower_all=True)
    calls, notes = {}, []
    atol, rtol = tolerance(np.dtype(np.float32), mode)
    for name, candidate in variants.items():
        try:
            call, run = _timer(runtime, candidate, feeds)
            actual = run(feeds)[0]
        except Exception as error:  # noqa: BLE001  (a runtime's refusal is a result)
            notes.append(f"{name}: fails ({str(error).splitlines()[0][:80]})")
            continue
        if truth is not None and not np.allclose(actual, truth, atol=max(atol, 1e-4), rtol=rtol):
            notes.append(f"{name}: WRONG (max error {float(np.abs(actual - truth).max()):.2g})")
        calls[name] = call
    ms = median_ms(calls, rounds, budget)
    return {"ms": ms, "notes": notes}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtimes", default="tract,iree,tvm,tinygrad")
    parser.add_argument("--quick", action="store_true", help="Two shapes, two configurations.")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--budget", type=float, default=0.2, help="Seconds per variant per round.")
    parser.add_argument(
        "--only", action="append", default=[], help="cases whose 'X out config' label has it"
    )
    parser.add_argument(
        "--no-generic", action="store_true", help="skip generic (tinygrad: minutes a case)"
    )
    parser.add_argument(
        "--out", type=pathlib.Path, default=pathlib.Path("bench/results/runtimes.md")
    )
    args = parser.parse_args()
    shapes = SHAPES[1:2] + SHAPES[-1:] if args.quick else SHAPES
    configs = CONFIGS[:1] + CONFIGS[-1:] if args.quick else CONFIGS
    lines = [
        f"Machine: {platform.processor() or platform.machine()}, 1 thread; "
        f"{', '.join(f'{name} {version}' for name, version in runtimes.versions().items())}",
        "",
        "| runtime | X | out | config | native ms | lowered ms (runtime's target) | generic ms "
        "| lowered / native | notes |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for runtime in args.runtimes.split(","):
        for x_shape, out in shapes:
            for config in configs:
                label = f"{'x'.join(map(str, x_shape))} {'x'.join(map(str, out))} "
                label += "/".join(map(str, config))
                if args.only and not any(text in label for text in args.only):
                    continue
                result = _case(
                    runtime, x_shape, out, config, args.rounds, args.budget, not args.no_generic
                )
                ms = result["ms"]
                target = f"lowered ({TARGET_OF[runtime]})"
                native, lowered = ms.get("native"), ms.get(target)
                generic = ms.get(
                    "lowered (generic)", lowered if TARGET_OF[runtime] == "generic" else None
                )
                ratio = f"{lowered / native:.2f}" if native and lowered else "-"
                row = [
                    runtime,
                    "x".join(map(str, x_shape)),
                    "x".join(map(str, out)),
                    "/".join(map(str, config)),
                    *(f"{v:.3f}" if v else "-" for v in (native, lowered, generic)),
                    ratio,
                    "; ".join(result["notes"]),
                ]
                lines.append("| " + " | ".join(row) + " |")
                print(lines[-1], flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
