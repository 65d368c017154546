"""A numpy GridSample for any spatial rank: the oracle where onnxruntime cannot run.

onnxruntime runs only 4-D/5-D float inputs (no 5-D cubic); the ONNX reference evaluator is slow
and wrong for cubic + border (it clamps the continuous coordinate), integer X (integer weights)
and size-1 axes under reflection (division by zero). This kernel follows onnxruntime's CPU
semantics instead: coordinates are unnormalized per axis, integer taps are taken around them
(nearest: 1, linear: 2, cubic: 4 per axis) and the padding rule is applied to every integer tap.
It is written independently of the lowering (loops over taps, integer ``mod`` for reflection)
and is itself tested against onnxruntime and the ONNX reference.

Coordinates are unnormalized as onnxruntime's kernel does it (``GsDenormalize``): in its order
and in the precision it computes in, float64 when X or the grid is double, else float32 (it runs
float16 through its float32 kernel; integer and bfloat16 X are judged as a float32 kernel would
see them). That decides nearest's ties and linear's floors: with W = 7 and g = float32(3/7),
float32 gives x = 4.5 (ties to 4), float64 4.50000001 (5). ``witness=True`` unnormalizes linear
and cubic in float64 instead, an independent judge of the lowering's float arithmetic; nearest
always computes in the runtime's precision, since a tie has no other right answer. Weights and
sums are float64; ``nearest`` gathers the values themselves, so it is exact for any dtype.

Non-finite coordinates: NaN or +-inf give NaN for linear/cubic (the tap weights are
NaN), which becomes 0 for integer outputs. For nearest, NaN maps to index 0
(border/reflection) or gives 0 (zeros padding); +-inf behaves like a huge finite value,
except under reflection, where folding it has no meaning and it counts as NaN.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from onnx.reference.op_run import OpRun

from gridsample_lower.spec import MODE_NAMES

__all__ = ["AffineGridKernel", "GridSampleKernel", "affine_grid", "coordinate_dtype", "grid_sample"]

_A = -0.75  # Keys cubic coefficient used by onnxruntime


def _unnormalize(g, size, align_corners):
    """The coordinate onnxruntime's ``GsDenormalize`` gives, in ``g``'s dtype, bit for bit.

    It computes ``(g + 1) / 2 * (L - 1)`` and ``((g + 1) * L - 1) / 2``; halving first gives the
    same roundings (scaling by 2 is exact), without overflowing where ``(g + 1) * L`` would.
    """
    t = g.dtype.type
    if align_corners:
        return (g + t(1)) * t((size - 1) / 2)
    return (g + t(1)) * t(size / 2) - t(0.5)


def coordinate_dtype(x_dtype, grid_dtype) -> np.dtype:
    """What onnxruntime computes coordinates in: float64 if X or grid is double, else float32."""
    double = np.dtype(np.float64)
    return double if double in (np.dtype(x_dtype), np.dtype(grid_dtype)) else np.dtype(np.float32)


def _to_int(v):
    """Integer-valued float64 taps -> int64 (NaN -> 0, huge/inf values clipped)."""
    return np.clip(np.nan_to_num(v, nan=0.0), -(2.0**62), 2.0**62).astype(np.int64)


def _pad(t, size, padding_mode, align_corners):
    """Apply the padding rule to int64 taps t: returns (index in [0, size-1], valid)."""
    if padding_mode == "zeros":
        return np.clip(t, 0, size - 1), (t >= 0) & (t <= size - 1)
    ok = np.ones(t.shape, dtype=bool)
    if padding_mode == "border":
        return np.clip(t, 0, size - 1), ok
    if align_corners:
        if size == 1:
            return np.zeros_like(t), ok
        p = 2 * (size - 1)
        m = np.mod(t, p)
        return np.where(m <= size - 1, m, p - m), ok
    p = 2 * size
    m = np.mod(t, p)
    return np.where(m < size, m, p - 1 - m), ok


def _cubic_weights(t):
    a, s, u, v = _A, t + 1, 1 - t, 2 - t
    return [
        ((a * s - 5 * a) * s + 8 * a) * s - 4 * a,
        ((a + 2) * t - (a + 3)) * t * t + 1,
        ((a + 2) * u - (a + 3)) * u * u + 1,
        ((a * v - 5 * a) * v + 8 * a) * v - 4 * a,
    ]


def _cast(acc, dtype):
    """float64 result -> dtype (integers: NaN -> 0, truncate toward zero, saturate)."""
    if not np.issubdtype(dtype, np.integer):
        return acc.astype(dtype)
    info = np.iinfo(dtype)
    hi = float(info.max)  # for 64-bit ints float(max) rounds up past max: step back one ulp
    hi = hi if hi <= info.max else np.nextafter(hi, 0.0)
    return np.clip(np.trunc(np.nan_to_num(acc, nan=0.0)), float(info.min), hi).astype(dtype)


@np.errstate(invalid="ignore", over="ignore")  # non-finite grids must not warn
def grid_sample(x, grid, mode="linear", padding_mode="zeros", align_corners=0, *, witness=False):
    """ONNX GridSample. x: (N, C, D1..Dr); grid: (N, O1..Or, r) -> (N, C, O1..Or).

    ``witness``: unnormalize linear and cubic in float64, not in the runtime's precision.
    """
    x, grid = np.asarray(x), np.asarray(grid)
    if mode not in MODE_NAMES or padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"unsupported mode={mode!r} / padding_mode={padding_mode!r}")
    mode = MODE_NAMES[mode]
    n, c, *dims = x.shape
    r = len(dims)
    if r < 1 or grid.ndim != r + 2 or grid.shape[0] != n or grid.shape[-1] != r:
        raise ValueError(f"bad shapes x={x.shape} grid={grid.shape}")
    out_shape = (n, c, *grid.shape[1:-1])
    npts = math.prod(grid.shape[1:-1])
    if x.size == 0 or npts == 0:
        return np.zeros(out_shape, dtype=x.dtype)
    wide = witness and mode != "nearest"
    ct = np.dtype(np.float64) if wide else coordinate_dtype(x.dtype, grid.dtype)
    g = grid.reshape(n, npts, r).astype(ct)
    flat = x.reshape(n, c, math.prod(dims))
    strides = [math.prod(dims[k + 1 :]) for k in range(r)]

    # Per spatial axis k (grid component r-1-k): list of (index, valid, weight) taps.
    axes = []
    for k, size in enumerate(dims):
        coord = _unnormalize(g[:, :, r - 1 - k], size, align_corners).astype(np.float64)
        if ct != np.float64 and np.isinf(coord).any():  # past float32's range a finite grid
            # value stays a huge coordinate
            wide_coord = _unnormalize(g[:, :, r - 1 - k].astype(np.float64), size, align_corners)
            coord = np.where(np.isinf(coord) & np.isfinite(wide_coord), wide_coord, coord)
        if padding_mode == "reflection":  # folding an infinite coordinate has no meaning
            coord = np.where(np.isinf(coord), np.nan, coord)
        else:
            # Past 2**52 every float64 is a whole number: bounding the coordinate there keeps its
            # fraction (so an edge pixel's weights) and floor(x) + 1 - x exact (1e30 + 1 == 1e30).
            coord = np.where(np.isinf(coord), coord, np.clip(coord, -(2.0**52), 2.0**52))
        if mode == "nearest":
            taps = [(np.rint(coord), None)]
        else:
            fl = np.floor(coord)
            if mode == "linear":
                taps = [(fl, fl + 1 - coord), (fl + 1, coord - fl)]
            else:
                taps = [(fl + (j - 1), w) for j, w in enumerate(_cubic_weights(coord - fl))]
        axis_taps = []
        for tap, w in taps:
            idx, ok = _pad(_to_int(tap), size, padding_mode, align_corners)
            if w is None and padding_mode == "zeros":
                ok &= ~np.isnan(tap)
            axis_taps.append((idx, ok, w))
        axes.append(axis_taps)

    acc = None
    for combo in itertools.product(*axes):
        lin = sum(idx * s for (idx, _, _), s in zip(combo, strides, strict=True))
        ok = np.logical_and.reduce([t[1] for t in combo])[:, None, :]
        vals = np.take_along_axis(flat, lin[:, None, :], axis=2)  # (N, C, P)
        if mode == "nearest":
            return np.where(ok, vals, np.zeros((), x.dtype)).reshape(out_shape)
        w = np.prod([t[2] for t in combo], axis=0)[:, None, :]
        term = np.where(ok, vals.astype(np.float64), 0.0) * w
        acc = term if acc is None else acc + term
    return _cast(acc, x.dtype).reshape(out_shape)


class GridSampleKernel(OpRun):
    """``grid_sample`` as an op for ``onnx.reference.ReferenceEvaluator(new_ops=[...])``."""

    op_domain = ""

    def _run(self, X, grid, mode=None, padding_mode=None, align_corners=None):  # noqa: N803
        return (
            grid_sample(X, grid, mode or "linear", padding_mode or "zeros", align_corners or 0),
        )


GridSampleKernel.__name__ = "GridSample"


def affine_grid(theta, size, align_corners=0):
    """ONNX AffineGrid as onnxruntime's kernel computes it, returned in ``theta``'s type.

    onnx.reference builds the base grid in float64 and returns float32 whatever theta's type (a
    float64 model's grid loses half its digits; a float16 one is never rounded). onnxruntime
    spaces the base grid like Eigen's ``LinSpaced`` (one point: 1), scales it by ``(L - 1) / L``
    without align_corners and applies theta, all in theta's type: 2-D float32 and float64 grids
    agree with it bit for bit (its product sums the last term first). float16
    is computed in float32 and rounded; onnxruntime has no float16 kernel and runs the ONNX
    function body in float16 instead, which differs by an ulp of float16 in about half the points.
    """
    theta = np.asarray(theta)
    n, _, *sizes = (int(v) for v in size)
    ct = np.float64 if theta.dtype == np.float64 else np.float32
    axes = [_base_axis(length, align_corners, ct) for length in reversed(sizes)]  # x, y[, z]
    points = np.meshgrid(*reversed(axes), indexing="ij")  # each (D,) H, W: z, y, x order
    base = np.stack([p.reshape(-1) for p in reversed(points)])  # (r, points): x, y[, z]
    t = theta.astype(ct)[:, :, :, None]  # (N, r, r + 1, 1)
    r = len(axes)
    grid = t[:, :, r - 1] * base[r - 1]  # summed last term first, as Eigen's product does
    for j in reversed(range(r - 1)):
        grid = t[:, :, j] * base[j] + grid
    grid = (grid + t[:, :, r]).transpose(0, 2, 1)  # (N, points, r)
    return grid.reshape(n, *sizes, r).astype(theta.dtype)


def _base_axis(length: int, align_corners: int, ct) -> np.ndarray:
    """Eigen's ``LinSpaced(length, -1, 1)`` in ``ct``, scaled by ``(L - 1) / L`` without corners."""
    if length == 1:
        axis = np.ones(1, ct)
    else:
        axis = ct(-1) + np.arange(length, dtype=ct) * (ct(2) / ct(length - 1))
        axis[-1] = ct(1)
    if not align_corners:
        axis = axis * ct(length - 1) / ct(length)
    return axis


class AffineGridKernel(OpRun):
    """``affine_grid`` for ``onnx.reference.ReferenceEvaluator(new_ops=[...])``."""

    op_domain = ""

    def _run(self, theta, size, align_corners=None):
        return (affine_grid(theta, size, align_corners or 0),)


AffineGridKernel.__name__ = "AffineGrid"
