"""``inspect``, ``targets`` and ``supported``: what a model holds, and what the tool can do."""

from __future__ import annotations

import functools
import json

import click
import onnx_ir as ir

from gridsample_lower.cli.batch import JOBS_OPTION, Outcome, expand_inputs, run_each
from gridsample_lower.cli.choices import selection_options
from gridsample_lower.cli.common import MODEL_PATH, Failure, read_model
from gridsample_lower.lowering.attention import selected_attentions
from gridsample_lower.lowering.inventory import find_gridsamples, inferred_types, name_unnamed
from gridsample_lower.lowering.options import LoweringOptions
from gridsample_lower.lowering.plan import in_float32_tail, node_plan
from gridsample_lower.lowering.registry import support_matrix
from gridsample_lower.lowering.targets import TARGETS
from gridsample_lower.text import table

__all__ = ["inspect", "supported", "targets"]


@click.command()
@click.argument("inputs", metavar="IN...", nargs=-1, required=True, type=MODEL_PATH)
@click.option("--json", "as_json", is_flag=True, help="One JSON document instead of a table.")
@JOBS_OPTION
@selection_options
def inspect(inputs, as_json, jobs, **choices) -> None:
    """List every GridSample in IN: where it lives, its configuration, whether it can be lowered.

    The last column says what `lower` would do with the same options, and why; --json adds each
    node's plan (the gather and sum forms, and why). Several models, a folder or a quoted glob
    make one table. Exits 2 when a model cannot be read or a node cannot be lowered.
    """
    models = expand_inputs(inputs)
    options = LoweringOptions.take(choices)
    try:
        options.selection()
    except ValueError as error:
        raise Failure(str(error)) from None
    work = functools.partial(inspect_one, options=options, plans=as_json)
    outcomes = run_each(work, models, [None] * len(models), jobs=jobs, silent=True)
    if as_json:
        document = {
            "ok": all(outcome.code == 0 for outcome in outcomes),
            "models": [{"input": str(o.source), "status": o.status, **o.record} for o in outcomes],
        }
        click.echo(json.dumps(document, indent=2))
    else:
        _print_tables(outcomes)
    worst = max(outcome.code for outcome in outcomes)
    if worst:
        raise Failure(_what_failed(outcomes), worst)


def inspect_one(model_path, _output, *, options: LoweringOptions, plans: bool) -> Outcome:
    """One model's GridSample nodes, described; code 2 if one cannot be lowered."""
    model = ir.serde.deserialize_model(read_model(model_path).proto)
    selection = options.selection()
    rows = []
    with inferred_types(model):  # the target judges by shapes, as it does while lowering
        sites = find_gridsamples(model)
        name_unnamed(model, sites)  # the names --only and --skip take
        try:
            selection.check_matches(sites)  # as lower refuses a filter that matches nothing
        except ValueError as error:
            raise Failure(f"{model_path}: {error}") from None
        for site in sites:
            row = site.describe()
            row["would"] = _would(site, selection)
            if plans and site.spec is not None:  # (the table stays narrow)
                tail = in_float32_tail(site, selection.target)  # as lower plans it
                plan = node_plan(site.spec, site.node, selection.target, tail=tail)
                row["plan"] = plan.describe()
                row["plan_reasons"] = {key: why for key, why in plan.why.items() if why}
            rows.append(row)
        for attention in selected_attentions(sites, selection):  # as the pass groups them
            for sampler in attention.samplers:
                row = rows[[site.node for site in sites].index(sampler)]
                row["would"] = f"lower as one unit: deformable attention {attention.name!r}"
                if "plan" in row:
                    row["plan"] = "deformable attention: one Gather of every level's taps"
    blocked = [row["name"] for row in rows if row["would"].startswith("cannot lower")]
    record: dict = {"gridsamples": rows}
    if blocked:
        record["error"] = f"{model_path}: cannot lower {', '.join(blocked)}"
    return Outcome(model_path, 2 if blocked else 0, [], record)


def _print_tables(outcomes: list[Outcome]) -> None:
    """One table of every node: readable values, the model first where there are several."""
    several = len(outcomes) > 1
    rows = []
    for outcome in outcomes:
        for node in outcome.record.get("gridsamples", []):
            row = {"model": str(outcome.source)} if several else {}
            row.update(
                name=node["name"],
                location=node["location"],
                opset=str(node["opset"]),
                rank="?" if node["rank"] is None else str(node["rank"]),
                mode=node["mode"] + ("" if node["spelling_ok"] else " (misspelled)"),
                padding=node["padding_mode"],
                align_corners="?" if node["align_corners"] is None else str(node["align_corners"]),
                X=node["X"],
                grid=node["grid"],
                ort_native="yes" if node["onnxruntime_native"] else "no",
                would=node["would"] + (f" ({node['problem']})" if node["problem"] else ""),
            )
            rows.append(row)
    for outcome in outcomes:
        if outcome.code == 2 and "gridsamples" not in outcome.record:
            if several:  # (one model's error ends the command)
                click.echo(f"error: {outcome.record.get('error')}", err=True)
        elif not outcome.record.get("gridsamples"):
            click.echo(f"no GridSample in {outcome.source}")
    if rows:
        click.echo(table(rows))


def _what_failed(outcomes: list[Outcome]) -> str:
    failed = [o for o in outcomes if o.code]
    if len(outcomes) == 1:
        return failed[0].record.get("error", "failed")
    return f"{len(failed)} of {len(outcomes)} models cannot be read or fully lowered"


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
