"""A model's graphs: every subgraph at any depth, as protos or onnx_ir, and where nodes live."""

from __future__ import annotations

from collections.abc import Iterator

import onnx
import onnx_ir as ir

__all__ = ["graphs", "located_nodes"]


def graphs(graph: onnx.GraphProto | onnx.FunctionProto) -> Iterator[onnx.GraphProto]:
    """``graph`` and every subgraph in it, at any depth, parents first."""
    yield graph
    for node in graph.node:
        for attr in node.attribute:
            if attr.HasField("g"):
                yield from graphs(attr.g)
            for sub in attr.graphs:
                yield from graphs(sub)


def located_nodes(model: ir.Model) -> Iterator[tuple[ir.Node, str, int]]:
    """Every node of the main graph, the functions and their subgraphs, with where it lives.

    Also the default-domain opset there. Locations read "main graph > If 'branch' then_branch"
    or "function domain::name".
    """
    model_opset = model.opset_imports.get("", 1)
    yield from _walk(model.graph, "main graph", model_opset)
    for function in model.functions.values():
        opset = function.opset_imports.get("", model_opset)
        yield from _walk(function, f"function {function.domain}::{function.name}", opset)


def _walk(graph, location: str, opset: int) -> Iterator[tuple[ir.Node, str, int]]:
    for node in graph:
        yield node, location, opset
        for attr in node.attributes.values():
            if attr.is_ref():
                continue
            label = f"{location} > {node.op_type} {node.name or '<unnamed>'!r} {attr.name}"
            if attr.type == ir.AttributeType.GRAPH:
                yield from _walk(attr.value, label, opset)
            elif attr.type == ir.AttributeType.GRAPHS:
                for i, sub in enumerate(attr.value):
                    yield from _walk(sub, f"{label}[{i}]", opset)
