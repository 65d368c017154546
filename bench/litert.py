r"""GridSample on LiteRT (TFLite through onnx2tf): onnx2tf's emulation vs the litert target.

onnx2tf has no GridSample op to map to; it emulates the node with TensorFlow ops. This script
converts, for each case, the one-node GridSample model (that emulation), its lowering for the
``litert`` target (``--lower-all``) and for ``generic`` (the default), checks every converted
model on the TFLite interpreter against onnxruntime's own kernel (the numpy reference where
onnxruntime has none: 1-D, 3-D cubic), and times them in interleaved rounds with one
interpreter thread. A wrong result is marked in the table, never timed away. The last column is
what ``--target litert`` gives without ``--lower-all``: the emulation where it keeps the node.

Two sets: ``--set bench`` (bench/run.py's shapes and configurations, timed) and ``--set
correct`` (every mode, padding and align_corners at ranks 1-3, batch 2 or ``--batch 1``, small
odd sizes, far grids with exact half-way points; checked, not timed). ``--variants`` may name
forced forms too (``litert~planes=0``: the plan's ``force``), for experiments.

onnx2tf pins onnx 1.19 and brings TensorFlow: it lives in its own environment, and this script
runs in two: the package's (models, truth) and onnx2tf's (conversion, interpreter), which it
calls itself. Create it once (Python 3.11):

    python3.11 -m venv /work/venv-litert
    /work/venv-litert/bin/pip install onnx2tf==1.29.24 onnx==1.19.1 tensorflow==2.19.0 \\
        tf_keras==2.19.0 ai-edge-litert==2.1.0 onnxsim onnx_graphsurgeon sng4onnx psutil \\
        onnxruntime "numpy<2"

then, from the package's environment (``pip install -e .``):

    python bench/litert.py --litert-python /work/venv-litert/bin/python --set bench \\
        --out bench/results/litert.md

onnx2tf overwrites its input with its own simplified model (each conversion gets a copy),
calls ``onnxsim`` as a command and silently skips it when not on PATH (the environment's bin
is put first), and needs ``-kat X grid`` (keep the inputs' NCHW shapes) or GridSample fails to
convert. Its emulation's output is channels-last; the check accepts it transposed, and says so.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import hashlib
import io
import itertools
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np
from common import (  # (bench/ is on the path)
    CONFIGS_2D,
    CORRECT_SHAPES,
    SHAPE_3D,
    SHAPES_2D,
    sample_inputs,
)

CONFIGS_3D = [("linear", "zeros", 0), ("nearest", "zeros", 0), ("linear", "border", 0)]
VARIANTS = ("emulation", "litert", "generic")


# --- the package's environment: models, inputs, truth -------------------------------------


def _cases(which: str, variants: list[str], batch: int = 2) -> list[dict]:
    from gridsample_lower.spec import ALIGN_CORNERS, MODES, PADDING_MODES

    out = []
    if which == "bench":
        shapes = [(x, o, c) for x, o in SHAPES_2D for c in CONFIGS_2D]
        shapes += [(*SHAPE_3D, c) for c in CONFIGS_3D]
        for x, o, (mode, padding, align) in shapes:
            out.append(dict(x=x, out=o, mode=mode, padding=padding, align=align, far=False))
    else:
        for x, o in CORRECT_SHAPES.values():
            x = (batch, *x[1:])
            for mode in MODES:
                for padding in PADDING_MODES:
                    for align in ALIGN_CORNERS:
                        out.append(
                            dict(x=x, out=o, mode=mode, padding=padding, align=align, far=True)
                        )
    for case in out:
        dims = "x".join(map(str, case["x"])) + "-" + "x".join(map(str, case["out"]))
        case["name"] = f"{case['mode']}-{case['padding']}-ac{case['align']}-{dims}"
        case["variants"] = list(variants)
    return out


def _lowered(model, variant: str):
    """``target`` or ``target~field=value,...``: the plan's forms forced (experiments)."""
    from onnxscript import rewriter

    from gridsample_lower import lower
    from gridsample_lower.lowering.plan import plan_of
    from gridsample_lower.lowering.rule import GridSampleLowering

    target, _, forced = variant.partition("~")
    if not forced:
        return lower(model, target=target, lower_all=True)
    force = {}
    for item in forced.split(","):
        key, value = item.split("=")
        force[key] = int(value) if value.isdigit() else value

    def planner(spec, node, target):
        return plan_of(spec, *[v.shape for v in node.inputs[:2]], target, force=dict(force))

    return rewriter.rewrite(model, [GridSampleLowering.rule(target=target, planner=planner)])


def _make(cases: list[dict], directory: pathlib.Path, seed: int) -> None:
    """Writes each case's models, inputs and expected output, and manifest.json."""
    import onnx

    from gridsample_lower import lower
    from gridsample_lower.check.reference import grid_sample
    from gridsample_lower.models import gridsample_model

    rng = np.random.default_rng(seed)
    for case in cases:
        folder = directory / case["name"]
        folder.mkdir(parents=True, exist_ok=True)
        x_shape, out = case["x"], case["out"]
        rank = len(out)
        x, grid = sample_inputs(rng, x_shape, out, case["far"])
        model = gridsample_model(
            list(x_shape), list(grid.shape), case["mode"], case["padding"], case["align"]
        )
        models = {"emulation": model}
        for variant in case["variants"]:
            if variant != "emulation":
                models[variant] = _lowered(model, variant)
        # What `--target litert` chooses without --lower-all: the node kept (the emulation) or
        # its lowering (the "litert" variant, lowered with --lower-all).
        chosen = lower(model, target="litert")
        case["kept"] = any(n.op_type == "GridSample" for n in chosen.graph.node)
        for variant, m in models.items():
            m.ir_version = min(m.ir_version, 10)  # onnx 1.19 reads up to 11
            onnx.save(m, folder / f"{variant}.onnx")
        np.save(folder / "X.npy", x)
        np.save(folder / "grid.npy", grid)
        native = rank in (2, 3) and not (rank == 3 and case["mode"] == "cubic")
        if native:
            import onnxruntime as ort

            options = ort.SessionOptions()
            options.intra_op_num_threads = 1
            session = ort.InferenceSession(
                model.SerializeToString(), options, providers=["CPUExecutionProvider"]
            )
            expected = session.run(None, {"X": x, "grid": grid})[0]
            case["truth"] = "onnxruntime"
        else:
            expected = grid_sample(x, grid, case["mode"], case["padding"], case["align"])
            case["truth"] = "reference"
        np.save(folder / "expected.npy", np.asarray(expected, dtype=np.float32))
    (directory / "manifest.json").write_text(json.dumps(cases, indent=1))


# --- onnx2tf's environment: conversion, check, timing -------------------------------------


def _convert_one(onnx_path: str, folder: str) -> dict:
    """Converts ``onnx_path`` (a copy: onnx2tf overwrites it) into ``folder``; a dict result."""
    import onnx2tf

    work = pathlib.Path(folder)
    work.mkdir(parents=True, exist_ok=True)
    copy = work / "input.onnx"
    shutil.copy(onnx_path, copy)
    log = io.StringIO()
    start = time.perf_counter()
    try:
        with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
            onnx2tf.convert(
                input_onnx_file_path=str(copy),
                output_folder_path=str(work),
                keep_shape_absolutely_input_names=["X", "grid"],
                non_verbose=True,
                disable_model_save=False,
            )
    except BaseException as error:  # onnx2tf exits on some errors  # noqa: BLE001
        return {"error": f"{type(error).__name__}: {error}"[:300], "log": log.getvalue()[-2000:]}
    found = sorted(work.glob("*_float32.tflite"))
    if not found:
        return {"error": "no .tflite written", "log": log.getvalue()[-2000:]}
    return {"tflite": str(found[0]), "seconds": time.perf_counter() - start}


def _worker_init(bin_dir: str) -> None:
    os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import onnx2tf  # noqa: F401  (once per worker: the import takes 10-30 s)


def _interpreter(path: str):
    from ai_edge_litert.interpreter import Interpreter

    interpreter = Interpreter(model_path=path, num_threads=1)
    interpreter.allocate_tensors()
    return interpreter


def _run(interpreter, x: np.ndarray, grid: np.ndarray) -> np.ndarray:
    for detail in interpreter.get_input_details():
        value = x if "X" in detail["name"] or detail["name"].endswith("x") else grid
        if tuple(detail["shape"]) != value.shape:  # the names may be mangled: go by shape
            value = x if tuple(detail["shape"]) == x.shape else grid
        interpreter.set_tensor(detail["index"], value)
    interpreter.invoke()
    return interpreter.get_tensor(interpreter.get_output_details()[0]["index"])


def _check(y: np.ndarray, expected: np.ndarray, mode: str) -> tuple[str, float]:
    """'ok', 'ok (NHWC)' or 'WRONG', and the largest error (the better layout)."""
    atol = 0.0 if mode == "nearest" else 1e-4
    candidates = {"": y}
    channels_last = (expected.shape[0], *expected.shape[2:], expected.shape[1])
    if y.shape == channels_last:  # the emulation keeps the channels last
        candidates[" (NHWC)"] = np.moveaxis(y, -1, 1)
    # Where sizes coincide (C = H = W) onnx2tf may permute the axes on its own: any order
    # that is right is reported as that layout, not as right.
    for perm in itertools.permutations(range(1, y.ndim)):
        order = (0, *perm)
        if order != tuple(range(y.ndim)) and np.transpose(y, order).shape == expected.shape:
            candidates.setdefault(f" (axes {order})", np.transpose(y, order))
    best = ("WRONG (shape)", float("inf"))
    for label, value in candidates.items():
        if value.shape != expected.shape:
            continue
        with np.errstate(invalid="ignore"):
            err = float(np.nanmax(np.abs(value.astype(np.float64) - expected)))
        nan_ok = np.array_equal(np.isnan(value), np.isnan(expected))
        tol = atol + (0.0 if mode == "nearest" else 1e-4 * float(np.nanmax(np.abs(expected))))
        verdict = ("ok" if err <= tol and nan_ok else "WRONG") + label
        if err < best[1] or (best[0].startswith("WRONG") and verdict.startswith("ok")):
            best = (verdict, err)
    return best


def _time(interpreters: dict, feeds: tuple, budget: float, rounds: int) -> dict:
    """Median seconds per run of each interpreter, timed in interleaved rounds."""
    per_round = {}
    for name, interpreter in interpreters.items():  # warm up, and size each round
        start = time.perf_counter()
        _run(interpreter, *feeds)
        per_round[name] = max(1, int(budget / rounds / max(time.perf_counter() - start, 1e-5)))
    times = {name: [] for name in interpreters}
    for _ in range(rounds):
        for name, interpreter in interpreters.items():
            n = per_round[name]
            start = time.perf_counter()
            for _ in range(n):
                _run(interpreter, *feeds)
            times[name].append((time.perf_counter() - start) / n)
    return {name: statistics.median(values) for name, values in times.items()}


def _serve(directory: pathlib.Path, jobs: int, pin: int | None, budget: float, rounds: int):
    """onnx2tf's side: convert every model (cached by content), check, time; results.json."""
    cases = json.loads((directory / "manifest.json").read_text())
    bin_dir = str(pathlib.Path(sys.executable).parent)
    cache = directory / "tflite"
    jobs_list = []
    for case in cases:
        for variant in case["variants"]:
            path = directory / case["name"] / f"{variant}.onnx"
            digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
            jobs_list.append((case["name"], variant, str(path), str(cache / digest)))
    converted = {}
    pending = []
    for name, variant, path, folder in jobs_list:
        done = sorted(pathlib.Path(folder).glob("*_float32.tflite"))
        if done:
            converted[name, variant] = {"tflite": str(done[0]), "cached": True}
        else:
            pending.append((name, variant, path, folder))
    print(f"converting {len(pending)} models ({len(converted)} cached)", flush=True)
    with concurrent.futures.ProcessPoolExecutor(
        jobs, initializer=_worker_init, initargs=(bin_dir,)
    ) as pool:
        futures = {pool.submit(_convert_one, p, f): (n, v) for n, v, p, f in pending}
        for k, future in enumerate(concurrent.futures.as_completed(futures), 1):
            key = futures[future]
            try:
                converted[key] = future.result()
            except Exception as error:  # a worker that died  # noqa: BLE001
                converted[key] = {"error": f"{type(error).__name__}: {error}"[:300]}
            status = converted[key].get("error", "ok")
            print(f"[{k}/{len(pending)}] {key[0]} {key[1]}: {status}", flush=True)
    if pin is not None:
        os.sched_setaffinity(0, {pin})
    results = []
    for case in cases:
        folder = directory / case["name"]
        feeds = (np.load(folder / "X.npy"), np.load(folder / "grid.npy"))
        expected = np.load(folder / "expected.npy")
        row = {"case": case, "variants": {}}
        interpreters = {}
        for variant in case["variants"]:
            conv = converted[case["name"], variant]
            entry = row["variants"].setdefault(variant, {})
            if "error" in conv:
                entry["verdict"] = "FAILS to convert: " + conv["error"].splitlines()[0][:120]
                continue
            try:
                interpreter = _interpreter(conv["tflite"])
                entry["verdict"], entry["err"] = _check(
                    _run(interpreter, *feeds), expected, case["mode"]
                )
                entry["ops"] = _op_counts(conv["tflite"])
                interpreters[variant] = interpreter
            except Exception as error:  # noqa: BLE001
                entry["verdict"] = f"FAILS to run: {type(error).__name__}: {error}"[:160]
        if budget > 0 and interpreters:
            for variant, seconds in _time(interpreters, feeds, budget, rounds).items():
                row["variants"][variant]["ms"] = seconds * 1e3
        results.append(row)
        print(
            case["name"],
            {v: e.get("verdict") for v, e in row["variants"].items()},
            {v: round(e["ms"], 3) for v, e in row["variants"].items() if "ms" in e},
            flush=True,
        )
    (directory / "results.json").write_text(json.dumps(results, indent=1, default=str))


def _op_counts(path: str) -> dict:
    """The TFLite builtin ops of a model, counted (best effort)."""
    try:
        from ai_edge_litert.interpreter import Interpreter

        ops = Interpreter(model_path=path)._get_ops_details()  # noqa: SLF001
        counts: dict[str, int] = {}
        for op in ops:
            counts[op["op_name"]] = counts.get(op["op_name"], 0) + 1
        return counts
    except Exception:  # noqa: BLE001
        return {}


# --- the table ------------------------------------------------------------------------------


def _markdown(results: list[dict], timed: bool) -> str:
    variants = list(dict.fromkeys(v for r in results for v in r["variants"]))
    head = ["case", "truth"] + [f"{v} ms" if timed else v for v in variants]
    if timed:
        head += [f"{v} / emulation" for v in variants if v != "emulation"]
        head += ["the target's choice / emulation"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in results:
        case, got = row["case"], row["variants"]
        cells = [case["name"], case["truth"]]
        for v in variants:
            entry = got.get(v, {})
            verdict = entry.get("verdict", "-")
            text = verdict if verdict == "ok" else f"{verdict} (err {entry.get('err', 0):.2g})"
            if verdict.startswith("FAILS"):
                text = verdict
            if timed and "ms" in entry:
                text = f"{entry['ms']:.3f}" + ("" if verdict == "ok" else f" ({text})")
            cells.append(text)
        if timed:
            base = got.get("emulation", {}).get("ms")
            for v in variants:
                if v == "emulation":
                    continue
                ms = got.get(v, {}).get("ms")
                cells.append(f"{ms / base:.2f}" if ms and base else "-")
            if case.get("kept"):
                cells.append("1 (kept: the emulation)")
            elif "litert / emulation" in head:
                cells.append(cells[head.index("litert / emulation")])
            else:
                cells.append("-")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--litert-python", help="python of onnx2tf's environment")
    parser.add_argument("--set", choices=["bench", "correct"], default="bench")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--only", default="", help="cases whose name contains this")
    parser.add_argument("--work", default="/tmp/litert-bench", help="models and conversions")
    parser.add_argument("--out", help="markdown table to write")
    parser.add_argument("--jobs", type=int, default=2, help="conversions at once")
    parser.add_argument("--pin", type=int, default=0, help="CPU to time on (-1: none)")
    parser.add_argument("--budget", type=float, default=2.0, help="seconds per case and model")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch", type=int, default=2, help="the correct set's batch")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    directory = pathlib.Path(args.work) / args.set
    timed = args.set == "bench" and args.budget > 0
    if args.serve:  # in onnx2tf's environment
        pin = None if args.pin < 0 else args.pin
        _serve(directory, args.jobs, pin, args.budget if timed else 0.0, args.rounds)
        return
    if not args.litert_python:
        parser.error("--litert-python is needed (see the module's docstring)")
    variants = args.variants.split(",")
    cases = [c for c in _cases(args.set, variants, args.batch) if args.only in c["name"]]
    directory.mkdir(parents=True, exist_ok=True)
    _make(cases, directory, args.seed)
    command = [args.litert_python, __file__, "--serve", "--set", args.set, "--work", args.work]
    command += ["--jobs", str(args.jobs), "--pin", str(args.pin), "--budget", str(args.budget)]
    command += ["--rounds", str(args.rounds)]
    environment = dict(os.environ, PYTHONPATH="", TF_CPP_MIN_LOG_LEVEL="3")
    subprocess.run(command, check=True, env=environment)
    results = json.loads((directory / "results.json").read_text())
    table = _markdown(results, timed)
    print(table)
    if args.out:
        header = (
            f"# GridSample on LiteRT (onnx2tf), `python bench/litert.py --set {args.set}`\n\n"
            "Truth: onnxruntime's kernel, else the numpy reference. ok: max abs error <= 1e-4 "
            "(nearest: exact), NaN where the truth has NaN; (NHWC): right once its channels-last "
            "output is moved back. ms: medians of interleaved rounds, 1 interpreter thread.\n\n"
        )
        pathlib.Path(args.out).write_text(header + table + "\n")


if __name__ == "__main__":
    main()
