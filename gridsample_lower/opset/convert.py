"""Convert a model's opset safely: GridSample respelled everywhere, nothing else lost.

Opset 20 renamed GridSample's modes (bilinear -> linear, bicubic -> cubic) and allowed N-D input;
runtimes reject or misread a mode spelled for the other side. ``upgrade`` and ``downgrade``
convert every other op with onnx's converter (``onnx_converter.convert_model``, which keeps
functions, metadata and names), then spell every GridSample mode for the target opset: in
subgraphs, in functions, and in the function defaults and call-site values that feed a mode.
Before converting, they refuse, naming the node, what cannot be expressed at the target opset;
after, they check every node against the target's schemas.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterator
from typing import TypeVar

import onnx
import onnx_ir as ir
from onnx_ir.passes.common import InlinePass

from gridsample_lower.graphs import located_nodes
from gridsample_lower.lowering.api import expect_model, on_copy
from gridsample_lower.lowering.inventory import Site, find_gridsamples, is_gridsample
from gridsample_lower.lowering.passes import LowerGridSamplePass
from gridsample_lower.opset.onnx_converter import OpsetConversionError, convert_model, onnx_opset
from gridsample_lower.spec import MODE_NAMES, OPSET16_SPELLING, GridSampleSpec

__all__ = ["DOWNGRADE_OPSETS", "UPGRADE_OPSETS", "OpsetConversionError", "downgrade", "upgrade"]

ModelT = TypeVar("ModelT", onnx.ModelProto, ir.Model)

UPGRADE_OPSETS = (20, 21, 22)
DOWNGRADE_OPSETS = (16, 17, 18, 19)

_SITE_KEY = "gridsample_lower.site"
# Attribute values newer than their attribute: (op, attribute, value) -> first opset.
_NEW_VALUES = {
    ("Pad", "mode", "wrap"): 19,
    ("Resize", "coordinate_transformation_mode", "half_pixel_symmetric"): 19,
}


def upgrade(model: ModelT, opset: int = 20) -> ModelT:
    """Convert ``model`` to opset 20, 21 or 22 and spell every GridSample mode linear/cubic.

    Subgraphs and model-local functions are converted too (their opset imports follow, and the
    function defaults and call-site values that feed a GridSample mode are respelled); functions,
    metadata, names and the IR version are kept. A model already at ``opset`` only has its
    spellings repaired. The input is not modified; the result has the input's type.

    Raises:
        TypeError: ``model`` is not a ModelProto or onnx_ir Model, or ``opset`` not an int.
        OpsetConversionError: ``opset`` is not 20-22 or is below the model's, or a node cannot
            be converted; the message names the node.
    """
    _check_target(model, "upgrade", opset, UPGRADE_OPSETS)
    return on_copy(model, lambda work: _convert(work, opset, upward=True))


def downgrade(model: ModelT, opset: int = 16, *, lower_rest: bool = False) -> ModelT:
    """Convert ``model`` to opset 16-19, for runtimes that only know GridSample-16.

    Modes are spelled bilinear/bicubic everywhere; other ops are converted down where ONNX
    allows it. A GridSample that cannot exist at ``opset`` (spatial rank other than 2, bfloat16)
    stops the conversion, unless ``lower_rest`` lowers exactly those nodes to primitive ops.

    Raises:
        TypeError: ``model`` is not a ModelProto or onnx_ir Model, or ``opset`` not an int.
        OpsetConversionError: ``opset`` is not 16-19 or is above the model's, or a node cannot
            be expressed at ``opset``; the message names the node.
    """
    _check_target(model, "downgrade", opset, DOWNGRADE_OPSETS)

    def run(work: ir.Model) -> ir.Model:
        blocked = _blocked_sites(work, opset)
        if blocked and not lower_rest:
            site, reason = blocked[0]
            more = f" ({len(blocked) - 1} more like it)" if len(blocked) > 1 else ""
            raise OpsetConversionError(
                f"GridSample {site.name!r} ({site.location}) cannot exist at opset {opset}: "
                f"{reason}{more}; lower the model with `gridsample-lower lower`, or only such "
                "nodes with --lower-rest"
            )
        if blocked:
            LowerGridSamplePass(select=lambda _, spec: _blocker(spec, opset) is not None)(work)
        return _convert(work, opset, upward=False)

    return on_copy(model, run)


def _check_target(model, function: str, opset: int, allowed: tuple[int, ...]) -> None:
    expect_model(model, function)
    if isinstance(opset, bool) or not isinstance(opset, numbers.Integral):
        raise TypeError(f"opset must be an int, not {type(opset).__name__}")
    if opset not in allowed:
        raise OpsetConversionError(f"opset {opset} is not one of {', '.join(map(str, allowed))}")


def _convert(work: ir.Model, target: int, *, upward: bool) -> ir.Model:
    source = onnx_opset(work.opset_imports) or target
    if (target < source) if upward else (target > source):
        other = "downgrade" if upward else "upgrade"
        raise OpsetConversionError(f"the model is at opset {source}: use {other} for {target}")
    _check_ops_exist(work, target)
    out = ir.serde.deserialize_model(convert_model(ir.serde.serialize_model(work), target))
    _respell(out, target)
    _check_expressible(out, target)
    return out


def _blocker(spec: GridSampleSpec, target: int) -> str | None:
    """Why a GridSample with ``spec`` cannot exist at opset ``target``, or None."""
    if target < 20 and spec.rank != 2:
        return f"its spatial rank is {spec.rank}, and GridSample before opset 20 is 4-D only"
    if target < 22 and ir.DataType.BFLOAT16 in (spec.x_dtype, spec.grid_dtype):
        return "it takes bfloat16, which GridSample accepts from opset 22 on"
    return None


def _blocked_sites(model: ir.Model, target: int) -> list[tuple[Site, str]]:
    """GridSample nodes that cannot exist at ``target``, each with the reason."""
    sites = find_gridsamples(model)
    blocked = []
    for site, specs in zip(sites, _specs_as_run(model, len(sites)), strict=True):
        reasons = [reason for spec in specs if (reason := _blocker(spec, target))]
        if reasons:
            blocked.append((site, reasons[0]))
    return blocked


def _specs_as_run(model: ir.Model, count: int) -> list[list[GridSampleSpec]]:
    """The specs each GridSample of ``find_gridsamples(model)`` runs with, one per call.

    A function's GridSample has no types (and may take its mode from the call), so the specs
    are read from a copy with every function inlined and types inferred.
    """
    probe = ir.serde.deserialize_model(ir.serde.serialize_model(model))
    for k, site in enumerate(find_gridsamples(probe)):
        site.node.metadata_props[_SITE_KEY] = str(k)
    InlinePass()(probe)
    specs: list[list[GridSampleSpec]] = [[] for _ in range(count)]
    for site in find_gridsamples(probe, infer=True):
        if site.spec is not None and _SITE_KEY in site.node.metadata_props:
            specs[int(site.node.metadata_props[_SITE_KEY])].append(site.spec)
    return specs


def _respell(model: ir.Model, target: int) -> None:
    """Spell every GridSample mode, and every function attribute feeding one, for ``target``."""
    names = MODE_NAMES if target >= 20 else OPSET16_SPELLING  # old spelling -> new
    params = _mode_parameters(model)
    for node, _ in _nodes(model):
        for key in _mode_keys(node, params):
            _rename(node.attributes, key, names)
    for function_id, keys in params.items():
        for key in keys:
            _rename(model.functions[function_id].attributes, key, names)


def _mode_parameters(model: ir.Model) -> dict[ir.OperatorIdentifier, set[str]]:
    """Function attributes that end up as a GridSample mode, through any chain of calls."""
    params: dict[ir.OperatorIdentifier, set[str]] = {}
    changed = True
    while changed:
        changed = False
        for function_id, function in model.functions.items():
            own = params.setdefault(function_id, set())
            for node in ir.traversal.RecursiveGraphIterator(function):
                for key in _mode_keys(node, params):
                    attr = node.attributes.get(key)
                    if attr is not None and attr.is_ref() and attr.ref_attr_name not in own:
                        own.add(attr.ref_attr_name)
                        changed = True
    return params


def _mode_keys(node: ir.Node, params: dict[ir.OperatorIdentifier, set[str]]):
    """The attributes of ``node`` that are (or feed) a GridSample mode."""
    return ("mode",) if is_gridsample(node) else tuple(params.get(node.op_identifier(), ()))


def _rename(attributes, key: str, names: dict[str, str]) -> None:
    attr = attributes.get(key)
    if attr is not None and not attr.is_ref() and isinstance(attr.value, str):
        if attr.value in names:
            attributes[key] = ir.AttrString(key, names[attr.value])


def _nodes(model: ir.Model) -> Iterator[tuple[ir.Node, str]]:
    """Every node of the graph, its subgraphs and the functions, with where it lives."""
    for node, location, _ in located_nodes(model):
        yield node, location


def _onnx_nodes(model: ir.Model) -> Iterator[tuple[ir.Node, str]]:
    """Default-domain nodes, each with a description naming it and where it lives."""
    for node, location in _nodes(model):
        if node.domain in ("", "ai.onnx"):
            output = node.outputs[0].name if node.outputs else "?"
            name = repr(node.name) if node.name else f"producing {output!r}"
            yield node, f"{node.op_type} {name} ({location})"


def _check_ops_exist(model: ir.Model, target: int) -> None:
    for node, where in _onnx_nodes(model):
        if not onnx.defs.has(node.op_type, target, ""):
            raise OpsetConversionError(f"{where} does not exist at opset {target}")


def _check_expressible(model: ir.Model, target: int) -> None:
    """Raise if a converted node has an attribute, input or value ``target`` does not know."""
    for node, where in _onnx_nodes(model):
        schema = onnx.defs.get_schema(node.op_type, target, "")
        extra = sorted(set(node.attributes) - set(schema.attributes))
        problem = f"attribute {extra[0]}" if extra else None
        inputs = list(node.inputs)
        while inputs and inputs[-1] is None:
            inputs.pop()
        if len(inputs) > schema.max_input:
            problem = f"input {schema.max_input + 1}"
        for (op, key, value), since in _NEW_VALUES.items():
            attr = node.attributes.get(key)
            if node.op_type == op and target < since and attr is not None and attr.value == value:
                problem = f"{key}={value!r}"
        if problem:
            raise OpsetConversionError(f"{where}: {problem} cannot be expressed at opset {target}")
