"""What every command shares: one-line failures with exit codes, reading models, atomic writes.

Models are read through ``gridsample_lower.files.model_io`` (external weights left on disk), whose
errors become one-line failures. Also the verifier's options and how a command runs it
(``verify_options``, ``run_verification``), shared by ``verify``, ``lower``, ``upgrade`` and
``downgrade``; how those last three write their model is in ``output.py``.
"""

from __future__ import annotations

import math
import pathlib
import sys
import time
from typing import TYPE_CHECKING

import click
import onnx

from gridsample_lower.cli.collector import collecting
from gridsample_lower.cli.errors import Failure, OneLineUsage
from gridsample_lower.files import atomic, model_io
from gridsample_lower.files.model_io import ModelCheckError, ModelFile, ModelFileError

if TYPE_CHECKING:
    from gridsample_lower.check import VerificationReport

__all__ = [
    "MODEL_PATH",
    "Failure",
    "OneLineUsage",
    "check_report",
    "checkable",
    "fits_the_check",
    "parse_dims",
    "parse_tolerances",
    "read_model",
    "run_verification",
    "say",
    "verify_options",
    "write_atomically",
    "write_report",
]

# Directories are accepted here so that the error is ours: one line, not click's usage text.
MODEL_PATH = click.Path(path_type=pathlib.Path)


def read_model(path: pathlib.Path, *, check: bool = False, hint: str = "") -> ModelFile:
    """The model at ``path``, external weights left on disk; ``hint`` follows a checker failure."""
    try:
        return model_io.load_model(path, check=check)
    except ModelCheckError as error:
        raise Failure(f"{error}{hint}") from None
    except ModelFileError as error:
        raise Failure(str(error)) from None


def checkable(source: ModelFile, *protos: onnx.ModelProto) -> list[onnx.ModelProto]:
    """``protos`` (``source``'s model and its rewrites) with the weights the check runs with."""
    fits_the_check(source)
    try:
        return model_io.with_weights(protos, source.base_dir)
    except ModelFileError as error:  # the weights changed since they were checked
        raise Failure(str(error)) from None


def fits_the_check(source: ModelFile) -> None:
    """Refuse a model the numerical check cannot hold (2 GiB and more with its weights)."""
    if not source.fits_in_memory():
        size = (source.proto.ByteSize() + source.external_bytes) / 2**30
        raise Failure(
            f"{source.path}: {size:.1f} GiB with its weights: too large for the numerical check, "
            "which runs models from memory (protobuf stops at 2 GiB); --no-verify skips it"
        )


def write_atomically(target: pathlib.Path, write) -> None:
    """Write through a temporary file beside ``target``; rename only when it is complete."""
    try:
        model_io.write_atomically(target, write)
    except ModelFileError as error:
        raise Failure(str(error)) from None


def check_report(report_path: pathlib.Path | None, inputs, outputs=()) -> None:
    """Refuse, before any work, a --report that cannot be written or would replace a model file.

    ``inputs``: the files read (models and their external data); ``outputs``: those written.
    """
    if report_path is None:
        return
    try:
        model_io.check_destination(report_path, None, inputs)
    except ModelFileError as error:
        raise Failure(f"--report {error}") from None
    if any(atomic.same_file(report_path, output) for output in outputs):
        raise Failure(f"--report {report_path}: is one of the output's files")


def write_report(report_path: pathlib.Path | None, report: VerificationReport) -> None:
    """Write ``report`` as JSON to ``report_path`` (if given), atomically."""
    if report_path is not None:
        write_atomically(report_path, lambda tmp: pathlib.Path(tmp).write_text(report.to_json()))


def parse_dims(dims: tuple[str, ...]) -> dict[str, int]:
    parsed = {}
    for item in dims:
        name, _, value = item.partition("=")
        if not name or not (value.isascii() and value.isdigit()):
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
        help="Size of a symbolic dimension, or of a symbol in one (h for 32*h) (default: from "
        "given inputs, else 128 along image axes, 3 elsewhere).",
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
    source: pathlib.Path | None = None,
    skippable: bool = True,
) -> VerificationReport:
    """Run ``verify`` with the options of ``verify_options``; write the JSON report if asked.

    ``source``: the file a command is about to write a rewrite of; named when the check cannot
    run at all, with --no-verify as the way out if ``skippable``.
    """
    from gridsample_lower.check import VerificationSetupError, load_inputs, verify  # (only here)

    progress = Progress(quiet)
    try:
        with collecting():  # (many short-lived models)
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
        if source is None:
            raise Failure(str(error)) from None
        way_out = "--no-verify skips it" if skippable else "it is needed with --no-check"
        raise Failure(f"{source}: the numerical check cannot run ({error}); {way_out}") from None
    finally:
        progress.close()
    write_report(report_path, report)
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
