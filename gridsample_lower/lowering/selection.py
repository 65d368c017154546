"""Which GridSample nodes to lower: a target's native set, node names, modes and ranks.

One object answers for the pass, the rule, ``inspect --target`` and the CLI, and says why a
node is kept, so "what would be lowered and why" is never computed twice.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import onnx_ir as ir

from gridsample_lower.lowering.inventory import Site
from gridsample_lower.lowering.targets import TARGETS, Target
from gridsample_lower.spec import GridSampleSpec
from gridsample_lower.text import listed

__all__ = ["Selection", "selects"]


@dataclasses.dataclass(frozen=True)
class Selection:
    """Lower every GridSample except those a filter or the target keeps."""

    target: Target = TARGETS["generic"]
    lower_all: bool = False  # also lower what the target runs natively
    only: frozenset[str] = frozenset()  # node names; empty means all
    skip: frozenset[str] = frozenset()
    modes: frozenset[str] = frozenset()  # empty means all
    ranks: frozenset[int] = frozenset()

    def names(self, name: str) -> bool:
        """Whether the name filters let this node through (all a node without a spec can say)."""
        return (not self.only or name in self.only) and name not in self.skip

    def why_kept(self, name: str, spec: GridSampleSpec, node: ir.Node | None = None) -> str | None:
        """None if the node is to be lowered, else the reason it is kept.

        With the ``node``, the target may judge by its shapes and constant inputs too.
        """
        if not self.names(name):
            return "not named by --only" if name not in self.skip else "named by --skip"
        if self.modes and spec.mode not in self.modes:
            return f"mode {spec.mode} not selected"
        if self.ranks and spec.rank not in self.ranks:
            return f"rank {spec.rank} not selected"
        if not self.lower_all and self.target.keeps(spec, node):
            return f"{self.target.name} runs it natively"
        return None

    def kept_by_target(self, name: str, spec: GridSampleSpec, node: ir.Node | None = None) -> bool:
        """Whether only the target keeps the node: every filter would lower it."""
        chosen = dataclasses.replace(self, lower_all=True)
        return self.why_kept(name, spec, node) is not None and chosen(name, spec, node)

    def __call__(self, name: str, spec: GridSampleSpec, node: ir.Node | None = None) -> bool:
        return self.why_kept(name, spec, node) is None

    def check_matches(self, sites: list[Site]) -> None:
        """Raise ValueError for a filter value no GridSample has: a typo would lower nothing.

        Modes and ranks are judged only where every node's configuration is known.
        """
        names = {site.node.name for site in sites}
        specs = [site.spec for site in sites if site.spec is not None]
        known = len(specs) == len(sites)
        for option, wanted, what, present in (
            ("only", self.only, "named", names),
            ("skip", self.skip, "named", names),
            ("modes", self.modes if known else (), "of mode", {spec.mode for spec in specs}),
            ("ranks", self.ranks if known else (), "of rank", {spec.rank for spec in specs}),
        ):
            missing = sorted(set(wanted) - present)
            if missing:
                raise ValueError(
                    f"{option}: no GridSample {what} {missing[0]!r} in the model "
                    f"(it has: {listed(present)})"
                )


def selects(
    select: Selection | Callable[[str, GridSampleSpec], bool], node: ir.Node, spec: GridSampleSpec
) -> bool:
    """Whether ``select`` lowers ``node``: a Selection sees the node, a function only its name."""
    if isinstance(select, Selection):
        return select.why_kept(node.name, spec, node) is None
    return select(node.name, spec)
