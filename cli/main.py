"""``gridsample-lower``: find GridSample in ONNX models and lower it to primitive ops.

Each command is a docstring plus a few calls into ``gridsample_lower``. Exit codes: 0 success,
1 a numerical check failed, 2 bad usage or a model that cannot be read or lowered.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import sys
import tempfile

import click
import onnx
import onnx_ir as ir

import gridsample_lower
from gridsample_lower.inventory import find_gridsamples
from gridsample_lower.registry import support_matrix

__all__ = ["main"]


class Failure(click.ClickException):
    """One line on stderr and a chosen exit code, never a traceback."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code

    def show(self, file=None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(gridsample_lower.__version__, prog_name="gridsample-lower")
def main() -> None:
    """Lower ONNX GridSample to ops every runtime has (Gather, Floor, Where, Mul, ...)."""


@main.command()
@click.argument("model_path", metavar="IN", type=click.Path(dir_okay=False, path_type=pathlib.Path))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, path_type=pathlib.Path),
              help="Where to write the lowered model.")
@click.option("--no-verify", is_flag=True, help="Skip the numerical check against the original.")
@click.option("--samples", default=2, show_default=True, help="Random input sets to check.")
@click.option("--seed", default=0, show_default=True, help="Seed of the random inputs.")
@click.option("--dim", "dims", multiple=True, metavar="NAME=VALUE",
              help="Size of a symbolic dimension in the check (default 3).")
@click.option("-q", "--quiet", is_flag=True, help="Print errors only.")
def lower(model_path, output, no_verify, samples, seed, dims, quiet) -> None:
    """Lower every GridSample in IN (graph, subgraphs, functions) and write OUT.

    The rewrite is checked on random inputs against the original (onnxruntime where it runs
    the original, else onnx.reference) before anything is written.
    """
    model = _load(model_path)
    try:
        lowered, report = gridsample_lower.lower_with_report(model)
    except gridsample_lower.UnsupportedGridSample as error:
        raise Failure(f"{model_path}: {error}") from None
    if not report:
        _write_atomically(output, lambda tmp: shutil.copyfile(model_path, tmp))
        _say(quiet, f"no GridSample in {model_path}; written unchanged to {output}")
        return
    if not no_verify:
        result = gridsample_lower.verify_lowering(
            model, lowered, samples=samples, seed=seed, dims=_parse_dims(dims)
        )
        if not result.ok:
            raise Failure(f"{model_path}: {result.summary()}; nothing written", exit_code=1)
    _write_atomically(output, lambda tmp: onnx.save_model(lowered, tmp))
    for label, count in sorted(report.items()):
        _say(quiet, f"{count} x {label}")
    check = "not verified (--no-verify)" if no_verify else result.summary()
    _say(quiet, f"wrote {output}: {sum(report.values())} GridSample lowered, {check}")


@main.command()
@click.argument("model_path", metavar="IN", type=click.Path(dir_okay=False, path_type=pathlib.Path))
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line instead of a table.")
def inspect(model_path, as_json) -> None:
    """List every GridSample in IN: where it lives, its configuration, whether it can be lowered."""
    model = ir.serde.deserialize_model(_load(model_path))
    rows = [site.describe() for site in find_gridsamples(model, infer=True)]
    if as_json:
        for row in rows:
            click.echo(json.dumps(row))
        return
    if not rows:
        click.echo(f"no GridSample in {model_path}")
        return
    _table(rows)


@main.command()
def supported() -> None:
    """Print the configurations gridsample-lower lowers, and which onnxruntime runs natively."""
    click.echo(support_matrix())
    click.echo("\nX: float16, bfloat16, float, double, every integer type (bool and string: nearest)."
               "\ngrid: float16, bfloat16, float, double. Shapes: static or symbolic.")


def _load(path: pathlib.Path) -> onnx.ModelProto:
    if not path.exists():
        raise Failure(f"{path}: no such file")
    try:
        model = onnx.load_model(path)
    except Exception as error:  # noqa: BLE001  (protobuf and IO errors have many types)
        raise Failure(f"{path}: not a readable ONNX model ({type(error).__name__})") from None
    if not model.HasField("graph"):
        raise Failure(f"{path}: not an ONNX model (no graph)")
    return model


def _write_atomically(target: pathlib.Path, write) -> None:
    """Write through a temporary file beside ``target``; rename only when it is complete."""
    directory = target.parent if str(target.parent) else pathlib.Path(".")
    if not directory.is_dir():
        raise Failure(f"{target}: directory {directory} does not exist")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, target)
    except BaseException:
        pathlib.Path(tmp).unlink(missing_ok=True)
        raise


def _parse_dims(dims: tuple[str, ...]) -> dict[str, int]:
    parsed = {}
    for item in dims:
        name, _, value = item.partition("=")
        if not name or not value.isdigit():
            raise click.BadParameter(f"expected NAME=VALUE, got {item!r}", param_hint="--dim")
        parsed[name] = int(value)
    return parsed


def _table(rows: list[dict]) -> None:
    columns = list(rows[0])
    text = [[str(row[c]) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in text)) for i, c in enumerate(columns)]
    click.echo("  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip())
    for r in text:
        click.echo("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip())


def _say(quiet: bool, message: str) -> None:
    if not quiet:
        click.echo(message)


if __name__ == "__main__":
    sys.exit(main())
