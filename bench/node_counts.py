"""Count the nodes of each lowered configuration (static and symbolic shapes).

Run: ``python bench/node_counts.py``; prints a markdown table (Constant nodes counted apart).
"""

from __future__ import annotations

import collections

import onnx

from gridsample_lower import lower, supported_specs
from gridsample_lower.models import gridsample_model


def _model(spec, symbolic: bool) -> onnx.ModelProto:
    r = spec.rank
    x = ["N", "C", *[f"d{i}" for i in range(r)]] if symbolic else [2, 3, *[8] * r]
    g = ["N", *[f"o{i}" for i in range(r)], r] if symbolic else [2, *[6] * r, r]
    return gridsample_model(x, g, spec.mode, spec.padding_mode, spec.align_corners)


def counts(spec, symbolic: bool) -> tuple[int, int]:
    ops = collections.Counter(n.op_type for n in lower(_model(spec, symbolic)).graph.node)
    return sum(ops.values()) - ops["Constant"], ops["Constant"]


def main() -> None:
    print("| configuration | static: ops + constants | symbolic: ops + constants |")
    print("|---|---|---|")
    for spec in supported_specs():
        (a, b), (c, d) = counts(spec, False), counts(spec, True)
        print(f"| {spec.label} | {a} + {b} | {c} + {d} |")


if __name__ == "__main__":
    main()
