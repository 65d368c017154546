"""The interpolation all modes share: grid to coordinates, kernels' weights, and the ring.

Layout (docs/lowered-graph.md): per-axis tensors are shaped ``(N, T_1..T_r, O_1..O_r)``:
batch first, one tap axis per spatial axis (T long on its own axis, 1 on the others), the
output points innermost and planar; ``(N, 1, T_1.., O_1..)`` where the target lays an axis 1
of a few values out blocked (``Emitter.lead``, ``Target.lone_axis_1``). Adding the per-axis
tensors broadcasts to all K = T**r tap combinations, which ``gathers.gather_and_combine``
fetches and sums as the ``Plan`` says.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import onnx_ir as ir

from gridsample_lower.lowering.coords import (
    integer_bound,
    integer_tap_indices,
    ring_base,
    source_coordinate,
    tap_indices,
)
from gridsample_lower.lowering.emitter import ALL_AXES, Emitter
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
    returns the weights of one axis from the coordinate x, x1 = floor(x) (None: x is the
    fraction x - floor(x) already), and ``per_tap`` (a
    ``TapConstants``), which shapes per-tap constants for that axis and knows which tensor axis
    holds its taps.
    """

    offsets: tuple[float, ...]
    weights: Callable[..., ir.Value]
    # Each tap's weight is ``|f - c|`` for these ``c``, f = x - floor(x) (linear: 1 - f, f):
    # the form ``plan.fraction`` carries apart, one fraction per point and axis.
    fraction: tuple[float, ...] | None = None


def grid_coordinates(em: Emitter, grid: ir.Value, spec: GridSampleSpec) -> list[ir.Value]:
    """One ``(N, 1..1, O1..Or)`` coordinate tensor per spatial axis of X, in X's axis order.

    ``(N, 1..1, P)`` where the emitter's per-point tensors hold the points on one axis.

    The grid lists coordinates innermost-first (x = width first), so axis i reads component r-1-i.
    """
    r, ct = spec.rank, compute_dtype(spec)
    if em.target.grid_by_gather and spec.grid_dtype != ct:
        grid = em.Cast(grid, to=ct)
    points = r
    if em.point_axes == 1 and r > 1:  # (N, P, r): the points on one axis
        grid, points = em.reshape(grid, [em.batch, em.points, r]), 1
    if em.target.grid_by_gather:  # (N, O..) per component, then (N, 1..1, O..)
        taps = em.const(list(range(1, r + 1 + em.lead)), INT64)
        return [
            em.Unsqueeze(em.Gather(grid, em.index(r - 1 - axis), axis=points + 1), taps)
            for axis in range(r)
        ]
    planar = em.Transpose(grid, perm=[points + 1, *range(points + 1)])
    if spec.grid_dtype != ct:
        planar = em.Cast(planar, to=ct)
    planar = em.Unsqueeze(planar, em.const(list(range(2, r + 2 + em.lead)), INT64))
    return [em.Gather(planar, em.index(r - 1 - axis), axis=0) for axis in range(r)]


@dataclasses.dataclass(frozen=True)
class TapConstants:
    """Shapes per-tap constants of one spatial axis as ``(1, 1.., T, ..1, 1..1)``.

    ``tap_axis`` is the tensor axis that holds that spatial axis' taps. ``lead`` and
    ``points`` (the unit axes before the taps, the point axes after them) default to the
    emitter's layout.
    """

    em: Emitter
    axis: int
    rank: int
    dtype: ir.DataType
    lead: int | None = None
    points: int | None = None

    def __post_init__(self) -> None:
        if self.lead is None:
            object.__setattr__(self, "lead", self.em.lead)
        if self.points is None:
            object.__setattr__(self, "points", self.em.point_axes)

    @property
    def tap_axis(self) -> int:
        return 1 + self.lead + self.axis

    def __call__(self, values: Sequence[float]) -> ir.Value:
        per_axis = per_tap(values, self.axis, self.rank, self.points, self.lead)
        return self.em.const(per_axis, self.dtype)


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
    indices, weights, masked = [], None, None
    # taps in integers where their positions may not be exact as stored
    if plan.interleaved:
        integers = not positions_exact(em, spec, plan)
        indices, weights, masked = _interleaved_taps(em, grid, spec, plan, kernel)
    else:
        integers = plan.positions_from_grid and not positions_exact(em, spec, plan, folded=True)
        if integers:
            indices, weights, masked = _integer_taps_from_grid(em, grid, spec, plan, kernel)
    for axis, (floor, w) in enumerate(
        [] if plan.interleaved or integers else _floors(em, grid, spec, plan, kernel)
    ):
        taps = TapConstants(em, axis, r, ct)
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
            if inside is not None and plan.masks:  # every tap masked once gathered
                masked = inside if masked is None else em.logical_and(masked, inside)
            elif inside is not None:  # a multiply by 0 or 1 is exact, 5x cheaper than Where
                w = em.Mul(w, em.Cast(inside, to=ct))
        indices.append(index)
        weights = w if weights is None else em.Mul(weights, w)
    if plan.ring:
        x = _zero_ring(em, x, spec, plan.ring)
        em = em.with_x(x)
    offsets = [o + plan.ring for o in kernel.offsets] if plan.per_point else None
    fraction = kernel.fraction if plan.fraction else None
    y = gather_and_combine(
        em,
        x,
        spec,
        plan,
        indices,
        weights,
        masked,
        offsets=offsets,
        integers=integers,
        fraction=fraction,
    )
    return _cast_result(em, y, spec, ct)


def _floors(
    em: Emitter, grid: ir.Value, spec: GridSampleSpec, plan: Plan, kernel: Kernel
) -> Iterator[tuple[ir.Value, ir.Value]]:
    """Each axis' floor of its coordinate and its taps' weights, planar, axis by axis.

    ``plan.positions_from_grid``: from two elementwise regions on the grid as it is, each
    with one output (what two regions share, OpenVINO stores): the floors, integers exact in
    bfloat16 (``positions_exact``), and u = t - 1/2 for the fractions t, whose rounding to
    bfloat16 then costs the weights at most 2**-10, from ``after(grid, grid)``, NaN where the
    grid is not finite (a finite grid whose coordinate overflows keeps its bounded one). Else
    from the grid transposed first, which a runtime storing bfloat16 rounds (a coordinate 0.04
    pixel off at 40 pixels, 0.4 after a Conv where OpenVINO's own kernel errs by 0.008).
    """
    r, ct = spec.rank, compute_dtype(spec)
    if plan.positions_from_grid:
        g = interleaved_grid(em, grid, spec)
        floor = em.Floor(source_coordinate(em, g, ALL_AXES, spec, ct))
        fraction = _fraction_less_half(em, after(em, g, g, ct), spec)  # (NaN where g is not finite)
        pairs = zip(planar(em, floor, r, False), planar(em, fraction, r, False), strict=True)
        for axis, (f, u) in enumerate(pairs):
            yield f, kernel.weights(em, u, None, TapConstants(em, axis, r, ct))
        return
    for axis, g in enumerate(grid_coordinates(em, grid, spec)):
        coord = source_coordinate(em, g, axis, spec, ct)  # finite, NaN and infinities too
        floor = em.Floor(coord)
        taps = TapConstants(em, axis, r, ct)
        yield floor, kernel.weights(em, em.Add(coord, em.Sub(g, g)), floor, taps)  # g - g: 0, NaN


def _fraction_less_half(em: Emitter, start: ir.Value, spec: GridSampleSpec) -> ir.Value:
    """The fraction t of every coordinate less a half, u = t - 1/2, from the grid's ``start``.

    In [-1/2, 1/2), which bfloat16 rounds by at most 2**-10 (t by 2**-9); NaN where the
    start is (the kernels' weights are polynomials in u).
    """
    ct = compute_dtype(spec)
    coord = source_coordinate(em, start, ALL_AXES, spec, ct)
    return em.Sub(em.Sub(coord, em.Floor(coord)), em.const(0.5, ct))


def _integer_taps_from_grid(
    em: Emitter, grid: ir.Value, spec: GridSampleSpec, plan: Plan, kernel: Kernel
) -> tuple[list[ir.Value], ir.Value, ir.Value | None]:
    """``_floors`` where an axis may pass 256 pixels: the floors leave as ``256 hi + lo``.

    Each axis' taps are then integer arithmetic (``_integer_taps``); the fractions come from a
    third region, started by ``after(grid, grid)`` (NaN where the grid is not finite). Returns
    the indices, the weights' product and the taps' mask (or None).
    """
    r, ct = spec.rank, compute_dtype(spec)
    g = interleaved_grid(em, grid, spec)
    parts = planar(em, _fraction_less_half(em, after(em, g, g, ct), spec), r, False)
    weights = [
        (kernel.weights(em, u, None, TapConstants(em, a, r, ct)),) for a, u in enumerate(parts)
    ]

    def floors(begin: ir.Value) -> ir.Value:
        return em.Floor(source_coordinate(em, begin, ALL_AXES, spec, ct))

    indices, weights, masked = _integer_taps(em, floors, g, spec, plan, kernel, weights)
    return indices, functools.reduce(em.Mul, (w for (w,) in weights)), masked


def interleaved_grid(em: Emitter, grid: ir.Value, spec: GridSampleSpec) -> ir.Value:
    """The grid as it is, ``(N, O1..Or, r)``, in the compute type: every axis at once.

    ``(N, O1.., Ok*..*Or*r)`` where the emitter's interleaved values are ``merged``, and
    ``(r, N, O1..Or)`` where they take the components first (``em.arrange``).
    """
    ct = compute_dtype(spec)
    grid = em.arrange(grid)
    return grid if spec.grid_dtype == ct else em.Cast(grid, to=ct)


def planar(em: Emitter, value: ir.Value, rank: int, tapped: bool) -> list[ir.Value]:
    """Each spatial axis' part of an interleaved ``([T,] N, O.., r)`` value, in X's axis order.

    Shaped as ``grid_coordinates`` and ``TapConstants`` shape them: ``(N, 1.., T, ..1, O..)``
    (T on tensor axis 1 + axis), or ``(N, 1..1, O..)`` untapped.

    One Transpose puts the components first, ``(r, N, [T,] O..)``; each axis is one slice
    (``Target.grid_by_gather``, untapped: each axis gathered from the last one, no Transpose).
    A ``merged`` value has its components split off its last axis first; a value with them
    first already, ``([T,] r, N, O..)``, has only its tap axis moved, a reshape where it or N
    holds one value.
    """
    if em.merged:
        value = em.split_components(value, tapped)
    by_gather = em.target.grid_by_gather and not (tapped or em.components_first)
    if em.components_first:
        if tapped:  # (T, r, N, O..) -> (r, N, T, O..)
            value = em.Transpose(value, perm=[1, 2, 0, *range(3, rank + 3)])
    elif tapped:  # (T, N, O.., r) -> (r, N, T, O..)
        value = em.Transpose(value, perm=[rank + 2, 1, 0, *range(2, rank + 2)])
    elif not by_gather:  # (N, O.., r) -> (r, N, O..); else each gathered from the last axis
        value = em.Transpose(value, perm=[rank + 1, *range(rank + 1)])
    parts = []
    for axis in range(rank):
        part = em.Gather(value, em.index(rank - 1 - axis), axis=-1 if by_gather else 0)
        own = 1 + em.lead + axis if tapped else None  # its tap axis, which T holds
        ones = [a for a in range(1, 1 + em.lead + rank) if a != own]
        parts.append(em.Unsqueeze(part, em.const(ones, INT64)) if ones else part)
    return parts


BF16_EXACT = 256  # integers up to this magnitude are exact in bfloat16


def positions_exact(em: Emitter, spec: GridSampleSpec, plan: Plan, folded: bool = False) -> bool:
    """Whether every in-axis tap position (ring and kernel included) is exact as stored.

    Kept in float32 (``plan.float32_kept``), or exact in bfloat16 (up to 256). ``folded``:
    floors that leave their region before the padding rule, a reflected coordinate folded
    within two periods (twice the axis).
    """
    if plan.float32_kept:
        return True
    span = 2 if folded and spec.padding_mode == "reflection" else 1
    sizes = [em.x_dim(2 + a) for a in range(spec.rank)]
    return all(n is not None and span * n + 2 * plan.ring + 4 <= BF16_EXACT for n in sizes)


def after(em: Emitter, g: ir.Value, first: ir.Value, ct: ir.DataType) -> ir.Value:
    """``g`` again, as ``g + 0 * first``: the start of a region that must not share its ops.

    ``first`` is what an earlier region computed from ``g`` (finite wherever its result
    counts). OpenVINO merges the same ops on the same input, even after rewriting them
    (``(g + 1) * s`` as ``g * s + s``), and stores what two regions then share, in bfloat16 at
    its default precision; this start is no other region's.
    """
    return em.Add(g, em.Mul(first, em.const(0.0, ct)))


def planar_indices(
    em: Emitter,
    build: Callable[[ir.Value], ir.Value],
    g: ir.Value,
    spec: GridSampleSpec,
    plan: Plan,
    exact: bool | None = None,
) -> list[ir.Value]:
    """Each axis' part of interleaved integer-valued float positions, ``(N, 1..1, O..)``.

    ``build(start)`` computes them, ``(N, O.., r)``, from the grid ``g`` (or a start equal to
    it). Where an axis (with its ring) may pass 256, they leave as two values exact in
    bfloat16, ``256 hi + lo``, each from a region of its own: the second built again from
    ``after(g, hi)``. One region stacking both (a Where along a new leading axis, one output)
    ran 5-17x a single output's time on OpenVINO (1.9 ms for a 480x640 grid). They are put
    together in the plan's position type. Positions far outside the axis may round, but stay
    outside: the integer clamps send them to the same edge. ``exact`` (default:
    ``positions_exact``): they are exact as stored, and leave whole, in float.
    """
    r, ct = spec.rank, compute_dtype(spec)
    index = build(g)
    if positions_exact(em, spec, plan) if exact is None else exact:
        return planar(em, index, r, tapped=False)
    scale = em.const(1.0 / BF16_EXACT, ct)
    hi = em.Floor(em.Mul(index, scale))
    again = build(after(em, g, hi, ct))
    lo = em.Sub(again, em.Mul(em.Floor(em.Mul(again, scale)), em.const(float(BF16_EXACT), ct)))
    positions = plan.position_type
    highs, lows = ([em.Cast(p, to=positions) for p in planar(em, v, r, False)] for v in (hi, lo))
    times = em.const(BF16_EXACT, positions)
    return [em.Add(em.Mul(h, times), low) for h, low in zip(highs, lows, strict=True)]


def interleaved_axes(em: Emitter, rank: int) -> int:
    """The axes of an interleaved value: ``(N, O1..Or, r)``, fewer merged (``em.merged_axes``)."""
    return rank + 2 - em.merged_axes


@dataclasses.dataclass(frozen=True)
class InterleavedTaps:
    """Per-tap constants ``(T, 1, .., 1)`` for interleaved ``(N, O.., r)`` values.

    Every axis' taps on a new leading axis, broadcast to ``(T, N, O.., r)``.
    """

    em: Emitter
    rank: int
    dtype: ir.DataType
    scalar_coefficients = True  # kernels: keep per-tap constant tensors few (cubic)

    def __call__(self, values: Sequence[float], dtype: ir.DataType | None = None) -> ir.Value:
        shaped = np.reshape(values, [len(values)] + [1] * interleaved_axes(self.em, self.rank))
        return self.em.const(shaped, dtype or self.dtype)


def _interleaved_taps(
    em: Emitter, grid: ir.Value, spec: GridSampleSpec, plan: Plan, kernel: Kernel
) -> tuple[list[ir.Value], list[tuple[ir.Value, ir.Value]], ir.Value | None]:
    """Every axis' coordinate, taps and weights computed at once on the grid as it is.

    Elementwise regions from the grid, each to one output: the taps (small integers, exact
    in bfloat16 up to 256, else ``256 hi + lo``: ``planar_indices``) and the weights' ``hi``
    and ``lo`` (``_split_weights``). OpenVINO's CPU plugin fuses each into one kernel that
    reads the grid in float32 (its default bfloat16 precision stores every float tensor between
    kernels in bfloat16, a coordinate to 2**-9 of its size). Regions that shared their start
    would be cut there, the start stored: so each starts with an op of its own (the weights
    with an Add of zeros that gives them their tap axis; a second half with ``after``). Then
    each axis' part is taken out, planar. Zeros padding without a ring (``plan.masks``:
    a small output from a large X) also gives the taps inside X, ``(N, T.., O..)``, whose
    values are kept once gathered (else None). Kept in float32 (``plan.float32_kept``), one
    coordinate and floor serve the taps and the weights, which so agree: computed apart, they
    may round apart near an integer, and the weights then weigh another pair of pixels
    (OpenVINO erred by 1.3 for an STN at 480x640 fenced, reshaped to static sizes, f32).
    """
    r, ct = spec.rank, compute_dtype(spec)
    taps = InterleavedTaps(em, r, ct)
    g = interleaved_grid(em, grid, spec)

    def coordinate(start: ir.Value) -> tuple[ir.Value, ir.Value]:
        coord = source_coordinate(em, start, ALL_AXES, spec, ct)
        return coord, em.Floor(coord)

    # kept in float32: one coordinate and floor, which the taps and the weights share
    shared = coordinate(g) if plan.float32_kept else None

    def floors(start: ir.Value) -> ir.Value:
        return (shared or coordinate(start))[1]

    def weights(start: ir.Value, mask: ir.Value | None = None) -> ir.Value:
        """``(T, N, O.., r)`` from its own start; ``mask``: the taps inside X, 1 or 0."""
        coord, floor = shared or coordinate(start)
        if plan.fraction:  # (1, N, O.., r): x - floor(x), each tap's |f - c| made where summed
            w = em.Sub(em.Add(coord, em.Sub(start, start)), floor)
        else:
            w = kernel.weights(em, em.Add(coord, em.Sub(start, start)), floor, taps)
        return w if mask is None else em.Mul(w, mask)  # by 0 or 1: exact

    if not positions_exact(em, spec, plan):  # the floors leave as 256 hi + lo
        split = _split_weights(em, weights, g, taps, kernel, plan, ct)
        return _integer_taps(em, floors, g, spec, plan, kernel, split)
    floor, masked = floors(g), None
    if plan.per_point:
        index = ring_base(em, floor, ALL_AXES, kernel.offsets, ct)  # (N, O.., r)
    elif plan.ring:
        index = em.Add(floor, taps([o + 1 for o in kernel.offsets]))
        if ct == ir.DataType.DOUBLE:  # clamped in float first: a float64 floor may pass 2**31
            last = em.axis_size(ALL_AXES, ct, lambda n: n + 1)
            index = em.clip(index, em.const(0.0, ct), last, vector=True)
    else:
        positions = em.Add(floor, taps(kernel.offsets))
        index, inside = tap_indices(em, positions, ALL_AXES, spec, ct)
        if inside is not None and plan.masks:  # every tap's values kept where inside X
            masked = functools.reduce(em.logical_and, planar(em, inside, r, tapped=True))
        elif inside is not None:  # (zeros padding without a ring)
            mask = em.Cast(inside, to=ct)
            weights = functools.partial(weights, mask=mask)
    indices = planar(em, index, r, tapped=not plan.per_point)
    return indices, _split_weights(em, weights, g, taps, kernel, plan, ct), masked


# Kernels whose weights' regions are built twice, ``hi`` and ``lo`` apart: linear's (some 8
# ops). Cubic's (some 30) stay one region stacking both: apart, its weights took kornia's cubic
# warp_affine on OpenVINO from 7.2 to 12.4x the original where OpenVINO runs symbolic sizes op
# by op, for 1.95 -> 1.89 with static sizes.
WEIGHTS_APART_MAX_TAPS = 2


def _split_weights(
    em: Emitter,
    build: Callable[[ir.Value], ir.Value],
    g: ir.Value,
    taps: InterleavedTaps,
    kernel: Kernel,
    plan: Plan,
    ct,
) -> list[tuple[ir.Value, ...]]:
    """Each axis' weights apart, each as ``(hi, lo)``, exact enough in bfloat16 (or whole).

    ``hi`` is a multiple of 2**-8, exact in bfloat16 (weights lie in [-1, 1]); ``lo = w - hi``
    (exact) lies below 2**-8, so bfloat16 rounds it by 2**-17 at most. ``build(start)`` makes
    the weights, ``(T, N, O.., r)``, from the grid plus zeros shaped to give it its tap axis
    (the positions' regions start from the grid itself). Linear's ``lo`` comes from a region of
    its own, built again from ``after(g, hi)`` (``planar_indices``); cubic's ``hi`` and ``lo``
    leave one region, stacked by a Where along a new leading axis (``WEIGHTS_APART_MAX_TAPS``).
    The gathered values are multiplied by every ``hi + lo`` in one region: neither a weight nor
    a product of weights is stored.
    """

    def high(w: ir.Value) -> ir.Value:
        return em.Mul(em.Floor(em.Mul(w, em.const(256.0, ct))), em.const(1.0 / 256, ct))

    rank = taps.rank
    w = build(em.Add(g, taps([0.0])))
    if plan.float32_kept:  # stored in float32: whole
        return [(part,) for part in planar(em, w, rank, tapped=True)]
    hi = high(w)
    if len(kernel.offsets) <= WEIGHTS_APART_MAX_TAPS:
        again = build(after(em, g, hi, ct))
        lo = em.Sub(again, high(again))
        highs, lows = (planar(em, v, rank, tapped=True) for v in (hi, lo))
        return list(zip(highs, lows, strict=True))
    first = np.reshape([True, False], [2] + [1] * (1 + interleaved_axes(em, rank)))
    first = em.Constant(value=ir.Tensor(first))
    both = em.Where(first, hi, em.Sub(w, hi))  # (2, T, N, O.., r): hi, then lo
    highs, lows = (
        planar(em, em.Gather(both, em.index(k), axis=0), rank, tapped=True) for k in range(2)
    )
    return list(zip(highs, lows, strict=True))


def _integer_taps(
    em: Emitter,
    floors: Callable[[ir.Value], ir.Value],
    g: ir.Value,
    spec: GridSampleSpec,
    plan: Plan,
    kernel: Kernel,
    weights: list[tuple[ir.Value, ir.Value]],
) -> tuple[list[ir.Value], list[tuple[ir.Value, ir.Value]], ir.Value | None]:
    """Each axis' taps from its floors, in integers (an axis past 256, or of unknown size).

    The floors leave their region exact (``planar_indices``); the taps, the ring's clamp, the
    padding rule and the masks are integer arithmetic, exact whatever the runtime stores.
    """
    r, ct, dtype = spec.rank, compute_dtype(spec), plan.position_type
    indices, masked = [], None
    for axis, f in enumerate(planar_indices(em, floors, g, spec, plan, exact=False)):
        taps = TapConstants(em, axis, r, dtype)
        if plan.per_point:
            low = em.const(-1 - max(kernel.offsets), dtype)
            high = integer_bound(em, axis, dtype, lambda n: n - min(kernel.offsets))
            index = em.clip(f, low, high)
        elif plan.ring:  # clamped onto the ring by flat_index
            index = em.Add(f, taps([o + 1 for o in kernel.offsets]))
        else:
            positions = em.Add(f, taps(kernel.offsets))
            index, inside = integer_tap_indices(em, positions, axis, spec, dtype)
            if inside is not None and plan.masks:  # its values kept where inside X
                masked = inside if masked is None else em.logical_and(masked, inside)
            elif inside is not None:  # a multiply by 0 or 1: exact in any precision
                mask = em.Cast(inside, to=ct)
                weights[axis] = tuple(em.Mul(part, mask) for part in weights[axis])
        indices.append(index)
    return indices, weights, masked


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
