"""Lower GridSample(mode=cubic) to Floor + Gather + a weighted sum over 4**r taps.

Keys' cubic convolution with A = -0.75 (onnxruntime's ``GsGetCubicCoeffs``), evaluated on the
distance d from the point to each tap: the inner taps (d <= 1) use ``((A+2)d - (A+3))d^2 + 1``,
the outer ones (1 < d < 2) ``((Ad - 5A)d + 8A)d - 4A``.
"""

from __future__ import annotations

import onnx_ir as ir

from gridsample_lower.emitter import Emitter
from gridsample_lower.registry import register
from gridsample_lower.sampling import Kernel, interpolate
from gridsample_lower.spec import GridSampleSpec

A = -0.75


def _weights(em: Emitter, x: ir.Value, x1: ir.Value, taps: ir.Value, per_tap) -> ir.Value:
    d = em.Abs(em.Sub(x, taps))

    def horner(coefficients: list[float]) -> ir.Value:
        acc = em.Mul(d, per_tap([coefficients[0]]))
        for c in coefficients[1:]:
            acc = em.Add(acc, per_tap([c])) if c else acc
            acc = em.Mul(acc, d) if c is not coefficients[-1] else acc
        return acc

    inner = horner([A + 2, -(A + 3), 0.0, 1.0])  # ((A+2)d - (A+3)) d^2 + 1
    outer = horner([A, -5 * A, 8 * A, -4 * A])  # ((A d - 5A) d + 8A) d - 4A
    is_inner = per_tap([False, True, True, False], ir.DataType.BOOL)
    return em.Where(is_inner, inner, outer)


CUBIC = Kernel(offsets=(-1.0, 0.0, 1.0, 2.0), weights=_weights)


@register("cubic")
def cubic(em: Emitter, x: ir.Value, grid: ir.Value, spec: GridSampleSpec) -> ir.Value:
    return interpolate(em, x, grid, spec, CUBIC)
