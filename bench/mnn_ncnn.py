"""The mnn and ncnn targets on MNN and on ncnn (through pnnx): right, and how fast.

Checks every mode, padding and align_corners at ranks 1-3 on each runtime, native and lowered
(``lower(model, target, lower_all=True)``, so what the target keeps is lowered too), against
onnxruntime's kernel where it runs and the repository's numpy reference elsewhere, on grids in
[-3, 3] and on a nearest-ties grid; then times native against lowered (the target as it
is: what it keeps stays native), one thread, the two in turns, at bench/run.py's shapes; cubic,
which neither runtime computes right, against its native bilinear at the same shape ("best
alternative"). Writes bench/results/mnn_ncnn.md and .json.

Its own venv (MNN and pnnx must not meet the test venv: MNN's ``mnnconvert`` script pip-installs
a logging SDK that downgrades protobuf below onnx's floor; this script calls the converter's C
entry point instead):

    python3.11 -m venv /work/venv-mnn
    /work/venv-mnn/bin/pip install -e ".[test]" mnn==3.6.1 ncnn==1.0.20261020
    /work/venv-mnn/bin/pip install --no-deps pnnx==20261020
    /work/venv-mnn/bin/python bench/mnn_ncnn.py [--check-only | --time-only] [--rounds 7]

Every case runs in a fresh interpreter (``--worker``): MNN crashes on 1-D GridSample, and ncnn's
OpenMP hangs in forked children.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import subprocess
import sys
import time

import numpy as np
from common import CONFIGS_2D as BENCH_CONFIGS_2D
from common import SHAPE_3D, SHAPES_2D  # (bench/ is on the path)

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

MODES, PADDINGS = ("linear", "nearest", "cubic"), ("zeros", "border", "reflection")
CHECK_IN, CHECK_OUT = [16, 20, 9], [12, 14, 7]  # H != W, not powers of two
CONFIGS_2D = [*BENCH_CONFIGS_2D, ("cubic", "border", 1), ("cubic", "reflection", 0)]
CONFIGS_3D = [
    ("linear", "zeros", 0),
    ("nearest", "zeros", 0),
    ("linear", "reflection", 0),
    ("cubic", "zeros", 0),
]


# -- the worker: one case in a fresh interpreter ---------------------------------------------


def _model(x_shape, grid_shape, mode, padding, align):
    from gridsample_lower.models import gridsample_model

    return gridsample_model(list(x_shape), list(grid_shape), mode, padding, align)


def _forms(case: dict) -> dict:
    """Each form the case runs: its name and ONNX model."""
    from gridsample_lower import lower

    mode, padding, align = case["config"]
    model = _model(case["x"], case["grid"], mode, padding, align)
    forms = {}
    for name in case["forms"]:
        if name == "native":
            forms[name] = model
        elif name == "native bilinear":
            pad = padding if padding != "reflection" else "border"
            forms[name] = _model(case["x"], case["grid"], "linear", pad, align)
        elif name == "generic":
            forms[name] = lower(model)
        elif name.endswith(" all"):
            forms[name] = lower(model, target=name[:-4], lower_all=True)
        else:
            forms[name] = lower(model, target=name)
    return forms


def _expected(case: dict, x, grid) -> np.ndarray:
    import onnxruntime as ort

    from gridsample_lower.check.reference import grid_sample

    mode, padding, align = case["config"]
    r = len(case["x"]) - 2
    if r in (2, 3) and not (r == 3 and mode == "cubic"):
        model = _model(case["x"], case["grid"], mode, padding, align)
        session = ort.InferenceSession(
            model.SerializeToString(), providers=["CPUExecutionProvider"]
        )
        return session.run(None, {"X": x, "grid": grid})[0]
    return grid_sample(x, grid, mode, padding, align).astype(np.float32)


def _inputs(case: dict, rng):
    x = rng.standard_normal(case["x"]).astype(np.float32)
    r = len(case["x"]) - 2
    if case.get("grid_kind") == "ties":  # 2x upsampling, align_corners=1: every point a tie
        sizes = case["x"][2:]
        axes = [np.arange(2 * s - 1) / 2.0 * 2 / max(s - 1, 1) - 1 for s in sizes]
        mesh = np.meshgrid(*axes, indexing="ij")
        grid = np.stack(mesh[::-1], axis=-1)[None].astype(np.float32)
        grid = np.broadcast_to(grid, (case["x"][0], *grid.shape[1:])).copy()
        case["grid"] = list(grid.shape)
        return x, grid
    grid = rng.uniform(-case["far"], case["far"], (case["grid"][0], *case["grid"][1:])).astype(
        np.float32
    )
    assert grid.shape[-1] == r
    return x, grid


def _runner(runtime: str, model, shapes, folder: pathlib.Path):
    import mnn_ncnn_run as rt

    folder.mkdir(parents=True, exist_ok=True)
    if runtime == "mnn":
        return rt.MNNRunner(rt.mnn_convert(model, folder)), None
    param, weights, _ = rt.pnnx_convert(model, shapes, folder)
    unknown = rt.ncnn_unknown_layers(param)
    if unknown:
        raise RuntimeError(f"ncnn has no layer {', '.join(unknown)}")
    runner = rt.NCNNRunner(param, weights)
    return runner, runner


def worker(case: dict) -> dict:
    """Run one case: check every form once, then time them in turns."""
    import tempfile

    from gridsample_lower.check.tolerances import tolerance

    rng = np.random.default_rng(case.get("seed", 0))
    x, grid = _inputs(case, rng)
    expected = _expected(case, x, grid)
    atol, rtol = tolerance(np.float32, case["config"][0])
    forms = _forms(case)
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="mnn_ncnn_"))
    result = {"case": case, "forms": {}}
    runs = {}
    for name, model in forms.items():
        entry = result["forms"].setdefault(name, {})
        try:
            runner, ncnn = _runner(
                case["runtime"],
                model,
                [x.shape, grid.shape],
                scratch / name.replace(" ", "_"),
            )
            feeds = {"X": x, "grid": grid}
            run = (lambda r=runner: r([x, grid])) if ncnn else (lambda r=runner, f=feeds: r(f))
            got = run()
            timed = (lambda r=runner: r.run_only([x, grid])) if ncnn else runner.run_only
        except Exception as error:  # noqa: BLE001 (a conversion or load failure is a result)
            entry["error"] = f"{type(error).__name__}: {str(error)[:300]}"
            continue
        got = np.asarray(got).reshape(expected.shape) if got.size == expected.size else got
        if got.shape != expected.shape:
            entry["error"] = f"shape {list(got.shape)} != {list(expected.shape)}"
            continue
        err = float(np.nanmax(np.abs(got - expected))) if got.size else 0.0
        same_nan = bool(np.array_equal(np.isnan(got), np.isnan(expected)))
        entry["max_error"] = err
        entry["ok"] = bool(same_nan and np.allclose(got, expected, atol=atol, rtol=rtol))
        runs[name] = timed
    rounds = case.get("rounds", 0)
    times = {name: [] for name in runs}
    walls = {name: [] for name in runs}
    repeat = case.get("repeat", 3)
    for _ in range(rounds):
        for name, run in runs.items():
            run()  # (warm)
            start, cpu = time.perf_counter(), time.process_time()
            for _ in range(repeat):
                run()
            # CPU time of this process (one thread): on a machine shared with other jobs the
            # wall clock mostly measures waiting for a core.
            times[name].append((time.process_time() - cpu) / repeat)
            walls[name].append((time.perf_counter() - start) / repeat)
    for name, samples in times.items():
        if samples:
            result["forms"][name]["ms"] = 1e3 * statistics.median(samples)
            result["forms"][name]["wall_ms"] = 1e3 * statistics.median(walls[name])
    return result


def run_case(case: dict, timeout: float = 1800) -> dict:
    command = [
        sys.executable,
        str(pathlib.Path(__file__).resolve()),
        "--worker",
        json.dumps(case),
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"case": case, "crash": "timeout"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        return {
            "case": case,
            "crash": f"exit {done.returncode}: {done.stderr.strip()[-300:]}",
        }
    return json.loads(lines[-1])


# -- the driver ----------------------------------------------------------------------------


def check_case(case: dict) -> dict:
    """Each form in its own interpreter: a native crash (MNN's 1-D) leaves the lowered one."""
    merged = {"case": case, "forms": {}}
    for form in case["forms"]:
        done = run_case({**case, "forms": [form]})
        if "crash" in done:
            merged["forms"][form] = {"error": "crash: " + done["crash"].split(":")[0]}
        else:
            merged["forms"].update(done["forms"])
            merged["case"] = {**done["case"], "forms": case["forms"]}
    return merged


def check_cases(runtime: str) -> list[dict]:
    cases = []
    for rank in (1, 2, 3):
        for mode in MODES:
            for padding in PADDINGS:
                for align in (0, 1):
                    base = {
                        "runtime": runtime,
                        "config": [mode, padding, align],
                        "x": [1, 3, *CHECK_IN[:rank]],
                        "grid": [1, *CHECK_OUT[:rank], rank],
                        "forms": ["native", f"{runtime} all"],
                    }
                    cases.append({**base, "far": 3.0, "grid_kind": "far"})
                    if mode == "nearest" and align == 1 and rank == 2:
                        cases.append({**base, "grid_kind": "ties"})
    return cases


def time_cases(runtime: str, rounds: int) -> list[dict]:
    cases = []
    shapes = [(x, o) for x, o in SHAPES_2D if runtime == "mnn" or x[0] == 1]  # ncnn: no batch
    for x_shape, out in shapes:
        for config in CONFIGS_2D:
            cases.append(_time_case(runtime, config, x_shape, out, rounds))
    for config in CONFIGS_3D:
        cases.append(_time_case(runtime, config, *SHAPE_3D, rounds))
    return cases


def _time_case(runtime, config, x_shape, out, rounds) -> dict:
    mode, padding, _ = config
    forms = ["native", runtime]
    if mode == "cubic":
        forms.append("native bilinear")
    if runtime == "mnn":
        forms.append("generic")  # (the "before": 57x)
    kept = mode == "linear" and padding in ("zeros", "border")
    if kept:
        forms.append(f"{runtime} all")
    return {
        "runtime": runtime,
        "config": list(config),
        "x": list(x_shape),
        "grid": [x_shape[0], *out, len(out)],
        "far": 1.1,
        "forms": forms,
        "rounds": rounds,
        "repeat": 3,
    }


def _label(case: dict) -> str:
    mode, padding, align = case["config"]
    x = "x".join(map(str, case["x"]))
    out = "x".join(map(str, case["grid"][1:-1]))
    kind = {"ties": ", ties"}.get(case.get("grid_kind", ""), "")
    return f"{mode} {padding} ac{align} | {x} -> {out}{kind}"


def _cell(entry: dict | None, key: str = "max_error") -> str:
    if entry is None:
        return "-"
    if "error" in entry:
        return "fails: " + entry["error"].split("\n")[0][:80]
    if key == "ms":
        return f"{entry['ms']:.3f}" if "ms" in entry else "-"
    mark = "" if entry.get("ok") else " **WRONG**"
    return f"{entry['max_error']:.2g}{mark}"


def report(results: dict, versions: str, load: str) -> str:
    out = ["# The mnn and ncnn targets on MNN and ncnn", "", versions, "", load, "", NOTES]
    for runtime in ("mnn", "ncnn"):
        checks = results.get(f"check-{runtime}", [])
        if checks:
            wrong = sum(
                1 for r in checks if not r.get("forms", {}).get(f"{runtime} all", {}).get("ok")
            )
            out += [
                f"## {runtime}: correctness (max abs error against onnxruntime or numpy)",
                "",
                (
                    f"Lowered with `lower(model, target={runtime!r}, lower_all=True)`: "
                    f"{len(checks) - wrong} of {len(checks)} cases right. X 1x3 with spatial "
                    f"sizes {CHECK_IN}, grids uniform in [-3, 3], and the nearest-ties grid."
                ),
                "",
                "| case | native | lowered |",
                "|---|---|---|",
            ]
            for r in checks:
                forms = r.get("forms", {})
                if "crash" in r:
                    out.append(f"| {_label(r['case'])} | crash: {r['crash'][:80]} | - |")
                    continue
                out.append(
                    f"| {_label(r['case'])} | {_cell(forms.get('native'))} | "
                    f"{_cell(forms.get(f'{runtime} all'))} |"
                )
            out.append("")
        timed = results.get(f"time-{runtime}", [])
        if timed:
            out += [
                f"## {runtime}: time (CPU ms of the one thread, median, forms in turns), ratios",
                "",
                (
                    "ratio = lowered / native of the same run; for cubic, which the runtime "
                    "computes as bilinear, also / its native bilinear (the best right "
                    "alternative there is: none). Kept configurations run native in the "
                    "target; `all` is lower_all."
                ),
                "",
                (
                    "| case | native | target | ratio | native bilinear | target / bilinear | "
                    "lower_all | ratio | generic (before) | ratio | lowered error |"
                ),
                "|---|---|---|---|---|---|---|---|---|---|---|",
            ]
            for r in timed:
                if "crash" in r:
                    out.append(f"| {_label(r['case'])} | crash: {r['crash'][:80]} |||||||||")
                    continue
                f = r["forms"]
                native = f.get("native", {}).get("ms")

                def ratio(name, base=native, f=f):
                    ms = f.get(name, {}).get("ms")
                    return f"{ms / base:.2f}" if ms and base else "-"

                bil = f.get("native bilinear", {}).get("ms")
                out.append(
                    f"| {_label(r['case'])} | {_cell(f.get('native'), 'ms')} | "
                    f"{_cell(f.get(runtime), 'ms')} | {ratio(runtime)} | "
                    f"{_cell(f.get('native bilinear'), 'ms')} | {ratio(runtime, bil)} | "
                    f"{_cell(f.get(f'{runtime} all'), 'ms')} | {ratio(f'{runtime} all')} | "
                    f"{_cell(f.get('generic'), 'ms')} | {ratio('generic')} | "
                    f"{_cell(f.get(runtime))} |"
                )
            out.append("")
    return "\n".join(out)


NOTES = """## Reading these tables

- Native: the runtime's own GridSample on the original node. MNN 3.6.1 computes cubic as
  bilinear, folds reflection once (wrong past [-1, 1]), rounds nearest's ties away from zero and
  crashes on 1-D; ncnn (pnnx 20261020) computes cubic as bilinear (pnnx maps only `bicubic`),
  rounds ties away from zero, and pnnx cannot convert 1-D or 3-D cubic nodes.
- The targets keep what their runtime computes right (MNN: 2-D and 3-D linear with zeros or
  border; ncnn: the same) and make its own GridSample read the rest (`lowering/native_taps.py`):
  nearest at pixel centres for nearest, linear samples for reflection (one, folded) and cubic
  (three an axis, up to 128 pixels an axis; beyond, 16 nearest reads at pixel centres).
- A right cubic needs 16 taps a point; the cheapest right read either runtime has is its own
  linear kernel, which can merge only cubic's two inner taps (the outer weights are negative):
  at least 9 of its reads a point, each about what its whole (bilinear) GridSample costs, so
  cubic stays about 9x or more of the native bilinear whatever the form; the gathers (MNN runs
  Gather and GatherElements as loops over the indices) cost as much or more.
- Times are CPU time of the one thread running the session (inputs set once, outputs left in
  place), medians of 5 rounds of 3 runs, the forms in turns; the wall clock on this shared
  machine mostly measured waiting for a core.
"""


def _versions() -> str:
    from importlib.metadata import version

    names = ["mnn", "ncnn", "pnnx", "onnx", "onnxruntime", "protobuf", "numpy"]
    return (
        "Versions: "
        + ", ".join(f"{n} {version(n)}" for n in names)
        + f"; Python {sys.version.split()[0]}."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--runtimes", default="mnn,ncnn")
    parser.add_argument("--check-only", action="store_true")
    parser.add_argument("--time-only", action="store_true")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--out", default=str(HERE / "results" / "mnn_ncnn"))
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return
    out = pathlib.Path(args.out)
    saved = out.with_suffix(".json")
    results = json.loads(saved.read_text()) if saved.exists() else {}
    load_start = pathlib.Path("/proc/loadavg").read_text().split()[:3]
    for runtime in args.runtimes.split(","):
        if not args.time_only:
            results[f"check-{runtime}"] = [check_case(c) for c in check_cases(runtime)]
            print(runtime, "checked", flush=True)
        if not args.check_only:
            results[f"time-{runtime}"] = []
            for case in time_cases(runtime, args.rounds):
                results[f"time-{runtime}"].append(run_case(case))
                print(runtime, _label(case), flush=True)
                saved.write_text(json.dumps(results, indent=1))
        saved.write_text(json.dumps(results, indent=1))
    load_end = pathlib.Path("/proc/loadavg").read_text().split()[:3]
    load = (
        f"Machine: 2 cores shared with other jobs; load average {' '.join(load_start)} at the "
        f"start, {' '.join(load_end)} at the end: read single ratios to within about 1.5x."
    )
    out.with_suffix(".md").write_text(report(results, _versions(), load) + "\n")
    print("wrote", out.with_suffix(".md"))


if __name__ == "__main__":
    main()
