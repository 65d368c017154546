"""onnxruntime's cost of the generic target's candidate forms (issue 24: OpenVINO's bfloat16).

Each case of bench/run.py (static shapes, and batch and spatial sizes symbolic) is lowered for
the generic target as it was before issue 24 ("base") and in each form below, checked against native
onnxruntime, and every form is timed in one rotation, round by round (``common.median_ms``), on
one thread. Prints each form's time over base's, per case, and the geometric mean.

Forms (plan choices forced for this process only):
- ``base``: generic before issue 24 (``integer_indices`` off);
- ``current``: the generic target as it is now;
- ``base_again``: base once more, timed as a form of its own: the noise;
- ``interleaved``: the openvino target's form (``Plan.interleaved``) for every mode, which
  meets OpenVINO's bfloat16 precision for linear and cubic too;
- ``nearest_interleaved``: that form for nearest only.

Run: ``python bench/generic_forms.py [--filter TEXT] [--forms a,b] [--rounds 41]
[--every-config]``. Timed under other agents' load: read ``base_again / base`` first.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import pathlib
import sys

import numpy as np
from common import median_ms  # (bench/ is on the path)
from run import SHAPE_KINDS, cases, session

from gridsample_lower import lower
from gridsample_lower.check.tolerances import tolerance
from gridsample_lower.lowering import plan as plan_module

ORIGINAL_PLAN_OF = plan_module.plan_of


def _forcing(choose):
    def plan_of(spec, x_shape, grid_shape, target, force=None):
        extra = choose(spec)
        return ORIGINAL_PLAN_OF(spec, x_shape, grid_shape, target, {**(force or {}), **extra})

    return plan_of


FORMS = {
    "base": {"plan_of": _forcing(lambda spec: {"integer_indices": False})},
    "current": {},
    "base_again": {"plan_of": _forcing(lambda spec: {"integer_indices": False})},
    "interleaved": {
        "plan_of": _forcing(lambda spec: {"interleaved": True, "integer_indices": False})
    },
    "nearest_interleaved": {
        "plan_of": _forcing(
            lambda spec: {"interleaved": spec.mode == "nearest", "integer_indices": False}
        )
    },
}


@contextlib.contextmanager
def form(name: str):
    patches = FORMS[name]
    saved = {k: getattr(plan_module, k) for k in patches}
    for k, v in patches.items():
        setattr(plan_module, k, v)
    try:
        yield
    finally:
        for k, v in saved.items():
            setattr(plan_module, k, v)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--filter", default="")
    parser.add_argument("--forms", default="current,base_again")
    parser.add_argument("--kinds", default="static,symbolic")
    parser.add_argument("--rounds", type=int, default=41)
    parser.add_argument("--budget", type=float, default=0.02, help="seconds per call per round")
    parser.add_argument("--every-config", action="store_true", help="as bench/run.py's")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    forms = ["base", *args.forms.split(",")]
    kinds = args.kinds.split(",")
    assert all(k in SHAPE_KINDS for k in kinds)
    rng = np.random.default_rng(0)
    rows, ratios = [], {f: [] for f in forms[1:]}
    print("| case | shapes | base ms | " + " | ".join(f"{f} / base" for f in forms[1:]) + " |")
    print("|---|---|---|" + "---|" * (len(forms) - 1))
    for case in cases(False, args.every_config):
        if args.filter not in case.label or case.constant_grid:
            continue
        feeds = case.inputs(rng)
        expected = session(case.model("static")).run(None, feeds)[0]
        atol, rtol = tolerance(np.float32, case.mode)
        for kind in kinds:
            calls, nodes = {}, {}
            for name in forms:
                with form(name):
                    lowered = lower(case.model(kind), target="generic")
                nodes[name] = len(lowered.graph.node)
                sess = session(lowered)
                np.testing.assert_allclose(sess.run(None, feeds)[0], expected, atol=atol, rtol=rtol)
                calls[name] = lambda sess=sess, feeds=feeds: sess.run(None, feeds)
            for call in calls.values():
                call()
            ms = median_ms(calls, args.rounds, args.budget)
            cells = []
            for name in forms[1:]:
                ratio = ms[name] / ms["base"]
                ratios[name].append(ratio)
                cells.append(f"{ratio:.3f}")
            print(f"| {case.label} | {kind} | {ms['base']:.3f} | " + " | ".join(cells) + " |")
            sys.stdout.flush()
            rows.append({"case": case.label, "kind": kind, "ms": ms, "nodes": nodes})
    for name, values in ratios.items():
        geomean = math.exp(sum(map(math.log, values)) / len(values)) if values else float("nan")
        print(f"{name} / base: geomean {geomean:.3f}, min {min(values):.3f}, max {max(values):.3f}")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
