"""``upgrade`` and ``downgrade``: convert a model's opset, GridSample respelled, then verified.

Thin shells over ``gridsample_lower.opset``. The converted model must pass the ONNX checker and
the same numerical check as ``lower`` before anything is written; a refusal names the node and
leaves no file behind.
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable

import click
import onnx
import onnx_ir as ir

from gridsample_lower.cli.common import MODEL_PATH, Failure, say, verify_options
from gridsample_lower.cli.output import destination, open_source, output_options, verify_and_save
from gridsample_lower.lowering.inventory import find_gridsamples
from gridsample_lower.opset import convert as opsets
from gridsample_lower.opset.onnx_converter import onnx_opset

__all__ = ["downgrade", "upgrade"]

_IN = click.argument("model_path", metavar="IN", type=MODEL_PATH)
_NO_VERIFY = click.option(
    "--no-verify", is_flag=True, help="Skip the numerical check against the original."
)
_QUIET = click.option("-q", "--quiet", is_flag=True, help="Print errors only.")


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
@_QUIET
def upgrade(model_path, target, no_verify, quiet, **check) -> None:
    """Convert IN to opset 20, 21 or 22 and write OUT, GridSample modes spelled linear/cubic.

    Other ops are converted by onnx's version converter; If/Loop/Scan bodies and model-local
    functions follow (so do the function attributes and call-site values that feed a mode),
    and functions, metadata, names and the IR version are kept. A model already at the opset
    only has its spellings repaired: what `inspect` flags as "mode spelled for another opset".
    OUT is written only if it passes the ONNX checker and the check `lower` runs (same options),
    and written as `lower` writes it (--in-place, --external-data).
    """
    dest, source = _open(model_path, no_verify, check)
    converted = _convert(model_path, opsets.upgrade, source.proto, target)
    _finish(source, converted, dest, target, no_verify, quiet, check)


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
@_QUIET
def downgrade(model_path, target, lower_rest, no_verify, quiet, **check) -> None:
    """Convert IN to opset 16-19 and write OUT, for runtimes that only know GridSample-16.

    Modes become bilinear/bicubic everywhere; other ops are converted down where ONNX allows
    it. A GridSample that cannot exist at the opset (spatial rank other than 2, bfloat16) stops
    the conversion with the node named, unless --lower-rest lowers exactly those nodes; so does
    any other op that cannot be expressed there. OUT is written only if it passes the ONNX
    checker and the check `lower` runs (same options), and written as `lower` writes it
    (--in-place, --external-data).
    """
    dest, source = _open(model_path, no_verify, check)
    converted = _convert(model_path, opsets.downgrade, source.proto, target, lower_rest=lower_rest)
    _finish(source, converted, dest, target, no_verify, quiet, check)


def _convert(model_path: pathlib.Path, convert: Callable[..., onnx.ModelProto], *args, **kwargs):
    """``convert(*args, **kwargs)``, its refusal turned into a one-line failure."""
    try:
        return convert(*args, **kwargs)
    except opsets.OpsetConversionError as error:
        raise Failure(f"{model_path}: {error}") from None


def _open(model_path, no_verify: bool, options: dict):
    """The destination (its options popped from ``options``) and the model to convert."""
    dest = destination(model_path, options, verifying=not no_verify)
    if no_verify and options["report_path"]:
        raise click.UsageError("--report needs the check: drop --no-verify")
    return dest, open_source(model_path, dest, verifying=not no_verify)


def _finish(source, converted, dest, target, no_verify, quiet, check) -> None:
    """Check ``converted`` numerically against the source, write it (full checker), report."""
    verdict = verify_and_save(source, converted, dest, no_verify, quiet, check, full_check=True)
    left = len(find_gridsamples(ir.serde.deserialize_model(converted)))
    say(
        quiet,
        f"wrote {dest.path}: opset {onnx_opset(source.proto.opset_import)} -> {target}, "
        f"{left} GridSample, {verdict}",
    )
