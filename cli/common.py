"""What every command shares: one-line failures with exit codes, loading, atomic writes.

Also the verifier's options and how a command runs it (``verify_options``, ``run_verification``),
shared by ``verify`` and ``lower``.
"""

from __future__ import annotations

import math
import os
import pathlib
import sys
import tempfile
import time

import click
import onnx

from gridsample_lower.verify import (
    DEFAULT_DIM,
    VerificationReport,
    VerificationSetupError,
    load_inputs,
    verify,
)

__all__ = [
    "Failure",
    "load_model",
    "parse_dims",
    "parse_tolerances",
    "run_verification",
    "say",
    "verify_options",
    "write_atomically",
]


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


def parse_tolerances(values: tuple[str, ...], option: str) -> dict[str, float] | None:
    """``("1e-4", "out0:1e-3")`` -> ``{"*": 1e-4, "out0": 1e-3}``; None when none is given."""
    parsed = {}
    for item in values:
        name, _, value = item.rpartition(":")
        try:
            bound = float(value)
        except ValueError:
            bound = -1.0
        if not bound >= 0:
            raise click.BadParameter(f"expected [NAME:]VALUE >= 0, got {item!r}", param_hint=option)
        parsed[name or "*"] = bound
    return parsed or None


_VERIFY_OPTIONS = [
    click.option(
        "--inputs",
        "input_specs",
        multiple=True,
        metavar="FILE.npz|NAME:FILE.npy",
        help="Given input values (repeatable); the others are drawn at random.",
    ),
    click.option(
        "--dim",
        "dims",
        multiple=True,
        metavar="NAME=VALUE",
        help=f"Size of a symbolic dimension (default: from given inputs, else {DEFAULT_DIM}).",
    ),
    click.option(
        "--samples",
        default=3,
        show_default=True,
        type=click.IntRange(min=1),
        help="Random input sets to run.",
    ),
    click.option("--seed", default=0, show_default=True, help="Seed of the random inputs."),
    click.option(
        "--atol",
        multiple=True,
        metavar="[NAME:]VALUE",
        help="Absolute tolerance, for all or for one output or GridSample node.",
    ),
    click.option(
        "--rtol",
        multiple=True,
        metavar="[NAME:]VALUE",
        help="Relative tolerance, likewise (default: the tolerance table).",
    ),
    click.option(
        "--report",
        "report_path",
        metavar="FILE.json",
        type=click.Path(dir_okay=False, path_type=pathlib.Path),
        help="Also write the report as JSON.",
    ),
]


def verify_options(command):
    """Decorate ``command`` with the verifier's options (``verify`` and ``lower`` share them)."""
    for option in reversed(_VERIFY_OPTIONS):
        command = option(command)
    return command


def run_verification(
    reference: onnx.ModelProto,
    candidate: onnx.ModelProto,
    *,
    quiet: bool,
    input_specs: tuple[str, ...],
    dims: tuple[str, ...],
    samples: int,
    seed: int,
    atol: tuple[str, ...],
    rtol: tuple[str, ...],
    report_path: pathlib.Path | None,
) -> VerificationReport:
    """Run ``verify`` with the options of ``verify_options``; write the JSON report if asked."""
    progress = Progress(quiet)
    try:
        report = verify(
            reference,
            candidate,
            load_inputs(input_specs),
            atol=parse_tolerances(atol, "--atol"),
            rtol=parse_tolerances(rtol, "--rtol"),
            samples=samples,
            seed=seed,
            dims=parse_dims(dims),
            progress=progress,
        )
    except VerificationSetupError as error:
        raise Failure(str(error)) from None
    finally:
        progress.close()
    if report_path is not None:
        write_atomically(report_path, lambda tmp: pathlib.Path(tmp).write_text(report.to_json()))
    return report


class Progress:
    """Report a long check's progress on stderr, from ``after`` seconds on.

    On a terminal one line is rewritten in place; elsewhere a line is printed every 2 seconds.
    """

    def __init__(self, quiet: bool, after: float = 1.0) -> None:
        self._quiet, self._after = quiet, after
        self._tty = sys.stderr.isatty()
        self._start, self._last = time.monotonic(), -math.inf
        self._width = 0

    def __call__(self, done: int, total: int, step: str) -> None:
        now = time.monotonic()
        interval = 0.1 if self._tty else 2.0
        if self._quiet or now - self._start < self._after or now - self._last < interval:
            return
        self._last = now
        line = f"verifying {done}/{total}: {step}"
        if self._tty:
            click.echo("\r" + line.ljust(self._width), err=True, nl=False)
            self._width = len(line)
        else:
            click.echo(line, err=True)

    def close(self) -> None:
        if self._width:
            click.echo("\r" + " " * self._width + "\r", err=True, nl=False)
