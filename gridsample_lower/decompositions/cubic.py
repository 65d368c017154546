"""Lower GridSample(mode=cubic) to Floor + Gather + a weighted sum over 4**r taps.

Keys' cubic convolution with A = -0.75, as onnxruntime's ``GsGetCubicCoeffs`` computes it from
t = x - floor(x): the inner taps, at distances t and 1 - t, weigh ``((A+2)d - (A+3))d^2 + 1``;
the outer ones, at t + 1 and 2 - t, ``((Ad - 5A)d + 8A)d - 4A``. Each weight is computed on the
per-point tensor and the four are concatenated along the axis' tap axis: half the elementwise
work of evaluating both polynomials at every tap.
"""

from __future__ import annotations

import onnx_ir as ir

from gridsample_lower.emitter import Emitter
from gridsample_lower.registry import register
from gridsample_lower.sampling import Kernel, interpolate
from gridsample_lower.spec import GridSampleSpec

A = -0.75


def _weights(em: Emitter, x: ir.Value, x1: ir.Value, per_tap) -> ir.Value:
    t = em.Sub(x, x1)
    one, two = per_tap([1.0]), per_tap([2.0])

    def horner(d: ir.Value, coefficients: list[float]) -> ir.Value:
        acc = em.Mul(d, per_tap([coefficients[0]]))
        for c in coefficients[1:]:
            acc = em.Add(acc, per_tap([c])) if c else acc
            acc = em.Mul(acc, d) if c is not coefficients[-1] else acc
        return acc

    inner = [A + 2, -(A + 3), 0.0, 1.0]  # ((A+2)d - (A+3)) d^2 + 1
    outer = [A, -5 * A, 8 * A, -4 * A]  # ((A d - 5A) d + 8A) d - 4A
    weights = [
        horner(em.Add(t, one), outer),
        horner(t, inner),
        horner(em.Sub(one, t), inner),
        horner(em.Sub(two, t), outer),
    ]
    return em.Concat(*weights, axis=per_tap.tap_axis)


CUBIC = Kernel(offsets=(-1.0, 0.0, 1.0, 2.0), weights=_weights)


@register("cubic")
def cubic(em: Emitter, x: ir.Value, grid: ir.Value, spec: GridSampleSpec) -> ir.Value:
    return interpolate(em, x, grid, spec, CUBIC)
