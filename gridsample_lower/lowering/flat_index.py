"""Per-axis tap positions to one flat index per tap, in the integer types the plan chose.

Each axis' positions (exact integers, still in float) are cast to integers and combined in
integers: integer Mul/Add on per-axis values beat float arithmetic plus a cast of every tap, and
stay exact where float32 would not (past 2**24). Where the plan says so (one index per point,
exact in float) the axes are combined in float and cast once. A NaN coordinate reaches the cast
(``coords.passes_nan``); whatever integer it becomes, integer Clip, Mul or Max/Min put it in
range: onnxruntime's Where, the other way, costs as much as 15 Muls.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx_ir as ir

from gridsample_lower.lowering.coords import passes_nan
from gridsample_lower.lowering.emitter import Emitter
from gridsample_lower.lowering.plan import Plan
from gridsample_lower.spec import GridSampleSpec, compute_dtype

__all__ = [
    "batch_offsets",
    "flat_index",
    "gather_index",
    "per_tap",
    "plane_offsets",
    "samples_size",
    "tap_column",
    "tap_offsets",
    "tap_table",
    "where_inside",
]

INT64 = ir.DataType.INT64


def per_tap(
    values: Sequence[float], axis: int, rank: int, points: int | None = None, lead: int = 0
) -> np.ndarray:
    """``values`` shaped ``(1, 1.., T, ..1, 1..1)``: spatial ``axis``' taps on axis 1 + axis.

    ``points``: the point axes that follow the tap axes (``rank`` unless they are one).
    ``lead``: unit axes between the batch and the tap axes (``Emitter.lead``).
    """
    points = rank if points is None else points
    before, after = 1 + lead + axis, rank - 1 - axis + points
    return np.reshape(values, [1] * before + [len(values)] + [1] * after)


def flat_index(
    em: Emitter,
    spec: GridSampleSpec,
    plan: Plan,
    indices: Sequence[ir.Value],
    inside: ir.Value | None,
    offsets: Sequence[float] | None = None,
    integers: bool = False,
) -> ir.Value:
    """The sample_type-sample flat index ``(N, T.., O..)`` of the per-axis (float, exact) indices.

    Where ``inside`` is False it is S, the zero slot past the sample (GatherElements' zero
    slot), else 0. With ``offsets`` (the plan's one index per point) it is each point's first
    tap, ``(N, 1.., O..)``, kept so that every tap ``index + offset`` lies in X: the caller adds
    the taps' flat offsets (``tap_table``, ``tap_offsets``) in the layout it gathers by.
    ``integers``: the indices are the plan's position type already (``sampling.planar_indices``).
    """
    r, ct, sample_type = spec.rank, compute_dtype(spec), plan.sample_type
    taps = (0.0,) if offsets is None else offsets
    to_slot = plan.zero_slot and not plan.rows  # the rows send them past every sample, later
    past_end = em.x_size(range(2, 2 + r), sample_type) if to_slot else None

    def inside_as(dtype):  # 1 inside, else 0
        return em.once(("inside as", dtype), lambda: em.Cast(inside, to=dtype))

    if plan.float_index:  # in float, exact: the gathers cast it once
        return _float_flat(em, spec, plan, indices, inside, offsets, taps, inside_as)
    if plan.flat_in_float:
        flat = em.Cast(_strided_sum(em, indices, r, ct), to=sample_type)
        if inside is not None:
            flat = where_inside(em, inside_as(sample_type), flat, past_end)
        else:  # one index per point (static sizes): every tap of the table stays in the sample
            strides = sum(em.stride(a) for a in range(r))
            low = -min(taps) * strides
            high = em.sample_size - 1 - max(taps) * strides
            flat = em.clip(flat, em.const(low, sample_type), em.const(high, sample_type))
    else:
        positions = plan.position_type  # int32 where they surely fit: 3-5x faster than int64
        if not integers:
            indices = [em.Cast(index, to=positions) for index in indices]
        # Integer indices (a runtime may round floats to bfloat16): nearest's positions are in
        # their axes already (clamped or reflected in float, bfloat16 rounds them by at most a
        # pixel or two past 256): its flat index is kept in the sample (where_inside with the
        # zero slot, else a Clip), unless exact (positions_from_grid).
        bound = plan.integer_indices and not plan.positions_from_grid and spec.mode == "nearest"
        bound = bound or (plan.integer_indices and inside is not None)
        if inside is None and passes_nan(spec):
            indices = [_in_axis(em, index, a, taps, positions) for a, index in enumerate(indices)]
        elif inside is not None and not bound:  # outside points' (NaN ones too) become 0
            indices = [em.Mul(index, inside_as(positions)) for index in indices]
        if positions != sample_type:
            indices = [em.Cast(index, to=sample_type) for index in indices]
        flat = _strided_sum(em, indices, r, sample_type)
        if bound and past_end is not None:  # outside points sent to S, the others kept below
            flat = where_inside(em, inside_as(sample_type), flat, past_end)
        elif bound and (plan.masks_values or inside is None):  # gathered from the sample
            last = em.x_size(range(2, 2 + r), sample_type, lambda s: s - 1)
            flat = em.clip(flat, em.const(0, sample_type), last)
        elif past_end is not None:  # outside points' flat index is 0: one Add sends them to S
            flat = em.Add(flat, _outside(em, inside_as(sample_type), past_end))
    return flat


def _float_flat(em, spec, plan, indices, inside, offsets, taps, inside_as) -> ir.Value:
    """``flat_index`` in the compute type (float32), every bound applied in float.

    Float Min/Max pass a NaN through (XNNPACK's do), and TFLite's Cast saturates it to
    2**31 - 1: a NaN coordinate's indices go there and back through int32 first, which keeps
    every finite index and puts NaN far outside, where the bounds catch it.
    """
    r, ct = spec.rank, compute_dtype(spec)

    def finite(index):
        return em.Cast(em.Cast(index, to=ir.DataType.INT32), to=ct)

    if inside is not None:  # outside points' indices (NaN ones too) become 0
        indices = [em.Mul(finite(index), inside_as(ct)) for index in indices]
    elif passes_nan(spec):
        indices = [_in_axis(em, finite(index), a, taps, ct) for a, index in enumerate(indices)]
    flat = _strided_sum(em, indices, r, ct)
    if plan.zero_slot and not plan.rows:
        flat = em.Add(flat, _outside(em, inside_as(ct), em.x_size(range(2, 2 + r), ct)))
    return flat


def gather_index(em: Emitter, plan: Plan, flat: ir.Value) -> ir.Value:
    """``flat`` as the gather's integer type where ``plan.float_index`` made it a float."""
    return em.Cast(flat, to=plan.index_type) if plan.float_index else flat


def _in_axis(
    em: Emitter, index: ir.Value, axis: int, taps: Sequence[float], dtype: ir.DataType
) -> ir.Value:
    """An axis' integer index clamped so that every tap ``index + taps`` lies in the axis.

    An int32 bound is capped at 2**30, so that a large size cannot wrap it: int32 positions of
    a large axis are bounded far below that (``costs.positions_fit_int32``).
    """
    low = em.const(-min(taps), dtype)

    def last(size):  # the largest index whose taps all lie in the axis
        return size - 1 - max(taps)

    size = em.x_dim(2 + axis)
    if dtype != ir.DataType.INT32:
        high = em.axis_size(axis, dtype, last)
    elif size is not None:
        high = em.const(min(last(size), 2**30), dtype)
    else:
        high = em.Cast(em.Min(em.axis_size(axis, INT64, last), em.const(2**30, INT64)), to=dtype)
    return em.clip(index, low, high)


def where_inside(
    em: Emitter, inside: ir.Value, flat: ir.Value, past_end: ir.Value | None
) -> ir.Value:
    """``flat`` where ``inside`` (1, else 0) is 1, else ``past_end`` (None: 0), without Where.

    Outside points' ``flat`` may be any integer (a NaN cast): times 0, or below the Max with
    ``past_end`` (the zero slot, past every index) and then clamped to it.
    """
    if past_end is None:
        return em.Mul(flat, inside)
    return em.Min(em.Max(flat, _outside(em, inside, past_end)), past_end)


def _outside(em: Emitter, inside: ir.Value, past_end: ir.Value) -> ir.Value:
    """``past_end`` where ``inside`` is 0, else 0."""
    return em.Sub(past_end, em.Mul(inside, past_end))


def tap_table(
    em: Emitter, rank: int, offsets: Sequence[float], dtype: ir.DataType, points: int | None = None
) -> ir.Value:
    """``(1, T.., 1..)``: the flat offset of every tap combination, one constant when static.

    ``points``: the point axes after the tap axes (the emitter's unless given).
    """
    points = em.point_axes if points is None else points
    static = _static_table(em, rank, offsets, points)
    if static is not None:
        return em.const(static, dtype)
    shaped = [per_tap(offsets, a, rank, points, em.lead) for a in range(rank)]
    return _strided_sum(em, [em.const(o, dtype) for o in shaped], rank, dtype)


def tap_offsets(
    em: Emitter, rank: int, offsets: Sequence[float], dtype: ir.DataType
) -> list[ir.Value]:
    """Each tap combination's flat offset, a scalar, in the order of the ``(N, K, P)`` taps."""
    static = _static_table(em, rank, offsets, 0)
    if static is not None:
        return [em.const(v, dtype) for v in static.reshape(-1).tolist()]
    flat = em.reshape(tap_table(em, rank, offsets, dtype, points=0), [-1])
    return [em.Gather(flat, em.index(k), axis=0) for k in range(len(offsets) ** rank)]


def tap_column(em: Emitter, rank: int, offsets: Sequence[float], dtype: ir.DataType) -> ir.Value:
    """``(1, K, 1)``: each tap combination's flat offset, to add to ``(N, 1, P)`` first taps."""
    static = _static_table(em, rank, offsets, 0)
    if static is not None:
        return em.const(static.reshape(1, -1, 1), dtype)
    return em.reshape(tap_table(em, rank, offsets, dtype, points=0), [1, -1, 1])


def _static_table(
    em: Emitter, rank: int, offsets: Sequence[float], points: int
) -> np.ndarray | None:
    """``tap_table``'s values where X's strides are static, else None."""
    strides = [em.static_size(range(3 + axis, 2 + rank)) for axis in range(rank)]
    if None in strides:
        return None
    shaped = [per_tap(offsets, a, rank, points, em.lead) for a in range(rank)]
    return sum(o * s for o, s in zip(shaped, strides, strict=True))


def _strided_sum(em: Emitter, values: Sequence[ir.Value], rank: int, dtype: ir.DataType):
    """``sum(values[a] * stride of X's spatial axis a)``: per-axis positions to flat ones."""
    total = None
    for axis, value in enumerate(values):
        if axis < rank - 1:
            value = em.Mul(value, em.x_size(range(3 + axis, 2 + rank), dtype))
        total = value if total is None else em.Add(total, value)
    return total


def samples_size(em: Emitter, rank: int, dtype: ir.DataType) -> ir.Value:
    """``N * S``, one constant when both are static: the zero row past every sample's rows."""
    batch, spatial = em.x_dim(0), em.static_size(range(2, 2 + rank))
    if batch is not None and spatial is not None:
        return em.const(batch * spatial, dtype)
    return em.Mul(em.x_size(range(2, 2 + rank), dtype), em.x_size(range(0, 1), dtype))


def batch_offsets(em: Emitter, rank: int, dtype: ir.DataType) -> ir.Value:
    """``n * S`` shaped ``(N, 1, 1)``, to add to the ``(N, K, P)`` sample_type-sample indices."""
    return _strided(em, 0, range(2, 2 + rank), [-1, 1, 1], dtype)


def plane_offsets(em: Emitter, rank: int, dtype: ir.DataType) -> ir.Value:
    """``n * C * S + c * S`` shaped ``(C, N, 1, 1)``: each plane's start in X flattened.

    Added to ``(N, K, P)`` sample_type-sample indices, it gives ``(C, N, K, P)``: every
    sample's planes read in place (``Plan.in_place``), where OpenVINO would copy X to put a
    channel's planes side by side (``Transpose (1, 0, ..)``: 0.44 ms at 3x480x640).
    """
    batch, channels, size = em.x_dim(0), em.x_dim(1), em.static_size(range(2, 2 + rank))
    if None not in (batch, channels, size):  # one constant
        starts = np.arange(channels)[:, None] * size + np.arange(batch)[None, :] * channels * size
        return em.const(starts.reshape(channels, batch, 1, 1), dtype)
    samples = _strided(em, 0, range(1, 2 + rank), [1, -1, 1, 1], dtype)
    return em.Add(_strided(em, 1, range(2, 2 + rank), [-1, 1, 1, 1], dtype), samples)


def _strided(
    em: Emitter, axis: int, stride: range, shape: list[int], dtype: ir.DataType
) -> ir.Value:
    """Each index along X's ``axis`` times ``prod(X.shape[stride])``, shaped ``shape``.

    ``shape`` holds -1 for the axis' indices, 1 elsewhere; one constant where both are static.
    """
    count, size = em.x_dim(axis), em.static_size(stride)
    if count is not None and size is not None:  # one constant, no Mul to fold
        return em.const(np.arange(count).reshape(shape) * size, dtype)
    factor = em.x_size(stride, dtype)
    if count is not None:
        return em.Mul(em.const(np.arange(count).reshape(shape), dtype), factor)
    k = em.Range(em.const(0, INT64), em.count(range(axis, axis + 1)), em.const(1, INT64))
    k = em.Unsqueeze(k, em.const([a for a, d in enumerate(shape) if d != -1], INT64))
    return em.Mul(k if dtype == INT64 else em.Cast(k, to=dtype), factor)
