"""Taps read by the target's own GridSample, where that kernel is right only in part (MNN, ncnn).

MNN 3.6 and ncnn (through pnnx) run GridSample, but compute cubic as bilinear, and reflection
(and nearest's ties) wrong; ncnn has no data-dependent read at all but GridSample, and MNN runs
Gather and GatherElements as a loop over the indices (40x its own kernel). Both read right
where their kernel is right, so the lowering hands it only what it gets right
(``Plan.reader``):

- "centres": every tap of every mode, its padding rule applied here (ties to even, reflection,
  border), read by the target's nearest GridSample at the exact centre of its pixel,
  ``(2 i + 1) / L - 1`` with align_corners=0, on X viewed as 2-D: ``(N, C, 1, W)`` for rank 1,
  ``(N, C, D*H, W)`` for rank 3 (rows ``d * H + h``). Zeros padding is the kernel's own: an
  outside tap reads 0, so there is no mask, and an infinite pixel beside it stays out of the sum.
- "samples": linear samples read by the target's linear GridSample (zeros or border padding,
  which it computes right). Linear with reflection is one sample at the coordinate reflected
  here (reflection maps whole pixels to whole pixels and the kernel is symmetric, so reflecting
  the coordinate is reflecting each tap). Cubic is three per axis: Keys' inner weights are
  positive and sum to 1 - w0 - w3 >= 1, so the inner taps are one linear sample at
  ``floor + w2 / (w1 + w2)`` weighing ``w1 + w2``; the outer taps are samples at whole pixels.
  2-D cubic: 9 samples instead of 16 taps. The samples' coordinates are normalized again for the
  kernel, which costs about ``L * 2**-25`` pixels of position (float32).

Every value is at most 4-D (N, taps, points), but the node's own X, grid and Y at rank 3, and
the ops are those pnnx maps to ncnn layers: no Gather, comparison, Where, Cast, Concat, Slice,
ReduceSum over one axis (pnnx drops the axis) or per-tap constant broadcast ``(1, T, 1)`` (pnnx
gives it the wrong shape). Per-tap tensors are stacked by MatMuls with unit columns, and spread
over every tap combination by MatMuls with 0/1 matrices: exact for finite values (a NaN
coordinate makes its point's taps NaN, which its weights make NaN anyway).
"""

from __future__ import annotations

import itertools

import numpy as np
import onnx_ir as ir

from gridsample_lower.lowering.decompositions import cubic as cubic_kernel
from gridsample_lower.lowering.emitter import Emitter
from gridsample_lower.lowering.plan import Plan
from gridsample_lower.spec import GridSampleSpec, compute_dtype

__all__ = ["READER_KEY", "read_by_native"]

# Emitted GridSample nodes carry this metadata key: the rule never lowers them again.
READER_KEY = "gridsample_lower.reader"
# Bounds for zeros and border coordinates: beyond them every tap reads the same (a zero, an
# edge pixel) and the weights still sum to 1; below 2**22 float32 keeps a fraction bit.
_BOUND = {ir.DataType.FLOAT: 2.0**22, ir.DataType.DOUBLE: 2.0**51}
_SIDE_SCALE = 2.0**60  # |fraction - 0.5|, when not 0, is at least 2**-54 (float64)


def read_by_native(
    em: Emitter, x: ir.Value, grid: ir.Value, spec: GridSampleSpec, plan: Plan
) -> ir.Value:
    """``(N, C, O..)``: the GridSample of ``spec`` with taps read by the target's own kernel."""
    r, ct = spec.rank, compute_dtype(spec)
    sizes = [em.x_dim(2 + a) for a in range(r)]
    if any(s is None for s in sizes):
        raise ValueError("the native readers need static spatial sizes")  # (the plan refuses)
    n, c, points = em.batch, em.channels, em.points
    comps = _grid_components(em, grid, spec, ct)
    axes = []  # per axis: positions (N, S, P), weights (N, S, P) or None, and S
    for a, g in enumerate(comps):
        coord = _coordinate(em, g, sizes[a], spec, ct)
        axes.append(_axis_reads(em, g, coord, sizes[a], spec, plan.reader, ct))
    counts = [count for _, _, count in axes]
    taps = int(np.prod(counts))
    positions = [pos for pos, _, _ in axes]  # (spread over the combinations by the readers)
    weights = None
    for a, (_, w, _) in enumerate(axes):
        if w is not None:
            w = _spread(em, w, a, counts, ct)
            weights = w if weights is None else em.Mul(weights, w)
    if plan.reader == "samples" and r == 3:
        spread = [_spread(em, pos, a, counts, ct) for a, pos in enumerate(positions)]
        values = _read_3d(em, x, spread, sizes, spec, taps, ct)
    else:
        values = _read_2d(em, x, positions, counts, sizes, spec, plan.reader, ct)
    # values: (N, C, K, P)
    if weights is None:
        return em.reshape(values, [n, c, *em.output_dims()])
    # The weights broadcast over C, the outermost axis where N is 1 (MNN loops over the others).
    single = em.x_dim(0) == 1 and not em.target.reads_only  # (pnnx: axis 0 is the batch)
    flat, across = (
        ([c, em.points_times(taps)], [1, em.points_times(taps)])
        if single
        else ([n, c, em.points_times(taps)], [n, 1, em.points_times(taps)])
    )
    values = em.Mul(em.reshape(values, flat), em.reshape(weights, across))
    values = em.reshape(values, [n, c, taps, points])
    if taps == 1:
        return em.reshape(values, [n, c, *em.output_dims()])
    if em.target.allows("ReduceSum"):
        y = em.ReduceSum(values, em.const([2], ir.DataType.INT64), keepdims=0)
    else:  # (pnnx drops a single ReduceSum axis): a MatMul with ones, float32 on ncnn
        y = em.MatMul(em.const(np.ones((1, taps)), ct), values)
    return em.reshape(y, [n, c, *em.output_dims()])


def _grid_components(em: Emitter, grid: ir.Value, spec: GridSampleSpec, ct) -> list[ir.Value]:
    """One ``(N, 1, P)`` coordinate per spatial axis, in X's axis order (x is the grid's first)."""
    r, n, points = spec.rank, em.batch, em.points
    if spec.grid_dtype != ct:
        grid = em.Cast(grid, to=ct)
    flat = em.reshape(grid, [n, points, r])
    if r == 1:
        return [em.reshape(flat, [n, 1, points])]
    if em.target.allows("Slice"):  # (MNN: a copy; its MatMul of (N, P, r) is a loop)
        return [
            em.reshape(
                em.Slice(flat, em.index([r - 1 - a]), em.index([r - a]), em.index([2])),
                [n, 1, points],
            )
            for a in range(r)
        ]
    comps = []
    for a in range(r):
        unit = np.zeros((r, 1))
        unit[r - 1 - a, 0] = 1.0
        comps.append(em.reshape(em.MatMul(flat, em.const(unit, ct)), [n, 1, points]))
    return comps


def _coordinate(em: Emitter, g: ir.Value, size: int, spec: GridSampleSpec, ct) -> ir.Value:
    """Unnormalized as onnxruntime does (same operations), bounded or brought within a period."""
    one = em.const(1.0, ct)
    if spec.align_corners:
        x = em.Mul(em.Add(g, one), em.const((size - 1) / 2, ct))
    else:
        x = em.Sub(em.Mul(em.Add(g, one), em.const(size / 2, ct)), em.const(0.5, ct))
    if spec.padding_mode != "reflection":
        return em.clip(x, em.const(-_BOUND[ct], ct), em.const(_BOUND[ct], ct))
    period = _period(size, spec)
    # x - trunc(x / p) p: trunc as floor(|y|) times clip(y, -1, 1), which is +-1 wherever
    # floor(|y|) is not 0 (no Sign: the same on every target).
    y = em.Div(x, em.const(period, ct))
    whole = em.Mul(em.Floor(em.Abs(y)), em.clip(y, em.const(-1.0, ct), one))
    return em.Sub(x, em.Mul(whole, em.const(period, ct)))


def _period(size: int, spec: GridSampleSpec) -> float:
    return 2.0 * size if not spec.align_corners else float(max(2 * (size - 1), 1))


def _axis_reads(em: Emitter, g, coord, size: int, spec: GridSampleSpec, reader: str, ct):
    """(positions (N, S, P), weights (N, S, P) or None, S) of one axis, padding rule applied."""
    if spec.mode == "nearest":
        tap = _round_half_to_even(em, coord, ct)
        return _pad_taps(em, tap, size, spec, ct), None, 1
    x = em.Add(coord, em.Sub(g, g))  # g - g: 0, or NaN for a NaN or infinite grid value
    if spec.mode == "linear" and reader == "samples":  # (reflection) one sample, weight 1
        one = em.const(1.0, ct)  # 1, or NaN for a NaN or infinite grid value, as the reference
        return _pad_samples(em, x, size, spec, ct), em.Add(em.Sub(g, g), one), 1
    floor = em.Floor(coord)
    if spec.mode == "linear":
        one = em.const(1.0, ct)
        positions = [floor, em.Add(floor, one)]
        weights = [em.Abs(em.Sub(x, em.Add(floor, one))), em.Abs(em.Sub(x, floor))]
    else:
        weights = _cubic_weights(em, em.Sub(x, floor), ct)
        if reader == "samples":
            inner = em.Add(weights[1], weights[2])
            at = em.Add(floor, em.Div(weights[2], inner))
            positions = [em.Sub(floor, em.const(1.0, ct)), at, em.Add(floor, em.const(2.0, ct))]
            samples = [_pad_samples(em, p, size, spec, ct) for p in positions]
            return _stack(em, samples, ct), _stack(em, [weights[0], inner, weights[3]], ct), 3
        positions = [em.Add(floor, em.const(o, ct)) for o in (-1.0, 0.0, 1.0, 2.0)]
    taps = [_pad_taps(em, p, size, spec, ct) for p in positions]
    return _stack(em, taps, ct), _stack(em, weights, ct), len(taps)


def _cubic_weights(em: Emitter, t: ir.Value, ct) -> list[ir.Value]:
    """Keys' weights of the four taps, as ``cubic._weights`` computes them, tap by tap."""
    weights = []
    for k in range(4):
        d = em.Mul(t, em.const(cubic_kernel.SIGN[k], ct))
        if cubic_kernel.SHIFT[k]:
            d = em.Add(d, em.const(cubic_kernel.SHIFT[k], ct))
        a, b, c, e = (coefficients[k] for coefficients in cubic_kernel.COEFFICIENTS)
        w = em.Mul(em.Add(em.Mul(d, em.const(a, ct)), em.const(b, ct)), d)
        if c:
            w = em.Add(w, em.const(c, ct))
        weights.append(em.Add(em.Mul(w, d), em.const(e, ct)))
    return weights


def _round_half_to_even(em: Emitter, x: ir.Value, ct) -> ir.Value:
    """ONNX Round without Round or comparisons: Floor, and the side of one half by a Clip."""
    floor = em.Floor(x)
    half, one = em.const(0.5, ct), em.const(1.0, ct)
    side = em.clip(  # -1 below one half, 0 at it, 1 above: the difference is exact
        em.Mul(em.Sub(em.Sub(x, floor), half), em.const(_SIDE_SCALE, ct)), em.const(-1.0, ct), one
    )
    odd = em.Sub(floor, em.Mul(em.Floor(em.Mul(floor, half)), em.const(2.0, ct)))
    at_tie = em.Sub(one, em.Abs(side))
    up = em.Add(em.Mul(em.Add(side, one), half), em.Mul(at_tie, em.Sub(odd, half)))
    return em.Add(floor, up)


def _pad_taps(em: Emitter, tap: ir.Value, size: int, spec: GridSampleSpec, ct) -> ir.Value:
    """Whole-pixel taps: reflected, clamped (border), or kept within a pixel outside (zeros)."""
    if spec.padding_mode == "zeros":
        return em.clip(tap, em.const(-1.0, ct), em.const(float(size), ct))
    if spec.padding_mode == "border":
        return em.clip(tap, em.const(0.0, ct), em.const(float(size - 1), ct))
    return _reflect(em, tap, size, spec, ct)


def _pad_samples(em: Emitter, at: ir.Value, size: int, spec: GridSampleSpec, ct) -> ir.Value:
    """Linear sample positions: what the kernel then reads is what each tap's rule reads."""
    if spec.padding_mode == "zeros":  # past 1 pixel outside, both taps read zeros
        return em.clip(at, em.const(-2.0, ct), em.const(float(size + 1), ct))
    if spec.padding_mode == "reflection":
        at = _reflect(em, at, size, spec, ct)
    return em.clip(at, em.const(0.0, ct), em.const(float(size - 1), ct))


def _reflect(em: Emitter, at: ir.Value, size: int, spec: GridSampleSpec, ct) -> ir.Value:
    """Reflection about 0 and L-1 (align_corners=1) or -0.5 and L-0.5, within a few periods."""
    period = em.const(_period(size, spec), ct)
    if not spec.align_corners:
        at = em.Add(at, em.const(0.5, ct))
    at = em.Abs(at)
    folded = em.Sub(at, em.Mul(em.Floor(em.Div(at, period)), period))
    folded = em.Min(folded, em.Sub(period, folded))  # (a period off is the same reflection)
    return folded if spec.align_corners else em.Sub(folded, em.const(0.5, ct))


def _stack(em: Emitter, values: list[ir.Value], ct) -> ir.Value:
    """``(N, 1, P)`` tensors to one ``(N, S, P)``: a sum of MatMuls with unit columns."""
    if len(values) == 1:
        return values[0]
    if em.target.allows("Concat"):
        return em.Concat(*values, axis=1)
    total = None
    for k, value in enumerate(values):
        unit = np.zeros((len(values), 1))
        unit[k, 0] = 1.0
        term = em.MatMul(em.const(unit, ct), value)
        total = term if total is None else em.Add(total, term)
    return total


def _spread(em: Emitter, value: ir.Value, axis: int, counts: list[int], ct) -> ir.Value:
    """Axis ``axis``' ``(N, S, P)`` over every combination of reads, ``(N, K, P)``: a 0/1 MatMul."""
    if int(np.prod(counts)) == counts[axis]:  # (one read on the other axes: the identity)
        return value
    if em.target.allows("Expand"):  # (MNN: a broadcast copy; its MatMul here is a loop)
        n, points = em.batch, em.points
        alone = [counts[b] if b == axis else 1 for b in range(len(counts))]
        value = em.reshape(value, [n, *alone, points])
        value = em.Expand(value, em.shape([n, *counts, points]))
        return em.reshape(value, [n, int(np.prod(counts)), points])
    combos = list(itertools.product(*[range(k) for k in counts]))
    select = np.zeros((len(combos), counts[axis]))
    for row, combo in enumerate(combos):
        select[row, combo[axis]] = 1.0
    return em.MatMul(em.const(select, ct), value)


def _normalized(em: Emitter, at: ir.Value, size: int, ct) -> ir.Value:
    """Pixel position to the grid value that align_corners=0 maps back to it: (2 at + 1)/L - 1."""
    two, one = em.const(2.0, ct), em.const(1.0, ct)
    return em.Sub(em.Div(em.Add(em.Mul(at, two), one), em.const(float(size), ct)), one)


def _native(em: Emitter, x, grid, mode: str, padding: str) -> ir.Value:
    """The target's own GridSample; linear as the default mode, spelled alike at every opset.

    (``mode="linear"`` is opset 20's spelling: GridSample-16 models need ``bilinear``.)
    """
    spelled = {} if mode == "linear" else {"mode": mode}
    y = em.op("GridSample", x, grid, padding_mode=padding, align_corners=0, **spelled)
    y.producer().metadata_props[READER_KEY] = "1"
    return y


def _read_2d(em: Emitter, x, positions, counts, sizes, spec: GridSampleSpec, reader: str, ct):
    """``(N, C, K, P)``: one 2-D GridSample on X viewed as ``(N, C, rows, W)``.

    Ranks 1 and 2 normalize each axis' reads before spreading them over the combinations
    (T x P values, not K x P); rank 3 combines its rows first.
    """
    r, n, c, points = spec.rank, em.batch, em.channels, em.points
    taps, width = int(np.prod(counts)), sizes[-1]

    def spread(value, axis):
        return _spread(em, value, axis, counts, ct)

    if r == 1:
        view = em.reshape(x, [n, c, 1, width])
        gx, gy = _normalized(em, positions[0], width, ct), None
    elif r == 2:
        view = x
        gx = spread(_normalized(em, positions[1], width, ct), 1)
        gy = spread(_normalized(em, positions[0], sizes[0], ct), 0)
    else:  # rows d * H + h; a tap outside on d or h reads column -1, a zero (zeros padding)
        rows = sizes[0] * sizes[1]
        view = em.reshape(x, [n, c, rows, width])
        depth, height, col = (spread(p, a) for a, p in enumerate(positions))
        if spec.padding_mode == "zeros":
            inside = em.Mul(_inside(em, depth, sizes[0], ct), _inside(em, height, sizes[1], ct))
            depth = em.clip(depth, em.const(0.0, ct), em.const(float(sizes[0] - 1), ct))
            height = em.clip(height, em.const(0.0, ct), em.const(float(sizes[1] - 1), ct))
            col = em.Add(em.Mul(col, inside), em.Sub(inside, em.const(1.0, ct)))
        row = em.Add(em.Mul(depth, em.const(float(sizes[1]), ct)), height)
        gx, gy = _normalized(em, col, width, ct), _normalized(em, row, rows, ct)
    if em.target.allows("Concat"):  # (MNN: its MatMul of (N, K*P, 1) by (1, 2) is 10x this)
        parts = [em.reshape(g, [n, taps, points, 1]) for g in (gx, gy) if g is not None]
        if gy is None:
            parts.append(em.Mul(parts[0], em.const(0.0, ct)))
        grid = em.Concat(*parts, axis=3)
        mode = "nearest" if reader == "centres" else "linear"
        padding = "zeros" if spec.padding_mode == "zeros" else "border"
        return _native(em, view, grid, mode, padding)  # (N, C, K, P)
    column = [n, em.points_times(taps), 1]  # (pnnx leaves a MatMul of (1, 1, P, 1) unconverted)
    grid = em.MatMul(em.reshape(gx, column), em.const([[1.0, 0.0]], ct))
    if gy is not None:
        grid = em.Add(grid, em.MatMul(em.reshape(gy, column), em.const([[0.0, 1.0]], ct)))
    grid = em.reshape(grid, [n, taps, points, 2])
    mode = "nearest" if reader == "centres" else "linear"
    padding = "zeros" if spec.padding_mode == "zeros" else "border"
    return _native(em, view, grid, mode, padding)  # (N, C, K, P)


def _read_3d(em: Emitter, x, spread, sizes, spec: GridSampleSpec, taps: int, ct):
    """``(N, C, K, P)``: linear samples by the target's own 3-D GridSample (5-D grid)."""
    n, c, points = em.batch, em.channels, em.points
    grid = None
    if em.target.allows("Concat"):
        parts = [_normalized(em, spread[a], sizes[a], ct) for a in (2, 1, 0)]
        grid = em.Concat(*[em.reshape(g, [n, taps, points, 1, 1]) for g in parts], axis=4)
    for a in range(3 if grid is None else 0):
        unit = np.zeros((1, 3))
        unit[0, 2 - a] = 1.0
        g = em.reshape(_normalized(em, spread[a], sizes[a], ct), [n, taps, points, 1, 1])
        term = em.MatMul(g, em.const(unit, ct))
        grid = term if grid is None else em.Add(grid, term)
    padding = "zeros" if spec.padding_mode == "zeros" else "border"
    y = _native(em, x, grid, "linear", padding)  # (N, C, K, P, 1)
    return em.reshape(y, [n, c, taps, points])


def _inside(em: Emitter, tap: ir.Value, size: int, ct) -> ir.Value:
    """1 where the whole-pixel ``tap`` lies in [0, size - 1], else 0 (no comparison)."""
    one = em.const(1.0, ct)
    clamped = em.clip(tap, em.const(0.0, ct), em.const(float(size - 1), ct))
    return em.Sub(one, em.Min(em.Abs(em.Sub(clamped, tap)), one))
