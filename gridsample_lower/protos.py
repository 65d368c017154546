"""Walk ONNX protos: a graph (or function) and every subgraph in it, at any depth."""

from __future__ import annotations

from collections.abc import Iterator

import onnx

__all__ = ["graphs"]


def graphs(graph: onnx.GraphProto | onnx.FunctionProto) -> Iterator[onnx.GraphProto]:
    """``graph`` and every subgraph in it, at any depth, parents first."""
    yield graph
    for node in graph.node:
        for attr in node.attribute:
            if attr.HasField("g"):
                yield from graphs(attr.g)
            for sub in attr.graphs:
                yield from graphs(sub)
