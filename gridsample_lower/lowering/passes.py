"""``LowerGridSamplePass`` and ``lower()``: every GridSample in a model, lowered to primitive ops.

The pass does what the rewrite rule cannot do alone: it inlines the calls of model-local
functions that contain a GridSample (call-site attributes and defaults honoured, so the mode is
known and the rank can be inferred), gives unnamed GridSample nodes a name to prefix their
lowered nodes with, lends inferred shapes to inputs that carry none, applies the rule to the
main graph and every subgraph, and reports what it lowered.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import gc
import numbers
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

import onnx
import onnx_ir as ir
from onnx_ir.passes.common import InlinePass
from onnxscript import rewriter

from gridsample_lower.lowering.functions import call_functions, untype_functions
from gridsample_lower.lowering.index_range import node_index_refusal
from gridsample_lower.lowering.inventory import (
    Site,
    find_gridsamples,
    inferred_types,
    is_gridsample,
)
from gridsample_lower.lowering.rule import RULE_NAME, gridsample_rule
from gridsample_lower.lowering.selection import Selection, selects
from gridsample_lower.lowering.spec import MODE_NAMES, GridSampleSpec, UnsupportedGridSample
from gridsample_lower.lowering.targets import Target, get_target
from gridsample_lower.protos import graphs

__all__ = [
    "LowerGridSamplePass",
    "LoweringResult",
    "expect_model",
    "lower",
    "lower_with_report",
    "selection_of",
]

ModelT = TypeVar("ModelT", onnx.ModelProto, ir.Model)


@dataclasses.dataclass
class LoweringResult(ir.passes.PassResult):
    """A PassResult that also counts the lowered nodes per configuration label."""

    lowered: dict[str, int] = dataclasses.field(default_factory=dict)


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
    ) -> None:
        super().__init__()
        self.strict = strict
        self.select = select
        self.target = get_target(target)
        self.as_functions = as_functions

    def call(self, model: ir.Model) -> LoweringResult:
        with cyclic_gc_paused():
            return self._lower(model)

    def _lower(self, model: ir.Model) -> LoweringResult:
        name_unnamed(model, find_gridsamples(model))
        inlined = _inline_functions_with_gridsample(model)
        with inferred_types(model):
            sites = find_gridsamples(model)
            if isinstance(self.select, Selection):
                self.select.check_matches(sites)
            judged = [(site, self._refusal(site)) for site in sites if self._selected(site)]
            problems = [(site, reason) for site, reason in judged if reason]
            if problems and self.strict:
                raise UnsupportedGridSample(problems[0][0].name, problems[0][1])
            sites = [site for site, reason in judged if not reason]  # the rest stay in place
            if self.as_functions:
                body = LowerGridSamplePass(target=self.target)  # a body's one node: all of it
                count = call_functions(model, sites, lambda one: body(one).model)
            else:
                count = _apply_rule(model, self.select, self.target)
        untype_functions(model)
        lowered = collections.Counter(site.spec.label for site in sites)
        if count != sum(lowered.values()):
            left = [s.name for s in find_gridsamples(model)]
            raise UnsupportedGridSample(left[0] if left else "?", "the rewrite rule declined it")
        return LoweringResult(model, modified=bool(count or inlined), lowered=dict(lowered))

    def _refusal(self, site: Site) -> str:
        """Why the rule declines this selected node, or "" (as ``GridSampleLowering.check``).

        It has no spec, or its X is too large for the target's int32 indices.
        """
        if site.spec is None:
            return site.problem or "unsupported"
        return node_index_refusal(site.spec, site.node, self.target)

    def _selected(self, site: Site) -> bool:
        if self.select is None:
            return True
        if site.spec is None:  # a Selection still reports it (strict); other filters skip it
            return isinstance(self.select, Selection) and self.select.names(site.node.name)
        return selects(self.select, site.node, site.spec)


def lower(
    model: ModelT,
    *,
    target: Target | str = "generic",
    lower_all: bool = False,
    only: Iterable[str] = (),
    skip: Iterable[str] = (),
    modes: Iterable[str] = (),
    ranks: Iterable[int] = (),
    index_dtype: ir.DataType | str | None = None,
    as_functions: bool = False,
    strict: bool = True,
) -> ModelT:
    """Lower the GridSample nodes of ``model``; returns a new model of the same kind.

    Args:
        model: ``onnx.ModelProto`` or ``onnx_ir.Model``; it is not modified.
        target: A name from ``TARGETS`` (or a ``Target``): the ops the lowered graph may use,
            its index type, and the configurations it runs natively, which are kept.
        lower_all: Lower what the target runs natively too.
        only: Node names to lower exclusively (empty: all); a bare str is one name.
        skip: Node names to leave alone.
        modes: Lower only these modes (empty: all): linear, nearest, cubic, or their
            opset-16 names bilinear, bicubic; a bare str is one mode.
        ranks: Lower only these spatial ranks, ints >= 1 (empty: all).
        index_dtype: int32 or int64 gather indices ("int32", ``onnx_ir.DataType.INT32`` or
            ``onnx.TensorProto.INT32``), overriding the target's choice; int32 with symbolic
            sizes promises that they stay below 2**31 elements.
        as_functions: Emit each configuration once as a model-local function (domain
            ``gridsample_lower``) and call it, instead of inlining the ops at every node.
        strict: Raise ``UnsupportedGridSample`` for a selected node that cannot be lowered;
            otherwise leave it.

    Raises:
        TypeError: ``model`` or a choice of the wrong type (a path for the model, say).
        ValueError: An unknown target, mode or index type, a rank below 1, or a name, mode
            or rank in ``only``, ``skip``, ``modes``, ``ranks`` that no GridSample has.
        UnsupportedGridSample: A selected node cannot be lowered (with ``strict``).
    """
    return lower_with_report(
        model,
        target=target,
        lower_all=lower_all,
        only=only,
        skip=skip,
        modes=modes,
        ranks=ranks,
        index_dtype=index_dtype,
        as_functions=as_functions,
        strict=strict,
    )[0]


def lower_with_report(
    model: ModelT, *, strict: bool = True, as_functions: bool = False, **choices
) -> tuple[ModelT, dict[str, int]]:
    """``lower``, plus the count of lowered nodes per configuration label."""
    expect_model(model, "lower")
    selection = selection_of(**choices)
    is_proto = isinstance(model, onnx.ModelProto)
    proto = model if is_proto else ir.serde.serialize_model(model)
    lowering = LowerGridSamplePass(
        strict=strict, select=selection, target=selection.target, as_functions=as_functions
    )
    with cyclic_gc_paused():
        result = lowering(ir.serde.deserialize_model(proto))
        if not is_proto:
            return result.model, result.lowered
        out = ir.serde.serialize_model(result.model)
    _drop_new_value_info(out, {info.name for g in _graphs(proto) for info in g.value_info})
    return out, result.lowered


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


def _drop_new_value_info(model: onnx.ModelProto, kept: set[str]) -> None:
    """Keep only the value_info the input had.

    onnx_ir writes the types it knows for initializers, constants and lowered values, which
    would change the model's bytes for nothing.
    """
    for graph in _graphs(model):
        entries = [info for info in graph.value_info if info.name in kept]
        if len(entries) != len(graph.value_info):
            del graph.value_info[:]
            graph.value_info.extend(entries)


def _graphs(model: onnx.ModelProto):
    """The main graph, the functions, and their subgraphs at any depth."""
    for root in (model.graph, *model.functions):
        yield from graphs(root)


def selection_of(
    *,
    target: Target | str = "generic",
    lower_all: bool = False,
    only: Iterable[str] = (),
    skip: Iterable[str] = (),
    modes: Iterable[str] = (),
    ranks: Iterable[int] = (),
    index_dtype: ir.DataType | str | None = None,
) -> Selection:
    """The Selection for ``lower``'s keyword arguments (the CLI passes the same ones)."""
    chosen = get_target(target)
    if index_dtype is not None:
        chosen = dataclasses.replace(chosen, index_dtype=_index_dtype(index_dtype))
    modes, ranks = _items(modes, "modes", str), _items(ranks, "ranks", numbers.Integral)
    unknown = [mode for mode in modes if mode not in MODE_NAMES]
    if unknown:
        raise ValueError(f"unknown mode {unknown[0]!r}; expected one of {', '.join(MODE_NAMES)}")
    if any(rank < 1 for rank in ranks):
        raise ValueError(f"ranks must be at least 1, not {min(ranks)}")
    return Selection(
        chosen,
        lower_all,
        frozenset(_items(only, "only", str)),
        frozenset(_items(skip, "skip", str)),
        frozenset(MODE_NAMES[mode] for mode in modes),
        frozenset(int(rank) for rank in ranks),
    )


def expect_model(model, function: str) -> None:
    """Raise TypeError for what is not a model: a path would fail deep inside, unclearly."""
    if not isinstance(model, onnx.ModelProto | ir.Model):
        raise TypeError(
            f"{function} expects an onnx.ModelProto or an onnx_ir.Model, not "
            f"{type(model).__name__} (read a file with onnx.load or model_io.load_model)"
        )


def _items(values, what: str, kind: type) -> tuple:
    """``values`` as a tuple of ``kind``; a bare one is one item (a str, not its characters)."""
    try:
        values = (values,) if isinstance(values, str) else tuple(values)
    except TypeError:
        values = (values,)
    wrong = [v for v in values if isinstance(v, bool) or not isinstance(v, kind)]
    if wrong:
        name = "int" if kind is numbers.Integral else kind.__name__
        raise TypeError(f"{what}: expected {name} values, got {type(wrong[0]).__name__}")
    return values


def _index_dtype(value: ir.DataType | str | int) -> ir.DataType:
    """int32 or int64 as a name, an ``ir.DataType`` or an ``onnx.TensorProto`` number."""
    if isinstance(value, str):
        dtype = ir.DataType.__members__.get(value.upper())
    elif isinstance(value, int) and not isinstance(value, bool):
        dtype = value  # onnx.TensorProto.INT32 == ir.DataType.INT32
    else:
        raise TypeError(f"index_dtype must be a str or a data type, not {type(value).__name__}")
    if dtype not in (ir.DataType.INT32, ir.DataType.INT64):
        raise ValueError(f"index_dtype must be int32 or int64, not {value!r}")
    return ir.DataType(dtype)


def _apply_rule(
    model: ir.Model, select: Callable[[str, GridSampleSpec], bool] | None, target: Target
) -> int:
    """Apply the rule everywhere, keeping other nodes' names as they were.

    ``apply_to_model`` ends with a NameFixPass that names every unnamed node in the model;
    the names it gives nodes we did not create are taken back. It also tags every new node
    with the rule's name in metadata; the node names already say where a node came from, so
    the tags (a third of a lowered model's bytes) are dropped.
    """
    roots = [model.graph, *model.functions.values()]
    unnamed = [n for r in roots for n in ir.traversal.RecursiveGraphIterator(r) if not n.name]
    count = rewriter.RewriteRuleSet([gridsample_rule(select, target)]).apply_to_model(model)
    for node in unnamed:
        node.name = ""
    for root in roots:
        for node in ir.traversal.RecursiveGraphIterator(root):
            if node.metadata_props.get(rewriter.RULE_NAME_TAG) == RULE_NAME:
                del node.metadata_props[rewriter.RULE_NAME_TAG]
    return count


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


def name_unnamed(model: ir.Model, sites) -> None:
    """Give unnamed GridSample nodes a unique name: their lowered nodes are prefixed with it.

    Public so the verifier names nodes exactly as the pass does.
    """
    graphs = [model.graph, *model.functions.values()]
    taken = {n.name for g in graphs for n in ir.traversal.RecursiveGraphIterator(g) if n.name}
    k = 0
    for site in sites:
        if not site.node.name:
            while f"GridSample_{k}" in taken:
                k += 1
            site.node.name = f"GridSample_{k}"
            taken.add(site.node.name)
