"""The onnxscript rewrite rule that replaces one GridSample node by its decomposition.

It matches GridSample whatever its attributes, declines with a reason when the node cannot be
lowered (unknown rank or type, attribute bound to a function parameter, ...), and otherwise
emits the decomposition registered for the node's mode. It works on its own with
``onnxscript.rewriter.rewrite(model, [gridsample_rule()])``; ``LowerGridSamplePass`` adds what a
rule cannot do alone (functions, shape inference, naming, a report).
"""

from __future__ import annotations

import onnx_ir as ir
from onnxscript import rewriter

from gridsample_lower.emitter import Emitter
from gridsample_lower.registry import lookup
from gridsample_lower.spec import GridSampleSpec, UnsupportedGridSample

__all__ = ["RULE_NAME", "GridSampleLowering", "gridsample_rule"]

RULE_NAME = "LowerGridSample"


class GridSampleLowering(rewriter.RewriteRuleClassBase):
    """GridSample(X, grid) -> primitive ops, for every rank, mode, padding and align_corners."""

    def __init__(self) -> None:
        super().__init__(name=RULE_NAME)

    def pattern(self, op, x, grid):
        return op.GridSample(x, grid, _allow_other_attributes=True, _outputs=["y"])

    def check(self, context, x: ir.Value, grid: ir.Value, y: ir.Value, **_) -> rewriter.MatchResult:
        result = rewriter.MatchResult()
        try:
            GridSampleSpec.from_node(y.producer())
        except UnsupportedGridSample as error:
            return result.fail(error.reason, y.producer())
        return result

    def rewrite(self, op, x: ir.Value, grid: ir.Value, y: ir.Value, **_) -> ir.Value:
        node = y.producer()
        spec = GridSampleSpec.from_node(node)
        prefix = node.name or f"GridSample({y.name})"
        return lookup(spec)(Emitter(op, prefix, x), x, grid, spec)


def gridsample_rule() -> rewriter.RewriteRule:
    """The rule, ready for ``onnxscript.rewriter.rewrite`` or a ``RewriteRuleSet``."""
    return GridSampleLowering.rule()
