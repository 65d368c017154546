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

from collections.abc import Mapping

import numpy as np
import onnx
from onnx import TensorProto, helper

from gridsample_lower.check.oracle import declared_types
from gridsample_lower.check.report import largest_error

__all__ = ["perturbed", "spread"]


def perturbed(model: onnx.ModelProto, nodes: Mapping[str, str]) -> onnx.ModelProto:
    """``model`` with the output of each GridSample named in ``nodes`` moved at random.

    ``nodes`` maps a main-graph GridSample's name to the name of a new float32 scalar input:
    its output ``y`` becomes ``y + u * that input``, ``u`` uniform in [-1, 1] (a seed per node).
    Only float outputs move (an integer X's nearest values are exact).
    """
    moved = onnx.ModelProto()
    moved.CopyFrom(model)
    types = declared_types(model)
    kept = []
    for original in model.graph.node:
        node = onnx.NodeProto()
        node.CopyFrom(original)
        kept.append(node)
        scale = nodes.get(node.name)
        if node.op_type != "GridSample" or scale is None or not node.output:
            continue
        y = node.output[0]
        if y in types and types[y].kind in "iub":
            continue
        exact, noise, scaled, cast = (f"{y}/{part}" for part in ("exact", "u", "scaled", "cast"))
        node.output[0] = exact
        kept += [
            helper.make_node("RandomUniformLike", [exact], [noise], dtype=TensorProto.FLOAT,
                             low=-1.0, high=1.0, seed=float(len(kept))),
            helper.make_node("Mul", [noise, scale], [scaled]),
            helper.make_node("CastLike", [scaled, exact], [cast]),
            helper.make_node("Add", [exact, cast], [y]),
        ]  # fmt: skip
        moved.graph.input.append(helper.make_tensor_value_info(scale, TensorProto.FLOAT, []))
    del moved.graph.node[:]
    moved.graph.node.extend(kept)
    return moved


def spread(expected: np.ndarray, moved: np.ndarray) -> float | None:
    """The largest ``|moved - expected|``; None where it says nothing of rounding.

    A NaN or infinity the move made, or a shape it changed, is no measure of the model's spread.
    """
    want, got = np.asarray(expected), np.asarray(moved)
    if want.shape != got.shape or want.dtype != got.dtype:
        return None
    largest = largest_error(want, got)
    return largest if np.isfinite(largest) else None
