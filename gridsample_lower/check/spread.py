"""How far a model's own outputs move when its GridSamples' outputs move by their lowered error.

A deep model can turn a GridSample's rounding into a larger error downstream: RAFT at 440x1024
refines its flow through eight correlation lookups, and its lowered outputs differ from the
original's by up to 6e-5 at a few values near 0, past the table's 5e-5, while every GridSample
matches alone within 1.5e-5. Moving each GridSample's output in the original at random by as
much as its lowered form differed alone moves that output as far (5.9-6.0e-5, from moves of
1e-6 or 1.5e-5 alike: the rounding of the layers after it). ``perturbed`` builds that
original; ``spread`` measures the move, which ``Run`` sets against the candidate's
(``tolerances.SPREAD_FACTOR``).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping

import numpy as np
import onnx
from onnx import TensorProto, helper

from gridsample_lower.check.oracle import declared_types
from gridsample_lower.check.report import largest_error
from gridsample_lower.graphs import graphs

__all__ = ["perturbed", "spread"]


def perturbed(model: onnx.ModelProto, nodes: Mapping[str, str]) -> onnx.ModelProto:
    """``model`` with the output of each GridSample named in ``nodes`` moved at random.

    ``nodes`` maps a GridSample's name to the name of a new float32 scalar input of the model:
    its output ``y`` becomes ``y + u * that input``, ``u`` uniform in [-1, 1] (a seed per
    node). In the main graph and in If, Loop and Scan bodies at any depth, which read the input
    from the outer scope; not in functions, which cannot. Only float outputs move (an integer
    X's nearest values are exact).
    """
    moved = onnx.ModelProto()
    moved.CopyFrom(model)
    types = declared_types(model)
    seeds = itertools.count(1)
    for graph in reversed(list(graphs(moved.graph))):  # each body before the graph holding it
        kept = []
        for node in graph.node:
            kept.append(node)
            scale = nodes.get(node.name)
            if node.op_type != "GridSample" or scale is None or not node.output:
                continue
            y = node.output[0]
            if y in types and types[y].kind in "iub":
                continue
            parts = ("exact", "u", "scaled", "cast")
            exact, noise, scaled, cast = (f"{y}/{part}" for part in parts)
            node.output[0] = exact
            kept += [
                helper.make_node("RandomUniformLike", [exact], [noise], dtype=TensorProto.FLOAT,
                                 low=-1.0, high=1.0, seed=float(next(seeds))),
                helper.make_node("Mul", [noise, scale], [scaled]),
                helper.make_node("CastLike", [scaled, exact], [cast]),
                helper.make_node("Add", [exact, cast], [y]),
            ]  # fmt: skip
        copies = [_copy(node) for node in kept]
        del graph.node[:]
        graph.node.extend(copies)
    for scale in dict.fromkeys(nodes.values()):
        moved.graph.input.append(helper.make_tensor_value_info(scale, TensorProto.FLOAT, []))
    return moved


def _copy(node: onnx.NodeProto) -> onnx.NodeProto:
    copy = onnx.NodeProto()
    copy.CopyFrom(node)
    return copy


def spread(expected: np.ndarray, moved: np.ndarray) -> float | None:
    """The largest ``|moved - expected|``; None where it says nothing of rounding.

    A NaN or infinity the move made, or a shape it changed, is no measure of the model's spread.
    """
    want, got = np.asarray(expected), np.asarray(moved)
    if want.shape != got.shape or want.dtype != got.dtype:
        return None
    largest = largest_error(want, got)
    return largest if np.isfinite(largest) else None
