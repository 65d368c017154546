"""Models whose GridSample feeds a Conv or MatMul, with their float64 truth, for OpenVINO.

OpenVINO's CPU plugin, at its default precision on CPUs with bfloat16, runs everything upstream
of a Conv or MatMul in bfloat16 (RUNTIMES.md): these models are where a lowering's float
tensors get rounded. Each builder returns ``(model, feeds, truth, conv_only)``; the truth is
computed in numpy in float64, ``conv_only`` (or None) is the Conv alone on the exact sampled
values: what a perfect float32 GridSample followed by OpenVINO's Conv gives.
For ``test_openvino.py`` and ``bench/openvino_precision.py``.
"""

from __future__ import annotations

import itertools

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from gridsample_lower.check.reference import affine_grid, grid_sample
from gridsample_lower.spec import ALIGN_CORNERS, MODES, PADDING_MODES

__all__ = ["conv_case", "deform_case", "stn_case"]

F32 = {"INFERENCE_PRECISION_HINT": "f32"}  # OpenVINO's compile config for float32
# (mode, padding, align_corners): every 2-D configuration, and 3-D's but cubic.
CONFIGS_2D = list(itertools.product(MODES, PADDING_MODES, ALIGN_CORNERS))
CONFIGS_3D = [c for c in CONFIGS_2D if c[0] != "cubic"]


def _model(nodes, inputs, outputs, inits, opset=20):
    graph = helper.make_graph(
        nodes, "g", inputs, outputs, [numpy_helper.from_array(v, k) for k, v in inits.items()]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9
    return model


def _vi(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))


def _gs(x, grid, out, mode, padding, ac):
    return helper.make_node(
        "GridSample", [x, grid], [out], mode=mode, padding_mode=padding, align_corners=ac
    )


def conv_case(rng, cfg, x_shape, grid_shape, out_channels=8):
    mode, padding, ac = cfg
    c, r = x_shape[1], len(x_shape) - 2
    w = (rng.standard_normal((out_channels, c, *[1] * r)) / 4).astype(np.float32)
    nodes = [_gs("X", "grid", "s", *cfg), helper.make_node("Conv", ["s", "W"], ["Y"])]
    y_shape = [x_shape[0], out_channels, *grid_shape[1:-1]]
    model = _model(
        nodes, [_vi("X", x_shape), _vi("grid", grid_shape)], [_vi("Y", y_shape)], {"W": w}
    )
    x = rng.standard_normal(x_shape).astype(np.float32)
    grid = rng.uniform(-1.1, 1.1, grid_shape).astype(np.float32)
    s = grid_sample(x.astype(np.float64), grid.astype(np.float64), mode, padding, ac)
    truth = np.einsum("oc,nc...->no...", w.reshape(out_channels, c).astype(np.float64), s)
    conv_only = _model(
        [helper.make_node("Conv", ["s", "W"], ["Y"])],
        [_vi("s", s.shape)],
        [_vi("Y", y_shape)],
        {"W": w},
    )
    return model, {"X": x, "grid": grid}, truth, (conv_only, {"s": s.astype(np.float32)})


def stn_case(rng, cfg, x_shape=(1, 8, 32, 40), hidden=8):
    mode, padding, ac = cfg
    n, c, h, wd = x_shape
    conv_w = (rng.standard_normal((hidden, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
    conv_b = (rng.standard_normal(hidden) * 0.1).astype(np.float32)
    fc_w = (rng.standard_normal((hidden, 6)) * 0.1).astype(np.float32)
    fc_b = np.array([1.05, 0.1, 0.05, -0.08, 0.95, -0.03], np.float32)
    out_w = (rng.standard_normal((8, c, 1, 1)) / 4).astype(np.float32)
    inits = {
        "conv_w": conv_w, "conv_b": conv_b, "fc_w": fc_w, "fc_b": fc_b, "out_w": out_w,
        "theta_shape": np.array([n, 2, 3], np.int64), "size": np.array(x_shape, np.int64),
    }  # fmt: skip
    nodes = [
        helper.make_node("Conv", ["X", "conv_w", "conv_b"], ["f"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["f"], ["fr"]),
        helper.make_node("GlobalAveragePool", ["fr"], ["p"]),
        helper.make_node("Flatten", ["p"], ["pf"]),
        helper.make_node("Gemm", ["pf", "fc_w", "fc_b"], ["t"]),
        helper.make_node("Reshape", ["t", "theta_shape"], ["theta"]),
        helper.make_node("AffineGrid", ["theta", "size"], ["grid"], align_corners=ac),
        _gs("X", "grid", "s", *cfg),
        helper.make_node("Conv", ["s", "out_w"], ["Y"]),
    ]
    model = _model(nodes, [_vi("X", x_shape)], [_vi("Y", (n, 8, h, wd))], inits)
    x = rng.standard_normal(x_shape).astype(np.float32)
    xd = x.astype(np.float64)
    padded = np.pad(xd, ((0, 0), (0, 0), (1, 1), (1, 1)))
    f = (
        sum(
            np.einsum(
                "oc,nchw->nohw",
                conv_w[:, :, i, j].astype(np.float64),
                padded[:, :, i : i + h, j : j + wd],
            )
            for i in range(3)
            for j in range(3)
        )
        + conv_b.astype(np.float64)[None, :, None, None]
    )
    pooled = np.maximum(f, 0).mean(axis=(2, 3))
    theta = (pooled @ fc_w.astype(np.float64) + fc_b.astype(np.float64)).reshape(n, 2, 3)
    grid = affine_grid(theta, x_shape, ac)
    s = grid_sample(xd, grid, mode, padding, ac)
    truth = np.einsum("oc,nchw->nohw", out_w[:, :, 0, 0].astype(np.float64), s)
    return model, {"X": x}, truth, None


def deform_case(rng, cfg, levels=((32, 40), (16, 20)), c=16, queries=100, points=4, d=32):
    mode, padding, ac = cfg
    n, nl = 1, len(levels)
    inits = {
        "off_w": (rng.standard_normal((d, nl * points * 2)) * 0.02).astype(np.float32),
        "att_w": (rng.standard_normal((d, nl * points)) * 0.3).astype(np.float32),
        "out_w": (rng.standard_normal((c, c)) / np.sqrt(c)).astype(np.float32),
        "off_shape": np.array([n, queries, nl, points, 2], np.int64),
        "att_shape": np.array([n, 1, queries, nl * points], np.int64),
        "two": np.array(2.0, np.float32), "one": np.array(1.0, np.float32),
    }  # fmt: skip
    nodes = [
        helper.make_node("MatMul", ["Q", "off_w"], ["off"]),
        helper.make_node("Reshape", ["off", "off_shape"], ["off5"]),
        helper.make_node("Add", ["ref", "off5"], ["loc"]),  # ref: (N, Lq, 1, 1, 2) in [0, 1]
        helper.make_node("Mul", ["loc", "two"], ["loc2"]),
        helper.make_node("Sub", ["loc2", "one"], ["grid_all"]),  # (N, Lq, L, P, 2)
        helper.make_node("MatMul", ["Q", "att_w"], ["att"]),
        helper.make_node("Reshape", ["att", "att_shape"], ["att4"]),
        helper.make_node("Softmax", ["att4"], ["attn"], axis=-1),  # (N, 1, Lq, L*P)
    ]
    sampled = []
    x_inputs = []
    for li, (h, w) in enumerate(levels):
        inits[f"proj_w{li}"] = (rng.standard_normal((c, c, 1, 1)) / np.sqrt(c)).astype(np.float32)
        inits[f"lvl{li}"] = np.array([li], np.int64)
        nodes += [
            helper.make_node("Conv", [f"X{li}", f"proj_w{li}"], [f"v{li}"]),
            helper.make_node("Gather", ["grid_all", f"lvl{li}"], [f"g{li}5"], axis=2),
            helper.make_node("Squeeze", [f"g{li}5", "sq_axis"], [f"g{li}"]),  # (N, Lq, P, 2)
            _gs(f"v{li}", f"g{li}", f"s{li}", *cfg),  # (N, C, Lq, P)
        ]
        sampled.append(f"s{li}")
        x_inputs.append(_vi(f"X{li}", (n, c, h, w)))
    inits["sq_axis"] = np.array([2], np.int64)
    inits["flat_shape"] = np.array([n, c, queries, nl * points], np.int64)
    nodes += [
        helper.make_node("Concat", sampled, ["s"], axis=3),  # (N, C, Lq, L*P)
        helper.make_node("Mul", ["s", "attn"], ["sw"]),
        helper.make_node("ReduceSum", ["sw", "red_axis"], ["agg"], keepdims=0),  # (N, C, Lq)
        helper.make_node("Transpose", ["agg"], ["aggt"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["aggt", "out_w"], ["Y"]),
    ]
    inits["red_axis"] = np.array([3], np.int64)
    inputs = [*x_inputs, _vi("Q", (n, queries, d)), _vi("ref", (n, queries, 1, 1, 2))]
    model = _model(nodes, inputs, [_vi("Y", (n, queries, c))], inits)
    feeds = {
        f"X{li}": rng.standard_normal((n, c, h, w)).astype(np.float32)
        for li, (h, w) in enumerate(levels)
    }
    feeds["Q"] = rng.standard_normal((n, queries, d)).astype(np.float32)
    feeds["ref"] = rng.uniform(0.0, 1.0, (n, queries, 1, 1, 2)).astype(np.float32)
    dd = {k: v.astype(np.float64) for k, v in {**feeds, **inits}.items()}
    off = (dd["Q"] @ dd["off_w"]).reshape(n, queries, nl, points, 2)
    grid = (dd["ref"] + off) * 2 - 1
    att = (dd["Q"] @ dd["att_w"]).reshape(n, 1, queries, nl * points)
    att = np.exp(att - att.max(-1, keepdims=True))
    att /= att.sum(-1, keepdims=True)
    ss = []
    for li in range(nl):
        v = np.einsum("oc,nchw->nohw", dd[f"proj_w{li}"][:, :, 0, 0], dd[f"X{li}"])
        ss.append(grid_sample(v, grid[:, :, li], mode, padding, ac))
    agg = (np.concatenate(ss, axis=3) * att).sum(3)
    truth = agg.transpose(0, 2, 1) @ dd["out_w"]
    return model, feeds, truth, None
