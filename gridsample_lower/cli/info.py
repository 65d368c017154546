"""``inspect``, ``targets`` and ``supported``: what a model holds, and what the tool can do."""

from __future__ import annotations

import json

import click
import onnx_ir as ir

from gridsample_lower.cli.choices import selection_options
from gridsample_lower.cli.common import MODEL_PATH, Failure, read_model
from gridsample_lower.lowering.inventory import find_gridsamples, inferred_types, name_unnamed
from gridsample_lower.lowering.options import LoweringOptions
from gridsample_lower.lowering.plan import node_plan
from gridsample_lower.lowering.registry import support_matrix
from gridsample_lower.lowering.targets import TARGETS
from gridsample_lower.text import table

__all__ = ["inspect", "supported", "targets"]


@click.command()
@click.argument("model_path", metavar="IN", type=MODEL_PATH)
@click.option(
    "--json", "as_json", is_flag=True, help="One JSON object per line instead of a table."
)
@selection_options
def inspect(model_path, as_json, **choices) -> None:
    """List every GridSample in IN: where it lives, its configuration, whether it can be lowered.

    The last column says what `lower` would do with the same options, and why.
    """
    model = ir.serde.deserialize_model(read_model(model_path).proto)
    rows = []
    with inferred_types(model):  # the target judges by shapes, as it does while lowering
        sites = find_gridsamples(model)
        name_unnamed(model, sites)  # the names --only and --skip take
        try:
            selection = LoweringOptions.take(choices).selection()
            selection.check_matches(sites)  # as lower refuses a filter that matches nothing
        except ValueError as error:
            raise Failure(f"{model_path}: {error}") from None
        for site in sites:
            row = site.describe()
            row["would"] = _would(site, selection)
            if as_json and site.spec is not None:  # (the table stays narrow)
                plan = node_plan(site.spec, site.node, selection.target)
                row["plan"] = plan.describe()
                row["plan_reasons"] = {key: why for key, why in plan.why.items() if why}
            rows.append(row)
    if as_json:
        for row in rows:
            click.echo(json.dumps(row))
        return
    if not rows:
        click.echo(f"no GridSample in {model_path}")
        return
    click.echo(table(rows))


@click.command()
def targets() -> None:
    """List the targets --target accepts, with what each one means."""
    width = max(map(len, TARGETS))
    for name, target in TARGETS.items():
        click.echo(f"{name.ljust(width)}  {target.description}")


@click.command()
def supported() -> None:
    """Print the configurations gridsample-lower lowers, and which onnxruntime runs natively."""
    click.echo(support_matrix())
    click.echo(
        "\nX: float16, bfloat16, float, double, every integer type (bool and string: nearest)."
        "\ngrid: float16, bfloat16, float, double. Shapes: static or symbolic."
    )


def _would(site, selection) -> str:
    """What `lower` does with the node: lower it, keep it (why), or refuse it (why, if known)."""
    if site.spec is None:
        return "cannot lower"  # (the problem column says why)
    kept = selection.why_kept(site.node.name, site.spec, site.node)
    if kept:
        return "keep: " + kept
    refused = node_plan(site.spec, site.node, selection.target).refusal  # as the rule does
    return "cannot lower: " + refused if refused else "lower"
