"""Deployment targets: which ops a lowered graph may use, its index type, what stays native.

A target is data, not code paths: the decompositions ask the emitter for an operation
(``clip``, ``round_half_to_even``, ``logical_and``, the gather) and the emitter picks the form
the target allows. ``keeps`` names the configurations the target runs natively, which
``lower`` leaves alone unless asked to lower everything; given the node too, it may judge by its
shapes and constant inputs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import onnx_ir as ir

from gridsample_lower.spec import GridSampleSpec

__all__ = ["TARGETS", "Target", "get_target"]


@dataclasses.dataclass(frozen=True)
class Target:
    """What a runtime or accelerator can run."""

    name: str
    description: str
    # Ops the lowered graph must not use; the emitter substitutes equivalents.
    avoids: frozenset[str] = frozenset()
    # Gather index type; None: int32 when the sizes are static and fit, else int64.
    index_dtype: ir.DataType | None = None
    # GridSample configurations the target runs natively (kept by default); the node, when
    # known, lets it judge by shapes and constant inputs.
    keeps: Callable[[GridSampleSpec, ir.Node | None], bool] = lambda spec, node=None: False

    def allows(self, op_type: str) -> bool:
        return op_type not in self.avoids


FOLDED_GRID_MAX_CHANNELS = 3  # bench/run.py, "constant grid": lowered wins up to here


def _float_4d(spec: GridSampleSpec, node: ir.Node | None = None) -> bool:
    floats = (ir.DataType.FLOAT, ir.DataType.FLOAT16)
    return spec.rank == 2 and spec.x_dtype in floats and spec.grid_dtype in floats


def _onnxruntime_keeps(spec: GridSampleSpec, node: ir.Node | None = None) -> bool:
    """Only the 2-D linear + zeros + align_corners=0 kernel beats the lowering (bench/run.py)...

    ...unless the grid is a constant and X has few float32 channels: onnxruntime then folds the
    lowered coordinate math when the session starts, and the rest takes 0.4-0.9 of the kernel's
    time (1-3 channels; from 8 channels on, 1.1-1.9).
    """
    fast = (spec.mode, spec.padding_mode, spec.align_corners) == ("linear", "zeros", 0)
    folds = node is not None and _folds_to_faster(spec, node)
    return spec.onnxruntime_native and fast and not folds


def _folds_to_faster(spec: GridSampleSpec, node: ir.Node) -> bool:
    x, grid = node.inputs[0], node.inputs[1]
    channels = x.shape[1] if x is not None and x.shape is not None and len(x.shape) > 1 else None
    few = isinstance(channels, int) and channels <= FOLDED_GRID_MAX_CHANNELS
    return spec.x_dtype == ir.DataType.FLOAT and few and _constant(grid)


def _constant(value: ir.Value | None) -> bool:
    """An initializer (not also a graph input, which a caller may override) or a Constant."""
    if value is None or value.is_graph_input():
        return False
    return ir.convenience.get_const_tensor(value) is not None


TARGETS: dict[str, Target] = {
    t.name: t
    for t in [
        Target("generic", "lower every GridSample, using any standard op (the default)"),
        Target(
            "onnxruntime",
            "lower what onnxruntime cannot run, and what runs faster lowered",
            keeps=_onnxruntime_keeps,
        ),
        Target(
            "openvino",
            "keep 4-D float GridSample (OpenVINO runs it), lower the rest",
            keeps=_float_4d,
        ),
        Target(
            "tensorrt",
            "keep 4-D float GridSample (TensorRT runs it), lower the rest",
            keeps=_float_4d,
        ),
        Target(
            "webnn",
            "WebNN: plain Gather, Where, Min/Max and Floor-based rounding; "
            "no GatherND, GatherElements, And, Mod, Round or Clip",
            avoids=frozenset({"GatherND", "GatherElements", "And", "Mod", "Round", "Clip"}),
            index_dtype=ir.DataType.INT32,
        ),
        Target(
            "int32",
            "NNAPI and NPUs that want int32 gather indices everywhere",
            index_dtype=ir.DataType.INT32,
        ),
    ]
}


def get_target(name: str | Target) -> Target:
    """The target called ``name``; raises ValueError listing the known ones."""
    if isinstance(name, Target):
        return name
    if name not in TARGETS:
        raise ValueError(f"unknown target {name!r}; known: {', '.join(TARGETS)}")
    return TARGETS[name]
