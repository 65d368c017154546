"""The interpolation all modes share: grid to coordinates, kernels' weights, and the ring.

Layout (docs/lowered-graph.md): per-axis tensors are shaped ``(N, T_1..T_r, O_1..O_r)``:
batch first, one tap axis per spatial axis (T long on its own axis, 1 on the others), the
output points innermost and planar. Adding the per-axis tensors broadcasts to all K = T**r tap
combinations, which ``gathers.gather_and_combine`` fetches and sums as the ``Plan`` says.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np
import onnx_ir as ir

from gridsample_lower.lowering.coords import ring_base, source_coordinate, tap_indices
from gridsample_lower.lowering.emitter import Emitter
from gridsample_lower.lowering.flat_index import per_tap
from gridsample_lower.lowering.gathers import gather_and_combine
from gridsample_lower.lowering.plan import Plan
from gridsample_lower.spec import GridSampleSpec, compute_dtype

__all__ = ["Kernel", "grid_coordinates", "interpolate"]

INT64 = ir.DataType.INT64


@dataclasses.dataclass(frozen=True)
class Kernel:
    """A separable interpolation kernel: where its taps are, and how much each one weighs.

    ``offsets`` are the taps' positions relative to floor(x). ``weights(em, x, x1, per_tap)``
    returns the weights of one axis from the coordinate x, x1 = floor(x), and ``per_tap`` (a
    ``TapConstants``), which shapes per-tap constants for that axis and knows which tensor axis
    holds its taps.
    """

    offsets: tuple[float, ...]
    weights: Callable[..., ir.Value]


def grid_coordinates(em: Emitter, grid: ir.Value, spec: GridSampleSpec) -> list[ir.Value]:
    """One ``(N, 1..1, O1..Or)`` coordinate tensor per spatial axis of X, in X's axis order.

    The grid lists coordinates innermost-first (x = width first), so axis i reads component r-1-i.
    """
    r, ct = spec.rank, compute_dtype(spec)
    if em.target.grid_by_gather:  # (N, O..) per component, then (N, 1..1, O..)
        if spec.grid_dtype != ct:
            grid = em.Cast(grid, to=ct)
        taps = em.const(list(range(1, r + 1)), INT64)
        last = r + 1
        if em.point_axes == 1 and r > 1:  # (N, P, r): the points on one axis
            grid, last = em.reshape(grid, [em.batch, em.points, r]), 2
        return [
            em.Unsqueeze(em.Gather(grid, em.index(r - 1 - axis), axis=last), taps)
            for axis in range(r)
        ]
    planar = em.Transpose(grid, perm=[r + 1, *range(r + 1)])
    if spec.grid_dtype != ct:
        planar = em.Cast(planar, to=ct)
    planar = em.Unsqueeze(planar, em.const(list(range(2, r + 2)), INT64))
    return [em.Gather(planar, em.index(r - 1 - axis), axis=0) for axis in range(r)]


@dataclasses.dataclass(frozen=True)
class TapConstants:
    """Shapes per-tap constants of one spatial axis as ``(1, 1.., T, ..1, 1..1)``.

    ``tap_axis`` is the tensor axis that holds that spatial axis' taps.
    """

    em: Emitter
    axis: int
    rank: int
    dtype: ir.DataType

    @property
    def tap_axis(self) -> int:
        return 1 + self.axis

    def __call__(self, values: Sequence[float]) -> ir.Value:
        return self.em.const(per_tap(values, self.axis, self.rank, self.em.point_axes), self.dtype)


def interpolate(
    em: Emitter, x: ir.Value, grid: ir.Value, spec: GridSampleSpec, plan: Plan, kernel: Kernel
) -> ir.Value:
    """Separable interpolation (linear, cubic): weighted sum of the kernel's taps on every axis.

    A NaN or infinite grid coordinate gives NaN (0 for integer X), like the reference kernel:
    its weights are NaN, while its taps stay in range. Zeros padding reads its outside taps from
    the plan's ring of zeros around X (``_zero_ring``), or masks their weights where onnxruntime
    cannot pad X: integers, which have no infinities, and bfloat16 (an infinite pixel beside a
    dropped tap then gives NaN: docs/semantics.md). A ring as wide as the kernel clamps only
    each point's first tap (``ring_base``, ``plan.per_point``); a ring of one clamps every tap.
    """
    r, ct = spec.rank, compute_dtype(spec)
    indices, weights = [], None
    for axis, g in enumerate(grid_coordinates(em, grid, spec)):
        coord = source_coordinate(em, g, axis, spec, ct)  # finite, NaN and infinities too
        floor, taps = em.Floor(coord), TapConstants(em, axis, r, ct)
        w = kernel.weights(em, em.Add(coord, em.Sub(g, g)), floor, taps)  # g - g: 0 or NaN
        if plan.per_point:
            index = ring_base(em, floor, axis, kernel.offsets, ct)
        elif plan.ring:  # shifted onto the padded axis; clamped onto its ring once an integer...
            index = em.Add(floor, taps([o + 1 for o in kernel.offsets]))
            if ct == ir.DataType.DOUBLE:  # ...and first in float, if it may pass 2**31
                last = em.axis_size(axis, ct, lambda n: n + 1)
                index = em.clip(index, em.const(0.0, ct), last)
        else:
            positions = em.Add(floor, taps(kernel.offsets))
            if plan.float_index and spec.padding_mode == "border":
                # clamped once, after the float index has been made finite (flat_index)
                index, inside = positions, None
            else:
                index, inside = tap_indices(em, positions, axis, spec, ct)
            if inside is not None:  # a multiply by 0 or 1 is exact, and 5x cheaper than Where
                w = em.Mul(w, em.Cast(inside, to=ct))
        indices.append(index)
        weights = w if weights is None else em.Mul(weights, w)
    if plan.ring:
        x = _zero_ring(em, x, spec, plan.ring)
        em = em.with_x(x)
    offsets = [o + plan.ring for o in kernel.offsets] if plan.per_point else None
    y = gather_and_combine(em, x, spec, plan, indices, weights, offsets=offsets)
    return _cast_result(em, y, spec, ct)


def _zero_ring(em: Emitter, x: ir.Value, spec: GridSampleSpec, width: int) -> ir.Value:
    """X with ``width`` zeros on either side of every spatial axis: where zeros padding taps read 0.

    Masking the weights instead would give inf * 0 = NaN where an outside tap is clamped onto an
    infinite pixel; the reference reads 0 there. With few channels the copy costs less than the
    masks did; with many, or an X much larger than the output, 5-35% more (docs/performance.md).
    """
    r = spec.rank
    padded = em.Pad(x, em.const([0, 0, *[width] * r, 0, 0, *[width] * r], INT64))
    dims = [em.x_dim(a) for a in range(2 + r)]
    grown = [d + 2 * width if d is not None else None for d in dims[2:]]
    padded.shape = ir.Shape([*dims[:2], *grown])
    padded.dtype = spec.x_dtype
    return padded


def _cast_result(em: Emitter, y: ir.Value, spec: GridSampleSpec, ct) -> ir.Value:
    """Back to X's type; integers truncate toward zero, saturated to their range."""
    if spec.x_dtype == ct:
        return y
    if spec.x_dtype.is_integer():
        y = em.Where(em.Equal(y, y), y, em.const(0.0, ct))  # NaN -> 0
        info = np.iinfo(spec.x_dtype.numpy())
        # The largest float64 values that still fit the integer type.
        low, high = float(info.min), float(np.nextafter(float(info.max) + 1.0, 0.0))
        y = em.clip(y, em.const(low, ct), em.const(min(high, float(info.max)), ct))
    return em.Cast(y, to=spec.x_dtype)
