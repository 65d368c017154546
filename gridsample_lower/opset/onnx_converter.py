"""Run onnx's version converter on a whole model without losing what it drops.

``onnx.version_converter`` converts ops in both directions, If/Loop/Scan bodies included, but it
drops model-local functions and node metadata, writes inferred value_info, ruins attributes bound
to function parameters, and has no downward adapter for GridSample, ConstantOfShape (20 -> 19),
Split and Pad (18 -> 17). (onnxscript's converter only goes upward from opset 18 and inlines every
function.) Here the main graph and each function body are converted on their own, with the nodes
the converter cannot handle parked in a private domain and adapted here instead; what it dropped
or added is put back as it was. GridSample comes back unchanged: the caller respells its mode.
"""

from __future__ import annotations

import dataclasses
import math
import re

import onnx
from onnx import helper

from gridsample_lower.graphs import graphs

__all__ = ["OpsetConversionError", "convert_model", "onnx_opset"]

_PARKED = "gridsample_lower.parked"
# Ops whose schema changed at this opset with no downward adapter in onnx's converter.
_DOWNWARD_GAPS = {"ConstantOfShape": 20, "Split": 18, "Pad": 18}


class OpsetConversionError(ValueError):
    """A model that cannot be converted to the requested opset; the message names the node."""


@dataclasses.dataclass(frozen=True)
class _Step:
    source: int
    target: int
    location: str


def onnx_opset(imports) -> int | None:
    """The default-domain version in a list of OperatorSetIdProto or an opset_imports mapping."""
    if not isinstance(imports, dict):
        imports = {entry.domain: entry.version for entry in imports}
    return imports.get("", imports.get("ai.onnx"))


def convert_model(proto: onnx.ModelProto, target: int) -> onnx.ModelProto:
    """``proto`` at opset ``target``: graph and functions converted, all else as it was."""
    out = onnx.ModelProto()
    out.CopyFrom(proto)
    source = onnx_opset(proto.opset_import)
    if source is not None and source != target:
        step = _Step(source, target, "main graph")
        graph = _convert_graph(proto.graph, proto.opset_import, proto.ir_version, step)
        _restore(proto.graph, graph)
        out.graph.CopyFrom(graph)
        _set_onnx_opset(out.opset_import, target)
    for function in out.functions:
        _convert_function(function, proto.ir_version, target)
    return out


def _set_onnx_opset(imports, version: int) -> None:
    kept = [entry for entry in imports if entry.domain not in ("", "ai.onnx")]
    del imports[:]
    imports.extend([helper.make_opsetid("", version), *kept])


def _convert_function(function: onnx.FunctionProto, ir_version: int, target: int) -> None:
    source = onnx_opset(function.opset_import)
    if source is None or source == target:
        return
    graph = helper.make_graph(
        function.node,
        function.name,
        [helper.make_empty_tensor_value_info(name) for name in function.input],
        [helper.make_empty_tensor_value_info(name) for name in function.output],
    )
    step = _Step(source, target, f"function {function.domain}::{function.name}")
    converted = _convert_graph(graph, function.opset_import, ir_version, step)
    _restore(graph, converted)
    del function.node[:]
    function.node.extend(converted.node)
    _set_onnx_opset(function.opset_import, target)


def _convert_graph(graph, imports, ir_version: int, step: _Step) -> onnx.GraphProto:
    """Run onnx's converter on ``graph`` and its subgraphs, with the parked nodes kept aside."""
    work = onnx.GraphProto()
    work.CopyFrom(graph)
    parked = _park(work, step)
    wrapper = helper.make_model(work, ir_version=ir_version)
    del wrapper.opset_import[:]
    wrapper.opset_import.extend(imports)
    _set_onnx_opset(wrapper.opset_import, step.source)
    wrapper.opset_import.append(helper.make_opsetid(_PARKED, 1))
    try:
        converted = onnx.version_converter.convert_version(wrapper, step.target).graph
    except (RuntimeError, ValueError, onnx.checker.ValidationError) as error:
        raise _converter_failure(error, graph, step) from None
    _unpark(converted, parked, step)
    return converted


def _describe(node: onnx.NodeProto, step: _Step) -> str:
    name = repr(node.name) if node.name else f"producing {node.output[0]!r}"
    return f"{node.op_type} {name} ({step.location})"


def _must_park(node: onnx.NodeProto, step: _Step) -> bool:
    """Nodes onnx's converter must not see: it would ruin or refuse them."""
    if any(attr.ref_attr_name for attr in node.attribute):
        return True
    if node.domain not in ("", "ai.onnx"):
        return False
    if node.op_type == "GridSample":
        return True
    since = _DOWNWARD_GAPS.get(node.op_type)
    return since is not None and step.target < since <= step.source


def _park(graph: onnx.GraphProto, step: _Step) -> list[onnx.NodeProto]:
    """Replace the nodes to park by stand-ins in a private domain; returns the originals."""
    parked: list[onnx.NodeProto] = []
    for sub in list(graphs(graph)):
        for node in sub.node:
            if _must_park(node, step):
                original = onnx.NodeProto()
                original.CopyFrom(node)
                stand_in = helper.make_node(
                    "Parked", node.input, node.output, domain=_PARKED, index=len(parked)
                )
                parked.append(original)
                node.CopyFrom(stand_in)
    return parked


def _unpark(graph: onnx.GraphProto, parked: list[onnx.NodeProto], step: _Step) -> None:
    dims = _known_dims(graph)
    for sub in reversed(list(graphs(graph))):  # subgraphs first: a parent's rebuild copies them
        nodes: list[onnx.NodeProto] = []
        for node in sub.node:
            if node.domain == _PARKED:
                nodes.extend(_adapt(parked[node.attribute[0].i], step, dims))
            else:
                nodes.append(node)
        del sub.node[:]
        sub.node.extend(nodes)


def _adapt(node: onnx.NodeProto, step: _Step, dims) -> list[onnx.NodeProto]:
    """A parked node, made valid at the target opset (GridSample is left to the caller)."""
    if node.domain not in ("", "ai.onnx") or node.op_type == "GridSample":
        return [node]
    bound = any(attr.ref_attr_name for attr in node.attribute)
    if bound and _since(node.op_type, step.source) != _since(node.op_type, step.target):
        raise OpsetConversionError(
            f"{_describe(node, step)}: attributes bound to function parameters cannot be "
            f"converted from opset {step.source} to {step.target}"
        )
    if node.op_type == "Pad" and step.target < 18 and len(node.input) > 3 and node.input[3]:
        raise OpsetConversionError(
            f"{_describe(node, step)}: input axes cannot be expressed at opset {step.target}"
        )
    if node.op_type == "Split" and step.target < 18:
        return _split_without_num_outputs(node, dims)
    return [node]


def _since(op_type: str, opset: int) -> int:
    return onnx.defs.get_schema(op_type, opset, "").since_version


def _split_without_num_outputs(node: onnx.NodeProto, dims) -> list[onnx.NodeProto]:
    """Split-18's ``num_outputs`` before opset 18: equal parts, or explicit sizes if uneven."""
    split = onnx.NodeProto()
    split.CopyFrom(node)
    attrs = [attr for attr in node.attribute if attr.name != "num_outputs"]
    del split.attribute[:]
    split.attribute.extend(attrs)
    axis = next((attr.i for attr in attrs if attr.name == "axis"), 0)
    shape = dims.get(node.input[0])
    size = shape[axis] if shape is not None and -len(shape) <= axis < len(shape) else None
    parts = len(node.output)
    if len(attrs) == len(node.attribute) or not isinstance(size, int) or size % parts == 0:
        return [split]  # no num_outputs, or equal parts: what Split does without sizes
    chunk = math.ceil(size / parts)
    sizes = [max(0, min(chunk, size - chunk * k)) for k in range(parts)]
    name = f"{node.output[0]}_split_sizes"
    tensor = helper.make_tensor(name, onnx.TensorProto.INT64, [parts], sizes)
    del split.input[:]
    split.input.extend([node.input[0], name])
    return [helper.make_node("Constant", [], [name], value=tensor), split]


def _known_dims(graph: onnx.GraphProto) -> dict[str, list[int | None]]:
    """Shapes the converter inferred (it writes them to value_info), by value name."""
    dims: dict[str, list[int | None]] = {}
    for sub in graphs(graph):
        for info in [*sub.input, *sub.value_info, *sub.output]:
            if info.type.tensor_type.HasField("shape"):
                shape = info.type.tensor_type.shape.dim
                dims[info.name] = [d.dim_value if d.HasField("dim_value") else None for d in shape]
        for init in sub.initializer:
            dims[init.name] = list(init.dims)
    return dims


def _restore(original: onnx.GraphProto, converted: onnx.GraphProto) -> None:
    """Put back what the converter dropped or changed: value_info, initializers, metadata."""
    infos = {info.name: info for g in graphs(original) for info in g.value_info}
    inits = {init.name: init for g in graphs(original) for init in g.initializer}
    metadata = {
        node.output[0]: node.metadata_props
        for g in graphs(original)
        for node in g.node
        if node.metadata_props and node.output
    }
    for sub in graphs(converted):
        kept = [infos[info.name] for info in sub.value_info if info.name in infos]
        del sub.value_info[:]
        sub.value_info.extend(kept)
        for init in sub.initializer:
            if init.name in inits:
                init.CopyFrom(inits[init.name])
        for node in sub.node:
            if node.output and not node.metadata_props and node.output[0] in metadata:
                node.metadata_props.extend(metadata[node.output[0]])
    del converted.metadata_props[:]
    converted.metadata_props.extend(original.metadata_props)


def _converter_failure(error: Exception, graph, step: _Step) -> OpsetConversionError:
    """One line naming the node onnx's converter gave up on, when its message names the op."""
    message = " ".join(str(error).split()).split("failed: ")[-1]
    found = re.search(r"for (\w+)$", message)
    nodes = [n for g in graphs(graph) for n in g.node if found and n.op_type == found.group(1)]
    where = f"{_describe(nodes[0], step)}: " if nodes else f"{step.location}: "
    return OpsetConversionError(
        f"{where}onnx's version converter cannot convert it from opset {step.source} to "
        f"{step.target} ({message})"
    )
