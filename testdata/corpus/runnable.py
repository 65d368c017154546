"""The corpus' exports as onnxruntime runs them as written (no torch needed: the bench uses it).

onnxruntime departs from an export's meaning in two places: it refuses a GridSample with a
double grid and float X, and it samples a float16 GridSample's grid unrounded. ``runnable``
makes a copy it runs as written; make_corpus.py compares that with PyTorch, and
bench/models.py takes it as the reference at deployment sizes.
"""

from __future__ import annotations

import onnx


def runnable(proto: onnx.ModelProto) -> tuple[onnx.ModelProto, list[str]]:
    """A copy onnxruntime runs as written, and what was changed (for this check only).

    A double grid with float X, which onnxruntime refuses, is cast to X's type. A float16
    GridSample is spelled out in float32 (Casts around it): onnxruntime runs it through its
    float32 kernel with Casts of its own, and drops its Cast to float32 together with a Cast to
    float16 the graph makes before, so it would sample a grid the graph rounds unrounded.
    """
    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    types = value_types(copy)
    nodes, changes = [], []
    for node in copy.graph.node:
        if node.op_type != "GridSample":
            nodes.append(node)
            continue
        x_type, grid_type = types.get(node.input[0]), types.get(node.input[1])
        k = len(changes)
        if grid_type == onnx.TensorProto.DOUBLE and x_type != onnx.TensorProto.DOUBLE:
            cast = f"{node.input[1]}__as_x_type_{k}"
            nodes.append(onnx.helper.make_node("Cast", [node.input[1]], [cast], to=x_type))
            node.input[1] = cast
            changes.append("double grid cast to X's type")
        if x_type == onnx.TensorProto.FLOAT16:
            for i in (0, 1):
                cast = f"{node.input[i]}__float32_{k}_{i}"
                nodes.append(onnx.helper.make_node("Cast", [node.input[i]], [cast], to=1))
                node.input[i] = cast
            output = node.output[0]
            node.output[0] = f"{output}__float32_{k}"
            nodes.append(node)
            nodes.append(onnx.helper.make_node("Cast", [node.output[0]], [output], to=10))
            changes.append("float16 GridSample spelled out in float32")
            continue
        nodes.append(node)
    del copy.graph.node[:]
    copy.graph.node.extend(nodes)
    return copy, changes


def value_types(proto: onnx.ModelProto) -> dict[str, int]:
    inferred = onnx.shape_inference.infer_shapes(proto)
    types = {v.name: v.type.tensor_type.elem_type for v in inferred.graph.value_info}
    types.update({v.name: v.type.tensor_type.elem_type for v in inferred.graph.input})
    types.update({i.name: i.data_type for i in inferred.graph.initializer})
    for node in inferred.graph.node:
        if node.op_type == "Constant":
            types[node.output[0]] = node.attribute[0].t.data_type
    return types
