"""Gather every tap of every point from X and sum them, in the forms the plan chose.

GatherElements reads X viewed as ``(N*C, S)`` with the ``(N, K*P)`` within-sample indices
expanded over C (no transpose of X or Y), or channel by channel, each channel's taps summed by
a MatMul with ones. The rows read C-vectors from a channels-last copy ``(N*S, C)``, summed tap
by tap (a chain of Adds), scaled at once by one BatchNormalization, or by one batched MatMul.
``plan.py`` says when each pays, and why.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx_ir as ir

from gridsample_lower.lowering.costs import TILE
from gridsample_lower.lowering.emitter import Emitter
from gridsample_lower.lowering.flat_index import (
    batch_offsets,
    flat_index,
    gather_index,
    plane_offsets,
    samples_size,
    tap_column,
    tap_offsets,
    tap_table,
    where_inside,
)
from gridsample_lower.lowering.plan import Plan
from gridsample_lower.spec import GridSampleSpec, compute_dtype

__all__ = ["gather_and_combine"]

INT64 = ir.DataType.INT64
Size = int | ir.Value  # a static size, or a 1-D int64 value of one element
REORDER = [0, 3, 1, 2]  # the one perm some runtimes run fast (``Target.reorder_transposes``)


def gather_and_combine(
    em: Emitter,
    x: ir.Value,
    spec: GridSampleSpec,
    plan: Plan,
    indices: Sequence[ir.Value],
    weights: ir.Value | list[ir.Value] | None = None,
    inside: ir.Value | None = None,
    offsets: Sequence[float] | None = None,
    integers: bool = False,
    fraction: Sequence[float] | None = None,
) -> ir.Value:
    """``(N, C, O1..Or)``: X at the per-axis (float, exact) ``indices``, combined with ``weights``.

    Without weights (nearest) the single tap is returned in X's type; with them, the weighted
    sum over the plan's taps in the compute type; a list holds each axis' weights apart, by
    which the taps are multiplied one by one. Where ``inside`` is False the result is zero.
    ``offsets``: the indices are one per point, its taps at these offsets on every axis.
    ``integers``: the indices are integers already, of the plan's position type.
    ``fraction`` (``plan.fraction``): each axis' weights are its fraction f, one per point, and
    tap t weighs ``|f - fraction[t]|``.
    """
    flat = flat_index(em, spec, plan, indices, inside, offsets, integers)
    if offsets is not None and not plan.rows:  # every tap's index, (N, T.., O..)
        flat_type = compute_dtype(spec) if plan.float_index else plan.sample_type
        flat = em.Add(flat, tap_table(em, spec.rank, offsets, flat_type))
    if isinstance(weights, list) and plan.sum not in ("reduce_sum", "chain"):
        product = None  # each axis' weights apart: only these two take them so
        for parts in weights:
            part = _whole(em, parts)
            product = part if product is None else em.Mul(product, part)
        weights = product
    if plan.rows:
        return _gather_rows(em, x, spec, plan, flat, weights, inside, fraction, offsets)
    return _gather_elements(em, x, spec, plan, flat, weights, inside)


def _gather_elements(
    em: Emitter,
    x: ir.Value,
    spec: GridSampleSpec,
    plan: Plan,
    flat: ir.Value,
    weights: ir.Value | None,
    inside: ir.Value | None,
) -> ir.Value:
    ct, n, c = compute_dtype(spec), em.batch, em.channels
    points = em.output_dims()
    flat = em.flatten(
        gather_index(em, plan, flat), 1, lambda: [n, em.points_times(plan.taps)]
    )  # (N, K*P)
    if plan.sum == "by_channel":  # (weights only: they do the masking)
        return _combine_by_channel(em, x, spec, plan, flat, weights)
    data = em.flatten(x, 2, lambda: [em.planes, em.sample_size])  # (N*C, S)
    if plan.zero_slot:  # the flat index already reads S, one past the sample, where outside
        if plan.slot_by_pad:
            data = em.Pad(data, em.const([0, 0, 0, 1], INT64))
        else:
            data = em.Concat(data, _zeros(em, x.dtype, [em.planes, 1]), axis=1)
    flat = em.Expand(em.Unsqueeze(flat, em.const([1], INT64)), em.shape([n, c, 1]))
    flat = em.flatten(flat, 2, lambda: [em.planes, em.points_times(plan.taps)])
    values = em.GatherElements(data, flat, axis=1)  # (N*C, K*P)
    if weights is None:
        values = em.reshape(values, [n, c, *points])
        if plan.masks_values:
            values = em.Where(em.reshape(inside, [n, 1, *points]), values, _zero(em, x.dtype))
        return values
    if spec.x_dtype != ct:
        values = em.Cast(values, to=ct)
    # Shaped so the sum lands in the output's shape: a Reshape last would copy the output.
    if isinstance(weights, list):  # each axis' (N, 1.., T, ..1, O..) apart (plan.interleaved)
        r, one = spec.rank, em.const([1], INT64)
        per_axis = [round(plan.taps ** (1 / r))] * r
        values = em.reshape(values, [n, c, *per_axis, *points])
        if plan.masks_values:  # outside taps add 0, whatever pixel they were clamped to
            kept = em.reshape(inside, [n, 1, *per_axis, *points])
            values = em.Where(kept, values, _zero(em, ct))
        for parts in weights:  # hi + lo in the region that multiplies: never stored
            # (N, 1, T.., O..): the unit axis after the batch given, where the emitter has it
            shaped = [p if em.lead else em.Unsqueeze(p, one) for p in parts]
            values = em.Mul(values, _whole(em, shaped))
        return em.ReduceSum(values, em.const(list(range(2, 2 + r)), INT64), keepdims=0)
    values = em.reshape(values, [n, c, plan.taps, *points])
    if plan.masks_values:  # outside taps add 0, whatever pixel they were clamped to
        kept = em.reshape(inside, [n, 1, plan.taps, *points])
        values = em.Where(kept, values, _zero(em, ct))
    weights = em.reshape(weights, [n, 1, plan.taps, *points])
    return em.ReduceSum(em.Mul(values, weights), em.const([2], INT64), keepdims=0)


def _combine_by_channel(
    em: Emitter, x: ir.Value, spec: GridSampleSpec, plan: Plan, flat: ir.Value, weights: ir.Value
) -> ir.Value:
    """``(N, C, O..)``: each channel gathered and its weighted taps summed on its own.

    Every channel's ``(N, S)`` planes are read by one GatherElements with the same ``(N, K*P)``
    indices, and a MatMul with ones sums their taps: no copy of the indices per channel, and no
    ReduceSum of a ``(1, K, P)`` tensor, which onnxruntime sums (nothing outside the reduced
    axis) 6x slower than a ``(C, K, P)`` one.
    """
    ct, n, taps, total = compute_dtype(spec), em.batch, plan.taps, em.points
    points = em.output_dims()
    weights = em.reshape(weights, [n, taps, total])
    ones = em.const(np.ones((1, taps)), ct)
    sums = []
    for k in range(em.x_dim(1)):
        plane = em.flatten(
            em.Gather(x, em.index(k), axis=1), 1, lambda: [n, em.sample_size]
        )  # (N, S)
        values = em.GatherElements(plane, flat, axis=1)  # (N, K*P)
        if spec.x_dtype != ct:
            values = em.Cast(values, to=ct)
        total_sum = em.MatMul(ones, em.Mul(em.reshape(values, [n, taps, total]), weights))
        sums.append(em.reshape(total_sum, [n, 1, *points]))  # (N, 1, O..): no copy here...
    # ...so the Concat writes the output itself: a Reshape last would copy the whole output
    # where it is the graph's output (1.3 of 37 ms at 16x480x640).
    return sums[0] if len(sums) == 1 else em.Concat(*sums, axis=1)


def _gather_rows(
    em: Emitter,
    x: ir.Value,
    spec: GridSampleSpec,
    plan: Plan,
    flat: ir.Value,
    weights: ir.Value | None,
    inside: ir.Value | None,
    fraction: Sequence[float] | None = None,
    offsets: Sequence[float] | None = None,
) -> ir.Value:
    """``(N, C, O..)`` from rows of X.

    ``offsets``: ``flat`` holds each point's first tap, ``(N, 1.., O..)``, and each tap's
    offset is added where it is gathered.
    """
    r, n, c, taps, total = spec.rank, em.batch, em.channels, plan.taps, em.points
    index_type = plan.index_type
    if plan.planes and em.x_dim(0) == 1:  # one sample: gathered along its pixels, (C, S)
        rows = em.flatten(x, 2, lambda: [c, em.sample_size])
    elif plan.in_place:  # (1, N*C*S): every value of X in place, each channel's index its own
        rows = _in_one_row(em, x)
    elif plan.planes:  # (C, N*S): every sample's plane of a channel in a row, blocks moved
        # (transposed as it is: tract 0.23 cannot prove (N, C, S) the size of a padded X of
        # symbolic sizes, Reshape volume mismatch)
        planes = em.Transpose(x, perm=[1, 0, *range(2, 2 + r)])
        rows = em.flatten(planes, 1, lambda: [c, em.pixels])
    else:
        rows = _channels_last(em, x, r, plan.tiled)  # (N*S, C)
    flat = em.reshape(flat, [n, 1 if offsets else taps, total])
    flat_type = compute_dtype(spec) if plan.float_index else index_type
    if plan.float_index and r == 1:
        # A 1-D index may end in a Sub of a constant (nearest reflection: ``- 0.5``), which
        # onnx2tf 1.29 merges with the offsets' Add into one Sub and then emits that Add too:
        # the offsets twice, a Gather out of bounds. Its offsets are added once it is cast.
        flat, flat_type = gather_index(em, plan, flat), index_type
    if em.x_dim(0) != 1:  # within-sample indices may be int32 where these offsets are not
        if not plan.float_index and plan.sample_type != index_type:
            flat = em.Cast(flat, to=index_type)
        # (C, N, K, P) in place: each plane at its start in X flattened
        offsets_of = plane_offsets if plan.in_place else batch_offsets
        flat = em.Add(flat, offsets_of(em, r, flat_type))
    if plan.zero_slot:
        if plan.in_place:  # past every value of X
            past_end = em.x_size(range(0, 2 + r), flat_type)
        else:
            past_end = samples_size(em, r, flat_type)
        kept = em.Cast(em.reshape(inside, [n, 1, total]), to=flat_type)
        flat = where_inside(em, kept, flat, past_end)
        if plan.in_place:
            rows = em.Concat(rows, _zeros(em, x.dtype, [1, 1]), axis=1)
        elif plan.planes:
            rows = em.Concat(rows, _zeros(em, x.dtype, [c, 1]), axis=1)
        else:
            rows = em.Concat(rows, _zeros(em, x.dtype, [1, c]), axis=0)
    if flat_type != index_type:
        flat = gather_index(em, plan, flat)
    starts = None  # (chain) each tap's index: its scalar offset added to the (N, P) first taps
    if offsets is not None and plan.sum == "chain":
        first = [c, n, total] if plan.in_place else [n, total]
        flat, starts = em.reshape(flat, first), tap_offsets(em, r, offsets, index_type)
    elif offsets is not None:  # every tap's index at once, (N, K, P)
        flat = em.Add(flat, tap_column(em, r, offsets, index_type))
    y_dtype = x.dtype if weights is None else compute_dtype(spec)
    if y_dtype != x.dtype:  # cast once here, usually fewer rows than the taps gathered
        rows = em.Cast(rows, to=y_dtype)
    kept = None  # (linear, cubic) where each tap lies inside X: its values, else 0
    if plan.masks_values and taps > 1:  # (N, T, P), or (N, T, P, 1) beside rows of C values
        kept = em.reshape(inside, [n, taps, total] if plan.planes else [n, taps, total, 1])
    if plan.sum == "reduce_sum":
        y = _reduced_taps(
            em,
            rows,
            flat,
            weights,
            spec.rank,
            taps,
            total,
            plan.planes,
            (fraction, y_dtype),
            kept,
        )
    elif plan.sum == "matmul":
        y = _matmul_taps(em, rows, flat, weights, taps, total)
    elif plan.sum == "scaled":
        y = _scaled_taps(em, rows, flat, weights, taps, total, y_dtype)
    else:
        y = _chain_taps(
            em,
            rows,
            flat,
            weights,
            taps,
            total,
            plan.planes,
            (fraction, y_dtype),
            starts,
            kept,
            tap_axis=2 if plan.in_place else 1,
        )
    points = em.output_dims()
    if plan.planes:  # (C, N, P): the output's layout already where N is 1
        if plan.masks_values and kept is None:
            y = em.Where(em.reshape(inside, [n, total]), y, _zero(em, y_dtype))
        if em.x_dim(0) != 1:  # each channel's (P) blocks moved back into their samples
            y = em.Transpose(em.reshape(y, [c, n, total]), perm=[1, 0, 2])
        return em.reshape(y, [n, c, *points])
    if plan.masks_values and kept is None:
        y = em.Where(em.reshape(inside, [n, total, 1]), y, _zero(em, y_dtype))
    if em.target.reorder_transposes and r != 2:  # (N, C, P, 1), then the output's shape
        return em.reshape(
            em.Transpose(em.reshape(y, [n, total, 1, c]), perm=REORDER), [n, c, *points]
        )
    # Transposed last, straight into the output's shape: a Reshape last would copy it.
    return em.Transpose(em.reshape(y, [n, *points, c]), perm=[0, r + 1, *range(1, r + 1)])


def _chain_taps(
    em: Emitter,
    rows: ir.Value,
    flat: ir.Value,
    weights: ir.Value | None,
    taps: int,
    total: Size,
    planes: bool = False,
    fractions: tuple[Sequence[float] | None, ir.DataType] = (None, ir.DataType.FLOAT),
    starts: Sequence[ir.Value] | None = None,
    kept: ir.Value | None = None,
    tap_axis: int = 1,
) -> ir.Value:
    """``(N, P, C)``: one Gather per tap, weighted and summed by a chain of Adds.

    ``weights`` may be each axis' apart (``plan.interleaved``): each tap is then multiplied
    by its taps' weight on every axis, in one region with the sum. ``planes``: ``rows`` is one
    sample's ``(C, S)``, gathered along its pixels: ``(C, 1, P)``. ``starts``: ``flat`` is
    ``(N, P)``, each point's first tap, and tap k's index is ``flat + starts[k]``.
    ``kept``: where each tap lies inside X (its values, else 0), shaped as ``flat`` with the
    gathered values' channel axis. ``tap_axis``: ``flat``'s (2 where each channel has its own
    indices, ``(C, N, K, P)``).
    """
    n, (fraction, dtype) = em.batch, fractions
    apart = isinstance(weights, list)
    if apart:  # (hi, lo) per axis, added in the region that multiplies: never stored
        per_axis = round(taps ** (1 / len(weights)))
        if fraction:  # one f per point and axis: each tap's |f - c| (1 - f, f)
            shape = [n, total] if planes else [n, total, 1]
            axis_weights = [
                _tap_weights(em, _whole(em, [em.reshape(p, shape) for p in pair]), fraction, dtype)
                for pair in weights
            ]
        else:
            shape = [n, per_axis, total] if planes else [n, per_axis, total, 1]
            parts = [[em.reshape(p, shape) for p in pair] for pair in weights]
            axis_weights = [
                [
                    _whole(em, [em.Gather(p, em.index(t), axis=1) for p in pair])
                    for t in range(per_axis)
                ]
                for pair in parts
            ]
    elif weights is not None:
        weights = em.reshape(weights, [n, taps, total] if planes else [n, taps, total, 1])
    y = None
    for k in range(taps):  # a chain of Adds: 10% faster than one Sum of every tap
        index = em.Add(flat, starts[k]) if starts else em.Gather(flat, em.index(k), axis=tap_axis)
        values = em.Gather(rows, index, axis=1 if planes else 0)
        if kept is not None:  # an outside tap adds 0, whatever pixel it was clamped to
            values = em.Where(em.Gather(kept, em.index(k), axis=1), values, _zero(em, dtype))
        if apart:  # tap k is (t_0, .., t_r-1), the last axis' tap innermost
            for a, w in enumerate(axis_weights):
                values = em.Mul(values, w[k // per_axis ** (len(weights) - 1 - a) % per_axis])
        elif weights is not None:
            values = em.Mul(values, em.Gather(weights, em.index(k), axis=1))
        y = values if y is None else em.Add(y, values)
    return y


def _reduced_taps(
    em: Emitter,
    rows: ir.Value,
    flat: ir.Value,
    weights: list[tuple[ir.Value, ...]],
    rank: int,
    taps: int,
    total: Size,
    planes: bool = False,
    fractions: tuple[Sequence[float] | None, ir.DataType] = (None, ir.DataType.FLOAT),
    kept: ir.Value | None = None,
) -> ir.Value:
    """``(N, P, C)``: every tap in one Gather, weighted, summed by one ReduceSum.

    The ``(N, T.., P, C)`` taps are multiplied by each axis' weights (``hi + lo``,
    plan.interleaved) in one region. OpenVINO's fused kernels take about 11 inputs: a chain of
    16 or more taps is split, its partial sums stored in bfloat16 (cubic 1x16x32x40 before a
    Conv: 0.018 against native's 0.008). ``planes``: ``rows`` is one sample's ``(C, S)``,
    gathered along its pixels into ``(C, T.., P)``, summed into ``(C, P)``. ``kept``: where
    each tap lies inside X (its values, else 0), shaped as ``flat`` with the channel axis.
    """
    n, c, per_axis = em.batch, em.channels, round(taps ** (1 / rank))
    fraction, dtype = fractions
    # (the channels lead, and the weights broadcast over them, where gathered from planes;
    # several samples' planes, read from X on one axis, keep their batch axis: (C, N, T.., P))
    one_sample = em.x_dim(0) == 1
    lead, last = (([c] if one_sample else [c, n]), []) if planes else ([n], [c])
    ones = ([1] if one_sample else [1, n]) if planes else [n]
    values = em.Gather(rows, flat, axis=1 if planes else 0)
    if kept is not None:  # an outside tap adds 0, whatever pixel it was clamped to
        values = em.Where(kept, values, _zero(em, dtype))
    first = len(lead)  # the first tap axis
    if not isinstance(weights, list):  # (forced planar) one product of weights
        values = em.reshape(values, [*lead, taps, total, *last])
        values = em.Mul(values, em.reshape(weights, [*ones, taps, total, *[1] * len(last)]))
        return em.ReduceSum(values, em.const([first], INT64), keepdims=0)
    values = em.reshape(values, [*lead, *[per_axis] * rank, total, *last])
    for axis, parts in enumerate(weights):
        taps_here = 1 if fraction else per_axis
        shape = [*ones, *[taps_here if a == axis else 1 for a in range(rank)], total]
        shape += [1] * len(last)
        w = _whole(em, [em.reshape(p, shape) for p in parts])
        if fraction:  # |f - c| with the taps' c on this axis' tap axis
            at = np.reshape(fraction, [1, *[per_axis if a == axis else 1 for a in range(rank)]])
            w = em.Abs(em.Sub(w, em.const(at.reshape([*at.shape, 1, *[1] * len(last)]), dtype)))
        values = em.Mul(values, w)
    if planes:  # (C, T.., P): OpenVINO sums it as fast whichever way it is viewed
        axes = list(range(first, first + rank))
        return em.ReduceSum(values, em.const(axes, INT64), keepdims=0)
    if not all(isinstance(d, int) for d in (n, c, total)):
        # (N, T, P, C): the tap axes merged (OpenVINO sums (N, 4, 4, P, C)'s tap axes twice as
        # slowly as one); not the view below, from which IREE 3.13 read garbage
        values = em.reshape(values, [n, taps, total, c])
        return em.ReduceSum(values, em.const([1], INT64), keepdims=0)
    # (N, T, P*C): OpenVINO sums one leading axis of a 3-D view a third faster than the tap
    # axes of (N, T.., P, C) (16 taps of 4096 x 64: 0.92 vs 1.37 ms)
    values = em.reshape(values, [n, taps, total * c])
    summed = em.ReduceSum(values, em.const([1], INT64), keepdims=0)
    return em.reshape(summed, [n, total, c])


def _whole(em: Emitter, parts: Sequence[ir.Value]) -> ir.Value:
    """One axis' weights from their parts: ``hi + lo`` (bfloat16-safe), or the weights whole."""
    return parts[0] if len(parts) == 1 else em.Add(*parts)


def _tap_weights(
    em: Emitter, f: ir.Value, fraction: Sequence[float], dtype: ir.DataType
) -> list[ir.Value]:
    """Each tap's weight ``|f - c|`` from one axis' fraction (``f`` itself where c is 0)."""
    return [f if c == 0 else em.Abs(em.Sub(f, em.const(c, dtype))) for c in fraction]


def _scaled_taps(
    em: Emitter,
    rows: ir.Value,
    flat: ir.Value,
    weights: ir.Value,
    taps: int,
    total: Size,
    dtype: ir.DataType,
) -> ir.Value:
    """``(N, P, C)``: every tap in one Gather, scaled row by row, summed by one MatMul.

    BatchNormalization with mean 0, variance 0 and epsilon 1 is ``x * scale`` exactly (the
    divisor is sqrt(1) = 1), one scale per row: the ``(N*K*P, C)`` taps become its channels.
    Its zeros come from the weights (``w - w``), NaN exactly where the weight is NaN already.
    """
    n, c = em.batch, em.channels
    values = em.reshape(em.Gather(rows, flat, axis=0), [1, -1, c])  # (1, N*K*P, C)
    scale = em.reshape(weights, [-1])
    zeros = em.Sub(scale, scale)
    scaled = em.BatchNormalization(values, scale, zeros, zeros, zeros, epsilon=1.0)
    ones = em.const(np.ones((1, taps)), dtype)
    row = em.points_times(c)
    summed = em.MatMul(ones, em.reshape(scaled, [n, taps, row]))  # (N, 1, P*C)
    return em.reshape(summed, [n, total, c])


def _matmul_taps(
    em: Emitter, rows: ir.Value, flat: ir.Value, weights: ir.Value, taps: int, total: Size
) -> ir.Value:
    """``(N, P, C)``: every tap in one Gather, ``(N, P, K, C)``, summed by one MatMul.

    The ``(N, P, 1, K)`` weights times the ``(N, P, K, C)`` taps: a batch of small products.
    """
    n, c = em.batch, em.channels
    values = em.Gather(rows, em.Transpose(flat, perm=[0, 2, 1]), axis=0)
    weights = em.Transpose(em.reshape(weights, [n, 1, taps, total]), perm=[0, 3, 1, 2])
    return em.reshape(em.MatMul(weights, values), [n, total, c])


def _channels_last(em: Emitter, x: ir.Value, rank: int, tiled: bool) -> ir.Value:
    """X as ``(N*S, C)`` rows: one Transpose, or two in tiles of ``(C, TILE)`` (``plan``).

    Where only ``REORDER`` runs fast (``Target.reorder_transposes``), X viewed as ``(N, C, 1,
    S)`` becomes ``(N, S, C, 1)``.
    """
    n, c = em.batch, em.channels
    if tiled:
        blocks = em.reshape(x, [n, c, em.sample_size // TILE, TILE])
        blocks = em.Transpose(blocks, perm=[0, 2, 1, 3])
        # A Reshape between the two keeps onnxruntime from fusing them back into one transpose.
        blocks = em.reshape(blocks, [-1, c, TILE])
        return em.flatten(em.Transpose(blocks, perm=[0, 2, 1]), 2, lambda: [em.pixels, c])
    if em.target.reorder_transposes:
        moved = em.Transpose(em.reshape(x, [n, c, 1, em.sample_size]), perm=REORDER)
        return em.flatten(moved, 2, lambda: [em.pixels, c])
    last = em.Transpose(x, perm=[0, *range(2, rank + 2), 1])
    return em.flatten(last, rank + 1, lambda: [em.pixels, c])


def _in_one_row(em: Emitter, x: ir.Value) -> ir.Value:
    """X as ``(1, N*C*S)``, no copy.

    Without Flatten, a Reshape to ``(N*C*S)`` unsqueezed: IREE 3.13 compiled a Reshape of X
    straight to ``(1, N*C*S)`` for N = 1 alone.
    """
    if em.target.allows("Flatten"):
        return em.Flatten(x, axis=0)
    return em.Unsqueeze(em.reshape(x, [em.values]), em.const([0], INT64))


def _zero(em: Emitter, dtype: ir.DataType, shape: tuple[int, ...] = ()) -> ir.Value:
    """A constant zero of ``dtype`` (a string's is empty), shaped ``shape``."""
    if dtype == ir.DataType.STRING:
        return em.Constant(value=ir.StringTensor(np.full(shape, b"", dtype=object)))
    return em.const(np.zeros(shape), dtype)


def _zeros(em: Emitter, dtype: ir.DataType, shape: list[int | ir.Value]) -> ir.Value:
    """Zeros of any dtype (string included), gathered from a one-element constant.

    The index expands at run time (a static shape folds once at load) rather than being stored:
    a table as large as the zeros would grow the model with N x C.
    """
    index = em.Expand(em.index(np.zeros([1] * len(shape))), em.shape(shape))
    return em.Gather(_zero(em, dtype, (1,)), index, axis=0)
