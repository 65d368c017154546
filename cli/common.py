"""What every command shares: one-line failures with exit codes, loading, atomic writes."""

from __future__ import annotations

import os
import pathlib
import tempfile

import click
import onnx

__all__ = ["Failure", "load_model", "parse_dims", "say", "write_atomically"]


class Failure(click.ClickException):
    """One line on stderr and a chosen exit code, never a traceback."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code

    def show(self, file=None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


def load_model(path: pathlib.Path) -> onnx.ModelProto:
    if not path.exists():
        raise Failure(f"{path}: no such file")
    try:
        model = onnx.load_model(path)
    except Exception as error:  # noqa: BLE001  (protobuf and IO errors have many types)
        raise Failure(f"{path}: not a readable ONNX model ({type(error).__name__})") from None
    if not model.HasField("graph"):
        raise Failure(f"{path}: not an ONNX model (no graph)")
    return model


def write_atomically(target: pathlib.Path, write) -> None:
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


def parse_dims(dims: tuple[str, ...]) -> dict[str, int]:
    parsed = {}
    for item in dims:
        name, _, value = item.partition("=")
        if not name or not value.isdigit():
            raise click.BadParameter(f"expected NAME=VALUE, got {item!r}", param_hint="--dim")
        parsed[name] = int(value)
    return parsed


def say(quiet: bool, message: str) -> None:
    if not quiet:
        click.echo(message)
