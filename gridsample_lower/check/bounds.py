"""Which tolerance each output and GridSample node is held to: the table, or an override.

A node is held to the tolerance of its mode and output dtype (``tolerances.tolerance``). A graph
output is held to the tolerance of the least exact GridSample mode in the model; when nearest
is the only mode but the two models run in different runtimes and the model does arithmetic
besides (a Conv, an Add), outputs are held to the linear tolerance instead, since each runtime
rounds that arithmetic its own way. Bool and string outputs are compared exactly. Overrides
name an output or a node, or ``"*"`` for every other one.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import onnx

from gridsample_lower.check.given import VerificationSetupError
from gridsample_lower.check.tolerances import tolerance
from gridsample_lower.graphs import graphs
from gridsample_lower.lowering.inventory import Site

__all__ = ["Bounds", "Tolerance", "op_types", "whole_model_mode"]

Tolerance = float | Mapping[str, float] | None
_BY_EXACTNESS = ("nearest", "linear", "cubic")
# Ops two runtimes compute bit for bit alike: they move or select values.
_EXACT_OPS = {
    *("Cast", "Concat", "Constant", "ConstantOfShape", "Equal", "Expand", "Flatten", "Gather"),
    *("GatherElements", "GatherND", "GridSample", "Identity", "If", "Loop", "Pad", "Reshape"),
    *("Scan", "Shape", "Slice", "Split", "Squeeze", "Tile", "Transpose", "Unsqueeze", "Where"),
}


class Bounds:
    """(atol, rtol) per output or node: the override for its name, for "*", else the table."""

    def __init__(self, atol: Tolerance, rtol: Tolerance, names: set[str]) -> None:
        self._overrides = [_overrides(atol, names, "atol"), _overrides(rtol, names, "rtol")]

    def __call__(self, name: str, dtype: np.dtype, mode: str) -> tuple[float, float]:
        table = (0.0, 0.0) if np.dtype(dtype).kind in "OUSb" else tolerance(dtype, mode)
        return tuple(  # type: ignore[return-value]
            over.get(name, over.get("*", default))
            for over, default in zip(self._overrides, table, strict=True)
        )

    def given(self, name: str) -> bool:
        """Whether an atol or rtol was given for ``name`` (or for every name, "*")."""
        return any(name in over or "*" in over for over in self._overrides)


def _overrides(value: Tolerance, names: set[str], what: str) -> dict[str, float]:
    if value is None:
        return {}
    overrides = {"*": value} if isinstance(value, int | float) else dict(value)
    for name, bound in overrides.items():
        if name != "*" and name not in names:
            raise VerificationSetupError(f"{what}: no output or GridSample node named {name!r}")
        if not bound >= 0:
            raise VerificationSetupError(f"{what} for {name!r} must be >= 0, not {bound}")
    return {name: float(bound) for name, bound in overrides.items()}


def whole_model_mode(
    ref: onnx.ModelProto, sites: list[Site], two_runtimes: bool
) -> tuple[str, str]:
    """The mode whose tolerance outputs are held to, and a note when it was raised."""
    modes = [s.spec.mode if s.spec else "cubic" for s in sites]
    mode = max(modes, key=_BY_EXACTNESS.index, default="nearest")
    if mode != "nearest" or not two_runtimes:
        return mode, ""
    ops = op_types(ref.graph) - _EXACT_OPS
    if not ops:
        return mode, ""
    return "linear", (
        f"outputs held to the linear tolerance: the two runtimes compute {sorted(ops)[0]} "
        "and other arithmetic each in their own way"
    )


def op_types(graph: onnx.GraphProto) -> set[str]:
    """Every op type of ``graph`` and its subgraphs at any depth."""
    return {node.op_type for sub in graphs(graph) for node in sub.node}
