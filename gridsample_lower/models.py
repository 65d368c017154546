"""Build a one-node GridSample model: the unit the tests, benchmarks and functions start from."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
import onnx_ir as ir
from onnx import helper

from gridsample_lower.spec import OPSET16_SPELLING

__all__ = ["gridsample_model"]


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


def _elem_type(dtype: np.dtype | type | ir.DataType) -> int:
    if isinstance(dtype, ir.DataType):
        return int(dtype)
    return int(ir.DataType.from_numpy(np.dtype(dtype)))
