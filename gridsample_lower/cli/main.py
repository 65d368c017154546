"""``gridsample-lower``: find GridSample in ONNX models and lower it to primitive ops.

Each command is a docstring plus a few calls into ``gridsample_lower``. Exit codes: 0 success,
1 a numerical check failed, 2 bad usage or a model that cannot be read or lowered.
"""

from __future__ import annotations

import json
import sys

import click
import onnx_ir as ir

import gridsample_lower
from gridsample_lower.cli.choices import selection_options
from gridsample_lower.cli.common import (
    MODEL_PATH,
    Failure,
    OneLineUsage,
    read_model,
    say,
    verify_options,
)
from gridsample_lower.cli.convert import downgrade, upgrade
from gridsample_lower.cli.output import (
    copy_unchanged,
    destination,
    open_source,
    output_options,
    verify_and_save,
)
from gridsample_lower.cli.verify import verify
from gridsample_lower.lowering.inventory import find_gridsamples, inferred_types, name_unnamed
from gridsample_lower.lowering.options import LoweringOptions
from gridsample_lower.lowering.plan import node_plan
from gridsample_lower.lowering.registry import support_matrix
from gridsample_lower.lowering.targets import TARGETS
from gridsample_lower.text import table

__all__ = ["main"]


@click.group(cls=OneLineUsage, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(gridsample_lower.__version__, prog_name="gridsample-lower")
def main() -> None:
    """Lower ONNX GridSample to ops every runtime has (Gather, Floor, Where, Mul, ...)."""


@main.command()
@click.argument("model_path", metavar="IN", type=MODEL_PATH)
@output_options
@selection_options
@click.option(
    "--as-functions",
    is_flag=True,
    help="Emit each configuration once as a function (domain gridsample_lower).",
)
@click.option("--no-verify", is_flag=True, help="Skip the numerical check against the original.")
@verify_options
@click.option("-q", "--quiet", is_flag=True, help="Print errors only.")
def lower(model_path, as_functions, no_verify, quiet, **options) -> None:
    """Lower the GridSample nodes in IN (graph, subgraphs, functions) and write OUT.

    By default every GridSample is lowered; --target keeps what a runtime runs natively and
    uses only the ops it has, and --only/--skip/--modes/--ranks narrow the choice further.
    Before anything is written, the lowered model is checked against the original as
    `gridsample-lower verify` does (same options): every output, and every GridSample alone
    against the nodes it was lowered to. On a mismatch the report is printed, nothing is
    written and the exit code is 1.

    IN must pass the ONNX checker (--no-check: go on anyway), and so must OUT. OUT is written
    to a temporary file and renamed when complete; IN is never modified unless --in-place.
    Weights in external files stay external (in OUT.data, or the file --external-data names).
    """
    lowering = LoweringOptions.take(options, as_functions=as_functions)
    dest = destination(model_path, options, verifying=not no_verify)
    check = options
    if no_verify and check["report_path"]:
        raise click.UsageError("--report needs the check: drop --no-verify")
    source = open_source(model_path, dest, verifying=not no_verify)
    try:
        lowered, report = gridsample_lower.lower_with_report(source.proto, lowering)
    except (gridsample_lower.UnsupportedGridSample, ValueError) as error:
        raise Failure(f"{model_path}: {error}") from None
    if not report:
        kept = len(find_gridsamples(ir.serde.deserialize_model(source.proto)))
        what = f"nothing to lower ({kept} GridSample kept)" if kept else "no GridSample"
        say(quiet, f"{what} in {model_path}; {copy_unchanged(source, dest)}")
        return
    verdict = verify_and_save(source, lowered, dest, no_verify, quiet, check)
    for label, count in sorted(report.items()):
        say(quiet, f"{count} x {label}")
    say(quiet, f"wrote {dest.path}: {sum(report.values())} GridSample lowered, {verdict}")


@main.command()
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


@main.command()
def targets() -> None:
    """List the targets --target accepts, with what each one means."""
    width = max(map(len, TARGETS))
    for name, target in TARGETS.items():
        click.echo(f"{name.ljust(width)}  {target.description}")


@main.command()
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


main.add_command(verify)
main.add_command(upgrade)
main.add_command(downgrade)

if __name__ == "__main__":
    sys.exit(main())
