"""Golden graphs: the lowering's exact output, pinned while the package is restructured.

Lowering is deterministic, so a hash of each lowered graph's structure pins every choice it
made (gather and sum forms, index types, ring, zero slot): every node is hashed from its op,
attributes and its inputs' hashes, so the digest ignores node names, the order nodes were
emitted in and nodes nothing reads (the plan stopped emitting shape nodes while deciding). Cases: every spec of
ranks 1-3 for every target, static with 2 channels, symbolic, and with many channels; and for
2-D, float16 and int32 X. A restructuring that means to change nothing must keep every hash.
When a lowering is meant to change, regenerate deliberately and say why in the commit:
``python tests/test_golden.py --write``.
"""

from __future__ import annotations

import hashlib
import json
import pathlib
import sys

import numpy as np
import pytest

from gridsample_lower import UnsupportedGridSample, lower, supported_specs
from gridsample_lower.lowering.targets import TARGETS
from gridsample_lower.models import gridsample_model

GOLDEN = pathlib.Path(__file__).with_name("golden_graphs.json")
_SIZES_IN, _SIZES_OUT = [7, 5, 6], [3, 4, 2]


def _variants(rank: int) -> dict[str, tuple]:
    """name -> (X shape, grid shape, X dtype)."""
    static_in, static_out = _SIZES_IN[:rank], _SIZES_OUT[:rank]
    symbolic_in = [f"d{k}" for k in range(rank)]
    symbolic_out = [f"o{k}" for k in range(rank)]
    variants = {
        "static": ([2, 2, *static_in], [2, *static_out, rank], np.float32),
        "symbolic": (["N", "C", *symbolic_in], ["N", *symbolic_out, rank], np.float32),
        "channels": ([2, 40, *static_in], [2, *static_out, rank], np.float32),  # rows, MatMul
    }
    if rank == 2:
        variants["float16"] = ([2, 3, *static_in], [2, *static_out, rank], np.float16)
        variants["int32"] = ([2, 3, *static_in], [2, *static_out, rank], np.int32)
    return variants


def _cases() -> list[tuple[str, object, str, tuple]]:
    cases = []
    for spec in supported_specs():
        for variant, shapes in _variants(spec.rank).items():
            for target in TARGETS:
                label = spec.label.replace(" ", "-").replace("align_corners=", "ac")
                cases.append((f"{label}/{variant}/{target}", spec, target, shapes))
    return cases


CASES = _cases()


def _digest(spec, target: str, shapes: tuple) -> str:
    x_shape, grid_shape, x_dtype = shapes
    grid_dtype = x_dtype if x_dtype == np.float16 else np.float32
    model = gridsample_model(
        x_shape,
        grid_shape,
        spec.mode,
        spec.padding_mode,
        spec.align_corners,
        x_dtype=x_dtype,
        grid_dtype=grid_dtype,
    )
    try:
        lowered = lower(model, target=target, lower_all=True)
    except UnsupportedGridSample as error:  # (ncnn: what its GridSample cannot read)
        return f"refused: {error}"
    return _structure_digest(lowered)


def _structure_digest(model) -> str:
    """SHA-256 of the graph's computation: every output's op tree, names and order aside."""
    graph = model.graph
    producers = {out: node for node in graph.node for out in node.output}
    memo: dict[str, str] = {}

    def value(name: str) -> str:
        if name not in memo:
            node = producers.get(name)
            if node is None:  # a graph input (or an absent optional one)
                memo[name] = "input:" + name
            else:
                attrs = sorted(
                    a.SerializeToString(deterministic=True).hex() for a in node.attribute
                )
                inputs = [value(i) for i in node.input]
                text = repr(
                    (node.op_type, node.domain, attrs, inputs, list(node.output).index(name))
                )
                memo[name] = hashlib.sha256(text.encode()).hexdigest()
        return memo[name]

    outputs = [
        (out.SerializeToString(deterministic=True).hex(), value(out.name)) for out in graph.output
    ]
    reachable = sorted(h for h in memo.values() if not h.startswith("input:"))
    header = (model.ir_version, sorted((o.domain, o.version) for o in model.opset_import))
    inputs = [i.SerializeToString(deterministic=True).hex() for i in graph.input]
    text = repr((header, inputs, outputs, reachable))
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture(scope="module")
def golden() -> dict[str, str]:
    return json.loads(GOLDEN.read_text())


def test_every_case_is_pinned(golden):
    assert sorted(golden) == sorted(case[0] for case in CASES)


@pytest.mark.parametrize(("name", "spec", "target", "shapes"), CASES, ids=[c[0] for c in CASES])
def test_the_lowered_graph_is_unchanged(name, spec, target, shapes, golden):
    assert _digest(spec, target, shapes) == golden[name], (
        f"{name}: the lowered graph changed; if that is meant, run "
        "python tests/test_golden.py --write and say why in the commit"
    )


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        raise SystemExit("usage: python tests/test_golden.py --write")
    digests = {name: _digest(spec, target, shapes) for name, spec, target, shapes in CASES}
    GOLDEN.write_text(json.dumps(digests, indent=0, sort_keys=True) + "\n")
    print(f"wrote {len(digests)} digests to {GOLDEN}")
