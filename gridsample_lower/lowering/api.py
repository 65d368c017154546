"""``lower()`` and ``lower_with_report()``: the lowering as a function, and its options read.

Same type in and out (``onnx.ModelProto`` or ``onnx_ir.Model``); the input is not modified.
``selection_of`` turns the keyword options (shared with the command line) into a
``Selection``; a ModelProto comes back with only the value_info it had.
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Iterable
from typing import TypeVar

import onnx
import onnx_ir as ir

from gridsample_lower.lowering.passes import LowerGridSamplePass, cyclic_gc_paused
from gridsample_lower.lowering.selection import Selection
from gridsample_lower.lowering.spec import MODE_NAMES
from gridsample_lower.lowering.targets import Target, get_target
from gridsample_lower.protos import graphs

__all__ = ["expect_model", "lower", "lower_with_report", "selection_of"]

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
    return lower_with_report(
        model,
        target=target,
        lower_all=lower_all,
        only=only,
        skip=skip,
        modes=modes,
        ranks=ranks,
        index_dtype=index_dtype,
        as_functions=as_functions,
        strict=strict,
    )[0]


def lower_with_report(
    model: ModelT, *, strict: bool = True, as_functions: bool = False, **choices
) -> tuple[ModelT, dict[str, int]]:
    """``lower``, plus the count of lowered nodes per configuration label."""
    expect_model(model, "lower")
    selection = selection_of(**choices)
    is_proto = isinstance(model, onnx.ModelProto)
    proto = model if is_proto else ir.serde.serialize_model(model)
    lowering = LowerGridSamplePass(
        strict=strict, select=selection, target=selection.target, as_functions=as_functions
    )
    with cyclic_gc_paused():
        result = lowering(ir.serde.deserialize_model(proto))
        if not is_proto:
            return result.model, result.lowered
        out = ir.serde.serialize_model(result.model)
    _drop_new_value_info(out, {info.name for g in _graphs(proto) for info in g.value_info})
    return out, result.lowered


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


def selection_of(
    *,
    target: Target | str = "generic",
    lower_all: bool = False,
    only: Iterable[str] = (),
    skip: Iterable[str] = (),
    modes: Iterable[str] = (),
    ranks: Iterable[int] = (),
    index_dtype: ir.DataType | str | None = None,
) -> Selection:
    """The Selection for ``lower``'s keyword arguments (the CLI passes the same ones)."""
    chosen = get_target(target)
    if index_dtype is not None:
        chosen = dataclasses.replace(chosen, index_dtype=_index_dtype(index_dtype))
    modes, ranks = _items(modes, "modes", str), _items(ranks, "ranks", numbers.Integral)
    unknown = [mode for mode in modes if mode not in MODE_NAMES]
    if unknown:
        raise ValueError(f"unknown mode {unknown[0]!r}; expected one of {', '.join(MODE_NAMES)}")
    if any(rank < 1 for rank in ranks):
        raise ValueError(f"ranks must be at least 1, not {min(ranks)}")
    return Selection(
        chosen,
        lower_all,
        frozenset(_items(only, "only", str)),
        frozenset(_items(skip, "skip", str)),
        frozenset(MODE_NAMES[mode] for mode in modes),
        frozenset(int(rank) for rank in ranks),
    )


def expect_model(model, function: str) -> None:
    """Raise TypeError for what is not a model: a path would fail deep inside, unclearly."""
    if not isinstance(model, onnx.ModelProto | ir.Model):
        raise TypeError(
            f"{function} expects an onnx.ModelProto or an onnx_ir.Model, not "
            f"{type(model).__name__} (read a file with onnx.load or model_io.load_model)"
        )


def _items(values, what: str, kind: type) -> tuple:
    """``values`` as a tuple of ``kind``; a bare one is one item (a str, not its characters)."""
    try:
        values = (values,) if isinstance(values, str) else tuple(values)
    except TypeError:
        values = (values,)
    wrong = [v for v in values if isinstance(v, bool) or not isinstance(v, kind)]
    if wrong:
        name = "int" if kind is numbers.Integral else kind.__name__
        raise TypeError(f"{what}: expected {name} values, got {type(wrong[0]).__name__}")
    return values


def _index_dtype(value: ir.DataType | str | int) -> ir.DataType:
    """int32 or int64 as a name, an ``ir.DataType`` or an ``onnx.TensorProto`` number."""
    if isinstance(value, str):
        dtype = ir.DataType.__members__.get(value.upper())
    elif isinstance(value, int) and not isinstance(value, bool):
        dtype = value  # onnx.TensorProto.INT32 == ir.DataType.INT32
    else:
        raise TypeError(f"index_dtype must be a str or a data type, not {type(value).__name__}")
    if dtype not in (ir.DataType.INT32, ir.DataType.INT64):
        raise ValueError(f"index_dtype must be int32 or int64, not {value!r}")
    return ir.DataType(dtype)
