"""How ``lower``, ``upgrade`` and ``downgrade`` write their model, and refuse what they must.

``-o OUT`` or ``--in-place``; ``--external-data NAME``; ``--no-check``. A destination that
would overwrite the input (or its weights) without ``--in-place`` is refused before any work,
and so is a ``--report`` naming a file read or written; the rewritten model is checked
numerically against the input, then saved by ``gridsample_lower.files.model_io``: checked, complete,
or not at all. The report is written once the model is (or the check failed): never one saying
"ok" for a model that could not be written.
"""

from __future__ import annotations

import dataclasses
import functools
import pathlib
import shutil

import click
import onnx

from gridsample_lower.cli.batch import expand_inputs, place_outputs, refuse_in_out, run
from gridsample_lower.cli.common import (
    Failure,
    check_report,
    checkable,
    fits_the_check,
    read_model,
    run_verification,
    write_atomically,
    write_report,
)
from gridsample_lower.files import atomic, model_io
from gridsample_lower.files.model_io import ModelCheckError, ModelFile, ModelFileError

__all__ = [
    "Destination",
    "Writing",
    "copy_unchanged",
    "destination",
    "take_output_options",
    "open_source",
    "output_options",
    "run_rewrites",
    "save",
    "verify_and_save",
]

OUTPUT_KEYS = ("output", "in_place", "external_data", "no_check")


@dataclasses.dataclass(frozen=True)
class Destination:
    """Where a command writes its model, and how."""

    path: pathlib.Path
    in_place: bool = False
    external_data: str | None = None
    check: bool = True
    report: pathlib.Path | None = None

    def data_name(self, source: ModelFile) -> str | None:
        """The external data file to write: as asked, else OUT.data if IN's weights are files.

        In place, weights already in files stay in them (None: nothing to rewrite).
        """
        if self.external_data is not None or self.in_place or not source.data_files:
            return self.external_data
        return f"{self.path.name}.data"

    def protected(self, source: ModelFile) -> tuple[pathlib.Path, ...]:
        return () if self.in_place else source.files

    def files(self, source: ModelFile) -> tuple[pathlib.Path, ...]:
        """The files written: the model and, if any, its external data file."""
        name = self.data_name(source)
        return (self.path, *([atomic.followed(self.path).parent / name] if name else []))

    def result_files(self, source: ModelFile) -> tuple[pathlib.Path, ...]:
        """The files the result is made of: those written, and in place the weights kept."""
        kept = source.data_files if self.in_place and self.data_name(source) is None else ()
        return (*self.files(source), *kept)


_OUTPUT_OPTIONS = [
    click.option(
        "-o",
        "--output",
        type=click.Path(),  # a str: "DIR/" keeps its slash, which says "into this folder"
        help="Where to write the result: a file, or a folder (DIR/) for any number of models.",
    ),
    click.option(
        "--in-place",
        is_flag=True,
        help="Write over IN instead (IN and its data files are never written otherwise).",
    ),
    click.option(
        "--external-data",
        metavar="NAME",
        help="Write the weights to the file NAME beside OUT (default when IN's weights are "
        "external files: OUT's name + .data; with --in-place they stay where they are).",
    ),
    click.option(
        "--no-check",
        is_flag=True,
        help="Go on when IN fails onnx.checker; the numerical check still runs.",
    ),
]


def output_options(command):
    """Decorate ``command`` with -o/--output, --in-place, --external-data and --no-check."""
    for option in reversed(_OUTPUT_OPTIONS):
        command = option(command)
    return command


def take_output_options(options: dict, *, verifying: bool, models: int) -> tuple[str | None, dict]:
    """-o, and the other ``output_options``' values for ``destination``, popped from ``options``.

    Checked once for every model. The --report path stays in ``options``; it is read here to
    be checked with the rest.
    """
    values = {key: options.pop(key) for key in OUTPUT_KEYS}
    output = values.pop("output")
    if output is None and not values["in_place"]:
        raise click.UsageError("give -o OUT (or -o DIR/), or --in-place to write over IN")
    if values["in_place"] and output is not None and models > 1:
        raise click.UsageError("--in-place writes over each IN: drop -o")
    if values["no_check"] and not verifying:
        raise click.UsageError("--no-check needs the numerical check: drop --no-verify")
    if models > 1 and options.get("report_path") is not None:
        raise click.UsageError("--report takes one model; --json reports on all of them")
    if models > 1 and values["external_data"] is not None:
        raise click.UsageError("--external-data names one file: give one model")
    values["report"] = options.get("report_path")
    return output, values


def destination(
    model_path: pathlib.Path,
    output: pathlib.Path | None,
    *,
    in_place: bool,
    external_data: str | None,
    no_check: bool,
    report: pathlib.Path | None,
) -> Destination:
    """Where one model's result goes: ``output``, or over ``model_path`` with --in-place."""
    if in_place and output is not None and output.resolve() != model_path.resolve():
        raise click.UsageError("--in-place writes over IN: drop -o")
    return Destination(output or model_path, in_place, external_data, not no_check, report)


def open_source(model_path: pathlib.Path, dest: Destination, *, verifying: bool) -> ModelFile:
    """Read IN for a command that writes ``dest``; refuse early what could not be written."""
    hint = "; --no-check goes on anyway (the result is still checked numerically)"
    source = read_model(model_path, check=dest.check, hint=hint if verifying else "")
    if verifying:
        fits_the_check(source)
    if not dest.in_place and atomic.same_file(dest.path, source.path):
        raise Failure(f"{dest.path}: is the input; --in-place writes over it")
    try:
        model_io.check_destination(dest.path, dest.data_name(source), dest.protected(source))
    except ModelFileError as error:
        raise Failure(str(error)) from None
    check_report(dest.report, source.files, dest.files(source))
    return source


def save(source: ModelFile, proto: onnx.ModelProto, dest: Destination, *, full_check=False):
    """Write ``proto`` (read from ``source``) to ``dest``: checked, complete, or not at all."""
    try:
        model_io.save_model(
            proto,
            dest.path,
            base_dir=source.base_dir,
            external_data=dest.data_name(source),
            check=dest.check,
            full_check=full_check,
            protect=dest.protected(source),
        )
    except ModelCheckError as error:
        raise Failure(f"{error}; nothing written", exit_code=1) from None
    except ModelFileError as error:
        raise Failure(str(error)) from None


def verify_and_save(
    source: ModelFile,
    rewritten: onnx.ModelProto,
    dest: Destination,
    no_verify: bool,
    quiet: bool,
    check: dict,
    *,
    full_check: bool = False,
    verbose: bool = False,
) -> str:
    """Check ``rewritten`` against ``source`` numerically, then save it; returns the verdict.

    On a mismatch the report is printed (unless ``quiet``) and nothing is written (exit code 1);
    on success the verdict is followed by the report's notes. The JSON report is written after
    the model, so a failed save leaves none.
    """
    if no_verify:
        save(source, rewritten, dest, full_check=full_check)
        return "not verified (--no-verify)"
    models = checkable(source, source.proto, rewritten)
    check = {**check, "report_path": None}  # written below, once the outcome is known
    result = run_verification(
        *models, quiet=quiet, source=source.path, skippable=dest.check, **check
    )
    del models  # the weights the check held
    if not result.ok:
        if not quiet:
            click.echo(result.table())
        write_report(dest.report, result)
        raise Failure(f"{source.path}: {result.summary()}; nothing written", exit_code=1)
    save(source, rewritten, dest, full_check=full_check)
    write_report(dest.report, result)
    if verbose and not quiet:
        click.echo(result.table())
    return "\n".join([result.summary(), *result.note_lines()])  # the notes: what was checked


@dataclasses.dataclass(frozen=True)
class Writing:
    """How each model of a ``lower``, ``upgrade`` or ``downgrade`` run is checked and written."""

    written: dict  # destination()'s options
    check: dict  # the verifier's options
    no_verify: bool
    quiet: bool
    verbose: bool

    def open(self, model_path: pathlib.Path, output: pathlib.Path | None):
        """The destination of one model, and the model read (refused early if unwritable)."""
        dest = destination(model_path, output, **self.written)
        return dest, open_source(model_path, dest, verifying=not self.no_verify)

    def save(self, source: ModelFile, rewritten, dest: Destination, *, full_check=False) -> str:
        """Check ``rewritten`` and write it; the verdict (``verify_and_save``)."""
        return verify_and_save(
            source,
            rewritten,
            dest,
            self.no_verify,
            self.quiet,
            self.check,
            full_check=full_check,
            verbose=self.verbose,
        )


def run_rewrites(inputs, options: dict, one, columns, *, no_verify, jobs, as_json, quiet, verbose):
    """Expand IN, place the outputs and ``one(model, output, writing=...)`` each (``batch.run``)."""
    refuse_in_out(inputs, options["output"])
    models = expand_inputs(inputs)
    output, written = take_output_options(options, verifying=not no_verify, models=len(models))
    if no_verify and options["report_path"]:
        raise click.UsageError("--report needs the check: drop --no-verify")
    quiet_each = quiet or as_json or len(models) > 1
    writing = Writing(written, options, no_verify, quiet_each, verbose)
    work = functools.partial(one, writing=writing)
    outputs = place_outputs(models, output)
    run(work, models, outputs, jobs=jobs, as_json=as_json, quiet=quiet, columns=columns)


def copy_unchanged(source: ModelFile, dest: Destination) -> str:
    """Write ``source`` to ``dest`` as it is; says what was done."""
    if dest.in_place:
        return f"{dest.path} left as it was"
    if dest.data_name(source) is None:
        write_atomically(dest.path, lambda tmp: shutil.copyfile(source.path, tmp))
    else:
        save(source, source.proto, dest)
    return f"written unchanged to {dest.path}"
