"""Build GridSample models for the tests, benchmarks and functions.

One node, the unit everything starts from; and multi-scale deformable attention as exporters
write it (the pattern ``lowering/attention.py`` lowers as one unit).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
import onnx_ir as ir
from onnx import helper

from gridsample_lower.spec import OPSET16_SPELLING

__all__ = ["deformable_attention_model", "gridsample_model"]


def gridsample_model(
    x_shape: Sequence[int | str],
    grid_shape: Sequence[int | str],
    mode: str = "linear",
    padding_mode: str = "zeros",
    align_corners: int = 0,
    *,
    x_dtype: np.dtype | type | ir.DataType = np.float32,
    grid_dtype: np.dtype | type | ir.DataType = np.float32,
    opset: int = 20,
    ir_version: int = 9,
    name: str = "gs",
) -> onnx.ModelProto:
    """``Y = GridSample(X, grid)`` with the mode spelled for ``opset``; string dims are symbolic."""
    x_type, grid_type = _elem_type(x_dtype), _elem_type(grid_dtype)
    node = helper.make_node(
        "GridSample",
        ["X", "grid"],
        ["Y"],
        name=name,
        mode=OPSET16_SPELLING[mode] if opset < 20 else mode,
        padding_mode=padding_mode,
        align_corners=align_corners,
    )
    y_shape = [x_shape[0], x_shape[1], *grid_shape[1:-1]]
    graph = helper.make_graph(
        [node],
        "gridsample",
        [
            helper.make_tensor_value_info("X", x_type, list(x_shape)),
            helper.make_tensor_value_info("grid", grid_type, list(grid_shape)),
        ],
        [helper.make_tensor_value_info("Y", x_type, y_shape)],
    )
    opsets = [helper.make_opsetid("", opset)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=ir_version)


def deformable_attention_model(
    levels: Sequence[tuple[int, int]],
    batch: int = 2,
    channels: int = 8,
    queries: int = 10,
    points: int = 4,
    mode: str = "linear",
    padding_mode: str = "zeros",
    align_corners: int = 0,
    *,
    dtype: np.dtype | type = np.float32,
    symbolic: bool = False,
    keepdims: bool = False,
    heads: int = 0,
    opset: int = 20,
    ir_version: int = 9,
) -> onnx.ModelProto:
    """``Y (N, C, Q) = sum(stack(GridSample(X_l, grid_l)) * weights, -1)``, as exported.

    One GridSample per level ``X_l (N, C, H_l, W_l)``, ``grid_l (N, Q, P, 2)``; each sample
    Unsqueezed on axis -2, Concatenated there, the ``(N, C, Q, L, P)`` stack Reshaped to
    ``(N, C, Q, L*P)``, times ``weights (N, 1, Q, L*P)``, ReduceSum over the last axis (as
    ``transformers``' ``multi_scale_deformable_attention``). ``symbolic``: every size a name,
    and the Reshape's shape taken from the stack's (``Concat(Slice(Shape(stack), 0, -2),
    [-1])``), as TorchScript exports it; else a constant shape, as dynamo does. ``heads``
    (static only): the levels are split from one input ``value (N / heads, S, heads, C)``,
    each part reshaped, transposed and reshaped to ``(N, C, H_l, W_l)``, as dynamo exports
    ``value.split(...)``.
    """
    elem, count = _elem_type(dtype), len(levels)
    nodes, inputs, shapes = [], [], []
    n, c, q = ("N", "C", "Q") if symbolic else (batch, channels, queries)
    p = "P" if symbolic else points
    if heads:
        sizes = [height * width for height, width in levels]
        whole = [batch // heads, sum(sizes), heads, channels]
        inputs.append(helper.make_tensor_value_info("value", elem, whole))
        parts = [f"part{k}" for k in range(count)]
        nodes.append(helper.make_node("Split", ["value", "sizes"], parts, axis=1))
        shapes.append(helper.make_tensor("sizes", onnx.TensorProto.INT64, [count], sizes))
    for level, (height, width) in enumerate(levels):
        dims = [f"H{level}", f"W{level}"] if symbolic else [height, width]
        if heads:  # (B, S_l, H, C) -> (B, S_l, H*C) -> (B, H*C, S_l) -> (B*H, C, h, w)
            folded = [batch // heads, height * width, heads * channels]
            unfolded = [batch, channels, height, width]
            shapes += [
                helper.make_tensor(f"fold{level}", onnx.TensorProto.INT64, [3], folded),
                helper.make_tensor(f"unfold{level}", onnx.TensorProto.INT64, [4], unfolded),
            ]
            nodes += [
                helper.make_node("Reshape", [f"part{level}", f"fold{level}"], [f"f{level}"]),
                helper.make_node("Transpose", [f"f{level}"], [f"t{level}"], perm=[0, 2, 1]),
                helper.make_node("Reshape", [f"t{level}", f"unfold{level}"], [f"X{level}"]),
            ]
        else:
            inputs.append(helper.make_tensor_value_info(f"X{level}", elem, [n, c, *dims]))
        inputs.append(helper.make_tensor_value_info(f"grid{level}", elem, [n, q, p, 2]))
        nodes.append(
            helper.make_node(
                "GridSample",
                [f"X{level}", f"grid{level}"],
                [f"sample{level}"],
                name=f"sample{level}",
                mode=OPSET16_SPELLING[mode] if opset < 20 else mode,
                padding_mode=padding_mode,
                align_corners=align_corners,
            )
        )
        nodes.append(helper.make_node("Unsqueeze", [f"sample{level}", "minus2"], [f"u{level}"]))
    nodes.append(helper.make_node("Concat", [f"u{k}" for k in range(count)], ["stack"], axis=-2))
    if symbolic:
        nodes += [
            helper.make_node("Shape", ["stack"], ["stack_shape"]),
            helper.make_node("Slice", ["stack_shape", "zero", "minus2"], ["head"]),
            helper.make_node("Concat", ["head", "minus1"], ["merged_shape"], axis=0),
        ]
        merged = "merged_shape"
    else:
        merged = "merged"
    nodes += [
        helper.make_node("Reshape", ["stack", merged], ["samples"]),
        helper.make_node("Mul", ["samples", "weights"], ["weighted"]),
        helper.make_node("ReduceSum", ["weighted", "minus1"], ["Y"], keepdims=int(keepdims)),
    ]
    constants = [
        helper.make_tensor("minus2", onnx.TensorProto.INT64, [1], [-2]),
        helper.make_tensor("minus1", onnx.TensorProto.INT64, [1], [-1]),
        helper.make_tensor("zero", onnx.TensorProto.INT64, [1], [0]),
        helper.make_tensor(
            "merged", onnx.TensorProto.INT64, [4], [batch, channels, queries, count * points]
        ),
        *shapes,
    ]
    lp = f"{count}*P" if symbolic else count * points
    inputs.append(helper.make_tensor_value_info("weights", elem, [n, 1, q, lp]))
    y_shape = [n, c, q, 1] if keepdims else [n, c, q]
    graph = helper.make_graph(
        nodes,
        "deformable_attention",
        inputs,
        [helper.make_tensor_value_info("Y", elem, y_shape)],
        constants,
    )
    opsets = [helper.make_opsetid("", opset)]
    model = helper.make_model(graph, opset_imports=opsets, ir_version=ir_version)
    return onnx.shape_inference.infer_shapes(model) if heads else model  # (as dynamo's)


def _elem_type(dtype: np.dtype | type | ir.DataType) -> int:
    if isinstance(dtype, ir.DataType):
        return int(dtype)
    return int(ir.DataType.from_numpy(np.dtype(dtype)))
