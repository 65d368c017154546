"""Per-axis coordinate arithmetic shared by every mode: unnormalize, fold, and tap indices.

Mirrors onnxruntime's CPU kernel (``GsDenormalize``, ``PixelAtGrid``): the continuous
coordinate is only unnormalized, and the padding rule is applied to each integer tap (zeros
padding on a wide ring of zeros: to each point's first tap, ``ring_base``). Taps stay in float,
where they are small exact integers (float ops are several times cheaper than int64 ones in
onnxruntime). A NaN coordinate stays NaN where the result does not depend on its taps
(``passes_nan``): they are put in range once they are integers (``flat_index.flat_index``).
"""

from __future__ import annotations

from collections.abc import Sequence

import onnx_ir as ir

from gridsample_lower.lowering.emitter import ALL_AXES, Emitter
from gridsample_lower.spec import GridSampleSpec

__all__ = [
    "bounds_coordinate",
    "integer_bound",
    "integer_tap_indices",
    "passes_nan",
    "ring_base",
    "source_coordinate",
    "tap_indices",
]

# Past these magnitudes every float32 (float64) is an integer: bounding a coordinate there keeps
# the fraction, so the taps' weights, that onnxruntime gives it.
_WHOLE = {ir.DataType.FLOAT: 2.0**23, ir.DataType.DOUBLE: 2.0**52}


def source_coordinate(em: Emitter, g: ir.Value, axis: int, spec: GridSampleSpec, ct) -> ir.Value:
    """Unnormalize grid component ``g`` for spatial ``axis``; then bound it without changing taps.

    The operation order is onnxruntime's, so results agree bit for bit:
    align_corners=1: ``(g + 1) * ((L - 1) / 2)``; align_corners=0: ``(g + 1) * (L / 2) - 0.5``.
    Zeros and border: clip to +-2**23 (float64: 2**52), past which every value is a whole number,
    so the fraction and the weights stay onnxruntime's (an edge pixel's infinity, clamped to with
    both weights nonzero, stays infinite). Reflection: subtract a whole number of reflection
    periods (``fmod``, exact), which keeps the fraction and the tap parities. Linear and cubic
    keep a NaN coordinate (``passes_nan``), and reflection turns an infinite one into NaN: their
    weights make the result NaN. Nearest with border padding sends NaN to -2**23 and with
    reflection to 0, pixels the reference reads; with zeros padding it masks the point, so its
    coordinate stays unbounded.
    """
    one = em.const(1.0, ct)
    if spec.align_corners:
        x = em.Mul(em.Add(g, one), em.axis_size(axis, ct, lambda n: (n - 1) / 2))
    else:
        x = em.Sub(
            em.Mul(em.Add(g, one), em.axis_size(axis, ct, lambda n: n / 2)),
            em.const(0.5, ct),
        )
    if spec.padding_mode == "reflection":
        period = reflection_period(em, axis, spec, ct)
        whole = em.Floor(em.Div(em.Abs(x), period))
        if axis == ALL_AXES:  # OpenVINO runs Sign alone, on a bfloat16 input: the sign by Clip
            sign = em.clip(em.Mul(x, em.const(2.0**100, ct)), em.const(-1.0, ct), em.const(1.0, ct))
            whole = em.Mul(sign, whole)  # (|x| < 2**-100: whole is 0 anyway)
        else:
            whole = em.Mul(em.Sign(x), whole)  # trunc(x / period)
        x = em.Sub(x, em.Mul(whole, period))  # fmod, exact by Sterbenz, and fast
        if passes_nan(spec):  # linear, cubic: NaN (infinities too) give NaN weights
            return x
        return em.Where(em.Equal(x, x), x, em.const(0.0, ct))  # nearest: NaN != NaN reads 0
    if not bounds_coordinate(spec):  # nearest, zeros: its only tap is masked (NaN and far
        return x  # values included) before it is an index
    high, low = em.const(_WHOLE[ct], ct), em.const(-_WHOLE[ct], ct)
    if passes_nan(spec):  # linear, cubic: a NaN's weights are NaN; its taps are clipped as ints
        return em.clip(x, low, high)
    return em.Where(em.GreaterOrEqual(x, low), em.Min(x, high), low)  # NaN >= low is False


def bounds_coordinate(spec: GridSampleSpec) -> bool:
    """Whether ``source_coordinate`` bounds the coordinate by +-2**23 (float64: 2**52).

    Zeros and border padding do, but nearest with zeros, which masks its one tap instead.
    Reflection folds it into a period or two of the axis.
    """
    return spec.padding_mode == "border" or (
        spec.padding_mode == "zeros" and spec.mode != "nearest"
    )


def passes_nan(spec: GridSampleSpec) -> bool:
    """Whether ``source_coordinate`` lets a NaN coordinate through, so that its taps are NaN.

    Linear and cubic weights turn NaN on their own, whatever the padding; nearest with zeros
    padding masks the point. Nearest's border and reflection read a defined pixel
    (docs/semantics.md), so they replace NaN with one Where per axis.
    """
    return spec.mode != "nearest" or spec.padding_mode == "zeros"


def reflection_period(em: Emitter, axis: int, spec: GridSampleSpec, ct) -> ir.Value:
    """2L (align_corners=0) or 2(L-1) (align_corners=1; 1 for a size-1 axis, which folds to 0)."""
    if not spec.align_corners:
        return em.axis_size(axis, ct, lambda n: 2 * n)
    if axis == ALL_AXES:
        sizes = [em.x_dim(2 + spec.rank - 1 - j) for j in range(spec.rank)]
        if all(s is not None for s in sizes):
            return em.grid_vector([max(2 * (s - 1), 1) for s in sizes], ct)
        size = None
    else:
        size = em.x_dim(2 + axis)
    if size is not None:
        return em.const(max(2 * (size - 1), 1), ct)
    period = em.axis_size(axis, ct, lambda n: 2 * (n - 1))
    return em.once(("at least 1", period), lambda: em.Max(period, em.const(1.0, ct)))


def ring_base(em: Emitter, floor: ir.Value, axis: int, offsets: Sequence[float], ct) -> ir.Value:
    """Zeros padding on X with a ring of T zeros on either side (T taps): where the taps start.

    ``floor`` is clamped to [-1 - max(offsets), L - min(offsets)]: past either end every tap
    lies outside the axis, so a clamped floor still reads zeros only, now from the ring, and
    taps ``floor + offset`` need no clamp of their own (one op per point, not one per tap).
    Shifted by T they index the padded axis. X's own infinities never meet a zero weight.
    """
    low = em.const(-1.0 - max(offsets), ct)
    high = em.axis_size(axis, ct, lambda n: n - min(offsets))
    return em.clip(floor, low, high, vector=axis == ALL_AXES)


def tap_indices(
    em: Emitter, taps: ir.Value, axis: int, spec: GridSampleSpec, ct
) -> tuple[ir.Value, ir.Value | None]:
    """Apply the padding rule to float tap positions: in-axis positions and a validity mask.

    The positions are exact integers in [0, L-1], still in float. The mask (zeros padding
    only) is True where the tap lies inside the axis.
    Reflection of an integer tap t (docs/semantics.md): align_corners=1 reflects about 0 and L-1:
    ``m = |t| mod 2(L-1)``, ``t' = min(m, 2(L-1) - m)``; align_corners=0 reflects about -0.5 and
    L-0.5: the same on ``|t + 0.5|`` with period 2L, then minus 0.5. Exact, since
    ``source_coordinate`` has already brought the taps within a period or two of the axis.
    """
    if spec.padding_mode == "reflection":
        return _reflect(em, taps, axis, spec, ct), None
    last = em.axis_size(axis, ct, lambda n: n - 1)
    clamped = em.clip(taps, em.const(0.0, ct), last, vector=axis == ALL_AXES)
    if spec.padding_mode != "zeros":
        return clamped, None
    return clamped, _unless_empty(em, axis, em.Equal(clamped, taps), last, em.const(0.0, ct))


def integer_tap_indices(
    em: Emitter, taps: ir.Value, axis: int, spec: GridSampleSpec, dtype: ir.DataType
) -> tuple[ir.Value, ir.Value | None]:
    """``tap_indices`` on integer taps (``dtype``): in-axis positions and the validity mask.

    Reflection by the integer form (docs/semantics.md): ``m = t mod p``, then ``min(m, p - m)``
    (align_corners=1, p = 2(L-1), 1 for a size-1 axis) or ``min(m, p - 1 - m)``
    (align_corners=0, p = 2L). ``source_coordinate`` leaves taps above -p - 2, so ``t + 4p`` is
    not negative and Div is the floor division. A NaN coordinate's taps are whatever integers
    the cast made of them: ``flat_index`` clamps them into the axis.
    """
    if spec.padding_mode == "reflection":
        if spec.align_corners:
            size = em.x_dim(2 + axis)
            if size is not None:
                period = em.const(max(2 * (size - 1), 1), dtype)
            else:
                doubled = em.axis_size(axis, dtype, lambda n: 2 * (n - 1))
                period = em.Max(doubled, em.const(1, dtype))
            last = period
        else:
            period = em.axis_size(axis, dtype, lambda n: 2 * n)
            last = em.axis_size(axis, dtype, lambda n: 2 * n - 1)
        shifted = em.Add(taps, em.Mul(period, em.const(4, dtype)))
        folded = em.Sub(shifted, em.Mul(em.Div(shifted, period), period))
        return em.Min(folded, em.Sub(last, folded)), None
    last = integer_bound(em, axis, dtype, lambda n: n - 1)
    clamped = em.clip(taps, em.const(0, dtype), last)
    if spec.padding_mode != "zeros":
        return clamped, None
    return clamped, _unless_empty(em, axis, em.Equal(clamped, taps), last, em.const(0, dtype))


def _unless_empty(
    em: Emitter, axis: int, inside: ir.Value, last: ir.Value, zero: ir.Value
) -> ir.Value:
    """``inside`` (clamped == tap), False throughout where the axis may be empty and is.

    An empty axis clamps every tap onto one position (-1 by Clip, 0 by Max after Min), which
    a tap there equals: with a symbolic size the mask also asks ``L - 1 >= 0``.
    """
    axes = range(em.rank) if axis == ALL_AXES else [axis]
    if all(em.x_dim(2 + a) is not None for a in axes):
        return inside
    return em.logical_and(inside, em.GreaterOrEqual(last, zero))


def integer_bound(em: Emitter, axis: int, dtype: ir.DataType, fn) -> ir.Value:
    """``fn(L)`` as an integer bound of ``dtype``, int32 ones capped at 2**30.

    A large axis then cannot wrap them; int32 positions are bounded far below that
    (``costs.positions_fit_int32``).
    """
    if dtype != ir.DataType.INT32:
        return em.axis_size(axis, dtype, fn)
    size = em.x_dim(2 + axis)
    if size is not None:
        return em.const(min(fn(size), 2**30), dtype)
    capped = em.Min(em.axis_size(axis, ir.DataType.INT64, fn), em.const(2**30, ir.DataType.INT64))
    return em.Cast(capped, to=dtype)


def _reflect(em: Emitter, taps: ir.Value, axis: int, spec: GridSampleSpec, ct) -> ir.Value:
    period = reflection_period(em, axis, spec, ct)
    if spec.align_corners:
        folded = _minus_periods(em, em.Abs(taps), period)
        return em.Min(folded, em.Sub(period, folded))
    half = em.const(0.5, ct)
    folded = _minus_periods(em, em.Abs(em.Add(taps, half)), period)
    return em.Sub(em.Min(folded, em.Sub(period, folded)), half)


def _minus_periods(em: Emitter, x: ir.Value, period: ir.Value) -> ir.Value:
    """``x mod period`` for small non-negative integers or half-integers x: exact there.

    onnxruntime's Mod(fmod=1) calls std::fmod per element, 20x slower than these four ops.
    """
    return em.Sub(x, em.Mul(em.Floor(em.Div(x, period)), period))
