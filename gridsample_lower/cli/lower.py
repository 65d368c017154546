"""``gridsample-lower lower``: lower the GridSample nodes of a model, check, and write it."""

from __future__ import annotations

import click
import onnx_ir as ir

import gridsample_lower
from gridsample_lower.cli.choices import selection_options
from gridsample_lower.cli.common import MODEL_PATH, Failure, say, verify_options
from gridsample_lower.cli.output import (
    copy_unchanged,
    destination,
    open_source,
    output_options,
    verify_and_save,
)
from gridsample_lower.lowering.inventory import find_gridsamples
from gridsample_lower.lowering.options import LoweringOptions

__all__ = ["lower"]


@click.command()
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
