"""Time the real-model corpus, original against lowered, on onnxruntime and OpenVINO (f32).

Each model of ``testdata/corpus`` runs on its stored inputs: on onnxruntime the original and
``lower(target="onnxruntime", lower_all=True)``, on OpenVINO (``INFERENCE_PRECISION_HINT: f32``)
the original and ``lower(target="openvino", lower_all=True)``, one thread each. The variants
run in interleaved rounds; each gets the median of its rounds. A lowered model whose outputs
leave both the stored expected outputs and its runtime's run of the original (by the manifest's
tolerance, relative to the output's scale) is marked, not timed away. Where a runtime cannot
run the original (onnxruntime: a double grid with float X; OpenVINO: a float16 AffineGrid, a
5-D GridSample), only the lowered model is timed.

Run: ``pip install -e ".[test]" && python bench/models.py [--rounds 5] [--budget 0.2]
[--only NAME ...] [--out bench/results/models.md]``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import platform

import numpy as np
import onnx
import onnxruntime as ort
import openvino as ov
from common import median_ms  # (bench/ is on the path)

from gridsample_lower import lower

CORPUS = pathlib.Path(__file__).parents[1] / "testdata" / "corpus"


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


RUNTIMES = {"onnxruntime": (_onnxruntime, "onnxruntime"), "openvino": (_openvino, "openvino")}


def _off(actual: list[np.ndarray], expected: list[np.ndarray]) -> float:
    """The largest error of any output, relative to that output's largest magnitude."""
    worst = 0.0
    for a, e in zip(actual, expected, strict=True):
        e = e.astype(np.float64)
        scale = max(float(np.max(np.abs(e), initial=0.0)), 1e-30)
        worst = max(worst, float(np.max(np.abs(a.astype(np.float64) - e), initial=0.0)) / scale)
    return worst


def _model_rows(name: str, record: dict, rounds: int, budget: float) -> dict[str, dict]:
    model = onnx.load(str(CORPUS / f"{name}.onnx"))
    prefix = "onnxruntime:" if record["expected_from"] == "onnxruntime" else ""
    with np.load(CORPUS / f"{name}.npz") as data:
        feeds = {v.name: data[v.name] for v in model.graph.input}
        expected = [data[prefix + v.name] for v in model.graph.output]
    rows = {}
    for runtime, (prepare, target) in RUNTIMES.items():
        variants = {"original": model, "lowered": lower(model, target=target, lower_all=True)}
        calls, outputs, notes = {}, {}, []
        for variant, candidate in variants.items():
            try:
                run = prepare(candidate)
                outputs[variant] = run(feeds)
            except Exception as error:  # noqa: BLE001  (a runtime's refusal is a result)
                notes.append(f"{variant} fails: {_reason(error)}")
                continue
            calls[variant] = lambda run=run: run(feeds)
        if "lowered" in outputs:
            # Wrong only if it leaves both the stored expected outputs and the runtime's run of
            # the original: onnxruntime samples a float16 grid unrounded, OpenVINO computes
            # float16 models in float32 at this hint.
            offs = {"expected": _off(outputs["lowered"], expected)}
            if "original" in outputs:
                offs["original"] = _off(outputs["lowered"], outputs["original"])
            if min(offs.values()) > record["rtol"]:
                notes.append(
                    "lowered WRONG: "
                    + ", ".join(f"{v:.2g} from the {k}" for k, v in offs.items())
                    + " (of the output's scale)"
                )
        rows[runtime] = {"ms": median_ms(calls, rounds, budget), "notes": notes}
    return rows


def _reason(error: Exception) -> str:
    """A runtime's refusal in a few words: its last line, without onnxruntime's preamble."""
    lines = str(error).strip().splitlines()
    reason = lines[-1] if lines else type(error).__name__
    reason = reason.split(" : ")[-1].split(" node with name")[0]
    return reason.removeprefix("-- ")[:90]


def _cell(ms: dict, key: str) -> str:
    return f"{ms[key]:.2f}" if key in ms else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--budget", type=float, default=0.2, help="Seconds per variant per round.")
    parser.add_argument("--only", nargs="*", default=None, help="Corpus models to time.")
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("bench/results/models.md"))
    parser.add_argument("--note", default="", help="A sentence on the machine's state.")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    manifest = json.loads((CORPUS / "manifest.json").read_text())["models"]
    names = args.only or sorted(manifest)
    lines = [
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, 1 thread"
        f" per runtime; onnxruntime {ort.__version__}, OpenVINO {ov.__version__} (f32 hint); "
        f"`python bench/models.py --rounds {args.rounds} --budget {args.budget}` "
        f"({datetime.date.today()}). {args.note}",
        "",
        "Lowered: `--target onnxruntime --lower-all` on onnxruntime, `--target openvino "
        "--lower-all` on OpenVINO. ms: median of interleaved rounds; ratio: lowered / original.",
        "",
        "| model | GridSample | ort original ms | ort lowered ms | ratio | OpenVINO original ms "
        "| OpenVINO lowered ms | ratio | notes |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name in names:
        record = manifest[name]
        rows = _model_rows(name, record, args.rounds, args.budget)
        cells = [name, str(record["gridsample"])]
        notes = []
        for runtime in RUNTIMES:
            ms = rows[runtime]["ms"]
            ratio = (
                f"{ms['lowered'] / ms['original']:.2f}"
                if {"lowered", "original"} <= set(ms)
                else "-"
            )
            cells += [_cell(ms, "original"), _cell(ms, "lowered"), ratio]
            notes += [f"{runtime}: {note}" for note in rows[runtime]["notes"]]
        cells.append("; ".join(notes))
        lines.append("| " + " | ".join(cells) + " |")
        print(lines[-1], flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
