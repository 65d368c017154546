"""Gather the taps of every sampling point and combine them: the part all modes share.

Layout (README, The lowered graph): per-axis tensors are shaped ``(N, T_1..T_r, O_1..O_r)``:
batch first, one tap axis per spatial axis (T long on its own axis, 1 on the others), the
output points innermost and planar. Adding the per-axis tensors broadcasts to all K = T**r tap
combinations.
The gather is chosen by channel count (``bench/run.py`` measures both):

- few channels (C <= 32, C < 24 for onnxruntime's linear, or C symbolic; with 8 taps or
  more, C * taps < 256): one GatherElements on X viewed as ``(N*C, S)``, with the ``(N, K*P)``
  within-sample indices expanded over C; no transpose of X or Y. Where the target allows
  MatMul (onnxruntime), one channel, up to 16 with 8 taps or more, or any of these once the
  gather moves 2**21 values (N x C x taps x points), are gathered channel by channel instead.
- many channels: a channels-last copy of X, ``(N*S, C)`` (``_channels_last``); then one Gather
  per tap, each fetching P contiguous C-vectors, summed with their weights. Where the target
  allows MatMul (onnxruntime), one Gather fetches every tap instead: with 8 taps or more (3-D
  linear, cubic) summed by one batched MatMul; with fewer (1-D, 2-D linear) every row scaled
  by one BatchNormalization and summed by a MatMul with ones; either while that one Gather
  holds at most 2**25 values (``TAPS_MAX_VALUES``).

Each axis' tap positions (exact integers in float) are cast to integers first (int32 wherever
they surely fit: ``_positions_fit_int32``), and the flat index is combined in integers: int32
within a sample while the spatial size is static and below 2**31, else int64; the rows path adds
its batch offsets last, in int64 only when the batch is symbolic or N*S reaches 2**31. Integer
Mul/Add on the per-axis values beat float arithmetic plus one cast of every tap, and stay exact
where float32 would not (past 2**24).
Nearest with zeros padding (one tap) combines its axes in float where that is exact, and casts
once; so does zeros padding on a ring, whose taps need no clamp of their own: one index per
point, the taps' flat offsets added last (``_flat_index``). A NaN coordinate reaches the cast
(``passes_nan``); whatever integer it becomes, integer Clip, Mul or Max/Min put it in range:
onnxruntime's Where, the other way, costs as much as 15 Muls.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np
import onnx_ir as ir

from gridsample_lower.lowering.coords import (
    bounds_coordinate,
    passes_nan,
    ring_base,
    source_coordinate,
    tap_indices,
)
from gridsample_lower.lowering.emitter import Emitter
from gridsample_lower.lowering.index_range import INT32_LIMIT, int32_overflow, ring_width
from gridsample_lower.lowering.spec import GridSampleSpec, compute_dtype

__all__ = ["Kernel", "gather_and_combine", "grid_coordinates", "interpolate"]

INT64 = ir.DataType.INT64
ROWS_MIN_CHANNELS = 33  # from here on, gathering channels-last rows beats GatherElements...
ROWS_MAX_ELEMENTS = 2**18  # ...while X stays cache-sized (1 MB of float32)
SCALED_MIN_CHANNELS = 24  # rows scaled all at once (``_scaled_pays``) win from here...
SCALED_FULL_COPY_CHANNELS = 32  # ...from here even where X has as many values as the taps...
SCALED_MAX_VALUES = 2**21  # ...below ROWS_MIN_CHANNELS while they gather at most this many values
TILE = 128  # pixels per tile of the channels-last copy, where a plain Transpose thrashes...
ALIASED_BYTES = 2048  # ...as it does where a channel's pixels take a multiple of this...
TILED_MAX_VALUES = 2**20  # ...up to this many values per sample
MATMUL_MIN_TAPS = 8  # with this many taps (3-D linear, cubic), rows are summed by one MatMul...
MATMUL_MIN_VALUES = 256  # ...once channels x taps reach this
TAPS_MAX_VALUES = 2**25  # one Gather of every tap (scaled, MatMul) holds at most this many values
BY_CHANNEL_MAX_CHANNELS = 16  # up to this many channels with 8+ taps are gathered one by one...
BY_CHANNEL_MIN_VALUES = 2**21  # ...and any of GatherElements' few once it gathers this many...
BY_CHANNEL_WIDE_CHANNELS = 4  # ...and up to this many whose indices are int64
SLOT_MAX_RATIO = 4  # a zero slot appended to X pays while X is at most this many times the points


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
        return self.em.const(_per_tap(values, self.axis, self.rank), self.dtype)


def _per_tap(values: Sequence[float], axis: int, rank: int) -> np.ndarray:
    """``values`` shaped ``(1, 1.., T, ..1, 1..1)``: spatial ``axis``' taps on axis 1 + axis."""
    return np.reshape(values, [1] * (1 + axis) + [len(values)] + [1] * (2 * rank - 1 - axis))


def gather_and_combine(
    em: Emitter,
    x: ir.Value,
    spec: GridSampleSpec,
    indices: Sequence[ir.Value],
    weights: ir.Value | None = None,
    inside: ir.Value | None = None,
    taps: int = 1,
    rows: bool | None = None,
    offsets: Sequence[float] | None = None,
) -> ir.Value:
    """``(N, C, O1..Or)``: X at the per-axis (float, exact) ``indices``, combined with ``weights``.

    Without weights (nearest) the single tap is returned in X's type; with them, the weighted sum
    over the ``taps`` combinations in the compute type. Where ``inside`` is False the result is
    zero: those points read a zero appended to X (``_zero_slot_pays``, and wherever onnxruntime's
    Where lacks X's type: int16, uint16, uint64, bool, bfloat16), else are masked once gathered.
    ``rows`` is the gather path where the caller chose it (from X's sizes, before padding X).
    ``offsets``: the indices are one per point, its taps at these offsets on every axis.
    """
    r, ct = spec.rank, compute_dtype(spec)
    many = _gathers_rows(em, spec, taps) if rows is None else rows
    sample = em.prod_dims("x", range(2, 2 + r))
    sample = sample if isinstance(sample, int) else None
    largest = sample  # the largest index: the zero slot past the data, S or N*S (rows)
    if many:
        batch = em.x_dim(0)
        largest = sample * batch if sample is not None and batch is not None else None
    within = ir.DataType.INT32 if sample is not None and sample < INT32_LIMIT else INT64
    int_type = ir.DataType.INT32 if largest is not None and largest < INT32_LIMIT else INT64
    if em.target.index_dtype is not None:
        reach = largest if largest is not None else sample  # a symbolic batch: one sample
        # Unreachable through the rule, which refuses these nodes first
        # (``index_range.index_refusal``); ``_gathers_rows`` leaves rows that would overflow
        # for GatherElements where the target has it.
        if em.target.index_dtype == ir.DataType.INT32 and (reach or 0) >= INT32_LIMIT:
            raise AssertionError(f"{em.name}: indices reach {reach}: too many for int32")
        within = int_type = em.target.index_dtype
    # Masked points read a zero appended to X, or are masked once gathered (``_zero_slot_pays``).
    slot = inside is not None and (not _where_takes(x.dtype) or _zero_slot_pays(em, r, many))
    to_slot = slot and not many  # the rows path sends them past every sample, later
    exact = _float_exact(sample, ct)
    flat = _flat_index(em, spec, indices, inside, within, to_slot, exact, offsets)
    if many:
        return _gather_rows(em, x, spec, flat, weights, inside, taps, (within, int_type), slot)
    return _gather_elements(em, x, spec, flat, weights, inside, taps, slot, within == INT64)


def _float_exact(sample: int | None, ct: ir.DataType) -> bool:
    """Whether every flat index within a sample (and one past it) is an exact ``ct`` integer."""
    return sample is not None and sample <= 2 ** (24 if ct == ir.DataType.FLOAT else 53)


def _zero_slot_pays(em: Emitter, rank: int, many: bool) -> bool:
    """Whether masked points should read a zero appended to X rather than be masked once gathered.

    Appending copies X, while onnxruntime's Where costs ~4 copies per element: with
    GatherElements the slot pays while X is at most SLOT_MAX_RATIO times the points gathered;
    unknown sizes count as one point per pixel (symbolic 1x3x224x224: 0.37 -> 0.28 of native).
    Rows are masked after the gather: appending a row would copy the channels-last copy again.
    """
    spatial = em.prod_dims("x", range(2, 2 + rank))
    points = em.prod_dims("grid", range(1, 1 + rank))
    if not (isinstance(spatial, int) and isinstance(points, int)):
        return not many
    return not many and spatial <= SLOT_MAX_RATIO * points


def _flat_index(em, spec, indices, inside, within, to_slot, in_float, offsets=None):
    """The within-sample flat index ``(N, T.., O..)`` of the per-axis (float, exact) indices.

    Where ``inside`` is False it is S, the zero slot past the sample (``to_slot``), else 0.
    ``in_float`` (the flat index is an exact float): the axes are combined in float and cast
    once; else each axis is cast, and the axes are combined in integers. With ``offsets`` (the
    taps' positions relative to each axis' index) the indices are one per point, combined
    before the taps are: those are added last, as one ``(1, T.., 1..)`` table of flat offsets.
    An index may be NaN (``passes_nan``): once an integer (any integer: casting NaN is
    undefined) it is clamped into range, or masked by ``inside``, False for NaN points.
    """
    r, ct = spec.rank, compute_dtype(spec)
    cast_once = offsets is not None  # one index per point: one cast beats one per axis
    in_float = (inside is not None or cast_once) and in_float  # else integers are cheaper
    taps = (0.0,) if offsets is None else offsets
    fill = em.x_size(range(2, 2 + r), within) if to_slot else None

    def kept(dtype):  # 1 inside, else 0
        return em.once(("kept", dtype), lambda: em.Cast(inside, to=dtype))

    if in_float:
        flat = em.Cast(_strided_sum(em, indices, r, ct), to=within)
        if inside is not None:
            flat = _where_inside(em, kept(within), flat, fill)
        else:  # one index per point (static sizes): every tap of the table stays in the sample
            strides = sum(em.prod_dims("x", range(3 + a, 2 + r)) for a in range(r))
            low = -min(taps) * strides
            high = em.prod_dims("x", range(2, 2 + r)) - 1 - max(taps) * strides
            flat = em.clip(flat, em.const(low, within), em.const(high, within))
    else:
        # Each axis' positions in int32 where they surely fit, combined in ``within``: int64's
        # Cast, Clip and Mul run 3-5x slower (50k values: Clip 44 vs 8 us).
        narrow = ir.DataType.INT32 if _positions_fit_int32(em, spec) else within
        indices = [em.Cast(index, to=narrow) for index in indices]
        if inside is not None:  # outside points' indices (NaN ones too) become 0
            indices = [em.Mul(index, kept(narrow)) for index in indices]
        elif passes_nan(spec):
            indices = [_in_axis(em, index, a, taps, narrow) for a, index in enumerate(indices)]
        if narrow != within:
            indices = [em.Cast(index, to=within) for index in indices]
        flat = _strided_sum(em, indices, r, within)
        if fill is not None:  # outside points' flat index is 0: one Add sends them to S
            flat = em.Add(flat, _outside(em, kept(within), fill))
    return flat if offsets is None else em.Add(flat, _tap_table(em, r, offsets, within))


def _positions_fit_int32(em: Emitter, spec: GridSampleSpec) -> bool:
    """Whether every axis' tap positions fit int32 (before any are combined into a flat index).

    They lie in [0, L-1], so they do where every spatial size is static and below 2**31; and in
    float32 whatever the sizes where ``source_coordinate`` bounds the coordinates by 2**23.
    """
    sizes = [em.x_dim(a) for a in range(2, 2 + spec.rank)]
    if all(size is not None and size < 2**31 for size in sizes):
        return True
    return compute_dtype(spec) == ir.DataType.FLOAT and bounds_coordinate(spec)


def _in_axis(em: Emitter, index: ir.Value, axis: int, taps, dtype) -> ir.Value:
    """An axis' integer index clamped so that every tap ``index + taps`` lies in the axis.

    An int32 bound is capped at 2**30, so that a large size cannot wrap it: int32 positions of
    a large axis are bounded far below that (``_positions_fit_int32``).
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


def _where_inside(em, kept, flat, fill) -> ir.Value:
    """``flat`` where ``kept`` (1, else 0) is 1, else ``fill`` (None: 0): arithmetic, not Where.

    Outside points' ``flat`` may be any integer (a NaN cast): times 0, or below the Max with
    ``fill`` (which is past every index) and then clamped to it.
    """
    if fill is None:
        return em.Mul(flat, kept)
    return em.Min(em.Max(flat, _outside(em, kept, fill)), fill)


def _outside(em, kept, fill) -> ir.Value:
    """``fill`` where ``kept`` is 0, else 0."""
    return em.Sub(fill, em.Mul(kept, fill))


def _tap_table(em: Emitter, rank: int, offsets, dtype: ir.DataType) -> ir.Value:
    """``(1, T.., 1..)``: the flat offset of every tap combination, one constant when static."""
    strides = [em.prod_dims("x", range(3 + axis, 2 + rank)) for axis in range(rank)]
    shaped = [_per_tap(offsets, a, rank) for a in range(rank)]
    if all(isinstance(s, int) for s in strides):
        return em.const(sum(o * s for o, s in zip(shaped, strides, strict=True)), dtype)
    return _strided_sum(em, [em.const(o, dtype) for o in shaped], rank, dtype)


def _strided_sum(em: Emitter, values: Sequence[ir.Value], rank: int, dtype: ir.DataType):
    """``sum(values[a] * stride of X's spatial axis a)``: per-axis positions to flat ones."""
    total = None
    for axis, value in enumerate(values):
        if axis < rank - 1:
            value = em.Mul(value, em.x_size(range(3 + axis, 2 + rank), dtype))
        total = value if total is None else em.Add(total, value)
    return total


def _gathers_rows(em: Emitter, spec: GridSampleSpec, taps: int) -> bool:
    """Whether the gather fetches channels-last rows (else GatherElements, one value each).

    Rows where the target has no GatherElements; else where they pay, unless their indices,
    which span every sample, would overflow the target's int32 ones: GatherElements' stay
    within one sample (``index_range``). Judged by X's own sizes, before any ring of zeros.
    """
    if not em.target.allows("GatherElements"):
        return True
    x_shape = [em.x_dim(axis) for axis in range(2 + spec.rank)]
    if int32_overflow(spec, x_shape, em.target, rows=True):
        return False
    return _gather_rows_pays(em, spec.rank, taps)


def _gather_rows_pays(em: Emitter, rank: int, taps: int) -> bool:
    """Whether gathering channels-last rows beats GatherElements (bench/run.py measures both).

    Rows win with many channels, but they need a channels-last copy of X, so the points must
    gather at least about as many values as the copy moves. Summed tap by tap, they also read
    X at random, which pays only while X fits in cache (GatherElements reads one channel plane
    at a time); gathered at once and summed by one MatMul (``_matmul_pays``, ``_scaled_pays``:
    while that one Gather holds at most ``TAPS_MAX_VALUES``), they win at any size of X.
    A symbolic batch is taken as 1 (the usual deployment), and unknown sizes as one point per
    pixel.
    """
    channels = em.x_dim(1)
    matmul, scaled = _matmul_pays(em, rank, taps), _scaled_pays(em, rank, taps)
    fewest = SCALED_MIN_CHANNELS if scaled else ROWS_MIN_CHANNELS
    if channels is None or not (matmul or channels >= fewest):
        return False
    spatial = em.prod_dims("x", range(2, 2 + rank))
    points = em.prod_dims("grid", range(1, 1 + rank))
    if not (isinstance(spatial, int) and isinstance(points, int)):
        return taps >= 2
    cached = (em.x_dim(0) or 1) * channels * spatial <= ROWS_MAX_ELEMENTS
    copies = 1 if scaled and channels >= SCALED_FULL_COPY_CHANNELS else 2
    return (matmul or scaled or cached) and copies * spatial <= taps * points


def _matmul_pays(em: Emitter, rank: int, taps: int) -> bool:
    """Whether rows are summed by one batched MatMul rather than a chain of Mul and Add.

    With 8 taps or more (3-D linear, cubic), one Gather of every tap and a MatMul with the
    weights beat the per-tap chain (2-D cubic, 64 channels: 2.8 vs 3.9 ms; 3-D linear: 10%),
    and GatherElements too once each point gathers 256 values (16 channels for 2-D cubic, 32
    for 3-D linear). With more channels they win by more, timed side by side with the native
    kernel (3-D linear 160 channels at 16**3: 4.9 vs 9.1 ms; 2-D cubic 512 channels at 64x64:
    28 vs 50), up to ``TAPS_MAX_VALUES``: past it the chain's K times smaller intermediates
    keep the memory in bounds. Only where the target allows MatMul: most runtimes run it in
    reduced precision by default (``targets.py``).
    """
    channels = em.x_dim(1)
    if taps < MATMUL_MIN_TAPS or channels is None or not em.target.allows("MatMul"):
        return False
    return channels * taps >= MATMUL_MIN_VALUES and _gathered(em, rank, taps) <= TAPS_MAX_VALUES


def _gathered(em: Emitter, rank: int, taps: int) -> int:
    """N x C x taps x points: the values the taps gather (0 where unknown; a symbolic N is 1)."""
    channels, points = em.x_dim(1), em.prod_dims("grid", range(1, 1 + rank))
    if channels is None or not isinstance(points, int):
        return 0
    return (em.x_dim(0) or 1) * channels * taps * points


def _gather_elements(em, x, spec, flat, weights, inside, taps, slot, wide):
    r, ct = spec.rank, compute_dtype(spec)
    n, c = em.prod_dims("x", range(0, 1)), em.prod_dims("x", range(1, 2))
    points = em.output_dims(r)
    flat = em.Flatten(flat, axis=1)  # (N, K*P)
    if weights is not None and _by_channel_pays(em, r, taps, wide):  # (no mask: weights do)
        return _combine_by_channel(em, x, spec, flat, weights, taps)
    data = em.Flatten(x, axis=2)  # (N*C, S)
    mask_values = inside is not None and not slot
    if slot:  # the flat index already reads S, one past the sample, where inside is False
        if x.dtype in _PAD_TYPES:
            data = em.Pad(data, em.const([0, 0, 0, 1], INT64))
        else:
            data = em.Concat(data, _zeros(em, x.dtype, [em.prod_dims("x", range(0, 2)), 1]), axis=1)
    flat = em.Expand(em.Unsqueeze(flat, em.const([1], INT64)), em.shape([n, c, 1]))
    values = em.GatherElements(data, em.Flatten(flat, axis=2), axis=1)  # (N*C, K*P)
    if weights is None:
        values = em.reshape(values, [n, c, *points])
        if mask_values:
            values = em.Where(em.reshape(inside, [n, 1, *points]), values, _zero(em, x.dtype))
        return values
    if spec.x_dtype != ct:
        values = em.Cast(values, to=ct)
    # Shaped so the sum lands in the output's shape: a Reshape last would copy the output.
    values = em.reshape(values, [n, c, taps, *points])
    weights = em.reshape(weights, [n, 1, taps, *points])
    return em.ReduceSum(em.Mul(values, weights), em.const([2], INT64), keepdims=0)


def _by_channel_pays(em: Emitter, rank: int, taps: int, wide: bool) -> bool:
    """Whether X is gathered channel by channel, each channel's taps summed by a MatMul.

    Measured (bench/run.py): with one channel; with 8 taps or more and up to 16 channels (cubic
    3x224x224: 2.4 -> 1.5 ms of gathers; 3-D linear 16 channels: 0.32 -> 0.26 of native); with
    fewer taps once the gather moves 2**21 values or more, N x C x taps x points (linear
    8x32x64x64: 2.2 -> 1.9); and with up to 4 channels where the indices are int64 (``wide``:
    symbolic sizes), which cost twice as much to expand over the channels (symbolic 1x3x224x224
    linear 1.17-1.25 -> 0.98-1.07 of native, border 0.50 -> 0.43; tiny maps lose a few
    microseconds to the extra nodes, 1x3x32x32 56 -> 61 us, and 16 channels lose 3-60%).
    Smaller gathers spend more on the extra nodes than they save. Only where the target allows
    MatMul (``_matmul_pays``).
    """
    channels = em.x_dim(1)
    if channels is None or not em.target.allows("MatMul"):
        return False
    if channels == 1 or (taps >= MATMUL_MIN_TAPS and channels <= BY_CHANNEL_MAX_CHANNELS):
        return True
    if wide and channels <= BY_CHANNEL_WIDE_CHANNELS:
        return True
    return channels < ROWS_MIN_CHANNELS and _gathered(em, rank, taps) >= BY_CHANNEL_MIN_VALUES


def _combine_by_channel(em, x, spec, flat, weights, taps):
    """``(N, C, O..)``: each channel gathered and its weighted taps summed on its own.

    Every channel's ``(N, S)`` planes are read by one GatherElements with the same ``(N, K*P)``
    indices, and a MatMul with ones sums their taps: no copy of the indices per channel, and no
    ReduceSum of a ``(1, K, P)`` tensor, which onnxruntime sums (nothing outside the reduced
    axis) 6x slower than a ``(C, K, P)`` one.
    """
    ct, r, n, c = compute_dtype(spec), spec.rank, em.prod_dims("x", range(0, 1)), em.x_dim(1)
    total = em.prod_dims("grid", range(1, 1 + r))
    points = em.output_dims(r)
    weights = em.reshape(weights, [n, taps, total])
    ones = em.const(np.ones((1, taps)), ct)
    sums = []
    for k in range(c):
        plane = em.Flatten(em.Gather(x, em.index(k), axis=1), axis=1)  # (N, S)
        values = em.GatherElements(plane, flat, axis=1)  # (N, K*P)
        if spec.x_dtype != ct:
            values = em.Cast(values, to=ct)
        total_sum = em.MatMul(ones, em.Mul(em.reshape(values, [n, taps, total]), weights))
        sums.append(em.reshape(total_sum, [n, 1, *points]))  # (N, 1, O..): no copy here...
    # ...so the Concat writes the output itself: a Reshape last would copy the whole output
    # where it is the graph's output (1.3 of 37 ms at 16x480x640).
    return sums[0] if c == 1 else em.Concat(*sums, axis=1)


def _gather_rows(em, x, spec, flat, weights, inside, taps, index_types, slot):
    r = spec.rank
    within, int_type = index_types
    n, c = em.prod_dims("x", range(0, 1)), em.prod_dims("x", range(1, 2))
    total = em.prod_dims("grid", range(1, 1 + r))
    rows = _channels_last(em, x, r)  # (N*S, C)
    flat = em.reshape(flat, [n, taps, total])
    if em.x_dim(0) != 1:  # within-sample indices may be int32 where these offsets are not
        flat = flat if within == int_type else em.Cast(flat, to=int_type)
        flat = em.Add(flat, _batch_offsets(em, r, int_type))
    mask_values = inside is not None and not slot
    if slot:
        past_end = _all_samples_size(em, r, int_type)
        kept = em.Cast(em.reshape(inside, [n, 1, total]), to=int_type)
        flat = _where_inside(em, kept, flat, past_end)
        rows = em.Concat(rows, _zeros(em, x.dtype, [1, c]), axis=0)
    y_dtype = x.dtype if weights is None else compute_dtype(spec)
    if y_dtype != x.dtype:  # cast once here, usually fewer rows than the taps gathered
        rows = em.Cast(rows, to=y_dtype)
    if weights is not None and _matmul_pays(em, r, taps):
        y = _matmul_taps(em, rows, flat, weights, taps, total)
    elif weights is not None and _scaled_pays(em, r, taps):
        y = _scaled_taps(em, rows, flat, weights, taps, total, y_dtype)
    else:
        y = _chain_taps(em, rows, flat, weights, taps, total)
    if mask_values:
        y = em.Where(em.reshape(inside, [n, total, 1]), y, _zero(em, y_dtype))
    # Transposed last, straight into the output's shape: a Reshape last would copy it.
    points = em.output_dims(r)
    return em.Transpose(em.reshape(y, [n, *points, c]), perm=[0, r + 1, *range(1, r + 1)])


def _chain_taps(em, rows, flat, weights, taps, total):
    """``(N, P, C)``: one Gather per tap, weighted and summed by a chain of Adds."""
    n = em.prod_dims("x", range(0, 1))
    if weights is not None:
        weights = em.reshape(weights, [n, taps, total, 1])
    y = None
    for k in range(taps):  # a chain of Adds: 10% faster than one Sum of every tap
        tap = em.index(k)
        values = em.Gather(rows, em.Gather(flat, tap, axis=1), axis=0)  # (N, P, C)
        if weights is not None:
            values = em.Mul(values, em.Gather(weights, tap, axis=1))
        y = values if y is None else em.Add(y, values)
    return y


def _scaled_pays(em: Emitter, rank: int, taps: int) -> bool:
    """Whether rows are scaled by one BatchNormalization and summed by one MatMul with ones.

    For fewer than 8 taps (1-D, 2-D linear): 64 channels x 4096 points, 4 taps, 0.80 vs 1.0 ms
    of kernel time for the per-tap chain, whose broadcast Mul of ``(P, C)`` by ``(P, 1)`` pays
    for every short row. With more channels it wins by more, timed side by side with the
    native kernel (192 channels at 48x48: 1.15 vs 2.03 ms; 256 at 64x64: 4.7 vs 6.8), up to
    ``TAPS_MAX_VALUES`` (``_matmul_pays``). Below ROWS_MIN_CHANNELS, past 2**21 gathered
    values (N x C x taps x points), GatherElements channel by channel wins instead
    (8x32x64x64: 4.9 vs 6.0 ms). Only where the target allows both ops: BatchNormalization's
    parameters must be constants on TensorRT and most NPUs, and MatMul loses precision there.
    A symbolic batch counts as one sample, unknown points as few.
    """
    channels = em.x_dim(1)
    if not (1 < taps < MATMUL_MIN_TAPS and channels is not None):
        return False
    if not (em.target.allows("BatchNormalization") and em.target.allows("MatMul")):
        return False
    gathered = _gathered(em, rank, taps)
    few = channels < ROWS_MIN_CHANNELS and gathered > SCALED_MAX_VALUES
    return not few and gathered <= TAPS_MAX_VALUES


def _scaled_taps(em, rows, flat, weights, taps, total, dtype):
    """``(N, P, C)``: every tap in one Gather, scaled row by row, summed by one MatMul.

    BatchNormalization with mean 0, variance 0 and epsilon 1 is ``x * scale`` exactly (the
    divisor is sqrt(1) = 1), one scale per row: the ``(N*K*P, C)`` taps become its channels.
    Its zeros come from the weights (``w - w``), NaN exactly where the weight is NaN already.
    """
    n, c = em.prod_dims("x", range(0, 1)), em.prod_dims("x", range(1, 2))
    values = em.reshape(em.Gather(rows, flat, axis=0), [1, -1, c])  # (1, N*K*P, C)
    scale = em.reshape(weights, [-1])
    zeros = em.Sub(scale, scale)
    scaled = em.BatchNormalization(values, scale, zeros, zeros, zeros, epsilon=1.0)
    ones = em.const(np.ones((1, taps)), dtype)
    row = total * c if isinstance(total, int) else em.Mul(total, em.const([c], INT64))
    summed = em.MatMul(ones, em.reshape(scaled, [n, taps, row]))  # (N, 1, P*C)
    return em.reshape(summed, [n, total, c])


def _matmul_taps(em, rows, flat, weights, taps, total):
    """``(N, P, C)``: every tap in one Gather, ``(N, P, K, C)``, summed by one MatMul.

    The ``(N, P, 1, K)`` weights times the ``(N, P, K, C)`` taps: a batch of small products.
    """
    n, c = em.prod_dims("x", range(0, 1)), em.prod_dims("x", range(1, 2))
    values = em.Gather(rows, em.Transpose(flat, perm=[0, 2, 1]), axis=0)
    weights = em.Transpose(em.reshape(weights, [n, 1, taps, total]), perm=[0, 3, 1, 2])
    return em.reshape(em.MatMul(weights, values), [n, total, c])


def _channels_last(em: Emitter, x: ir.Value, rank: int) -> ir.Value:
    """X as ``(N*S, C)`` rows: a channels-last copy, in tiles where one Transpose would thrash.

    onnxruntime transposes a ``(C, S)`` plane at about a copy's speed, unless each channel's
    row of S values is a multiple of 2 kB: the reads then fall into the same cache sets (64
    channels x 4096 pixels: 195 us, 82 in tiles of ``(C, 128)``, which two Transposes copy
    twice; 64 x 4160: 46 vs 85). Past 2**20 values per sample the tiles lose again (256 x
    6144: 1.2 vs 1.4 ms).
    """
    spatial, c = em.prod_dims("x", range(2, 2 + rank)), em.x_dim(1)
    numeric = x.dtype not in (None, ir.DataType.STRING)  # (strings move as objects)
    aliased = (
        numeric and isinstance(spatial, int) and spatial * x.dtype.itemsize % ALIASED_BYTES == 0
    )
    if not (aliased and c and c * spatial <= TILED_MAX_VALUES):  # (c: the -1 below is exact)
        return em.Flatten(em.Transpose(x, perm=[0, *range(2, rank + 2), 1]), axis=rank + 1)
    n = em.prod_dims("x", range(0, 1))
    blocks = em.Transpose(em.reshape(x, [n, c, spatial // TILE, TILE]), perm=[0, 2, 1, 3])
    # A Reshape between the two keeps onnxruntime from fusing them back into one transpose.
    blocks = em.reshape(blocks, [-1, c, TILE])
    return em.Flatten(em.Transpose(blocks, perm=[0, 2, 1]), axis=2)


def _all_samples_size(em: Emitter, rank: int, dtype: ir.DataType) -> ir.Value:
    """``N * S``, one constant when both are static: the zero row past every sample's rows."""
    batch, spatial = em.x_dim(0), em.prod_dims("x", range(2, 2 + rank))
    if batch is not None and isinstance(spatial, int):
        return em.const(batch * spatial, dtype)
    return em.Mul(em.x_size(range(2, 2 + rank), dtype), em.x_size(range(0, 1), dtype))


def _batch_offsets(em: Emitter, rank: int, dtype: ir.DataType) -> ir.Value:
    """``n * S`` shaped ``(N, 1, 1)``, to add to the ``(N, K, P)`` within-sample indices."""
    batch, size = em.x_dim(0), em.prod_dims("x", range(2, 2 + rank))
    if batch is not None and isinstance(size, int):  # one constant, no Mul to fold
        return em.const(np.arange(batch).reshape(batch, 1, 1) * size, dtype)
    spatial = em.x_size(range(2, 2 + rank), dtype)
    if batch is not None:
        return em.Mul(em.const(np.arange(batch).reshape(batch, 1, 1), dtype), spatial)
    n = em.Range(em.const(0, INT64), em.x_size(range(0, 1), INT64), em.const(1, INT64))
    n = em.Unsqueeze(n, em.const([1, 2], INT64))
    return em.Mul(n if dtype == INT64 else em.Cast(n, to=dtype), spatial)


# Types onnxruntime's Where takes: the gathered values can be masked (``_zero_slot_pays`` says
# when that beats appending a zero to X); for the others (int8, int16, uint16, uint32, uint64,
# bool, bfloat16) the zero is always appended. (int8 and uint32 only from onnxruntime 1.31 on.)
_WHERE_TYPES = frozenset(
    {
        ir.DataType.FLOAT,
        ir.DataType.DOUBLE,
        ir.DataType.FLOAT16,
        ir.DataType.UINT8,
        ir.DataType.INT32,
        ir.DataType.INT64,
        ir.DataType.STRING,
    }
)


# Types onnxruntime's Pad takes: a zero slot appended by Pad needs no zeros tensor built first.
# (float16 runs there only between two Casts that onnxruntime inserts: three copies of X.)
_PAD_TYPES = frozenset(
    {
        ir.DataType.FLOAT,
        ir.DataType.DOUBLE,
        ir.DataType.INT8,
        ir.DataType.UINT8,
        ir.DataType.INT32,
        ir.DataType.UINT32,
        ir.DataType.INT64,
        ir.DataType.UINT64,
        ir.DataType.BOOL,
    }
)


def _where_takes(dtype: ir.DataType | None) -> bool:
    return dtype in _WHERE_TYPES


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


def interpolate(em: Emitter, x: ir.Value, grid: ir.Value, spec: GridSampleSpec, kernel: Kernel):
    """Separable interpolation (linear, cubic): weighted sum of the kernel's taps on every axis.

    A NaN or infinite grid coordinate gives NaN (0 for integer X), like the reference kernel:
    its weights are NaN, while its taps stay in range. Zeros padding reads its outside taps from
    a ring of zeros around X (``_zero_ring``), or masks their weights where onnxruntime cannot pad
    X: integers, which have no infinities, and bfloat16 (an infinite pixel beside a dropped tap
    then gives NaN: README, Semantics).
    GatherElements' ring is as wide as the kernel, so that only each point's first tap is
    clamped (``ring_base``); the rows path's copies of X cost more than those per-tap ops, so
    there a ring of one zero takes every tap clamped (64-256 channels: 1-5% faster).
    """
    r, ct = spec.rank, compute_dtype(spec)
    taps = len(kernel.offsets) ** r
    rows = _gathers_rows(em, spec, taps)  # judged by X's own sizes, which the measurements used
    width = ring_width(spec, rows)  # the ring's zeros either side of every axis (0: no ring)
    ring = width > 0
    per_point = ring and not rows  # one index per point, the taps' offsets added last
    indices, weights = [], None
    for axis, g in enumerate(grid_coordinates(em, grid, spec)):
        coord = source_coordinate(em, g, axis, spec, ct)  # finite, NaN and infinities too
        floor, per_tap = em.Floor(coord), TapConstants(em, axis, r, ct)
        w = kernel.weights(em, em.Add(coord, em.Sub(g, g)), floor, per_tap)  # g - g: 0 or NaN
        if per_point:
            index = ring_base(em, floor, axis, kernel.offsets, ct)
        elif ring:  # shifted onto the padded axis; clamped onto its ring once an integer...
            index = em.Add(floor, per_tap([o + 1 for o in kernel.offsets]))
            if ct == ir.DataType.DOUBLE:  # ...and first in float, if it may pass 2**31
                last = em.axis_size(axis, ct, lambda n: n + 1)
                index = em.clip(index, em.const(0.0, ct), last)
        else:
            positions = em.Add(floor, per_tap(kernel.offsets))
            index, inside = tap_indices(em, positions, axis, spec, ct)
            if inside is not None:  # a multiply by 0 or 1 is exact, and 5x cheaper than Where
                w = em.Mul(w, em.Cast(inside, to=ct))
        indices.append(index)
        weights = w if weights is None else em.Mul(weights, w)
    if ring:
        x = _zero_ring(em, x, spec, width)
        em = em.with_x(x)
    offsets = [o + width for o in kernel.offsets] if per_point else None  # in the padded X
    y = gather_and_combine(em, x, spec, indices, weights, taps=taps, rows=rows, offsets=offsets)
    return _cast_result(em, y, spec, ct)


def _zero_ring(em: Emitter, x: ir.Value, spec: GridSampleSpec, width: int) -> ir.Value:
    """X with ``width`` zeros on either side of every spatial axis: where zeros padding taps read 0.

    Masking the weights instead would give inf * 0 = NaN where an outside tap is clamped onto an
    infinite pixel; the reference reads 0 there. With few channels the copy costs less than the
    masks did; with many, or an X much larger than the output, 5-35% more (README, Performance).
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
