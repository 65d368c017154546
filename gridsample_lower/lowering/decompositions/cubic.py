"""Lower GridSample(mode=cubic) to Floor + Gather + a weighted sum over 4**r taps.

Keys' cubic convolution with A = -0.75, as onnxruntime's ``GsGetCubicCoeffs`` computes it from
t = x - floor(x): the inner taps, at distances t and 1 - t, weigh ``((A+2)d - (A+3))d^2 + 1``;
the outer ones, at t + 1 and 2 - t, ``((Ad - 5A)d + 8A)d - 4A``. Both are one Horner scheme
``((a d + b) d + c) d + e`` with coefficients per tap (c = 0 for the inner ones, an exact
no-op), run once over all four taps: 8 ops on ``(.., 4, ..)`` tensors, not 26 on single taps
and a Concat. The float operations are the same, so are the results, bit for bit; the time is
too (2-D, 3 channels at 224x224: 0-2% faster), but the graph is 36 nodes smaller. Where the
fraction arrives as u = t - 1/2 (``sampling._floors``, bfloat16-safe), the same cubics are
Horner schemes in u itself: 6 ops a tap, within a few units in the last place.
"""

from __future__ import annotations

import onnx_ir as ir

from gridsample_lower.lowering.emitter import Emitter
from gridsample_lower.lowering.plan import Plan
from gridsample_lower.lowering.sampling import Kernel, interpolate
from gridsample_lower.spec import GridSampleSpec

A = -0.75
# Per tap (offsets -1, 0, 1, 2): the distance d = sign * t + shift, then Horner's coefficients.
SIGN, SHIFT = [1.0, 1.0, -1.0, -1.0], [1.0, 0.0, 1.0, 2.0]
INNER = [A + 2, -(A + 3), 0.0, 1.0]  # ((A+2)d - (A+3)) d^2 + 1
OUTER = [A, -5 * A, 8 * A, -4 * A]  # ((A d - 5A) d + 8A) d - 4A
COEFFICIENTS = list(zip(OUTER, INNER, INNER, OUTER, strict=True))  # a, b, c, e: one per tap


# The same polynomials in u = t - 1/2 (``sampling._floors``), per tap: ((a u + b) u + c) u + e.
IN_U = [
    (A, -A / 2, -A / 4, A / 8),
    (A + 2, A / 2, -A / 4 - 3 / 2, 1 / 2 - A / 8),
    (-(A + 2), A / 2, A / 4 + 3 / 2, 1 / 2 - A / 8),
    (-A, -A / 2, A / 4, A / 8),
]


def _weights(em: Emitter, x: ir.Value, x1: ir.Value | None, per_tap) -> ir.Value:
    if x1 is None:  # x is u: four per-tap constants (OpenVINO fuses the weights whole)
        a, b, c, e = (per_tap(list(k)) for k in zip(*IN_U, strict=True))
        return em.Add(em.Mul(em.Add(em.Mul(em.Add(em.Mul(x, a), b), x), c), x), e)
    if getattr(per_tap, "scalar_coefficients", False):
        return _weights_by_distance(em, x, x1, per_tap)
    d = em.Add(em.Mul(em.Sub(x, x1), per_tap(SIGN)), per_tap(SHIFT))  # t + 1, t, 1 - t, 2 - t
    a, b, c, e = (per_tap(list(k)) for k in COEFFICIENTS)
    return em.Add(em.Mul(em.Add(em.Mul(em.Add(em.Mul(d, a), b), d), c), d), e)


CUBIC = Kernel(offsets=(-1.0, 0.0, 1.0, 2.0), weights=_weights)


def cubic(em: Emitter, x: ir.Value, grid: ir.Value, spec: GridSampleSpec, plan: Plan) -> ir.Value:
    return interpolate(em, x, grid, spec, plan, CUBIC)


def _weights_by_distance(em: Emitter, x: ir.Value, x1: ir.Value, per_tap) -> ir.Value:
    """The same weights, bit for bit, from one per-tap constant (interleaved coordinates).

    d = |t - offset| is t + 1, t, 1 - t and 2 - t exactly as above; both polynomials take
    scalar coefficients, and a constant mask picks the inner one for the two inner taps. A
    fused elementwise kernel in OpenVINO takes few constant tensors: the four per-tap ones
    above would split it and store the values between in bfloat16.
    """
    ct = per_tap.dtype

    def c(v):
        return em.const(v, ct)

    d = em.Abs(em.Sub(em.Sub(x, x1), per_tap(list(CUBIC.offsets))))
    inner = em.Add(em.Mul(em.Mul(em.Add(em.Mul(d, c(A + 2)), c(-(A + 3))), d), d), c(1.0))
    outer = em.Add(
        em.Mul(em.Add(em.Mul(em.Add(em.Mul(d, c(A)), c(-5 * A)), d), c(8 * A)), d), c(-4 * A)
    )
    inner_taps = per_tap([False, True, True, False], ir.DataType.BOOL)
    return em.Where(inner_taps, inner, outer)
