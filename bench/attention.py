"""Time multi-scale deformable attention: native, lowered node by node, and lowered as one unit.

``gridsample_lower.models.deformable_attention_model`` at the corpus' tiny sizes and at the
sizes Deformable DETR, RT-DETR and Mask2Former run at for a 640x640 image (8 heads of 32
channels, levels at strides 8-64, 4 points), the levels split from one value tensor as
dynamo exports it: the runtime's own GridSample with the stack,
Mul and ReduceSum; the runtime's target with fusion turned off (each GridSample lowered
alone); and the runtime's target as it is (the attention lowered as one unit: rows and a
MatMul on onnxruntime, the levels' planes on OpenVINO). 1 thread (OpenVINO: f32), interleaved
rounds, median per round; every variant's output is checked against native's.

Run: ``pip install -e ".[test]" && python bench/attention.py [--runtime onnxruntime|openvino]
[--rounds 5] [--budget 0.2] [--out bench/results/attention.md]`` (OpenVINO's default out:
``bench/results/attention_openvino.md``).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import os
import pathlib
import platform

import numpy as np
import onnxruntime as ort
from common import median_ms  # (bench/ is on the path)

from gridsample_lower import lower
from gridsample_lower.lowering.targets import TARGETS
from gridsample_lower.models import deformable_attention_model

# name: (levels, N = batch x heads, C, Q, P)
CASES = {
    "Deformable DETR tiny (corpus), encoder": ([(12, 12), (6, 6), (3, 3), (2, 2)], 2, 16, 193, 4),
    "RT-DETR tiny (corpus), decoder": ([(12, 12), (6, 6), (3, 3)], 2, 16, 20, 4),
    "Deformable DETR 640x640, decoder": ([(80, 80), (40, 40), (20, 20), (10, 10)], 8, 32, 300, 4),
    "RT-DETR 640x640, decoder": ([(80, 80), (40, 40), (20, 20)], 8, 32, 300, 4),
    "Mask2Former 640x640, pixel decoder": ([(80, 80), (40, 40), (20, 20)], 8, 32, 8400, 4),
    "Deformable DETR 640x640, encoder": ([(80, 80), (40, 40), (20, 20), (10, 10)], 8, 32, 8500, 4),
}
HEADS = {2: 2, 8: 8}  # N = batch 1 x heads: the levels split from one value, as dynamo writes


def _session(model):
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.log_severity_level = 4
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    return lambda feeds: session.run(None, feeds)[0]


def _openvino(model):
    import openvino as ov

    core = ov.Core()
    config = {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": 1}
    compiled = core.compile_model(core.read_model(model.SerializeToString(), b""), "CPU", config)
    request = compiled.create_infer_request()
    return lambda feeds: request.infer(feeds)[compiled.outputs[0]]


RUNTIMES = {"onnxruntime": _session, "openvino": _openvino}


def _version(runtime: str) -> str:
    if runtime == "openvino":
        import openvino as ov

        return ov.__version__.split("-")[0]
    return ort.__version__


def _inputs(levels, n, c, q, p, rng) -> dict[str, np.ndarray]:
    """Values and grids as a model makes them: sampling points around [-1, 1], softmax weights."""
    total = sum(height * width for height, width in levels)
    feeds = {"value": rng.standard_normal((n // HEADS[n], total, HEADS[n], c)).astype(np.float32)}
    for level in range(len(levels)):
        feeds[f"grid{level}"] = rng.uniform(-1.05, 1.05, (n, q, p, 2)).astype(np.float32)
    weights = rng.random((n, 1, q, len(levels) * p))
    feeds["weights"] = (weights / weights.sum(-1, keepdims=True)).astype(np.float32)
    return feeds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtime", choices=sorted(RUNTIMES), default="onnxruntime")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--budget", type=float, default=0.2, help="seconds per call and round")
    parser.add_argument("--out", help="default: bench/results/attention[_openvino].md")
    args = parser.parse_args()
    results = pathlib.Path(__file__).parent / "results"
    suffix = "" if args.runtime == "onnxruntime" else f"_{args.runtime}"
    out = args.out or str(results / f"attention{suffix}.md")
    runner_of, target = RUNTIMES[args.runtime], TARGETS[args.runtime]
    node_by_node = dataclasses.replace(target, fuses_attention=False)
    rng = np.random.default_rng(0)
    rows = []
    for name, (levels, n, c, q, p) in CASES.items():
        model = deformable_attention_model(levels, n, c, q, p, heads=HEADS[n])
        feeds = _inputs(levels, n, c, q, p, rng)
        runners = {
            "native": runner_of(model),
            "node by node": runner_of(lower(model, target=node_by_node, lower_all=True)),
            "one unit": runner_of(lower(model, target=target, lower_all=True)),
        }
        expected = runners["native"](feeds)
        for variant, run in runners.items():
            error = float(np.max(np.abs(run(feeds) - expected)))
            assert error < 1e-4, (name, variant, error)
        ms = median_ms(
            {k: (lambda r=r, f=feeds: r(f)) for k, r in runners.items()}, args.rounds, args.budget
        )
        rows.append(
            f"| {name} | {len(levels)} x {levels[0][0]}x{levels[0][1]}.. | {n} | {c} | {q} | {p} "
            f"| {ms['native']:.3f} | {ms['node by node'] / ms['native']:.2f} "
            f"| {ms['one unit'] / ms['native']:.2f} |"
        )
        print(rows[-1], flush=True)
    load = os.getloadavg()[0]
    head = (
        f"Machine: {platform.machine()}, {os.cpu_count()} cores (load average {load:.1f}), "
        f"1 thread; {args.runtime} {_version(args.runtime)}; `python bench/attention.py "
        f"--runtime {args.runtime} --rounds {args.rounds} --budget {args.budget}` "
        f"({datetime.date.today()}). Ratios: lowered / native, same run, interleaved rounds.\n\n"
        "| case | levels | N | C | Q | P | native ms | node by node | one unit |\n"
        "|---|---|---|---|---|---|---|---|---|\n"
    )
    pathlib.Path(out).write_text(head + "\n".join(rows) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
