"""Lower GridSample(mode=nearest) to Round + Gather: the values are moved, never computed.

Round is ONNX's half-to-even, applied right after unnormalizing and before the padding rule,
as onnxruntime does, so ties agree bit for bit. X is gathered in its own type, which keeps every
dtype exact (int64 beyond 2**53, bool, string).
"""

from __future__ import annotations

import onnx_ir as ir

from gridsample_lower.lowering.coords import source_coordinate, tap_indices
from gridsample_lower.lowering.emitter import Emitter
from gridsample_lower.lowering.gathers import gather_and_combine
from gridsample_lower.lowering.plan import Plan
from gridsample_lower.lowering.sampling import grid_coordinates
from gridsample_lower.spec import GridSampleSpec, compute_dtype


def nearest(em: Emitter, x: ir.Value, grid: ir.Value, spec: GridSampleSpec, plan: Plan) -> ir.Value:
    ct = compute_dtype(spec)
    indices, inside = [], None
    for axis, g in enumerate(grid_coordinates(em, grid, spec)):
        tap = em.round_half_to_even(source_coordinate(em, g, axis, spec, ct), ct)
        index, mask = tap_indices(em, tap, axis, spec, ct)
        indices.append(index)
        if mask is not None:
            inside = mask if inside is None else em.logical_and(inside, mask)
    return gather_and_combine(em, x, spec, plan, indices, inside=inside)
