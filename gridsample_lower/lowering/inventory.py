"""Find every GridSample in a model and describe it: where it lives, its opset, its spec.

Used by ``inspect``, by the pass to name and type nodes before lowering, and by the verifier.
Subgraph values often carry no type; ``inferred_types`` runs ONNX shape inference on a copy and
lends the inferred types to GridSample inputs for as long as they are needed.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator

import onnx
import onnx_ir as ir

from gridsample_lower.graphs import located_nodes
from gridsample_lower.runtime import onnxruntime_runs
from gridsample_lower.spec import (
    OPSET16_SPELLING,
    GridSampleSpec,
    UnsupportedGridSample,
    spelling_matches_opset,
)

__all__ = [
    "Site",
    "find_gridsamples",
    "inferred_types",
    "is_gridsample",
    "lend_inferred_types",
    "name_unnamed",
    "type_text",
]


def is_gridsample(node: ir.Node) -> bool:
    return node.op_type == "GridSample" and node.domain in ("", "ai.onnx")


@dataclasses.dataclass
class Site:
    """One GridSample node and what we know about it."""

    node: ir.Node
    location: str
    opset: int
    spec: GridSampleSpec | None = None
    problem: str | None = None
    x_type: str = "?"
    grid_type: str = "?"

    @property
    def name(self) -> str:
        return self.node.name or "<unnamed>"

    @property
    def spelling_ok(self) -> bool:
        return spelling_matches_opset(self.node, self.opset)

    def reaches_output_through(self, ops: frozenset[str]) -> bool:
        """Whether a path leads from the node's output to a model output through ``ops`` alone.

        Only in the main graph (a body's outputs are not the model's); an op of another
        domain, or one holding a subgraph, ends a path.
        """
        if self.location != "main graph" or not ops:
            return False
        seen: set[ir.Value] = set()
        todo = list(self.node.outputs)
        while todo:
            value = todo.pop()
            if value in seen:
                continue
            seen.add(value)
            if value.is_graph_output():
                return True
            for user, _ in value.uses():
                if user.domain in ("", "ai.onnx") and user.op_type in ops:
                    todo.extend(user.outputs)
        return False

    def describe(self) -> dict[str, object]:
        """A record for ``inspect``: stable keys, each always of one JSON type (or null).

        ``mode`` is spelled as stored (bilinear at opset 16, the opset's default if absent);
        ``spelling_ok`` is False where it is spelled for the other side of opset 20.
        """
        spec = self.spec
        attrs = {k: self.node.attributes.get(k) for k in ("mode", "padding_mode", "align_corners")}
        return {
            "name": self.name,
            "location": self.location,
            "opset": self.opset,
            "rank": spec.rank if spec else None,
            "mode": _stored(
                attrs["mode"], OPSET16_SPELLING["linear"] if self.opset < 20 else "linear"
            ),
            "padding_mode": _stored(attrs["padding_mode"], "zeros"),
            "align_corners": spec.align_corners if spec else _stored_int(attrs["align_corners"]),
            "X": self.x_type,
            "grid": self.grid_type,
            "onnxruntime_native": bool(spec and onnxruntime_runs(spec) and self.spelling_ok),
            "lowerable": spec is not None,
            "spelling_ok": self.spelling_ok,
            "problem": self.problem
            or ("" if self.spelling_ok else "mode spelled for another opset"),
        }


def find_gridsamples(model: ir.Model, *, infer: bool = False) -> list[Site]:
    """Every GridSample in the main graph, its subgraphs at any depth, and model-local functions.

    With ``infer``, inputs without a type or shape are described with inferred ones.
    """
    if infer:
        with inferred_types(model):
            return find_gridsamples(model)
    sites = [
        Site(node, location, node.version or opset)
        for node, location, opset in located_nodes(model)
        if is_gridsample(node)
    ]
    for site in sites:
        site.x_type, site.grid_type = (type_text(v) for v in site.node.inputs[:2])
        try:
            site.spec = GridSampleSpec.from_node(site.node)
        except UnsupportedGridSample as error:
            site.problem = error.reason
    return sites


@contextlib.contextmanager
def inferred_types(model: ir.Model) -> Iterator[None]:
    """Lend inferred types and shapes to GridSample inputs that have none, then take them back."""
    lent = lend_inferred_types(model)
    try:
        yield
    finally:
        for value, old_type, old_shape in lent:
            value.type, value.shape = old_type, old_shape


def lend_inferred_types(model: ir.Model) -> list[tuple[ir.Value, object, object]]:
    """Give GridSample inputs that have no type or shape the inferred ones; returns what was."""
    nodes = [
        node for node in ir.traversal.RecursiveGraphIterator(model.graph) if is_gridsample(node)
    ]
    untyped = {
        v
        for n in nodes
        for v in n.inputs[:2]
        if v is not None and (v.type is None or v.shape is None)
    }
    lent: list[tuple[ir.Value, ir.TypeProtocol | None, ir.Shape | None]] = []
    if untyped:
        for node, infos in zip(nodes, _inferred_inputs(model), strict=True):
            for value, info in zip(node.inputs[:2], infos, strict=True):
                if value in untyped and info is not None:
                    source = ir.serde.deserialize_value_info_proto(info, None)
                    lent.append((value, value.type, value.shape))
                    value.type = value.type or source.type
                    value.shape = value.shape or source.shape
                    untyped.discard(value)
    return lent


def _inferred_inputs(model: ir.Model) -> list[list[onnx.ValueInfoProto | None]]:
    """Each GridSample's first two inputs as ONNX shape inference types them.

    In ``RecursiveGraphIterator``'s order, each name looked up in its graph, then in the
    enclosing ones. Read from the inferred proto rather than from a model deserialized from
    it: deserializing it all took a third of the time of lowering the corpus' exports, which
    carry no value_info.
    """
    proto = ir.serde.serialize_model(model)
    try:
        proto = onnx.shape_inference.infer_shapes(proto, data_prop=True)
    except Exception:  # noqa: BLE001  (inference is best effort; the spec says what is missing)
        pass
    found: list[list[onnx.ValueInfoProto | None]] = []

    def walk(graph: onnx.GraphProto, scopes: list[dict[str, onnx.ValueInfoProto]]) -> None:
        scopes = [{i.name: i for i in (*graph.input, *graph.output, *graph.value_info)}, *scopes]
        for node in graph.node:
            if is_gridsample(node):  # (a NodeProto has the same two fields)
                found.append([next((s[n] for s in scopes if n in s), None) for n in node.input[:2]])
            for attr in node.attribute:
                for sub in [attr.g] if attr.type == onnx.AttributeProto.GRAPH else attr.graphs:
                    walk(sub, scopes)

    walk(proto.graph, [])
    return found


def type_text(value: ir.Value | None) -> str:
    """``float32[N,3,64,64]``; symbolic dims by name, unknown ones as ``?``."""
    if value is None:
        return "-"
    dtype = value.dtype.name.lower() if value.dtype is not None else "?"
    if value.shape is None:
        return f"{dtype}[?]"
    dims = [str(d) if isinstance(d, int) else (d.value or "?") for d in value.shape]
    return f"{dtype}[{','.join(dims)}]"


def _stored(attr: ir.Attr | None, default: str) -> str:
    """An attribute's text as stored: the default if absent, @name if a function's parameter."""
    if attr is None:
        return default
    return f"@{attr.ref_attr_name}" if attr.is_ref() else str(attr.value)


def _stored_int(attr: ir.Attr | None) -> int | None:
    if attr is None:
        return 0
    return None if attr.is_ref() or not isinstance(attr.value, int) else attr.value


def name_unnamed(model: ir.Model, sites) -> None:
    """Give unnamed GridSample nodes a unique name: their lowered nodes are prefixed with it.

    The pass and the verifier both call it, so they name nodes alike.
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
