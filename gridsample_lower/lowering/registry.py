"""The table of decompositions, keyed by mode: the one list of what gridsample_lower can lower.

Padding mode and align_corners only change coordinate arithmetic, and the rank is a loop bound,
so the mode alone decides the structure of the lowered graph. ``decompose`` emits a node's, for
the onnxscript rule and the pass alike.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable
from typing import Any

import onnx_ir as ir

from gridsample_lower.lowering import costs
from gridsample_lower.lowering.decompositions import cubic, linear, nearest
from gridsample_lower.lowering.emitter import Emitter
from gridsample_lower.lowering.native_taps import read_by_native
from gridsample_lower.lowering.plan import Plan, node_plan
from gridsample_lower.lowering.point_tiles import in_tiles
from gridsample_lower.lowering.targets import Target
from gridsample_lower.runtime import onnxruntime_runs
from gridsample_lower.spec import ALIGN_CORNERS, MODES, PADDING_MODES, GridSampleSpec

__all__ = [
    "TESTED_RANKS",
    "Decomposition",
    "decompose",
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


def decompose(
    builder: Any,
    node: ir.Node,
    target: Target,
    planner: Callable[[GridSampleSpec, ir.Node, Target], Plan] = node_plan,
) -> ir.Value:
    """Emit the lowering of GridSample ``node`` through ``builder``; the value replacing Y.

    ``builder`` makes nodes as onnxscript's rewriter builder does
    (``op(op_type, *inputs, _name=, _outputs=, **attributes)``).
    """
    spec = GridSampleSpec.from_node(node)
    x, grid = node.inputs[:2]
    prefix = node.name or f"GridSample({node.outputs[0].name})"
    plan = planner(spec, node, target)  # as the rule's check made it
    em = Emitter(
        builder,
        prefix=prefix,
        x=x,
        grid=grid,
        rank=spec.rank,
        target=target,
        flat_points=plan.flat_points,
        merged=plan.merged,
        components_first=plan.components_first,
    )
    if plan.empty:  # Y is empty too. (onnxruntime's optimizer mis-handles the general graph.)
        return em.reshape(x, [em.batch, em.channels, *em.output_dims()])
    if plan.point_tiles > 1:  # the points in tiles, each lowered alone
        return in_tiles(em, plan, lambda view, piece: _piece(view, x, spec, piece))
    return _piece(em, x, spec, plan)


def _piece(em: Emitter, x: ir.Value, spec: GridSampleSpec, plan: Plan) -> ir.Value:
    """Y of ``em``'s grid in one piece (a tile's, or the whole node's)."""
    if plan.flat_grid:  # lowered on the grid as (N, 1.., P, r), Y reshaped back
        flat = em.with_points_on_one_axis()
        y = _lower(flat, x, flat.grid, spec, dataclasses.replace(plan, flat_grid=False))
        return em.reshape(y, [em.batch, em.channels, *em.output_dims()])
    return _lower(em, x, em.grid, spec, plan)


def _lower(em: Emitter, x: ir.Value, grid: ir.Value, spec: GridSampleSpec, plan: Plan):
    """The target's own GridSample reading the taps, or the gathers, fenced where planned."""
    if plan.reader:  # the target's own GridSample reads the taps
        return read_by_native(em, x, grid, spec, plan)
    if plan.fenced:  # symbolic sizes: in a Loop's body, which the runtime keeps in float32
        return em.fenced(lambda body: _sample(body, x, grid, spec, plan))
    return _sample(em, x, grid, spec, plan)


def _sample(em: Emitter, x: ir.Value, grid: ir.Value, spec: GridSampleSpec, plan: Plan):
    """The gathers and sums of ``plan``; for an X of unknown size, in an If (``small_x``)."""
    if plan.small_x is not None:  # X of unknown size: masked where it proves large
        small = plan.small_x
        fewest = costs.masked_min_spatial(plan.taps, math.prod(em.output_dims()))
        spatial = em.x_size(range(2, 2 + spec.rank), ir.DataType.INT64)
        return em.if_else(
            em.GreaterOrEqual(spatial, em.const(fewest, ir.DataType.INT64)),
            lambda branch: lookup(spec)(_laid_out(branch, plan), x, grid, spec, plan),
            lambda branch: lookup(spec)(_laid_out(branch, small), x, grid, spec, small),
        )
    return lookup(spec)(em, x, grid, spec, plan)


def _laid_out(em: Emitter, plan: Plan) -> Emitter:
    """``em`` with its interleaved values laid out as ``plan`` says (an If's branch's)."""
    return em.merging(plan.merged, plan.components_first)


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
