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
from gridsample_lower.cli.common import (
    Failure,
    load_model,
    run_verification,
    say,
    verify_options,
    write_atomically,
)

from gridsample_lower import opset as opsets
from gridsample_lower.inventory import find_gridsamples
from gridsample_lower.version_converter import onnx_opset

__all__ = ["downgrade", "upgrade"]

_IN = click.argument(
    "model_path", metavar="IN", type=click.Path(dir_okay=False, path_type=pathlib.Path)
)
_OUT = click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(dir_okay=False, path_type=pathlib.Path),
    help="Where to write the converted model.",
)
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
@_OUT
@_opset_option(opsets.UPGRADE_OPSETS, 20)
@_NO_VERIFY
@verify_options
@_QUIET
def upgrade(model_path, output, target, no_verify, quiet, **check) -> None:
    """Convert IN to opset 20, 21 or 22 and write OUT, GridSample modes spelled linear/cubic.

    Other ops are converted by onnx's version converter; If/Loop/Scan bodies and model-local
    functions follow (so do the function attributes and call-site values that feed a mode),
    and functions, metadata, names and the IR version are kept. A model already at the opset
    only has its spellings repaired: what `inspect` flags as "mode spelled for another opset".
    OUT is written only if it passes the ONNX checker and the check `lower` runs (same options).
    """
    model = load_model(model_path)
    converted = _convert(model_path, opsets.upgrade, model, target)
    _finish(model_path, model, converted, output, target, no_verify, quiet, check)


@click.command()
@_IN
@_OUT
@_opset_option(opsets.DOWNGRADE_OPSETS, 16)
@click.option(
    "--lower-rest",
    is_flag=True,
    help="Lower the GridSample nodes that cannot exist at the opset instead of stopping.",
)
@_NO_VERIFY
@verify_options
@_QUIET
def downgrade(model_path, output, target, lower_rest, no_verify, quiet, **check) -> None:
    """Convert IN to opset 16-19 and write OUT, for runtimes that only know GridSample-16.

    Modes become bilinear/bicubic everywhere; other ops are converted down where ONNX allows
    it. A GridSample that cannot exist at the opset (spatial rank other than 2, bfloat16) stops
    the conversion with the node named, unless --lower-rest lowers exactly those nodes; so does
    any other op that cannot be expressed there. OUT is written only if it passes the ONNX
    checker and the check `lower` runs (same options).
    """
    model = load_model(model_path)
    converted = _convert(model_path, opsets.downgrade, model, target, lower_rest=lower_rest)
    _finish(model_path, model, converted, output, target, no_verify, quiet, check)


def _convert(model_path: pathlib.Path, convert: Callable[..., onnx.ModelProto], *args, **kwargs):
    """``convert(*args, **kwargs)``, its refusal turned into a one-line failure."""
    try:
        return convert(*args, **kwargs)
    except opsets.OpsetConversionError as error:
        raise Failure(f"{model_path}: {error}") from None


def _finish(model_path, model, converted, output, target, no_verify, quiet, check) -> None:
    """Check ``converted`` (checker, then numerically against ``model``), write it, report."""
    try:
        onnx.checker.check_model(converted, full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as error:
        reason = str(error).strip().splitlines()[0]
        raise Failure(
            f"{model_path}: the converted model fails the ONNX checker: {reason}"
        ) from None
    if no_verify and check["report_path"]:
        raise click.UsageError("--report needs the check: drop --no-verify")
    result = None if no_verify else run_verification(model, converted, quiet=quiet, **check)
    if result is not None and not result.ok:
        click.echo(result.table())
        raise Failure(f"{model_path}: {result.summary()}; nothing written", exit_code=1)
    write_atomically(output, lambda tmp: onnx.save_model(converted, tmp))
    left = len(find_gridsamples(ir.serde.deserialize_model(converted)))
    verdict = "not verified (--no-verify)" if result is None else result.summary()
    say(
        quiet,
        f"wrote {output}: opset {onnx_opset(model.opset_import)} -> {target}, "
        f"{left} GridSample, {verdict}",
    )
