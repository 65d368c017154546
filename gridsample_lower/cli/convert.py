"""``upgrade`` and ``downgrade``: convert models' opset, GridSample respelled, then verified.

Thin shells over ``gridsample_lower.opset``. The converted model must pass the ONNX checker and
the same numerical check as ``lower`` before anything is written; a refusal names the node and
leaves no file behind. Many models at once as ``lower`` takes them (``batch``).
"""

from __future__ import annotations

import functools
import pathlib
import time

import click
import onnx_ir as ir

from gridsample_lower.cli.batch import (
    Outcome,
    batch_options,
)
from gridsample_lower.cli.common import MODEL_PATH, Failure, verify_options
from gridsample_lower.cli.output import (
    Writing,
    output_options,
    run_rewrites,
)
from gridsample_lower.cli.summary import changes
from gridsample_lower.lowering.inventory import find_gridsamples
from gridsample_lower.opset import convert as opsets
from gridsample_lower.opset.onnx_converter import onnx_opset

__all__ = ["downgrade", "upgrade"]

_IN = click.argument("inputs", metavar="IN...", nargs=-1, required=True, type=MODEL_PATH)
_NO_VERIFY = click.option(
    "--no-verify", is_flag=True, help="Skip the numerical check against the original."
)
COLUMNS = {
    "opset": lambda record: record.get("opset", ""),
    "GridSample": lambda record: str(record.get("gridsample", "")),
    "nodes": lambda record: record.get("nodes", ""),
    "seconds": lambda record: str(record.get("seconds", "")),
    "check": lambda record: record.get("check", ""),
}


def _opset_option(allowed: tuple[int, ...], default: int):
    return click.option(
        "--opset",
        "target",
        default=default,
        show_default=True,
        type=click.IntRange(min(allowed), max(allowed)),
        help="The opset to convert to.",
    )


@click.command()
@_IN
@output_options
@_opset_option(opsets.UPGRADE_OPSETS, 20)
@_NO_VERIFY
@verify_options
@batch_options
def upgrade(inputs, target, no_verify, jobs, as_json, quiet, verbose, **check) -> None:
    """Convert IN to opset 20, 21 or 22 and write OUT, GridSample modes spelled linear/cubic.

    Other ops are converted by onnx's version converter; If/Loop/Scan bodies and model-local
    functions follow (so do the function attributes and call-site values that feed a mode),
    and functions, metadata, names and the IR version are kept. A model already at the opset
    only has its spellings repaired: what `inspect` flags as "mode spelled for another opset".
    OUT is written only if it passes the ONNX checker and the check `lower` runs (same options),
    and written as `lower` writes it (--in-place, --external-data, many models to -o DIR/).
    """
    _run_all(inputs, "upgrade", {"opset": target}, no_verify, jobs, as_json, quiet, verbose, check)


@click.command()
@_IN
@output_options
@_opset_option(opsets.DOWNGRADE_OPSETS, 16)
@click.option(
    "--lower-rest",
    is_flag=True,
    help="Lower the GridSample nodes that cannot exist at the opset instead of stopping.",
)
@_NO_VERIFY
@verify_options
@batch_options
def downgrade(
    inputs, target, lower_rest, no_verify, jobs, as_json, quiet, verbose, **check
) -> None:
    """Convert IN to opset 16-19 and write OUT, for runtimes that only know GridSample-16.

    Modes become bilinear/bicubic everywhere; other ops are converted down where ONNX allows
    it. A GridSample that cannot exist at the opset (spatial rank other than 2, bfloat16) stops
    the conversion with the node named, unless --lower-rest lowers exactly those nodes; so does
    any other op that cannot be expressed there. OUT is written only if it passes the ONNX
    checker and the check `lower` runs (same options), and written as `lower` writes it
    (--in-place, --external-data, many models to -o DIR/).
    """
    arguments = {"opset": target, "lower_rest": lower_rest}
    _run_all(inputs, "downgrade", arguments, no_verify, jobs, as_json, quiet, verbose, check)


def _run_all(inputs, direction, arguments, no_verify, jobs, as_json, quiet, verbose, check):
    one = functools.partial(convert_one, direction=direction, arguments=arguments)
    flags = {"no_verify": no_verify, "jobs": jobs, "as_json": as_json, "quiet": quiet}
    run_rewrites(inputs, check, one, COLUMNS, verbose=verbose, **flags)


def convert_one(
    model_path: pathlib.Path,
    output: pathlib.Path | None,
    *,
    direction: str,
    arguments: dict,
    writing: Writing,
) -> Outcome:
    """Convert one model's opset and write it; what happened, as lines and a record."""
    start = time.perf_counter()
    dest, source = writing.open(model_path, output)
    try:
        converted = getattr(opsets, direction)(source.proto, **arguments)
    except opsets.OpsetConversionError as error:
        raise Failure(f"{model_path}: {error}") from None
    verdict = writing.save(source, converted, dest, full_check=True)
    left = len(find_gridsamples(ir.serde.deserialize_model(converted)))
    opset = f"{onnx_opset(source.proto.opset_import)} -> {arguments['opset']}"
    change = changes(source, converted, dest.result_files(source))
    record = {
        "output": str(dest.path),
        "opset": opset,
        "gridsample": left,
        **change,
        "seconds": round(time.perf_counter() - start, 2),
        "check": "not verified" if writing.no_verify else "verified",
        "verdict": verdict,
        "summary": f"opset {opset}, {left} GridSample",
    }
    line = f"wrote {dest.path}: opset {opset}, {left} GridSample, {verdict}"
    return Outcome(model_path, 0, [line], record)
