"""Golden graphs: the lowering's exact output, pinned while the package is restructured.

Lowering is deterministic, so the SHA-256 of each lowered model's bytes pins every choice it
made (gather and sum forms, index types, ring, zero slot, node names). Cases: every spec of
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

from gridsample_lower import lower, supported_specs
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
    lowered = lower(model, target=target, lower_all=True)
    return hashlib.sha256(lowered.SerializeToString(deterministic=True)).hexdigest()


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
