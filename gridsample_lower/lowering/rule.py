"""The onnxscript rewrite rule that replaces one GridSample node by its decomposition.

It matches GridSample whatever its attributes, declines with a reason when the node cannot be
lowered (unknown rank or type, attribute bound to a function parameter, an X too large for the
target's int32 indices, ...): its check builds the node's ``Plan``, where every such
choice is made; otherwise it emits the decomposition registered for the node's
mode. It works on its own with
``onnxscript.rewriter.rewrite(model, [gridsample_rule()])``; ``LowerGridSamplePass`` adds what a
rule cannot do alone (functions, shape inference, naming, a report).
"""

from __future__ import annotations

from collections.abc import Callable

import onnx_ir as ir
from onnxscript import rewriter

from gridsample_lower.lowering.emitter import Emitter
from gridsample_lower.lowering.plan import Plan, node_plan
from gridsample_lower.lowering.registry import lookup
from gridsample_lower.lowering.selection import selects
from gridsample_lower.lowering.targets import Target, get_target
from gridsample_lower.spec import GridSampleSpec, UnsupportedGridSample

__all__ = ["RULE_NAME", "GridSampleLowering", "gridsample_rule"]

RULE_NAME = "LowerGridSample"


class GridSampleLowering(rewriter.RewriteRuleClassBase):
    """GridSample(X, grid) -> primitive ops, for every rank, mode, padding and align_corners.

    With ``select(node name, spec)``, only the nodes it accepts are lowered; the rule declines
    the others.
    """

    def __init__(
        self,
        select: Callable[[str, GridSampleSpec], bool] | None = None,
        target: Target | str = "generic",
        planner: Callable[[GridSampleSpec, ir.Node, Target], Plan] = node_plan,
    ) -> None:
        super().__init__(name=RULE_NAME)
        self.select = select
        self.target = get_target(target)
        self.planner = planner  # (tests force a plan's forms through it)

    def pattern(self, op, x, grid):
        return op.GridSample(x, grid, _allow_other_attributes=True, _outputs=["y"])

    def check(self, context, x: ir.Value, grid: ir.Value, y: ir.Value, **_) -> rewriter.MatchResult:
        result = rewriter.MatchResult()
        try:
            spec = GridSampleSpec.from_node(y.producer())
        except UnsupportedGridSample as error:
            return result.fail(error.reason, y.producer())
        if self.select is not None and not selects(self.select, y.producer(), spec):
            return result.fail(f"{spec.label} is not selected", y.producer())
        plan = self.planner(spec, y.producer(), self.target)
        if plan.refusal:  # decided here, where strict=False can still leave the node in place
            return result.fail(plan.refusal, y.producer())
        return result

    def rewrite(self, op, x: ir.Value, grid: ir.Value, y: ir.Value, **_) -> ir.Value:
        node = y.producer()
        spec = GridSampleSpec.from_node(node)
        prefix = node.name or f"GridSample({y.name})"
        plan = self.planner(spec, node, self.target)  # as the check made it
        em = Emitter(op, prefix=prefix, x=x, grid=grid, rank=spec.rank, target=self.target)
        if plan.empty:  # Y is empty too. (onnxruntime's optimizer mis-handles the general graph.)
            return em.reshape(x, [em.batch, em.channels, *em.output_dims()])
        return lookup(spec)(em, x, grid, spec, plan)


def gridsample_rule(
    select: Callable[[str, GridSampleSpec], bool] | None = None,
    target: Target | str = "generic",
) -> rewriter.RewriteRule:
    """The rule, ready for ``onnxscript.rewriter.rewrite`` or a ``RewriteRuleSet``.

    Args:
        select: If given, only the GridSample nodes it accepts (by name and spec) are lowered.
        target: The target whose ops the lowered graph may use (see ``targets.TARGETS``).
    """
    return GridSampleLowering.rule(select, target)
