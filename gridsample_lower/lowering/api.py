"""``lower()`` and ``lower_with_report()``: the lowering as a function.

Same type in and out (``onnx.ModelProto`` or ``onnx_ir.Model``); the input is not modified,
and a ModelProto comes back with only the value_info it had. The keyword options are the fields
of ``LoweringOptions``, which the command line builds from its flags.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

import onnx
import onnx_ir as ir

from gridsample_lower.graphs import graphs
from gridsample_lower.lowering.options import LoweringOptions
from gridsample_lower.lowering.passes import cyclic_gc_paused
from gridsample_lower.lowering.targets import Target

__all__ = ["expect_model", "lower", "lower_with_report", "on_copy"]

ModelT = TypeVar("ModelT", onnx.ModelProto, ir.Model)


def lower(
    model: ModelT,
    *,
    target: Target | str = "generic",
    lower_all: bool = False,
    only: Iterable[str] = (),
    skip: Iterable[str] = (),
    modes: Iterable[str] = (),
    ranks: Iterable[int] = (),
    index_dtype: ir.DataType | str | None = None,
    as_functions: bool = False,
    strict: bool = True,
) -> ModelT:
    """Lower the GridSample nodes of ``model``; returns a new model of the same kind.

    Args:
        model: ``onnx.ModelProto`` or ``onnx_ir.Model``; it is not modified.
        target: A name from ``TARGETS`` (or a ``Target``): the ops the lowered graph may use,
            its index type, and the configurations it runs natively, which are kept.
        lower_all: Lower what the target runs natively too.
        only: Node names to lower exclusively (empty: all); a bare str is one name.
        skip: Node names to leave alone.
        modes: Lower only these modes (empty: all): linear, nearest, cubic, or their
            opset-16 names bilinear, bicubic; a bare str is one mode.
        ranks: Lower only these spatial ranks, ints >= 1 (empty: all).
        index_dtype: int32 or int64 gather indices ("int32", ``onnx_ir.DataType.INT32`` or
            ``onnx.TensorProto.INT32``), overriding the target's choice; int32 with symbolic
            sizes promises that they stay below 2**31 elements.
        as_functions: Emit each configuration once as a model-local function (domain
            ``gridsample_lower``) and call it, instead of inlining the ops at every node.
        strict: Raise ``UnsupportedGridSample`` for a selected node that cannot be lowered;
            otherwise leave it.

    Raises:
        TypeError: ``model`` or a choice of the wrong type (a path for the model, say).
        ValueError: An unknown target, mode or index type, a rank below 1, or a name, mode
            or rank in ``only``, ``skip``, ``modes``, ``ranks`` that no GridSample has.
        UnsupportedGridSample: A selected node cannot be lowered (with ``strict``).
    """
    options = LoweringOptions(
        target, lower_all, only, skip, modes, ranks, index_dtype, as_functions, strict
    )
    return lower_with_report(model, options)[0]


def lower_with_report(
    model: ModelT, options: LoweringOptions | None = None, **choices
) -> tuple[ModelT, dict[str, int]]:
    """``lower``, plus the count of lowered nodes per configuration label.

    ``options``, or ``lower``'s keyword arguments (``choices``).
    """
    expect_model(model, "lower")
    options = LoweringOptions(**choices) if options is None else options
    lowering = options.lowering_pass()
    lowered: dict[str, int] = {}

    def run(work: ir.Model) -> ir.Model:
        result = lowering(work)
        lowered.update(result.lowered)
        return result.model

    with cyclic_gc_paused():
        out = on_copy(model, run)
    if isinstance(out, onnx.ModelProto):
        _drop_new_value_info(out, {info.name for g in _graphs(model) for info in g.value_info})
    return out, lowered


def on_copy(model: ModelT, convert: Callable[[ir.Model], ir.Model]) -> ModelT:
    """``convert`` run on a copy of ``model``: either kind in, the same kind out."""
    is_proto = isinstance(model, onnx.ModelProto)
    proto = model if is_proto else ir.serde.serialize_model(model)
    out = convert(ir.serde.deserialize_model(proto))
    return ir.serde.serialize_model(out) if is_proto else out


def _drop_new_value_info(model: onnx.ModelProto, kept: set[str]) -> None:
    """Keep only the value_info the input had.

    onnx_ir writes the types it knows for initializers, constants and lowered values, which
    would change the model's bytes for nothing.
    """
    for graph in _graphs(model):
        entries = [info for info in graph.value_info if info.name in kept]
        if len(entries) != len(graph.value_info):
            del graph.value_info[:]
            graph.value_info.extend(entries)


def _graphs(model: onnx.ModelProto):
    """The main graph, the functions, and their subgraphs at any depth."""
    for root in (model.graph, *model.functions):
        yield from graphs(root)


def expect_model(model, function: str) -> None:
    """Raise TypeError for what is not a model: a path would fail deep inside, unclearly."""
    if not isinstance(model, onnx.ModelProto | ir.Model):
        raise TypeError(
            f"{function} expects an onnx.ModelProto or an onnx_ir.Model, not "
            f"{type(model).__name__} (read a file with onnx.load or model_io.load_model)"
        )
