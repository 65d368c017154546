"""``gridsample-lower verify``: check that one model computes what another computes."""

from __future__ import annotations

import click

from gridsample_lower.cli.common import (
    MODEL_PATH,
    check_report,
    checkable,
    read_model,
    run_verification,
    verify_options,
)

__all__ = ["verify"]


@click.command()
@click.argument("reference_path", metavar="REFERENCE", type=MODEL_PATH)
@click.argument("candidate_path", metavar="CANDIDATE", type=MODEL_PATH)
@verify_options
@click.option("-q", "--quiet", is_flag=True, help="Print the verdict line only.")
def verify(reference_path, candidate_path, quiet, **check) -> None:
    """Check that CANDIDATE, a lowered model say, computes what REFERENCE computes.

    Both run on the same inputs, random by default (grids in [-1.25, 1.25] with exact sampling
    positions and half-way ties mixed in) or given with --inputs, and every output is compared,
    dtype and shape included. REFERENCE runs in onnxruntime where it runs every GridSample
    natively, else in onnx.reference. Each GridSample of REFERENCE is also run alone on the X
    and grid it actually sees and compared with the nodes CANDIDATE lowered it to (named
    '<node name>/<Op>_<k>'), so a mismatch names the node responsible.

    Tolerances follow the table in tolerances.py per dtype and mode (nearest: exact); --atol and
    --rtol override them for everything (1e-4) or for one output or node (out0:1e-3).

    Exit codes: 0 everything within tolerance, 1 a mismatch, 2 bad usage or unreadable input.
    """
    reference, candidate = read_model(reference_path), read_model(candidate_path)
    check_report(check["report_path"], [*reference.files, *candidate.files])
    models = [*checkable(reference, reference.proto), *checkable(candidate, candidate.proto)]
    report = run_verification(*models, quiet=quiet, **check)
    click.echo(report.summary() if quiet else report.table())
    if not report.ok:
        click.get_current_context().exit(1)
