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

import warnings
from collections.abc import Callable

import onnx_ir as ir
from onnxscript import rewriter

from gridsample_lower.lowering.emitter import Emitter
from gridsample_lower.lowering.inventory import lend_inferred_types
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
        warn: bool = True,
    ) -> None:
        super().__init__(name=RULE_NAME)
        self.select = select
        self.target = get_target(target)
        self.planner = planner  # (tests force a plan's forms through it)
        self.warn = warn  # (the pass has already said why, or raised)

    def pattern(self, op, x, grid):
        return op.GridSample(x, grid, _allow_other_attributes=True, _outputs=["y"])

    def check(self, context, x: ir.Value, grid: ir.Value, y: ir.Value, **_) -> rewriter.MatchResult:
        result = rewriter.MatchResult()
        node = y.producer()
        if any(v is not None and (v.type is None or v.shape is None) for v in (x, grid)):
            lend_inferred_types(context.model)  # kept: the rewrite reads the same shapes
        try:
            spec = GridSampleSpec.from_node(node)
        except UnsupportedGridSample as error:
            return self._decline(result, node, error.reason)
        if self.select is not None and not selects(self.select, node, spec):
            return result.fail(f"{spec.label} is not selected", node)  # (asked for: no warning)
        plan = self.planner(spec, node, self.target)
        if plan.refusal:  # decided here, where strict=False can still leave the node in place
            return self._decline(result, node, plan.refusal)
        return result

    def _decline(self, result: rewriter.MatchResult, node: ir.Node, reason: str):
        """Fail the match, and say so: a rule that silently does nothing misleads."""
        if self.warn:
            warnings.warn(f"gridsample_rule left GridSample {node.name!r}: {reason}", stacklevel=2)
        return result.fail(reason, node)

    def rewrite(self, op, x: ir.Value, grid: ir.Value, y: ir.Value, **_) -> ir.Value:
        node = y.producer()
        spec = GridSampleSpec.from_node(node)
        prefix = node.name or f"GridSample({y.name})"
        plan = self.planner(spec, node, self.target)  # as the check made it
        em = Emitter(
            op,
            prefix=prefix,
            x=x,
            grid=grid,
            rank=spec.rank,
            target=self.target,
            flat_points=plan.flat_points,
        )
        if plan.empty:  # Y is empty too. (onnxruntime's optimizer mis-handles the general graph.)
            return em.reshape(x, [em.batch, em.channels, *em.output_dims()])
        return lookup(spec)(em, x, grid, spec, plan)


def gridsample_rule(
    select: Callable[[str, GridSampleSpec], bool] | None = None,
    target: Target | str = "generic",
    *,
    warn: bool = True,
) -> rewriter.RewriteRule:
    """The rule, ready for ``onnxscript.rewriter.rewrite`` or a ``RewriteRuleSet``.

    Inputs without a type or shape get the inferred ones (onnx shape inference on the model).
    A GridSample it cannot lower is left in place with a ``UserWarning`` that says why.

    Args:
        select: If given, only the GridSample nodes it accepts (by name and spec) are lowered.
        target: The target whose ops the lowered graph may use (see ``targets.TARGETS``).
        warn: Warn for each GridSample left in place (not for those ``select`` leaves).
    """
    return GridSampleLowering.rule(select, target, warn=warn)
