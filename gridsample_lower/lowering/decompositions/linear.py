"""Lower GridSample(mode=linear) to Floor + Gather + a weighted sum over 2**r corners.

Weights are onnxruntime's ``x2 - x`` and ``x - x1`` per axis, computed as ``|x - (x1 + [1, 0])|``,
or as ``|u - [1/2, -1/2]|`` from u = (x - x1) - 1/2 (``sampling._floors``).
"""

from __future__ import annotations

import onnx_ir as ir

from gridsample_lower.lowering.emitter import Emitter
from gridsample_lower.lowering.plan import Plan
from gridsample_lower.lowering.sampling import Kernel, interpolate
from gridsample_lower.spec import GridSampleSpec


def _weights(em: Emitter, x: ir.Value, x1: ir.Value | None, per_tap) -> ir.Value:
    if x1 is None:  # x is u = t - 1/2: 1 - t and t
        return em.Abs(em.Sub(x, per_tap([0.5, -0.5])))
    return em.Abs(em.Sub(x, em.Add(x1, per_tap([1.0, 0.0]))))


LINEAR = Kernel(offsets=(0.0, 1.0), weights=_weights, fraction=(1.0, 0.0))


def linear(em: Emitter, x: ir.Value, grid: ir.Value, spec: GridSampleSpec, plan: Plan) -> ir.Value:
    return interpolate(em, x, grid, spec, plan, LINEAR)
