"""The table of decompositions, keyed by mode: the one list of what gridsample_lower can lower.

Padding mode and align_corners only change coordinate arithmetic, and the rank is a loop bound,
so the mode alone decides the structure of the lowered graph.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import onnx_ir as ir

from gridsample_lower.lowering.decompositions import cubic, linear, nearest
from gridsample_lower.runtime import onnxruntime_runs
from gridsample_lower.spec import ALIGN_CORNERS, MODES, PADDING_MODES, GridSampleSpec

__all__ = [
    "TESTED_RANKS",
    "Decomposition",
    "lookup",
    "support_matrix",
    "supported_specs",
]

# (emitter, X, grid, spec, plan) -> Y
Decomposition = Callable[..., ir.Value]

# Ranks the suite checks exhaustively; every rank >= 1 goes through the same code.
TESTED_RANKS = (1, 2, 3)
# One decomposition per mode: the one list of what can be lowered, written out.
_TABLE: dict[str, Decomposition] = {
    "linear": linear.linear,
    "nearest": nearest.nearest,
    "cubic": cubic.cubic,
}


def lookup(spec: GridSampleSpec) -> Decomposition:
    """The decomposition for ``spec``."""
    return _TABLE[spec.mode]


def supported_specs(ranks: tuple[int, ...] = TESTED_RANKS) -> list[GridSampleSpec]:
    """Every (rank, mode, padding, align_corners) configuration lowered, for float32 inputs."""
    return [
        GridSampleSpec(rank, mode, padding, align)
        for rank, mode, padding, align in itertools.product(
            ranks, sorted(_TABLE, key=MODES.index), PADDING_MODES, ALIGN_CORNERS
        )
    ]


def support_matrix() -> str:
    """The support matrix as a markdown table (for ``supported`` and README)."""
    ranks = (*TESTED_RANKS, 4)
    head = "| mode | padding_mode | align_corners | " + " | ".join(
        f"r={r}" if r in TESTED_RANKS else f"r>={r}" for r in ranks
    )
    lines = [head + " |", "|---" * (3 + len(ranks)) + "|"]
    for spec in supported_specs(ranks=(1,)):
        cells = []
        for rank in ranks:
            native = GridSampleSpec(rank, spec.mode, spec.padding_mode, spec.align_corners)
            cells.append("lowered (ort native)" if onnxruntime_runs(native) else "lowered")
        lines.append(
            f"| {spec.mode} | {spec.padding_mode} | {spec.align_corners} | "
            + " | ".join(cells)
            + " |"
        )
    return "\n".join(lines)
