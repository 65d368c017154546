"""``LowerGridSamplePass``: every GridSample in a model, lowered to primitive ops.

The pass does what the rewrite rule cannot do alone: it inlines the calls of model-local
functions that contain a GridSample (call-site attributes and defaults honoured, so the mode is
known and the rank can be inferred), gives unnamed GridSample nodes a name to prefix their
lowered nodes with, lends inferred shapes to inputs that carry none, replaces each selected
node in the main graph, its subgraphs and functions by what ``decompose`` emits (as the rule
does), and reports what it lowered.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import gc
import threading
from collections.abc import Callable, Iterator

import onnx_ir as ir
from onnx_ir.passes.common import InlinePass

from gridsample_lower.lowering.attention import (
    DeformableAttention,
    attentions_to_fuse,
    lower_attention,
    selected_attentions,
)
from gridsample_lower.lowering.emitter import NodeRecorder
from gridsample_lower.lowering.functions import call_functions, untype_functions
from gridsample_lower.lowering.inventory import (
    Site,
    find_gridsamples,
    inferred_types,
    is_gridsample,
    name_unnamed,
)
from gridsample_lower.lowering.native_taps import READER_KEY
from gridsample_lower.lowering.plan import in_float32_tail, node_plan
from gridsample_lower.lowering.registry import decompose
from gridsample_lower.lowering.selection import Selection, selects
from gridsample_lower.lowering.targets import Target, get_target
from gridsample_lower.spec import GridSampleSpec, UnsupportedGridSample

__all__ = ["LowerGridSamplePass", "LoweringResult", "cyclic_gc_paused"]


@dataclasses.dataclass
class LoweringResult(ir.passes.PassResult):
    """A PassResult that also counts the lowered nodes per configuration label."""

    lowered: dict[str, int] = dataclasses.field(default_factory=dict)
    # Each deformable attention lowered as one unit: its name, and its GridSamples' names.
    attentions: dict[str, list[str]] = dataclasses.field(default_factory=dict)


class LowerGridSamplePass(ir.passes.InPlacePass):
    """Replace every GridSample (graph, subgraphs, functions) by primitive standard ops.

    Raises UnsupportedGridSample, naming the node and the reason, if one cannot be lowered
    (unsupported, or an X too large for the target's int32 indices: ``index_range``); with
    ``strict=False`` such nodes are left in place instead. With ``select``, only the nodes
    whose spec it accepts are lowered (after functions holding a GridSample are inlined); nodes
    it cannot judge, having no spec, are left in place too. A ``Selection`` naming a node, mode
    or rank that no GridSample has raises ValueError.
    """

    def __init__(
        self,
        *,
        strict: bool = True,
        select: Callable[[str, GridSampleSpec], bool] | None = None,
        target: Target | str = "generic",
        as_functions: bool = False,
        float32_tail: bool = True,
    ) -> None:
        super().__init__()
        self.strict = strict
        self.select = select
        self.target = get_target(target)
        self.as_functions = as_functions
        # Nodes whose output reaches the model's through the target's float32 tail are planned
        # as such (``Target.float32_tail``); not in a function's body, whose outputs may feed
        # anything.
        self.float32_tail = float32_tail

    def call(self, model: ir.Model) -> LoweringResult:
        with cyclic_gc_paused():
            return self._lower(model)

    def _lower(self, model: ir.Model) -> LoweringResult:
        name_unnamed(model, find_gridsamples(model))
        inlined = _inline_functions_with_gridsample(model)
        with inferred_types(model):
            found = find_gridsamples(model)
            if isinstance(self.select, Selection):
                self.select.check_matches(found)
            attentions: list[DeformableAttention] = []  # (lowered as one unit)
            judged = [(site, self._refusal(site)) for site in found if self._selected(site)]
            problems = [(site, reason) for site, reason in judged if reason]
            if problems and self.strict:
                raise UnsupportedGridSample(problems[0][0].name, problems[0][1])
            sites = [site for site, reason in judged if not reason]  # the rest stay in place
            if self.as_functions:
                # a body's one node: all of it
                body = LowerGridSamplePass(target=self.target, float32_tail=False)
                count = call_functions(model, sites, lambda one: body(one).model)
            else:
                attentions = self._attentions(found, {s.node: why for s, why in judged})
                _lower_attentions(attentions, self.target)
                joined = {node for attention in attentions for node in attention.samplers}
                taken = {site.node for site in sites}
                sites += [site for site in found if site.node in joined - taken]  # (kept alone)
                alone = [site for site in sites if site.node not in joined]
                _lower_sites(alone, self.target, self.float32_tail)
                count = len(sites)
        untype_functions(model)
        lowered = collections.Counter(site.spec.label for site in sites)
        return LoweringResult(
            model,
            modified=bool(count or inlined),
            lowered=dict(lowered),
            attentions={a.name: [n.name for n in a.samplers] for a in attentions},
        )

    def _refusal(self, site: Site) -> str:
        """Why the rule declines this selected node, or "" (as ``GridSampleLowering.check``).

        It has no spec, or its X is too large for the target's int32 indices.
        """
        if site.spec is None:
            return site.problem or "unsupported"
        return node_plan(site.spec, site.node, self.target).refusal

    def _attentions(self, found: list[Site], judged: dict) -> list[DeformableAttention]:
        """The attentions lowered as one unit (``selected_attentions``).

        Of the nodes lowered, and of those only the target keeps where one unit runs them
        faster. ``judged``: each selected node's refusal, "" where it is lowered.
        """
        if not self.target.fuses_attention:
            return []
        if not isinstance(self.select, Selection):
            lowered = {node for node, why in judged.items() if not why}
            return attentions_to_fuse(found, self.target, lowered)

        def refused(site: Site) -> bool:  # (a kept node's plan is made here, once)
            why = judged[site.node] if site.node in judged else self._refusal(site)
            return bool(why)

        return selected_attentions(found, self.select, refused)

    def _selected(self, site: Site) -> bool:
        if self.select is None:
            return True
        if site.spec is None:  # a Selection still reports it (strict); other filters skip it
            return isinstance(self.select, Selection) and self.select.names(site.node.name)
        return selects(self.select, site.node, site.spec)


_gc_lock = threading.Lock()
_gc_pauses = 0  # how many lowerings, in any thread, are running with the collector paused
_gc_was_enabled = False


@contextlib.contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while a lowering builds its nodes.

    Tens of thousands of new graph objects trigger collections that scan them all again: a
    third of the time lowering 500 GridSamples (2.5-3.0 vs 1.9 s). The pause is process-wide;
    cycles made meanwhile wait for the next collection (the peak memory of that lowering did
    not change: 237 MB either way). The collector is restored as it was when the last
    concurrent lowering ends, so a caller's own ``gc.disable()`` is kept.
    """
    global _gc_pauses, _gc_was_enabled
    paused = False
    try:
        with _gc_lock:
            if _gc_pauses == 0:
                _gc_was_enabled = gc.isenabled()
                gc.disable()
            _gc_pauses += 1
            paused = True
        yield
    finally:
        with _gc_lock:
            _gc_pauses -= paused
            if paused and _gc_pauses == 0 and _gc_was_enabled:
                gc.enable()


def _lower_sites(sites: list[Site], target: Target, tails: bool) -> None:
    """Replace each site's node by its decomposition, in the node's own graph or function.

    ``decompose`` emits it, as for the rule, into a ``NodeRecorder``: onnxscript's
    ``apply_to_model`` would try the rule's pattern on every node, the new ones too (36,968
    tries for 500 GridSamples), and build each node through its schema-aware builder, where
    the sites are known and selected, and the plan has refused what cannot be lowered. The
    original node's metadata (an exporter's source location, say) goes to every node that
    replaces it, as the rewriter does. ``tails``: plan the nodes in the target's float32 tail
    as such.
    """
    for site in sites:
        node, recorder = site.node, NodeRecorder()
        tail = tails and in_float32_tail(site, target)
        y = decompose(recorder, node, target, functools.partial(node_plan, tail=tail))
        nodes = recorder.live([y])
        for new in nodes:
            new.metadata_props.update(node.metadata_props)
            new.metadata_props.pop(READER_KEY, None)  # (the rule's mark; the sites are known)
        ir.convenience.replace_nodes_and_values(node.graph, node, [node], nodes, node.outputs, [y])


def _lower_attentions(attentions: list[DeformableAttention], target: Target) -> None:
    """Replace each deformable attention's nodes by its lowering as one unit.

    The new nodes go after the weighting Mul, which follows every input they read. Nodes
    that only computed the replaced ones' inputs (TorchScript's shape of the stack, sliced
    for the Reshape) are removed; a graph whose stack shape still has readers is sorted.
    """
    for attention in attentions:
        recorder = NodeRecorder()
        replaced = lower_attention(recorder, attention, target)
        mul = attention.nodes[-2]
        graph = mul.graph
        nodes = recorder.live(list(replaced.values()))
        for new in nodes:  # (an exporter's source location, say)
            new.metadata_props.update(attention.samplers[0].metadata_props)
        inputs = {v for node in attention.nodes for v in node.inputs if v is not None}
        ir.convenience.replace_nodes_and_values(
            graph, mul, list(attention.nodes), nodes, list(replaced), list(replaced.values())
        )
        _remove_unused({v.producer() for v in inputs}, graph)
        if any(replaced[v].uses() for v in attention.shapes):  # read before the Mul
            graph.sort()


def _remove_unused(candidates: set, graph) -> None:
    """Remove ``candidates`` (and what only they read) whose outputs nothing reads any more."""
    pending = [n for n in candidates if n is not None and n.graph is graph]
    while pending:
        node = pending.pop()
        if node.graph is not graph or any(o.uses() or o.is_graph_output() for o in node.outputs):
            continue
        producers = {v.producer() for v in node.inputs if v is not None}
        graph.remove(node, safe=True)
        pending.extend(p for p in producers if p is not None)


def _inline_functions_with_gridsample(model: ir.Model) -> bool:
    """Inline calls of functions that contain a GridSample, directly or through other calls."""
    functions = model.functions
    holds = {
        fid: any(is_gridsample(n) for n in ir.traversal.RecursiveGraphIterator(f))
        for fid, f in functions.items()
    }
    changed = True
    while changed:  # a function calling one that holds a GridSample holds one too
        changed = False
        for fid, function in functions.items():
            if not holds[fid] and any(
                holds.get(n.op_identifier(), False)
                for n in ir.traversal.RecursiveGraphIterator(function)
            ):
                holds[fid] = changed = True
    if not any(holds.values()):
        return False
    return InlinePass(criteria=lambda f: holds[f.identifier()])(model).modified
