"""Rebuild the bundled example models (seeded, deterministic): ``python testdata/make_examples.py``.

stn.onnx: a small spatial transformer followed by an optical-flow warp, the two places
GridSample usually appears. A localisation head (Conv, GlobalAveragePool, Gemm) predicts an
affine transform per image; AffineGrid turns it into a sampling grid; GridSample (linear, zeros)
resamples the image. A second head predicts a per-pixel flow that is added to an identity grid
and warps the result again (cubic, border). The batch size is symbolic.
"""

from __future__ import annotations

import pathlib

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = pathlib.Path(__file__).parent


def spatial_transformer(seed: int = 0) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)
    h = w = 32

    def init(name, array):
        return numpy_helper.from_array(np.asarray(array, dtype=np.float32), name)

    identity = np.array([1, 0, 0, 0, 1, 0], dtype=np.float32)
    ys, xs = np.meshgrid(np.linspace(-1, 1, h), np.linspace(-1, 1, w), indexing="ij")
    initializers = [
        init("conv_w", rng.normal(0, 0.1, (8, 3, 3, 3))),
        init("conv_b", np.zeros(8)),
        init("fc_w", rng.normal(0, 0.01, (6, 8))),
        init("fc_b", identity + rng.normal(0, 0.05, 6)),
        init("flow_w", rng.normal(0, 0.02, (2, 3, 3, 3))),
        init("base_grid", np.stack([xs, ys], axis=-1)[None]),
        numpy_helper.from_array(np.array([-1, 2, 3], dtype=np.int64), "theta_shape"),
    ]
    nodes = [
        helper.make_node("Conv", ["image", "conv_w", "conv_b"], ["features"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["features"], ["relu"]),
        helper.make_node("GlobalAveragePool", ["relu"], ["pooled"]),
        helper.make_node("Flatten", ["pooled"], ["flat"]),
        helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["theta_flat"], transB=1),
        helper.make_node("Reshape", ["theta_flat", "theta_shape"], ["theta"]),
        helper.make_node("Shape", ["image"], ["image_shape"]),
        helper.make_node("AffineGrid", ["theta", "image_shape"], ["affine_grid"], align_corners=0),
        helper.make_node(
            "GridSample",
            ["image", "affine_grid"],
            ["aligned"],
            name="stn_sample",
            mode="linear",
            padding_mode="zeros",
            align_corners=0,
        ),
        helper.make_node("Conv", ["aligned", "flow_w"], ["flow_nchw"], pads=[1, 1, 1, 1]),
        helper.make_node("Transpose", ["flow_nchw"], ["flow"], perm=[0, 2, 3, 1]),
        helper.make_node("Add", ["base_grid", "flow"], ["flow_grid"]),
        helper.make_node(
            "GridSample",
            ["aligned", "flow_grid"],
            ["warped"],
            name="flow_warp",
            mode="cubic",
            padding_mode="border",
            align_corners=1,
        ),
    ]
    graph = helper.make_graph(
        nodes,
        "spatial_transformer",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 3, h, w])],
        [helper.make_tensor_value_info("warped", TensorProto.FLOAT, ["batch", 3, h, w])],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)], ir_version=9)
    model.producer_name = "gridsample_lower testdata"
    onnx.checker.check_model(model, full_check=True)
    return model


if __name__ == "__main__":
    onnx.save_model(spatial_transformer(), HERE / "stn.onnx")
    print(f"wrote {HERE / 'stn.onnx'}")
