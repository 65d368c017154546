"""Gather the taps of every sampling point and combine them: the part all modes share.

Layout (PERFORMANCE.md): per-point tensors stay planar with the points innermost. Each spatial
axis i contributes a tensor of shape ``(1, .., T, .., 1, N, O1..Or)`` (its T taps on tap-axis i);
adding them broadcasts to all ``T**r`` tap combinations at once. X is viewed as ``(C, N*S)``, so a
single Gather fetches every tap of every point as ``(C, T, .., T, N, O1..Or)``, indexed by a flat
int64 index ``n*S + sum_i idx_i * stride_i`` that is exact at any size.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import onnx_ir as ir

from gridsample_lower.coords import source_coordinate, tap_indices
from gridsample_lower.emitter import Emitter
from gridsample_lower.spec import GridSampleSpec, compute_dtype

__all__ = ["Kernel", "gather_taps", "grid_coordinates", "interpolate", "to_output_layout"]

INT64 = ir.DataType.INT64

# A separable kernel: given the coordinate x and floor(x) of one axis, and a function that shapes
# a list of per-tap constants for that axis, return the float tap positions and their weights.
Kernel = Callable[[Emitter, ir.Value, ir.Value, Callable[[Sequence[float]], ir.Value]], tuple]


def grid_coordinates(em: Emitter, grid: ir.Value, spec: GridSampleSpec) -> list[ir.Value]:
    """One ``(N, O1..Or)`` coordinate tensor per spatial axis of X, in X's axis order, as ``ct``.

    The grid lists coordinates innermost-first (x = width first), so axis i reads component r-1-i.
    """
    r, ct = spec.rank, compute_dtype(spec)
    planar = em.Transpose(grid, perm=[r + 1, *range(r + 1)])
    if spec.grid_dtype != ct:
        planar = em.Cast(planar, to=ct)
    return [em.Gather(planar, em.const(r - 1 - axis, INT64), axis=0) for axis in range(r)]


def tap_constants(
    em: Emitter, axis: int, rank: int, dtype
) -> Callable[[Sequence[float]], ir.Value]:
    """Shape per-tap constants of spatial ``axis`` as ``(1, .., T, .., 1, 1, 1..1)``."""

    def shaped(values: Sequence[float], as_type: ir.DataType = dtype) -> ir.Value:
        shape = [1] * axis + [len(values)] + [1] * (rank - 1 - axis) + [1] * (rank + 1)
        return em.const(np.reshape(values, shape), as_type)

    return shaped


def gather_taps(
    em: Emitter, x: ir.Value, indices: Sequence[ir.Value], rank: int, inside: ir.Value | None = None
) -> ir.Value:
    """Gather X at per-axis int64 ``indices`` (broadcastable); returns ``(C, <index shape>)``.

    Where ``inside`` is False the result is zero: those points read a zero appended after the
    last element. Only the index tensor is masked, never the values, so this works for every
    dtype (onnxruntime's Where lacks int16, uint16, uint64, bool and bfloat16).
    """
    flat = None
    for axis, index in enumerate(indices):
        if axis < rank - 1:
            index = em.Mul(index, em.x_size(range(3 + axis, 2 + rank), INT64))
        flat = index if flat is None else em.Add(flat, index)
    if em.x_dim(0) != 1:
        flat = em.Add(flat, _batch_offsets(em, rank))
        data = em.Flatten(em.Transpose(x, perm=[1, 0, *range(2, rank + 2)]), axis=1)
    else:
        data = em.Flatten(x, axis=2)  # N == 1: (1, C, ..) is already (C, ..)
    if inside is not None:
        past_end = _per_channel_size(em, rank)
        flat = em.Where(inside, flat, past_end)
        data = em.Concat(data, _zero_column(em, x), axis=1)
    return em.Gather(data, flat, axis=1)


def _per_channel_size(em: Emitter, rank: int) -> ir.Value:
    """N * S, the number of elements of one channel across the batch."""
    batch = em.x_dim(0)
    spatial = em.x_size(range(2, 2 + rank), INT64)
    if batch is not None:
        return spatial if batch == 1 else em.Mul(spatial, em.const(batch, INT64))
    return em.Mul(spatial, em.x_size(range(0, 1), INT64))


def _zero_column(em: Emitter, x: ir.Value) -> ir.Value:
    """A ``(C, 1)`` tensor of zeros of X's type (gathered from a one-element constant)."""
    dtype = x.dtype
    zero = (
        em.const([0], dtype)
        if dtype != ir.DataType.STRING
        else em.Constant(value=ir.StringTensor(np.array([b""], dtype=object)))
    )
    channels = em.x_dim(1)
    if channels is not None:
        rows = em.const(np.zeros((channels, 1)), INT64)
    else:
        shape = em.Concat(em.Shape(x, start=1, end=2), em.const([1], INT64), axis=0)
        rows = em.ConstantOfShape(shape, value=ir.tensor(np.zeros(1, dtype=np.int64)))
    return em.Gather(zero, rows, axis=0)


def _batch_offsets(em: Emitter, rank: int) -> ir.Value:
    """``n * S`` shaped ``(N, 1, .., 1)``, to add to the per-point flat index."""
    spatial = em.x_size(range(2, 2 + rank), INT64)
    batch = em.x_dim(0)
    if batch is not None:
        starts = em.const(np.arange(batch).reshape([batch] + [1] * rank), INT64)
        return em.Mul(starts, spatial)
    n = em.Range(em.const(0, INT64), em.x_size(range(0, 1), INT64), em.const(1, INT64))
    n = em.Unsqueeze(n, em.const(list(range(1, rank + 1)), INT64))
    return em.Mul(n, spatial)


def to_output_layout(em: Emitter, y: ir.Value, rank: int) -> ir.Value:
    """``(C, N, O1..Or)`` to ``(N, C, O1..Or)``."""
    return em.Transpose(y, perm=[1, 0, *range(2, rank + 2)])


def interpolate(em: Emitter, x: ir.Value, grid: ir.Value, spec: GridSampleSpec, kernel: Kernel):
    """Separable interpolation (linear, cubic): weighted sum of the kernel's taps on every axis."""
    r, ct = spec.rank, compute_dtype(spec)
    indices, weights = [], None
    for axis, g in enumerate(grid_coordinates(em, grid, spec)):
        coord = source_coordinate(em, g, axis, spec, ct)
        taps, w = kernel(em, coord, em.Floor(coord), tap_constants(em, axis, r, ct))
        index, inside = tap_indices(em, taps, axis, spec, ct)
        if inside is not None:
            w = em.Where(inside, w, em.const(0.0, ct))
        indices.append(index)
        weights = w if weights is None else em.Mul(weights, w)
    values = gather_taps(em, x, indices, r)
    if spec.x_dtype != ct:
        values = em.Cast(values, to=ct)
    y = em.ReduceSum(em.Mul(values, weights), em.const(list(range(1, r + 1)), INT64), keepdims=0)
    return _cast_result(em, to_output_layout(em, y, r), spec, ct)


def _cast_result(em: Emitter, y: ir.Value, spec: GridSampleSpec, ct) -> ir.Value:
    """Back to X's type; integers truncate toward zero, saturated to their range."""
    if spec.x_dtype == ct:
        return y
    if spec.x_dtype.is_integer():
        info = np.iinfo(spec.x_dtype.numpy())
        # The largest float64 values that still fit the integer type.
        low, high = float(info.min), float(np.nextafter(float(info.max) + 1.0, 0.0))
        y = em.Clip(y, em.const(low, ct), em.const(min(high, float(info.max)), ct))
    return em.Cast(y, to=spec.x_dtype)
