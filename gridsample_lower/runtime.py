"""Run a model in onnxruntime (CPU), bfloat16 inputs and outputs included; ask what it runs.

onnxruntime's Python API cannot exchange bfloat16 arrays, so such inputs and outputs are
passed as float32 (exact: every bfloat16 is a float32) through Cast nodes added to a copy.
Which GridSample configurations onnxruntime runs is found by trying its kernel
(``onnxruntime_runs``), not written down: float16 runs through its float32 kernel (it inserts
Casts), and what a release adds or drops is seen as it is. Those inserted Casts are spelled out
in the model before it runs (``_half_gridsamples_spelled_out``): onnxruntime removes its own
Cast to float32 together with a Cast to float16 the model makes before it, and so samples a
grid the model rounded to float16 unrounded (a float16 STN exported by dynamo: 0.0137 apart).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import ml_dtypes
import numpy as np
import onnx
from onnx import TensorProto, helper

from gridsample_lower.graphs import graphs
from gridsample_lower.models import gridsample_model
from gridsample_lower.spec import GridSampleSpec

__all__ = ["onnxruntime_runner", "onnxruntime_runs"]

_BF16 = TensorProto.BFLOAT16


def onnxruntime_runner(
    model: onnx.ModelProto, *, threads: int = 0, arena: bool = True
) -> Callable[[dict], list[np.ndarray]]:
    """A function from feeds to the list of outputs; raises if onnxruntime refuses the model.

    ``threads`` sets the intra-op thread count (0: onnxruntime's default, one per core). Many
    small sessions run faster with 1: each session starts and stops its own thread pool.
    ``arena=False`` returns each run's memory when it ends: a session's arena otherwise keeps
    what its largest run needed, and a check holds several sessions (a lowered cubic node on
    4x32x256x256 held 6.2 GiB across them, 1.4 GiB without arenas, at the same speed).
    """
    import onnxruntime as ort  # (here: lowering with --no-verify never runs a model)

    ort.set_default_logger_severity(3)
    model, bf16_outputs = _float_io(_half_gridsamples_spelled_out(model))
    options = ort.SessionOptions()
    options.log_severity_level = 4  # errors too: they are raised, and would be printed twice
    options.intra_op_num_threads = threads
    options.enable_cpu_mem_arena = arena
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )

    def run(feeds: dict) -> list[np.ndarray]:
        feeds = dict(
            (k + "__f32", v.astype(np.float32)) if v.dtype == ml_dtypes.bfloat16 else (k, v)
            for k, v in feeds.items()
        )
        outputs = session.run(None, feeds)
        return [
            o.astype(ml_dtypes.bfloat16) if i in bf16_outputs else o for i, o in enumerate(outputs)
        ]

    return run


def _float_io(model: onnx.ModelProto) -> tuple[onnx.ModelProto, set[int]]:
    graph = model.graph
    bf16_inputs = [i for i in graph.input if i.type.tensor_type.elem_type == _BF16]
    bf16_outputs = {k for k, o in enumerate(graph.output) if o.type.tensor_type.elem_type == _BF16}
    if not bf16_inputs and not bf16_outputs:
        return model, set()
    model = onnx.ModelProto.FromString(model.SerializeToString())
    graph = model.graph
    casts_in = []
    for info in graph.input:
        if info.type.tensor_type.elem_type == _BF16:
            casts_in.append(helper.make_node("Cast", [info.name + "__f32"], [info.name], to=_BF16))
            info.name += "__f32"
            info.type.tensor_type.elem_type = TensorProto.FLOAT
    for k in bf16_outputs:
        info = graph.output[k]
        graph.node.append(helper.make_node("Cast", [info.name], [info.name + "__f32"], to=1))
        info.name += "__f32"
        info.type.tensor_type.elem_type = TensorProto.FLOAT
    nodes = casts_in + list(graph.node)
    del graph.node[:]
    graph.node.extend(nodes)
    return model, bf16_outputs


def onnxruntime_runs(spec: GridSampleSpec) -> bool:
    """Whether onnxruntime's CPU kernel runs ``spec`` (tried once per rank, mode and dtypes)."""
    return _kernel_runs(spec.rank, spec.mode, spec.x_dtype, spec.grid_dtype)


@functools.cache
def _kernel_runs(rank: int, mode: str, x_dtype, grid_dtype) -> bool:
    x_shape, grid_shape = [1, 1, *[2] * rank], [1, *[1] * rank, rank]
    model = gridsample_model(x_shape, grid_shape, mode, x_dtype=x_dtype, grid_dtype=grid_dtype)
    x_type, grid_type = (np.dtype(t.numpy()) for t in (x_dtype, grid_dtype))
    feeds = {"X": np.zeros(x_shape, x_type), "grid": np.zeros(grid_shape, grid_type)}
    try:
        onnxruntime_runner(model, threads=1)(feeds)
    except Exception:  # noqa: BLE001  (refusals come as several exception types)
        return False
    return True


def _half_gridsamples_spelled_out(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with each float16 GridSample spelled as Cast, float32 GridSample, Cast.

    That is what onnxruntime runs for it, without the Cast pair it then removes (see the
    module's docstring). A model without one is returned as it is.
    """
    if not any(n.op_type == "GridSample" for g in graphs(model.graph) for n in g.node):
        return model
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # noqa: BLE001  (a model inference cannot read runs as it is)
        return model
    half, types = TensorProto.FLOAT16, {}
    for graph in graphs(inferred.graph):
        for info in [*graph.input, *graph.output, *graph.value_info]:
            types[info.name] = info.type.tensor_type.elem_type
        types.update({t.name: t.data_type for t in graph.initializer})

    def is_half(node: onnx.NodeProto) -> bool:
        grid_sample = node.op_type == "GridSample" and node.domain in ("", "ai.onnx")
        return grid_sample and half in [types.get(name) for name in node.input[:2]]

    if not any(is_half(n) for g in graphs(model.graph) for n in g.node):
        return model
    spelled = onnx.ModelProto()
    spelled.CopyFrom(model)
    for k, graph in enumerate(graphs(spelled.graph)):
        nodes = []
        for j, node in enumerate(graph.node):
            if is_half(node):
                nodes += _through_float32(node, types, f"__gridsample_float32_{k}_{j}")
            else:
                nodes.append(node)
        del graph.node[:]
        graph.node.extend(nodes)
    return spelled


def _through_float32(node: onnx.NodeProto, types: dict, tag: str) -> list[onnx.NodeProto]:
    """Casts of the float16 inputs to float32, ``node`` on them, its output cast back."""
    half = TensorProto.FLOAT16
    x_is_half = types.get(node.input[0]) == half
    casts = []
    for n, name in enumerate(list(node.input[:2])):
        if types.get(name) == half:
            casts.append(helper.make_node("Cast", [name], [f"{name}{tag}"], to=TensorProto.FLOAT))
            node.input[n] = f"{name}{tag}"
    if not x_is_half:  # Y has X's type: float32 already
        return [*casts, node]
    y = node.output[0]
    node.output[0] = f"{y}{tag}"
    return [*casts, node, helper.make_node("Cast", [node.output[0]], [y], to=half)]
