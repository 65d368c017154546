"""Lower GridSample(mode=nearest) to Round + Gather: the values are moved, never computed.

Round is ONNX's half-to-even, applied right after unnormalizing and before the padding rule,
as onnxruntime does, so ties agree bit for bit. X is gathered in its own type, which keeps every
dtype exact (int64 beyond 2**53, bool, string).
"""

from __future__ import annotations

import onnx_ir as ir

from gridsample_lower.lowering.coords import integer_tap_indices, source_coordinate, tap_indices
from gridsample_lower.lowering.emitter import ALL_AXES, Emitter
from gridsample_lower.lowering.gathers import gather_and_combine
from gridsample_lower.lowering.plan import Plan
from gridsample_lower.lowering.sampling import (
    grid_coordinates,
    interleaved_grid,
    planar,
    planar_indices,
    positions_exact,
)
from gridsample_lower.spec import GridSampleSpec, compute_dtype


def nearest(em: Emitter, x: ir.Value, grid: ir.Value, spec: GridSampleSpec, plan: Plan) -> ir.Value:
    ct = compute_dtype(spec)
    indices, inside = [], None
    if plan.positions_from_grid:
        return _positions_from_grid(em, x, grid, spec, plan)
    if plan.interleaved:  # every axis at once on the grid as it is (sampling._interleaved_taps)
        g = interleaved_grid(em, grid, spec)

        def rounded(start: ir.Value) -> ir.Value:
            return em.round_half_to_even(source_coordinate(em, start, ALL_AXES, spec, ct), ct)

        exact = positions_exact(em, spec, plan)
        if exact:
            index, mask = tap_indices(em, rounded(g), ALL_AXES, spec, ct)
            indices = planar(em, index, spec.rank, tapped=False)
            masks = planar(em, mask, spec.rank, tapped=False) if mask is not None else []
        else:  # the taps leave as 256 hi + lo; the padding rule in integers
            indices, masks = [], []
            for axis, t in enumerate(planar_indices(em, rounded, g, spec, plan)):
                index, mask = integer_tap_indices(em, t, axis, spec, plan.position_type)
                indices.append(index)
                masks += [mask] if mask is not None else []
        for part in masks:
            inside = part if inside is None else em.logical_and(inside, part)
        return gather_and_combine(em, x, spec, plan, indices, inside=inside, integers=not exact)
    for axis, g in enumerate(grid_coordinates(em, grid, spec)):
        tap = em.round_half_to_even(source_coordinate(em, g, axis, spec, ct), ct)
        index, mask = tap_indices(em, tap, axis, spec, ct)
        indices.append(index)
        if mask is not None:
            inside = mask if inside is None else em.logical_and(inside, mask)
    return gather_and_combine(em, x, spec, plan, indices, inside=inside)


def _positions_from_grid(
    em: Emitter, x: ir.Value, grid: ir.Value, spec: GridSampleSpec, plan: Plan
) -> ir.Value:
    """The rounded coordinates at once on the grid as it is; the padding rule on each axis.

    The region from the grid, ``(N, O.., r)``, ends in the rounded coordinates (reflection:
    the reflected positions): integers, which bfloat16 keeps exact up to 256, and past the axis
    it moves only away from it. Then, as planar, each axis' clamp and mask, exact too. Larger
    axes leave as 256 hi + lo (``planar_indices``) and take the padding rule in integers.
    The same ops as planar coordinates but the Transpose moved after them: one Cast more.
    """
    ct, r = compute_dtype(spec), spec.rank
    g = interleaved_grid(em, grid, spec)
    reflected = spec.padding_mode == "reflection"

    def positions(start: ir.Value) -> ir.Value:
        tap = em.round_half_to_even(source_coordinate(em, start, ALL_AXES, spec, ct), ct)
        if reflected:  # (reflecting on each axis would take the rounded coordinates, past 256)
            tap = tap_indices(em, tap, ALL_AXES, spec, ct)[0]
        return tap

    exact = positions_exact(em, spec, plan)
    if exact:
        parts = planar(em, positions(g), r, tapped=False)
    else:  # integers: 256 hi + lo, each from a region of its own
        parts = planar_indices(em, positions, g, spec, plan)
    indices, inside = [], None
    for axis, t in enumerate(parts):
        if reflected:
            index, mask = t, None
        elif exact:
            index, mask = tap_indices(em, t, axis, spec, ct)
        else:
            index, mask = integer_tap_indices(em, t, axis, spec, plan.position_type)
        indices.append(index)
        if mask is not None:
            inside = mask if inside is None else em.logical_and(inside, mask)
    return gather_and_combine(em, x, spec, plan, indices, inside=inside, integers=not exact)
