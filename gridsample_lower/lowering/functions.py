"""Emit each lowered configuration once, as a model-local function, and call it at every node.

A graph then stays readable in a viewer (one call where each GridSample was), and a runtime
may choose to run the function natively. The body is the lowering of a one-node model with
symbolic sizes, the same rank and the same dtypes, so one function serves every call.
"""

from __future__ import annotations

from collections.abc import Callable

import onnx_ir as ir

from gridsample_lower.lowering.inventory import Site
from gridsample_lower.models import gridsample_model
from gridsample_lower.spec import GridSampleSpec

__all__ = ["DOMAIN", "Lowering", "call_functions", "function_name", "untype_functions"]

DOMAIN = "gridsample_lower"


def function_name(spec: GridSampleSpec) -> str:
    """``GridSample_r2_linear_zeros_ac0_float_float``: one per configuration and dtypes."""
    dtypes = f"{spec.x_dtype.name.lower()}_{spec.grid_dtype.name.lower()}"
    return (
        f"GridSample_r{spec.rank}_{spec.mode}_{spec.padding_mode}_ac{spec.align_corners}_{dtypes}"
    )


Lowering = Callable[[ir.Model], ir.Model]


def call_functions(model: ir.Model, sites: list[Site], lowering: Lowering) -> int:
    """Replace each site's GridSample by a call of its configuration's function.

    ``lowering`` lowers the one-node model a function body is made from (the pass, for the
    target at hand).
    """
    opset = model.opset_imports.get("", 20)
    for site in sites:
        name = function_name(site.spec)
        if (DOMAIN, name, "") not in model.functions:
            model.functions[(DOMAIN, name, "")] = _function(name, site.spec, lowering, opset)
        node = site.node
        call = ir.Node(DOMAIN, name, node.inputs[:2], num_outputs=1, name=node.name)
        ir.convenience.replace_nodes_and_values(
            node.graph, node, [node], [call], node.outputs, call.outputs
        )
    if sites:
        model.opset_imports.setdefault(DOMAIN, 1)
    return len(sites)


def _function(name: str, spec: GridSampleSpec, lowering: Lowering, opset: int) -> ir.Function:
    r = spec.rank
    template = gridsample_model(
        ["N", "C", *[f"d{i}" for i in range(r)]],
        ["N", *[f"o{i}" for i in range(r)], r],
        spec.mode,
        spec.padding_mode,
        spec.align_corners,
        x_dtype=spec.x_dtype,
        grid_dtype=spec.grid_dtype,
        opset=max(opset, 20),
        ir_version=10,
    )
    graph = lowering(ir.serde.deserialize_model(template)).graph
    graph.opset_imports.clear()
    graph.opset_imports[""] = opset
    function = ir.Function(DOMAIN, name, "", graph=graph, attributes=())
    _untype(function)
    return function


def untype_functions(model: ir.Model) -> None:
    """Drop the value types inside our functions, which loading a model gives Constants back.

    A function is untyped, and onnx_ir writes the types of function values (IR < 10) as
    value_info named "domain::function/value" that it cannot read back when the value's name
    holds a "/", as lowered nodes' outputs do: without this, lowering twice would differ.
    """
    for (domain, _, _), function in model.functions.items():
        if domain == DOMAIN:
            _untype(function)


def _untype(function: ir.Function) -> None:
    inner = (output for node in function for output in node.outputs)
    for value in (*function.inputs, *inner):
        value.type, value.shape = None, None
