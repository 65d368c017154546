"""A float64 numpy GridSample for any spatial rank: the oracle where onnxruntime cannot run.

onnxruntime runs only 4-D/5-D float inputs (no 5-D cubic); the ONNX reference evaluator is slow
and wrong for cubic + border (it clamps the continuous coordinate), integer X (integer weights)
and size-1 axes under reflection (division by zero). This kernel follows onnxruntime's CPU
semantics instead: coordinates are unnormalized per axis, integer taps are taken around them
(nearest: 1, linear: 2, cubic: 4 per axis) and the padding rule is applied to every integer tap.
It is written independently of the lowering (loops over taps, integer ``mod`` for reflection)
and is itself tested against onnxruntime and the ONNX reference. Coordinates and values are
float64; ``nearest`` gathers the values themselves, so it is exact for any dtype.

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

__all__ = ["GridSampleKernel", "grid_sample"]

_MODES = {
    "linear": "linear",
    "bilinear": "linear",
    "nearest": "nearest",
    "cubic": "cubic",
    "bicubic": "cubic",
}
_A = -0.75  # Keys cubic coefficient used by onnxruntime


def _unnormalize(g, size, align_corners):
    if align_corners:
        return (g + 1) / 2 * (size - 1)
    return ((g + 1) * size - 1) / 2


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
def grid_sample(x, grid, mode="linear", padding_mode="zeros", align_corners=0):
    """ONNX GridSample. x: (N, C, D1..Dr); grid: (N, O1..Or, r) -> (N, C, O1..Or)."""
    x, grid = np.asarray(x), np.asarray(grid)
    if mode not in _MODES or padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"unsupported mode={mode!r} / padding_mode={padding_mode!r}")
    mode = _MODES[mode]
    n, c, *dims = x.shape
    r = len(dims)
    if r < 1 or grid.ndim != r + 2 or grid.shape[0] != n or grid.shape[-1] != r:
        raise ValueError(f"bad shapes x={x.shape} grid={grid.shape}")
    out_shape = (n, c, *grid.shape[1:-1])
    npts = math.prod(grid.shape[1:-1])
    if x.size == 0 or npts == 0:
        return np.zeros(out_shape, dtype=x.dtype)
    g = grid.reshape(n, npts, r).astype(np.float64)
    flat = x.reshape(n, c, math.prod(dims))
    strides = [math.prod(dims[k + 1 :]) for k in range(r)]

    # Per spatial axis k (grid component r-1-k): list of (index, valid, weight) taps.
    axes = []
    for k, size in enumerate(dims):
        coord = _unnormalize(g[:, :, r - 1 - k], size, align_corners)
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
