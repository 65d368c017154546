"""``gridsample-lower lower``: lower the GridSample nodes of models, check, and write them."""

from __future__ import annotations

import functools
import pathlib
import time

import click

from gridsample_lower.cli.batch import (
    Outcome,
    batch_options,
)
from gridsample_lower.cli.choices import selection_options
from gridsample_lower.cli.common import MODEL_PATH, Failure, verify_options
from gridsample_lower.cli.output import (
    Writing,
    copy_unchanged,
    output_options,
    run_rewrites,
)
from gridsample_lower.cli.summary import changes, kept_gridsamples
from gridsample_lower.lowering.api import lower_with_report
from gridsample_lower.lowering.options import LoweringOptions
from gridsample_lower.spec import UnsupportedGridSample

__all__ = ["lower"]

# The batch table's columns, from each model's record (--json has all of it).
COLUMNS = {
    "lowered": lambda record: str(sum(record["lowered"].values())),
    "kept": lambda record: str(len(record["kept"])),
    "nodes": lambda record: record.get("nodes", "-"),
    "size": lambda record: record.get("size", "-"),
    "seconds": lambda record: str(record.get("seconds", "")),
    "check": lambda record: record.get("check", ""),
}


@click.command()
@click.argument("inputs", metavar="IN...", nargs=-1, required=True, type=MODEL_PATH)
@output_options
@selection_options
@click.option(
    "--as-functions",
    is_flag=True,
    help="Emit each configuration once as a function (domain gridsample_lower).",
)
@click.option("--no-verify", is_flag=True, help="Skip the numerical check against the original.")
@verify_options
@batch_options
def lower(inputs, as_functions, no_verify, jobs, as_json, quiet, verbose, **options) -> None:
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

    Many models at once: several IN, a folder (its *.onnx) or a quoted glob, with -o DIR/
    (or --in-place); --jobs N works on N at a time; one table (or --json) ends the run, and
    the exit code is the worst model's.
    """
    lowering = LoweringOptions.take(options, as_functions=as_functions)
    one = functools.partial(lower_one, lowering=lowering)
    flags = {"no_verify": no_verify, "jobs": jobs, "as_json": as_json, "quiet": quiet}
    run_rewrites(inputs, options, one, COLUMNS, verbose=verbose, **flags)


def lower_one(
    model_path: pathlib.Path,
    output: pathlib.Path | None,
    *,
    lowering: LoweringOptions,
    writing: Writing,
) -> Outcome:
    """Lower one model and write it; what happened, as lines and a record (prints nothing)."""
    start = time.perf_counter()
    dest, source = writing.open(model_path, output)
    try:
        lowered, report = lower_with_report(source.proto, lowering)
    except (UnsupportedGridSample, ValueError) as error:
        raise Failure(f"{model_path}: {error}") from None
    selection = lowering.selection()
    kept = kept_gridsamples(source.proto, selection)
    record = {"output": str(dest.path), "lowered": dict(sorted(report.items())), "kept": kept}
    if not report:
        what = f"nothing to lower ({len(kept)} GridSample kept)" if kept else "no GridSample"
        done = copy_unchanged(source, dest)
        record.update(check="-", summary=what, seconds=round(time.perf_counter() - start, 2))
        return Outcome(model_path, 0, [f"{what} in {model_path}; {done}"], record)
    verdict = writing.save(source, lowered, dest)
    seconds = time.perf_counter() - start
    change = changes(source, lowered, dest.result_files(source))
    lowered_count = sum(report.values())
    checked = "not verified" if writing.no_verify else "verified"
    record.update(change, seconds=round(seconds, 2), check=checked, verdict=verdict)
    record["summary"] = f"{lowered_count} GridSample lowered, nodes {change['nodes']}"
    lines = [f"{count} x {label}" for label, count in sorted(report.items())]
    lines.append(f"nodes {change['nodes']}, size {change['size']}, {seconds:.1f} s")
    if change["ops_added"]:
        lines.append("ops added: " + ", ".join(change["ops_added"]))
    lines += [f"kept {item}" for item in kept]
    lines.append(f"wrote {dest.path}: {lowered_count} GridSample lowered, {verdict}")
    return Outcome(model_path, 0, lines, record)
