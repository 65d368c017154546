"""Which forms a lowered region picks at run time, and from which size: the check runs each.

The onnxruntime target's regions may hold an If on a size: X's values a channel (masked taps
or a ring, ``Plan.small_x``), a grid's points a sample (tiles or one piece,
``Plan.tiles_from``), a deformable attention's queries (``costs.attention_tiles``). The check
runs the form its values take and the other one, on inputs grown or cut to reach it.
"""

from __future__ import annotations

import onnx
from onnx import numpy_helper

__all__ = ["OTHER_FORM_MAX_VALUES", "repeats_to_switch", "switches"]

OTHER_FORM_MAX_VALUES = 2**24  # inputs grown to take a region's other form, at most


def switches(nodes: list[onnx.NodeProto]) -> dict[str, int]:
    """From which size each of the region's Ifs takes its first branch, by the input it sizes.

    ``If(GreaterOrEqual(size, Constant))``: X's values a channel (``registry.decompose``'s
    masked taps) or the grid's points a sample (``point_tiles``), the size read by a Shape of
    X or of the grid (a deformable attention's: its queries, ``attention_tiles``); in the
    region, its Ifs' branches, or the body of the Loop it may run in (``plan.fenced``). The
    check runs every form the candidate has.
    """
    every = [node for graph in _graphs_of(nodes) for node in graph]
    made = {output: node for node in every for output in node.output}
    found: dict[str, int] = {}
    for node in every:
        condition = made.get(node.input[0]) if node.op_type == "If" else None
        if condition is None or condition.op_type != "GreaterOrEqual":
            continue
        bound, sized = made.get(condition.input[1]), _sized(condition.input[0], made)
        if bound is not None and bound.op_type == "Constant" and sized is not None:
            value = int(numpy_helper.to_array(bound.attribute[0].t).reshape(-1)[0])
            found.setdefault(sized, value)
    return found


def repeats_to_switch(size: int, at: int, values: int) -> int | None:
    """How to run the other form of an If on ``size`` (points, queries) that switches ``at``.

    0: ``size`` takes the tiles already, so cut the inputs to one; else how many times to
    repeat them to reach ``at``; None where that passes ``OTHER_FORM_MAX_VALUES`` (``values``
    now) or nothing can be repeated.
    """
    if size >= at:
        return 0
    repeats = -(-at // max(size, 1))
    return None if size == 0 or values * repeats > OTHER_FORM_MAX_VALUES else repeats


def _graphs_of(nodes: list[onnx.NodeProto]):
    """``nodes``, then the nodes of their subgraphs at any depth."""
    yield nodes
    for node in nodes:
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.GRAPH:
                yield from _graphs_of(list(attribute.g.node))


def _sized(value: str, made: dict[str, onnx.NodeProto]) -> str | None:
    """The input whose Shape ``value`` is computed from, or None."""
    seen, stack = set(), [value]
    while stack:
        name = stack.pop()
        node = made.get(name)
        if node is None or name in seen:
            continue
        seen.add(name)
        if node.op_type == "Shape":
            return node.input[0]
        stack.extend(node.input)
    return None
