r"""Every target's lowered graphs on mlprodict's python runtime against the truth.

mlprodict is the Python runtime that the operator's opset-16 page comes from. For every mode,
padding and align_corners at ranks 1-3 (bench/common.py's correctness shapes: batch 2, odd
sizes, far grids with exact pixel centres and ties), float32 and float64, sizes static and
symbolic, this script builds the opset-16 one-node model (IR 8, the ``bilinear``/``bicubic``
spelling), lowers it for every
target (``lower_all``: what a target keeps is lowered too), and computes the truth:
onnxruntime's kernel where it runs the node, else the ONNX reference evaluator with the
package's GridSample kernel (``check.oracle.model_runner``). mlprodict's side
(bench/mlprodict_run.py) runs each model, and at rank 2 the node itself ("native"), in place
(its default) and with ``inplace=False``; this side judges the outputs with the package's
tolerances and writes the table.

mlprodict 0.9.1883 needs onnx 1.14 and numpy < 2: its own environment, Python 3.10.

    /root/.pyenv/versions/3.10.13/bin/python -m venv /work/venv-mlprodict
    /work/venv-mlprodict/bin/pip install mlprodict==0.9.1883 onnx==1.14.1 "numpy<2" jinja2 \
        scipy scikit-learn

then, from the package's environment:

    python bench/mlprodict_check.py --mlprodict-python /work/venv-mlprodict/bin/python \
        --out bench/results/mlprodict.md
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import pathlib
import subprocess
import sys
from collections import Counter

import numpy as np
from common import CORRECT_SHAPES, sample_inputs  # (bench/ is on the path)

HERE = pathlib.Path(__file__).resolve().parent
DTYPES = ("float32", "float64")
SIZES = {"static": "", "symbolic": "-symbolic"}  # sizes declared in the model: name suffix
OPSET, IR_VERSION = 16, 8  # onnx 1.14 reads up to opset 19 and IR 9


def _cases(targets: list[str]) -> list[dict]:
    from gridsample_lower.spec import ALIGN_CORNERS, MODES, PADDING_MODES

    cases = []
    for sizes in SIZES:
        for dtype in DTYPES:
            for rank, (x, out) in CORRECT_SHAPES.items():
                for mode, padding, align in itertools.product(MODES, PADDING_MODES, ALIGN_CORNERS):
                    dims = "x".join(map(str, x)) + "-" + "x".join(map(str, out))
                    name = f"{mode}-{padding}-ac{align}-{dims}-{dtype}" + SIZES[sizes]
                    forms = (["native"] if rank == 2 else []) + list(targets)
                    case = dict(name=name, rank=rank, x=x, out=out, mode=mode, padding=padding)
                    case.update(align=align, dtype=dtype, sizes=sizes, forms=forms)
                    cases.append(case)
    return cases


def _model(case: dict, x_shape: list, grid_shape: list):
    from gridsample_lower.models import gridsample_model

    dtype = np.dtype(case["dtype"])
    return gridsample_model(
        x_shape,
        grid_shape,
        case["mode"],
        case["padding"],
        case["align"],
        x_dtype=dtype,
        grid_dtype=dtype,
        opset=OPSET,
        ir_version=IR_VERSION,
    )


def _make(cases: list[dict], directory: pathlib.Path, seed: int) -> None:
    """Each case's models (opset 16, IR 8), inputs and truth; manifest.json."""
    import onnx

    from gridsample_lower import lower
    from gridsample_lower.check.oracle import model_runner

    rngs = {}  # per dtype and sizes: static float32 gets bench/litert.py's inputs
    for case in cases:
        folder = directory / case["name"]
        folder.mkdir(parents=True, exist_ok=True)
        rng = rngs.setdefault((case["dtype"], case["sizes"]), np.random.default_rng(seed))
        x, grid = sample_inputs(rng, case["x"], case["out"], far=True)
        dtype = np.dtype(case["dtype"])
        x, grid = x.astype(dtype), grid.astype(dtype)
        static = _model(case, list(x.shape), list(grid.shape))
        model = static
        if case["sizes"] == "symbolic":
            axes = [f"d{k}" for k in range(case["rank"])]
            points = [f"o{k}" for k in range(case["rank"])]
            model = _model(case, ["N", "C", *axes], ["N", *points, case["rank"]])
        case["lowering"] = {}
        for form in case["forms"]:
            if form == "native":
                lowered = model
            else:
                try:
                    lowered = lower(model, target=form, lower_all=True)
                except Exception as error:  # noqa: BLE001  (a target that refuses: a result)
                    case["lowering"][form] = f"{type(error).__name__}: {error}".splitlines()[0]
                    continue
            assert lowered.ir_version == IR_VERSION, lowered.ir_version
            onnx.save(lowered, folder / f"{form}.onnx")
        case["forms"] = [f for f in case["forms"] if f not in case["lowering"]]
        np.save(folder / "X.npy", x)
        np.save(folder / "grid.npy", grid)
        runner, case["truth"] = model_runner(static)
        try:
            expected = runner({"X": x, "grid": grid})[0]
        except Exception:  # noqa: BLE001  (onnxruntime loads 3-D nodes but runs only 4-D, 5-D)
            runner, case["truth"] = model_runner(static, native=False)
            expected = runner({"X": x, "grid": grid})[0]
        np.save(folder / "expected.npy", np.asarray(expected))
    (directory / "manifest.json").write_text(json.dumps(cases, indent=1))


def _node_model(nodes, inputs, output, initializers=()):
    """An opset-16, IR-8 model of ``nodes``: inputs (name, array), one float output."""
    from onnx import helper, numpy_helper

    def info(name, array):
        elem = helper.np_dtype_to_tensor_dtype(array.dtype)
        shape = list(array.shape) if array.size else None  # (the output: unknown)
        return helper.make_tensor_value_info(name, elem, shape)

    graph = helper.make_graph(
        nodes,
        "departure",
        [info(name, array) for name, array in inputs],
        [info(output, next(a for _, a in inputs if a.dtype.kind == "f")[:0])],  # X's type
        initializer=[numpy_helper.from_array(a, n) for n, a in initializers],
    )
    opsets = [helper.make_opsetid("", OPSET)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=IR_VERSION)


def _departures() -> list[dict]:
    """One small model per departure: what the spec says, the model, its inputs."""
    from onnx import helper

    f32, i64 = np.float32, np.int64
    column = np.arange(33, dtype=f32).reshape(33, 1)
    out = []

    def add(name, says, nodes, inputs, initializers=()):
        model = _node_model(nodes, inputs, nodes[-1].output[0], initializers)
        out.append(dict(name=name, says=says, model=model, inputs=dict(inputs)))

    add(
        "Where with a 0-D branch",
        "Where-16: 'This operator supports multidirectional (i.e., Numpy-style) broadcasting'",
        [helper.make_node("Where", ["c", "x", "y"], ["z"])],
        [("c", np.array([True, False])), ("x", np.array([1, 2], f32)), ("y", np.array(0, f32))],
    )
    add(
        "GatherElements, 33 elements on the axis, 2-D",
        "GatherElements-13: 'out[i][j] = input[index[i][j]][j] if axis = 0' (for any size)",
        [helper.make_node("GatherElements", ["data", "indices"], ["z"], axis=0)],
        [("data", column), ("indices", np.zeros((2, 1), i64))],
    )
    add(
        "GatherElements, 33 elements on the axis, 3-D",
        "GatherElements-13: 'out[i][j][k] = input[i][index[i][j][k]][k] if axis = 1'",
        [helper.make_node("GatherElements", ["data", "indices"], ["z"], axis=1)],
        [("data", column.reshape(1, 33, 1)), ("indices", np.full((1, 2, 1), 32, i64))],
    )
    add(
        "GatherElements, indices narrower off the axis",
        "GatherElements-13: 'Its output shape is the same as the shape of indices'",
        [helper.make_node("GatherElements", ["data", "indices"], ["z"], axis=1)],
        [("data", np.arange(6, dtype=f32).reshape(2, 3)), ("indices", np.array([[2, 1]], i64))],
    )
    grid = np.zeros((1, 1, 1, 2))
    add(
        "GridSample, float64 X",
        "GridSample-16: T1 'all tensor types' (tensor(double) among them)",
        [helper.make_node("GridSample", ["X", "grid"], ["z"])],
        [("X", np.arange(4, dtype=np.float64).reshape(1, 1, 2, 2)), ("grid", grid)],
    )
    add(
        "GridSample cubic + border, a point past the edge",
        "GridSample-16: 'border: use border values for out-of-bound grid locations' (a reading: "
        "onnxruntime and PyTorch clamp each tap)",
        [
            helper.make_node(
                "GridSample", ["X", "grid"], ["z"], mode="bicubic", padding_mode="border"
            )
        ],
        [
            ("X", np.array([0, 1, 0, 5], f32).reshape(1, 1, 1, 4)),
            ("grid", np.array([1.2, 0.0], f32).reshape(1, 1, 1, 2)),
        ],
    )
    add(
        "In place through a view: Neg(Reshape(A)) + A, A = Abs(X)",
        "IR: a graph is a dataflow of values, each computed once by its node (SSA); Add reads "
        "A as Abs made it",
        [
            helper.make_node("Abs", ["X"], ["A"]),
            helper.make_node("Reshape", ["A", "shape"], ["B"]),
            helper.make_node("Neg", ["B"], ["C"]),
            helper.make_node("Add", ["C", "A"], ["z"]),
        ],
        [("X", np.ones((2, 3), f32))],
        [("shape", np.array([2, 3], i64))],
    )
    return out


def _make_departures(directory: pathlib.Path) -> list[dict]:
    """Writes each departure's model, inputs and onnxruntime's output; their manifest entries."""
    import onnx

    from gridsample_lower.check.oracle import model_runner

    entries = []
    for k, departure in enumerate(_departures(), 1):
        folder = directory / f"departure-{k}"
        folder.mkdir(parents=True, exist_ok=True)
        onnx.save(departure["model"], folder / "node.onnx")
        for name, array in departure["inputs"].items():
            np.save(folder / f"{name}.npy", array)
        runner, truth = model_runner(departure["model"])
        np.save(folder / "expected.npy", runner(departure["inputs"])[0])
        entries.append(
            dict(
                name=folder.name,
                title=departure["name"],
                says=departure["says"],
                forms=["node"],
                truth=truth,
            )
        )
    return entries


def _departure_table(directory: pathlib.Path, entries: list[dict], runs: dict) -> str:
    lines = [
        "## mlprodict's departures, one small model each (inputs in the script)",
        "",
        "| model | the spec | truth | mlprodict in place | inplace=False |",
        "|---|---|---|---|---|",
    ]
    for entry in entries:
        folder = directory / entry["name"]
        cells = [f"{_values(np.load(folder / 'expected.npy'))} ({entry['truth']})"]
        for inplace in (1, 0):
            status = runs[entry["name"]][f"node.inplace{inplace}"]
            ran = status == "ran"
            cells.append(_values(np.load(folder / f"node.inplace{inplace}.npy")) if ran else status)
        cells = [c.replace("|", "/") for c in cells]
        lines.append(f"| {entry['title']} | {entry['says']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _values(array: np.ndarray) -> str:
    return np.array2string(np.asarray(array).ravel(), precision=4, separator=", ")


def _judge(directory: pathlib.Path, cases: list[dict], runs: dict) -> list[dict]:
    """Per case, form and inplace: ``ok``, ``WRONG`` (max error) or the error's line."""
    from gridsample_lower.check.tolerances import tolerance

    rows = []
    for case in cases:
        folder = directory / case["name"]
        expected = np.load(folder / "expected.npy")
        atol, rtol = tolerance(np.dtype(case["dtype"]), case["mode"])
        row = {"case": case, "forms": {}}
        for form, error in case["lowering"].items():
            row["forms"][form] = {1: ("fails", f"lower: {error}"), 0: ("fails", f"lower: {error}")}
        for form in case["forms"]:
            row["forms"][form] = {}
            for inplace in (1, 0):
                key = f"{form}.inplace{inplace}"
                status = runs[case["name"]][key]
                if status != "ran":
                    row["forms"][form][inplace] = ("fails", status)
                    continue
                got = np.load(folder / f"{key}.npy")
                if got.shape != expected.shape or got.dtype != expected.dtype:
                    verdict = f"{got.dtype}{list(got.shape)}, not {expected.dtype}"
                    row["forms"][form][inplace] = ("wrong", verdict)
                    continue
                with np.errstate(invalid="ignore"):
                    err = float(np.nanmax(np.abs(got - expected))) if got.size else 0.0
                same_nan = np.array_equal(np.isnan(got), np.isnan(expected))
                close = np.allclose(got, expected, atol=atol, rtol=rtol, equal_nan=True)
                right = same_nan and close
                row["forms"][form][inplace] = ("right", err) if right else ("wrong", err)
        rows.append(row)
    return rows


def _cell(result: tuple, keys: dict[str, str]) -> str:
    kind, detail = result
    if kind == "right":
        return "ok"
    if kind == "wrong":
        return f"**WRONG** {detail:.2g}" if isinstance(detail, float) else f"**WRONG** {detail}"
    return f"fails {keys[detail]}"


def _markdown(rows: list[dict], forms: list[str], versions: str) -> str:
    keys: dict[str, str] = {}  # error line -> E1, E2, ... in order of appearance
    for row in rows:
        for form in forms:
            for kind, detail in row["forms"].get(form, {}).values():
                if kind == "fails" and detail not in keys:
                    keys[detail] = f"E{len(keys) + 1}"
    out = [
        "# Every target's lowered graphs on mlprodict (`python bench/mlprodict_check.py`)",
        "",
        versions,
        "",
        (
            "Opset-16 one-node models (IR 8) lowered with `lower(model, target=..., "
            "lower_all=True)`, run by `OnnxInference(model, runtime='python')` in place "
            "(its default) and with `inplace=False`. X 2x3 with spatial sizes "
            f"{[list(x[2:]) for x, _ in CORRECT_SHAPES.values()]}, grids uniform in [-1.6, "
            "1.6] with every 7th value a multiple of 1/8; float32 and float64; sizes static, and "
            "symbolic (`-symbolic`: every size a name). Truth: "
            "onnxruntime's kernel where it runs the node, else the ONNX reference with the "
            "package's kernel; right: within the package's tolerance (nearest: exact), NaN "
            "where the truth has NaN. native: mlprodict's own GridSample (opset 16: 4-D only)."
        ),
        "",
        NOTES,
        "## Counts per target (in place; with inplace=False)",
        "",
        "| target | cases | runs | right | wrong | fails | inplace=False: runs | right | wrong "
        "| fails |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for form in forms:
        counts = {i: Counter() for i in (1, 0)}
        for row in rows:
            for inplace in (1, 0):
                if form in row["forms"]:
                    counts[inplace][row["forms"][form][inplace][0]] += 1
        n = sum(counts[1].values())
        cells = []
        for i in (1, 0):
            c = counts[i]
            cells += [c["right"] + c["wrong"], c["right"], c["wrong"], c["fails"]]
        out.append(f"| {form} | {n} | " + " | ".join(map(str, cells)) + " |")
    out += ["", "## Errors (the first line of the first cause)", ""]
    out += ["| key | error | cases (target: count) |", "|---|---|---|"]
    for error, key in keys.items():
        per_form = Counter(
            form
            for row in rows
            for form in forms
            for kind, detail in [row["forms"].get(form, {}).get(1, (None, None))]
            if kind == "fails" and detail == error
        )
        where = ", ".join(f"{form}: {count}" for form, count in per_form.items())
        out.append(f"| {key} | {error.replace('|', '/')} | {where} |")
    out += [
        "",
        "## Per case (in place; `/ ...` when inplace=False differs)",
        "",
        "| case | truth | " + " | ".join(forms) + " |",
        "|---|---|" + "---|" * len(forms),
    ]
    for row in rows:
        cells = []
        for form in forms:
            result = row["forms"].get(form)
            if result is None:
                cells.append("-")
                continue
            text = _cell(result[1], keys)
            if _cell(result[0], keys) != text:
                text += " / " + _cell(result[0], keys)
            cells.append(text)
        case = row["case"]
        out.append(f"| {case['name']} | {case['truth']} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


NOTES = """## Reading these tables

mlprodict departs from the spec in four places, each shown by a small model in the table of
departures below:

- Where: a 0-D branch beside a larger one is refused ("x and y should share the same shape");
  the spec broadcasts every input (numpy-style), mlprodict only equal shapes or a (1,) branch.
  Every target's nearest graphs (coordinates, masks) select a constant there; webnn's
  constants are (1,) (``where_scalars=False``).
- GatherElements: ``numpy.choose`` over the axis, which takes at most 32 choices (numpy < 2):
  with more than 32 elements along the axis it fails, and for 2-D data falls back to a loop
  that reads row i's first index in row i of the data ("cannot reshape array", or silently a
  wrong value). Indices narrower than the data off the axis are refused too ("Except for
  dimension ..."); the spec bounds neither. Targets that gather X's flattened pixels with
  GatherElements fail past 32 pixels (every 2-D and 3-D case here).
- GridSample: float64 X is refused (its dispatch tests float32 twice). The opset-16 node is
  4-D only, as the spec says; the mnn and ncnn targets read taps with GridSample itself (so
  no float64), mnn's 3-D reflection and cubic with a 5-D one.
- In-place execution (the default) lets the one node that reads a value overwrite it, even
  when that value is a view (Reshape) of one that another node reads later. The tract
  target's graphs with symbolic sizes meet it with zeros padding at ranks 2 and 3: the
  padded X's sizes, ``Cast(Shape)``, are reshaped and added to in place before a Mul reads
  them (wrong in place, right with ``inplace=False``). Elsewhere the two agree.

Not a departure but a reading: with cubic and border padding, mlprodict clamps a location
outside the image to the border before taking its 4x4 taps ("use border values for
out-of-bound grid locations"), where onnxruntime and PyTorch clamp each tap: the two native
rows marked wrong (0.14-0.22 apart on these far grids). The ONNX reference (onnx 1.23) does
the same as mlprodict with align_corners=1.
"""


def main() -> None:
    from gridsample_lower.lowering.targets import TARGETS

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mlprodict-python", required=True, help="python of its environment")
    parser.add_argument("--targets", default=",".join(TARGETS))
    parser.add_argument("--only", default="", help="cases whose name contains this")
    parser.add_argument("--work", default="/tmp/mlprodict-bench", help="models and outputs")
    parser.add_argument("--out", help="markdown table to write")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    targets = args.targets.split(",")
    cases = [c for c in _cases(targets) if args.only in c["name"]]
    directory = pathlib.Path(args.work)
    directory.mkdir(parents=True, exist_ok=True)
    _make(cases, directory, args.seed)
    departures = _make_departures(directory)
    manifest = directory / "manifest.json"
    manifest.write_text(json.dumps(json.loads(manifest.read_text()) + departures, indent=1))
    print(f"wrote {len(cases)} cases to {directory}", flush=True)
    environment = dict(os.environ, PYTHONPATH="")
    command = [args.mlprodict_python, str(HERE / "mlprodict_run.py"), str(directory)]
    subprocess.run(command, check=True, env=environment, stdout=subprocess.DEVNULL)
    done = json.loads((directory / "runs.json").read_text())
    rows = _judge(directory, cases, done["runs"])
    forms = ["native", *targets]
    table = _markdown(rows, forms, _versions(done["versions"]))
    per_case = "## Per case"
    departed = _departure_table(directory, departures, done["runs"])
    table = table.replace(per_case, departed + "\n" + per_case, 1)
    if args.out:
        pathlib.Path(args.out).write_text(table)
        print("wrote", args.out)
    else:
        print(table)


def _versions(theirs: dict) -> str:
    from importlib.metadata import version

    ours = {n: version(n) for n in ("onnx", "onnxruntime", "numpy")}
    return (
        "mlprodict's side: "
        + ", ".join(f"{k} {v}" for k, v in theirs.items())
        + ". The package's side (models, truth): "
        + ", ".join(f"{k} {v}" for k, v in ours.items())
        + f", Python {sys.version.split()[0]}."
    )


if __name__ == "__main__":
    main()
