"""One GridSample's points lowered tile by tile, so that each tile's tensors stay in cache.

onnxruntime runs each op over its whole tensor before the next starts: lowered in one piece, a
480x640 warp's per-point indices, weights and taps (tens of MB a run for 3 channels) stream
through memory between ops, where its own kernel reads X and the grid once. Split into tiles of
a few thousand points, each tile's tensors stay cached from the op that makes them to the ops
that read them (``Plan.point_tiles``; docs/performance.md). The grid is viewed as
``(N, 1.., P, r)``, sliced along P, each tile lowered as a GridSample of its own on the same X,
and the tiles' outputs ``(N, C, 1.., t)`` concatenated and viewed as ``(N, C, O..)``. Where P
is symbolic, an If takes the tiles only once a sample holds ``Plan.tiles_from`` points, so
that no tile is empty, and runs the node in one piece, as it would be without tiles, below.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import onnx_ir as ir

from gridsample_lower.lowering.emitter import Emitter
from gridsample_lower.lowering.plan import Plan

__all__ = ["in_tiles", "tile_bounds", "typed_slice", "where_enough"]

INT64 = ir.DataType.INT64
# Slice's end for the last tile: past any axis (Slice clamps it to P).
_PAST_ANY_AXIS = 2**62

Piece = Callable[[Emitter, Plan], ir.Value]  # Y of the view's grid in one piece


def in_tiles(em: Emitter, plan: Plan, piece: Piece) -> ir.Value:
    """Y of ``em``'s node, ``piece(view, plan)`` run on each tile of its points."""
    whole, tiles = dataclasses.replace(plan, point_tiles=1, tiles_from=0), plan.point_tiles
    return where_enough(
        em,
        em.points,
        tiles,
        plan.tiles_from,
        lambda view: _tiled(view, tiles, whole, piece),
        lambda view: piece(view, whole),
    )


def where_enough(
    em: Emitter,
    length: int | ir.Value,
    tiles: int,
    tiles_from: int,
    tiled: Callable[[Emitter], ir.Value],
    whole: Callable[[Emitter], ir.Value],
) -> ir.Value:
    """``tiled(em)``, or for a symbolic ``length`` (``tiles_from``) an If between the two.

    The If takes the tiles from ``tiles_from`` on, and only where none of them is empty;
    ``whole`` below.
    """
    if not tiles_from:
        return tiled(em)
    least = max(tiles_from, tiles * (tiles - 1) + 1)  # (ceil(L / tiles) x (tiles - 1) < L)
    return em.if_else(em.GreaterOrEqual(length, em.const([least], INT64)), tiled, whole)


def _tiled(em: Emitter, tiles: int, plan: Plan, piece: Piece) -> ir.Value:
    """Y from ``tiles`` slices of the grid's points as ``(N, 1.., P, r)``, each lowered alone."""
    flat = em.with_points_on_one_axis()
    flat_plan = dataclasses.replace(plan, flat_grid=False)  # (each tile is flat already)
    axis = flat.rank  # the points' axis of (N, 1.., P, r)
    outputs = []
    for bounds in tile_bounds(flat, flat.points, tiles):
        tile = typed_slice(flat, flat.grid, axis, *bounds)
        outputs.append(piece(flat.with_grid(tile), flat_plan))
    y = flat.Concat(*outputs, axis=1 + axis)  # (N, C, 1.., P)
    return em.reshape(y, [em.batch, em.channels, *em.output_dims()])


def typed_slice(
    em: Emitter, value: ir.Value, axis: int, start: ir.Value, end: ir.Value, length: int | None
) -> ir.Value:
    """``value[start:end]`` on ``axis``, typed with its static sizes (``length`` on ``axis``).

    The emitters read static sizes from a tile as from the whole; an exporter may give neither.
    """
    part = em.Slice(value, start, end, em.const([axis], INT64))
    if value.dtype is not None and value.shape is not None:
        part.dtype = value.dtype
        dims = [d if isinstance(d, int) else None for d in value.shape]
        part.shape = ir.Shape([*dims[:axis], length, *dims[axis + 1 :]])
    return part


def tile_bounds(em: Emitter, length: int | ir.Value, tiles: int):
    """Each tile's (start, end, static length or None) of an axis of ``length``: even tiles.

    A symbolic length is cut in tiles of ``ceil(length / tiles)``, the last one taking the
    rest; the last tiles are empty where the length is below ``tiles x (tiles - 1) + 1``
    (``where_enough``'s If keeps them from it; the attention's planes take them empty).
    """
    if isinstance(length, int):
        cuts = [length * k // tiles for k in range(tiles + 1)]
        for start, end in zip(cuts, cuts[1:], strict=False):
            yield em.const([start], INT64), em.const([end], INT64), end - start
        return
    step = em.Div(em.Add(length, em.const([tiles - 1], INT64)), em.const([tiles], INT64))
    starts = [em.const([0], INT64)]
    starts += [em.Mul(step, em.const([k], INT64)) for k in range(1, tiles)]
    ends = [*starts[1:], em.const([_PAST_ANY_AXIS], INT64)]
    for start, end in zip(starts, ends, strict=True):
        yield start, end, None
