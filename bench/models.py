"""Time the real-model corpus, original against lowered, on onnxruntime and OpenVINO (f32).

Each model of ``testdata/corpus`` runs on its stored inputs (``--size stored``, the default:
the tiny sizes it was exported at), at a deployment size (``--size deploy``), or both in one
run (``--size both``): on onnxruntime the original and ``lower(target="onnxruntime",
lower_all=True)``, on OpenVINO (``INFERENCE_PRECISION_HINT: f32``) the original and
``lower(target="openvino", lower_all=True)``, as exported (its symbolic sizes) and reshaped
to the inputs' sizes before compiling ("openvino static"), one thread each. The variants run
in interleaved rounds; each gets the median of its rounds. A lowered model whose outputs leave
both the reference outputs and its runtime's run of the original (by the manifest's tolerance,
relative to the output's scale) is marked, not timed away; the reference is the stored
expected outputs at the stored size, onnxruntime's run of the original as written at a
deployment size (``testdata/corpus/runnable.py``: a float16 grid kept rounded, a double grid
cast to X's type).
Where a runtime cannot run the original (onnxruntime: a double grid with float X; OpenVINO: a
float16 AffineGrid, a 5-D GridSample), only the lowered model is timed.

Deployment inputs (``DEPLOY``) are built as ``testdata/corpus/make_corpus.py`` builds the stored
ones, from a seeded numpy generator. An export whose axes are static at the sizes a deployment
needs is timed as ``make_corpus.py --deploy`` exported it again at those sizes (with the same
dynamic axes, into ``testdata/corpus/deploy/``: it needs the ``models`` extra, and the files
are not committed); without that file it is listed with the reason, untimed.

Run: ``pip install -e ".[test]" && python bench/models.py [--size stored|deploy|both]
[--rounds 5] [--budget 0.2] [--only NAME ...] [--out bench/results/models.md]``; with
``--size both`` the file holds both tables, from the same run.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import platform
import re
import sys
from collections.abc import Callable

import numpy as np
import onnx
import onnxruntime as ort
import openvino as ov
from common import median_ms  # (bench/ is on the path)

from gridsample_lower import lower

CORPUS = pathlib.Path(__file__).parents[1] / "testdata" / "corpus"
sys.path.insert(0, str(CORPUS))
from runnable import runnable  # noqa: E402  (the exports as onnxruntime runs them as written)

RESULTS = pathlib.Path(__file__).parent / "results"
DEPLOY_EXPORTS = CORPUS / "deploy"  # make_corpus.py --deploy: fixed-size exports, exported again
SEED = 0


def _onnxruntime(model: onnx.ModelProto):
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 4
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    return lambda feeds: session.run(None, feeds)


def _openvino(model: onnx.ModelProto):
    core = ov.Core()
    compiled = core.compile_model(
        core.read_model(model.SerializeToString(), b""),
        "CPU",
        {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": 1},
    )
    request = compiled.create_infer_request()

    def run(feeds):
        result = request.infer(feeds)
        return [np.array(result[output]) for output in compiled.outputs]

    return run


def _openvino_static(model: onnx.ModelProto):
    """OpenVINO as above, the model reshaped to the inputs' sizes before it is compiled.

    Once per set of sizes: static shapes, which OpenVINO compiles into fused kernels.
    """
    core, compiled = ov.Core(), {}

    def run(feeds):
        key = tuple(sorted((name, array.shape) for name, array in feeds.items()))
        if key not in compiled:
            read = core.read_model(model.SerializeToString(), b"")
            read.reshape({name: list(array.shape) for name, array in feeds.items()})
            options = {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": 1}
            done = core.compile_model(read, "CPU", options)
            compiled[key] = (done, done.create_infer_request())
        done, request = compiled[key]
        result = request.infer(feeds)
        return [np.array(result[output]) for output in done.outputs]

    return run


RUNTIMES = {
    "onnxruntime": (_onnxruntime, "onnxruntime"),
    "openvino": (_openvino, "openvino"),
    "openvino static": (_openvino_static, "openvino"),
}


# ---------------------------------------------------------------------------------------------
# Deployment sizes: each corpus model (the manifest's "model") at a size it is deployed at, its
# inputs built as make_corpus.py builds the stored ones (its _image, _smooth, _affine, ...).


def _image(rng, *shape):
    """Uniform noise in [-1, 1], as the detectors and RAFT see in the corpus."""
    return rng.uniform(-1.0, 1.0, shape).astype(np.float32)


def _upsampled(array: np.ndarray, sizes: tuple[int, ...]) -> np.ndarray:
    """Linear resize of the trailing axes (align_corners=False), as F.interpolate does."""
    for axis, size in zip(range(array.ndim - len(sizes), array.ndim), sizes, strict=True):
        n = array.shape[axis]
        source = np.clip((np.arange(size) + 0.5) * n / size - 0.5, 0, n - 1)
        low = np.floor(source).astype(np.int64)
        high = np.minimum(low + 1, n - 1)
        weight = (source - low).reshape([-1] + [1] * (array.ndim - axis - 1))
        array = np.take(array, low, axis) * (1 - weight) + np.take(array, high, axis) * weight
    return array


def _smooth(rng, *shape):
    """A smooth image: coarse noise at 1/8 of the size, upsampled, plus a little fine noise."""
    n, c, *sizes = shape
    coarse = rng.standard_normal((n, c, *[max(2, s // 8) for s in sizes]))
    return (_upsampled(coarse, tuple(sizes)) + 0.05 * rng.standard_normal(shape)).astype(np.float32)


def _near_identity(rng, n, rows):
    """make_corpus's _affine: rotation, scale, shear and a shift of a few pixels."""
    eye = np.broadcast_to(np.eye(rows + 1)[:rows], (n, rows, rows + 1))
    return eye + 0.15 * rng.standard_normal((n, rows, rows + 1)) * np.array([1.0] * rows + [20])


def _onto(transform, source, output):
    """A transform of output pixels composed after the resize of the image to the output.

    kornia's warps take a pixel transform from the source to the output; these exports fix the
    output's size, so a transform that fits the whole source into it is what a deployment at a
    larger source size does (a near-identity one would read only the source's corner).
    """
    rows = len(source)
    scale = np.diag([(o - 1) / (s - 1) for s, o in zip(source[::-1], output[::-1], strict=True)])
    square = transform
    if transform.shape[1] == rows:  # affine: the last row
        square = np.concatenate([transform, np.zeros((len(transform), 1, rows + 1))], 1)
        square[:, -1, -1] = 1
    resize = np.eye(rows + 1)
    resize[:rows, :rows] = scale
    return (square @ resize)[:, : transform.shape[1]].astype(np.float32)


def _images_640(rng, names):
    return {names[0]: _image(rng, 1, 3, 640, 640)}


def _raft(rng, names):
    return {name: _image(rng, 1, 3, 440, 1024) for name in names}


def _glm4v(rng, names):
    """One image of 46x46 patches with the coordinates GLM-4V gives them (make_corpus's)."""
    h, w = 46, 46
    ys, xs = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
    arrays = [
        rng.standard_normal((h * w, 32)).astype(np.float32),
        np.array([h * w], dtype=np.int64),
        np.array([[1, h, w]], dtype=np.int64),
        ys.reshape(-1).astype(np.int64),
        xs.reshape(-1).astype(np.int64),
    ]
    return dict(zip(names, arrays, strict=True))


def _warp_perspective(rng, names):
    image = _smooth(rng, 1, 3, 480, 640)
    homography = np.concatenate([_near_identity(rng, 1, 2), [[[0.0, 0.0, 1.0]]]], 1)
    homography[:, 2, :2] = 1e-3 * rng.standard_normal((1, 2))
    return {names[0]: image, names[1]: _onto(homography, (480, 640), (48, 64))}


def _warp_affine(rng, names):
    image = _smooth(rng, 1, 3, 480, 640)
    return {names[0]: image, names[1]: _onto(_near_identity(rng, 1, 2), (480, 640), (40, 56))}


def _remap(rng, names):
    h, w = 480, 640
    ys, xs = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
    wobble = 3 * np.sin(ys / 5)[None]
    map_x = (xs + wobble + rng.standard_normal((1, h, w))).astype(np.float32)
    map_y = (ys - wobble + rng.standard_normal((1, h, w))).astype(np.float32)
    return dict(zip(names, [_smooth(rng, 1, 3, h, w), map_x, map_y], strict=True))


def _warp_affine3d(rng, names):
    volume = _smooth(rng, 1, 2, 96, 128, 160)
    matrix = _onto(_near_identity(rng, 1, 3), (96, 128, 160), (12, 16, 20))
    return {names[0]: volume, names[1]: matrix}


def _stn(rng, names):
    return {names[0]: _smooth(rng, 1, 3, 480, 640)}


DEPLOY: dict[str, tuple[str, Callable]] = {  # model -> (what the size is, its inputs)
    "rt_detr": ("1x3x640x640", _images_640),
    "deformable_detr": ("1x3x640x640", _images_640),
    "mask2former_pixel_decoder": ("1x3x640x640", _images_640),
    "raft_small": ("2 frames 1x3x440x1024 (Sintel, padded to /8)", _raft),
    "glm4v_pos_embed": ("46x46 patches (a 644x644 image), 2116 tokens", _glm4v),
    "kornia_warp_perspective": ("1x3x480x640 to the export's 48x64", _warp_perspective),
    "kornia_warp_affine": ("1x3x480x640 to the export's 40x56", _warp_affine),
    "kornia_remap": ("1x3x480x640", _remap),
    "kornia_warp_affine3d": ("1x2x96x128x160 to the export's 12x16x20", _warp_affine3d),
    "stn_float32": ("1x3x480x640", _stn),
    "stn_float16": ("1x3x480x640", _stn),
}


def _as_written(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray] | None:
    """The reference at deployment sizes: onnxruntime's run of ``model`` as written, or None.

    None where that is its run of the original (``_model_rows`` makes that), or fails.
    ``runnable`` spells the export out where onnxruntime would depart from it: its run of the
    original samples a float16 GridSample's grid unrounded (the float16 STN at 480x640: 0.067
    of the output's scale from the grid the graph gives it), and refuses a double grid with
    float X.
    """
    written, changes = runnable(model)
    if not changes:
        return None
    try:
        return _onnxruntime(written)(feeds)
    except Exception:  # noqa: BLE001  (then the runtime's own run of the original is used)
        return None


def _shape(array: np.ndarray) -> str:
    return "x".join(map(str, array.shape))


def _deploy_feeds(record: dict, stored: dict[str, np.ndarray]):
    """The deployment inputs, what they are, and why the export cannot take them ("": it can).

    An export of fixed sizes takes them when ``make_corpus.py --deploy`` exported it again at
    that size (``DEPLOY_EXPORTS``): the caller times that export instead.
    """
    label, build = DEPLOY[record["model"]]
    rng = np.random.default_rng(SEED)
    feeds = {
        name: array.astype(stored[name].dtype) for name, array in build(rng, list(stored)).items()
    }
    for name, array in feeds.items():
        dynamic = record["dynamic_axes"].get(name, {})
        fixed = [
            axis
            for axis, (size, was) in enumerate(zip(array.shape, stored[name].shape, strict=True))
            if size != was and str(axis) not in dynamic
        ]
        if fixed:
            kind = "static export" if not record["dynamic_axes"] else "static spatial axes"
            return feeds, label, f"{kind}: {name} {_shape(stored[name])} only (wanted {label})"
    return feeds, label, ""


# ---------------------------------------------------------------------------------------------
# Timing


def _off(actual: list[np.ndarray], expected: list[np.ndarray], ties=None) -> tuple[float, int]:
    """The largest error of any output, relative to that output's largest magnitude.

    And how many differing values were left out as nearest's ties (``ties``: per output, a
    mask or None).
    """
    worst, excused = 0.0, 0
    for a, e, tie in zip(actual, expected, ties or [None] * len(actual), strict=True):
        e = e.astype(np.float64)
        scale = max(float(np.max(np.abs(e), initial=0.0)), 1e-30)
        error = np.abs(a.astype(np.float64) - e)
        if tie is not None:
            tie = np.broadcast_to(tie, error.shape)
            excused += int(np.count_nonzero(error[tie] > 0))
            error = np.where(tie, 0.0, error)
        worst = max(worst, float(np.max(error, initial=0.0)) / scale)
    return worst, excused


TIE = 1e-3  # pixels: a nearest coordinate this close to half-way may round either way


def _nearest_ties(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray | None]:
    """Per output a nearest GridSample gives (through Casts): where its points are ties.

    ``(N, 1, O..)``, True where the point's coordinate lies within ``TIE`` of half-way on some
    axis; None for other outputs.

    Runtimes unnormalize in float32 in their own order (OpenVINO fuses the arithmetic, as its
    own kernel does), so such a point may read either neighbour: neither is wrong.
    """
    producers = {name: node for node in model.graph.node for name in node.output}
    sources = []
    for output in model.graph.output:
        node = producers.get(output.name)
        while node is not None and node.op_type in ("Cast", "Identity"):
            node = producers.get(node.input[0])
        modes = {a.name: a for a in node.attribute} if node is not None else {}
        nearest = node is not None and node.op_type == "GridSample" and "mode" in modes
        sources.append(node if nearest and modes["mode"].s == b"nearest" else None)
    if not any(sources):
        return sources
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    del probe.graph.output[:]
    names = list(dict.fromkeys(name for node in sources if node for name in node.input[:2]))
    probe.graph.output.extend(onnx.helper.make_empty_tensor_value_info(n) for n in names)
    values = dict(zip(names, _onnxruntime(probe)(feeds), strict=True))
    masks = []
    for node in sources:
        if node is None:
            masks.append(None)
            continue
        x, grid = values[node.input[0]], values[node.input[1]].astype(np.float64)
        align = next((a.i for a in node.attribute if a.name == "align_corners"), 0)
        rank, tie = grid.shape[-1], np.zeros(grid.shape[:-1], dtype=bool)
        for axis in range(rank):
            size, g = x.shape[2 + axis], grid[..., rank - 1 - axis]
            coord = (g + 1) / 2 * (size - 1) if align else ((g + 1) * size - 1) / 2
            tie |= np.abs(coord - np.floor(coord) - 0.5) < TIE
        masks.append(tie[:, None])
    return masks


def _model_rows(
    model: onnx.ModelProto, rtol: float, sizes: dict, rounds: int, budget: float
) -> dict[str, dict[str, dict]]:
    """{size: {runtime: {"ms", "notes"}}} for sizes {size: (feeds, reference or None)}.

    A reference of None: onnxruntime's run of the original at those inputs.
    """
    rows: dict[str, dict[str, dict]] = {size: {} for size in sizes}
    references = {size: reference for size, (_, reference) in sizes.items()}
    ties: dict[str, list] = {}
    for runtime, (prepare, target) in RUNTIMES.items():
        variants = {"original": model, "lowered": lower(model, target=target, lower_all=True)}
        runs, failed = {}, []
        for variant, candidate in variants.items():
            try:
                runs[variant] = prepare(candidate)
            except Exception as error:  # noqa: BLE001  (a runtime's refusal is a result)
                failed.append(f"{variant} fails: {_reason(error)}")
        for size, (feeds, _) in sizes.items():
            calls, outputs, notes = {}, {}, list(failed)
            if size not in ties:
                ties[size] = _nearest_ties(model, feeds)
            for variant, run in runs.items():
                try:
                    outputs[variant] = run(feeds)
                except Exception as error:  # noqa: BLE001
                    notes.append(f"{variant} fails: {_reason(error)}")
                    continue
                calls[variant] = lambda run=run, feeds=feeds: run(feeds)
            if runtime == "onnxruntime" and references[size] is None:
                references[size] = outputs.get("original")
            which = "expected" if size == "stored" else "onnxruntime's run as written"
            if sizes[size][1] is None:  # (as written, it is the original; or failed)
                which = "onnxruntime's original"
            notes += _wrong(outputs, references[size], which, rtol, ties[size])
            rows[size][runtime] = {"ms": median_ms(calls, rounds, budget), "notes": notes}
    return rows


def _wrong(outputs: dict, reference, which: str, rtol: float, ties: list) -> list[str]:
    """A note if the lowered outputs leave both the reference and the runtime's original.

    Both, because onnxruntime samples a float16 grid unrounded and OpenVINO computes float16
    models in float32 at this hint. Values at nearest's ties (``_nearest_ties``) are left out
    of the comparison, and counted in a note where they differ.
    """
    if "lowered" not in outputs:
        return []
    offs = {}
    if reference is not None:
        offs[which] = _off(outputs["lowered"], reference, ties)
    if "original" in outputs:
        offs["original"] = _off(outputs["lowered"], outputs["original"], ties)
    if not offs:
        return ["lowered unchecked: no original ran"]
    best = min(offs, key=lambda k: offs[k][0])
    if offs[best][0] <= rtol:
        if not offs[best][1]:
            return []
        return [
            f"lowered right; {offs[best][1]} values at nearest's ties (within {TIE} px of "
            f"half-way) read the other neighbour than the {best}"
        ]
    return [
        "lowered WRONG: "
        + ", ".join(f"{v:.2g} from the {k}" for k, (v, _) in offs.items())
        + " (of the output's scale)"
    ]


def _reason(error: Exception) -> str:
    """A runtime's refusal in a few words: its last line, without onnxruntime's preamble.

    Where onnxruntime nests a failure (a node inside an If, a function's body), the innermost
    node's type and message, without the source file.
    """
    text = str(error).strip()
    if "Status Message: " in text:
        ops = re.findall(r"running (\w+) node", text)
        message = text.rsplit("Status Message: ", 1)[-1].splitlines()[0]
        message = re.sub(r"^\S+:\d+ ", "", message)
        message = message if len(message) <= 80 else "..." + message[-77:]
        return f"{ops[-1]}: {message}" if ops else message
    lines = text.splitlines()
    reason = lines[-1] if lines else type(error).__name__
    reason = reason.split(" : ")[-1].split(" node with name")[0]
    return reason.removeprefix("-- ")[:90]


def _cell(ms: dict, key: str) -> str:
    return f"{ms[key]:.2f}" if key in ms else "-"


HEADER = [
    "| model | GridSample | inputs | ort original ms | ort lowered ms | ratio "
    "| OpenVINO original ms | OpenVINO lowered ms | ratio "
    "| OpenVINO static original ms | lowered ms | ratio | notes |",
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
]


def _line(name: str, record: dict, inputs: str, rows: dict | None, note: str = "") -> str:
    cells = [name, str(record["gridsample"]), inputs]
    notes = [note] if note else []
    for runtime in RUNTIMES:
        ms = rows[runtime]["ms"] if rows else {}
        ratio = (
            f"{ms['lowered'] / ms['original']:.2f}" if {"lowered", "original"} <= set(ms) else "-"
        )
        cells += [_cell(ms, "original"), _cell(ms, "lowered"), ratio]
        notes += [f"{runtime}: {n}" for n in (rows[runtime]["notes"] if rows else [])]
    cells.append("; ".join(notes))
    return "| " + " | ".join(cells) + " |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--size",
        choices=["stored", "deploy", "both"],
        default="stored",
        help="The stored inputs (the export's sizes), a deployment size (DEPLOY), or both.",
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--budget", type=float, default=0.2, help="Seconds per variant per round.")
    parser.add_argument("--only", nargs="*", default=None, help="Corpus models to time.")
    parser.add_argument("--out", type=pathlib.Path, default=RESULTS / "models.md")
    parser.add_argument("--note", default="", help="A sentence on the machine's state.")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    manifest = json.loads((CORPUS / "manifest.json").read_text())["models"]
    names = args.only or sorted(manifest)
    sizes = ["stored", "deploy"] if args.size == "both" else [args.size]
    load = os.getloadavg()[0]
    tables: dict[str, list[str]] = {size: list(HEADER) for size in sizes}
    for name in names:
        record = manifest[name]
        model = onnx.load(str(CORPUS / f"{name}.onnx"))
        prefix = "onnxruntime:" if record["expected_from"] == "onnxruntime" else ""
        with np.load(CORPUS / f"{name}.npz") as data:
            stored = {v.name: data[v.name] for v in model.graph.input}
            expected = [data[prefix + v.name] for v in model.graph.output]
        timed, labels, untimed = {}, {}, {}
        if "stored" in sizes:
            timed["stored"] = (stored, expected)
            labels["stored"] = _shape(next(iter(stored.values())))
        again = None  # the export at the deployment size, where this one's sizes are fixed
        if "deploy" in sizes:
            feeds, label, fixed = _deploy_feeds(record, stored)
            if fixed and (DEPLOY_EXPORTS / f"{name}.onnx").exists():
                again = onnx.load(str(DEPLOY_EXPORTS / f"{name}.onnx"))
                labels["deploy"] = f"{label} (exported at this size)"
            elif fixed:
                untimed["deploy"] = fixed
            else:
                timed["deploy"], labels["deploy"] = (feeds, _as_written(model, feeds)), label
        rows = _model_rows(model, record["rtol"], timed, args.rounds, args.budget) if timed else {}
        if again is not None:
            deploy = {"deploy": (feeds, _as_written(again, feeds))}
            rows |= _model_rows(again, record["rtol"], deploy, args.rounds, args.budget)
        for size in sizes:
            if size in rows:
                line = _line(name, record, labels[size], rows[size])
            else:
                line = _line(name, record, "-", None, untimed[size])
            tables[size].append(line)
            print(f"{size}: {line}", flush=True)
    command = (
        f"python bench/models.py --size {args.size} --rounds {args.rounds} --budget {args.budget}"
    )
    lines = [
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, 1 thread"
        f" per runtime; onnxruntime {ort.__version__}, OpenVINO {ov.__version__} (f32 hint); "
        f"`{command}` ({datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC; load average "
        f"{load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end). {args.note}".rstrip(),
        "",
        "Lowered: `--target onnxruntime --lower-all` on onnxruntime, `--target openvino "
        "--lower-all` on OpenVINO: as exported (symbolic sizes: OpenVINO runs each op alone), "
        "and reshaped to the inputs' sizes before compiling (static: fused kernels). ms: "
        "median of interleaved rounds; ratio: lowered / original.",
    ]
    titles = {
        "stored": "At the exported sizes (the stored inputs)",
        "deploy": "At deployment sizes",
    }
    for size in sizes:
        if len(sizes) > 1:
            lines += ["", f"## {titles[size]}"]
        if size == "deploy":
            lines += [
                "",
                "Inputs built as `testdata/corpus/make_corpus.py` builds the stored ones (seeded "
                "numpy; `DEPLOY` in bench/models.py); the lowered outputs are checked against "
                "the original's in the same runtime or onnxruntime's, not against PyTorch. "
                "An export whose axes are static is timed as `make_corpus.py --deploy` exports "
                "it again at that size, where it has (the inputs cell says so); else listed, "
                "untimed.",
            ]
        lines += ["", *tables[size]]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
