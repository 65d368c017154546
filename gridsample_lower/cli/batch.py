"""Many models at once: inputs expanded, outputs placed, work spread over processes, one table.

A command's work on one model is a function ``work(source, output) -> Outcome`` that prints
nothing; ``run`` calls it for each model, in this process or in ``--jobs`` worker processes,
shows a progress bar on a terminal, and ends with one table (or one JSON document). One bad
model is reported and does not stop the others; the exit status is the worst one's.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import gc
import glob
import json
import pathlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import click

from gridsample_lower.cli import collector
from gridsample_lower.cli.errors import Failure

__all__ = [
    "JOBS_OPTION",
    "Outcome",
    "batch_options",
    "expand_inputs",
    "place_outputs",
    "refuse_in_out",
    "run",
    "run_each",
]

Work = Callable[[pathlib.Path, "pathlib.Path | None"], "Outcome"]


@dataclasses.dataclass
class Outcome:
    """What one model's work came to: an exit code, the lines to print, a record for JSON."""

    source: pathlib.Path
    code: int = 0  # 0 done, 1 the numerical check failed, 2 the model could not be processed
    lines: list[str] = dataclasses.field(default_factory=list)
    record: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def status(self) -> str:
        return {0: "ok", 1: "mismatch"}.get(self.code, "error")


JOBS_OPTION = click.option(
    "-j",
    "--jobs",
    default=1,
    show_default=True,
    type=click.IntRange(min=1),
    help="Models processed at once, each in its own process.",
)
_BATCH_OPTIONS = [
    JOBS_OPTION,
    click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout."),
    click.option("-q", "--quiet", is_flag=True, help="Print errors only."),
    click.option("-v", "--verbose", is_flag=True, help="Also print the check's tables."),
]


def batch_options(command):
    """Decorate ``command`` with --jobs, --json, -q and -v."""
    for option in reversed(_BATCH_OPTIONS):
        command = option(command)
    return command


def expand_inputs(paths: Sequence[pathlib.Path]) -> list[pathlib.Path]:
    """The models named: files as given, a folder's ``*.onnx``, a quoted glob's matches."""
    models: list[pathlib.Path] = []
    for path in paths:
        if path.is_dir():
            found = sorted(path.glob("*.onnx"))
            if not found:
                raise Failure(f"{path}: a folder with no .onnx file")
            models += found
        elif not path.exists() and glob.has_magic(str(path)):
            found = sorted(pathlib.Path(p) for p in glob.glob(str(path)))
            if not found:
                raise Failure(f"{path}: matches no file")
            models += found
        else:
            models.append(path)
    return models


def refuse_in_out(given: Sequence[pathlib.Path], output: str | None) -> None:
    """``lower IN OUT`` (onnxsim's habit) names two inputs: say that -o takes the output."""
    if len(given) == 2 and given[0].exists() and not given[1].exists():
        raise click.UsageError(
            f"{given[1]} does not exist; to write the result there, use -o: "
            f"{given[0]} -o {given[1]}"
        )


def place_outputs(models: list[pathlib.Path], output: str | None) -> list[pathlib.Path | None]:
    """Each model's output path: ``-o OUT`` for one model, ``-o DIR/`` for any number.

    ``-o`` names a folder when it ends with a separator or is a folder already; the folder is
    made if missing, each model written under its own name.
    """
    if output is None:
        return [None] * len(models)
    if output == "-":
        raise click.UsageError("-o -: a model cannot go to standard output; give a file or DIR/")
    as_folder = output.endswith(("/", "\\")) or pathlib.Path(output).is_dir()
    if not as_folder and len(models) > 1:
        raise click.UsageError(f"{len(models)} models: -o must name a folder (end it with /)")
    folder = pathlib.Path(output)
    if not as_folder:
        return [folder]
    outputs = [folder / model.name for model in models]
    seen: dict[pathlib.Path, pathlib.Path] = {}
    for model, out in zip(models, outputs, strict=True):
        if out in seen:
            raise click.UsageError(f"{seen[out]} and {model} would both be written to {out}")
        seen[out] = model
    folder.mkdir(parents=True, exist_ok=True)
    return outputs


def attempt(work: Work, source: pathlib.Path, output: pathlib.Path | None) -> Outcome:
    """``work``, any failure turned into an Outcome (a worker process must not raise)."""
    try:
        return work(source, output)
    except Failure as error:
        return Outcome(source, error.exit_code, [], {"error": error.format_message()})
    except click.UsageError as error:
        return Outcome(source, 2, [], {"error": error.format_message()})
    except Exception as error:  # noqa: BLE001  (one bad model must not stop the others)
        message = f"internal error: {type(error).__name__}: {error}"
        return Outcome(source, 2, [], {"error": message})


def run(
    work: Work,
    models: list[pathlib.Path],
    outputs: list[pathlib.Path | None],
    *,
    jobs: int,
    as_json: bool,
    quiet: bool,
    columns: Mapping[str, Callable[[dict], str]],
) -> None:
    """Do ``work`` on every model, report, and exit with the worst status.

    One model without --json runs here and fails as a single command does; otherwise each
    outcome is printed as it comes and a table ends the run: ``columns`` name its cells, each
    made from an outcome's record.
    """
    if len(models) == 1 and not as_json:
        outcome = work(models[0], outputs[0])  # a Failure ends the command, as ever
        if not quiet:
            for line in outcome.lines:
                click.echo(line)
        if outcome.code:
            raise Failure(outcome.record.get("error", "failed"), outcome.code)
        return
    outcomes = run_each(work, models, outputs, jobs=jobs, silent=as_json or quiet)
    worst = max(outcome.code for outcome in outcomes)
    if as_json:
        document = {"ok": worst == 0, "models": [_json_record(o) for o in outcomes]}
        click.echo(json.dumps(document, indent=2))
    elif not quiet or worst:
        click.echo(_table(outcomes, columns))
    if worst:
        failed = sum(1 for outcome in outcomes if outcome.code)
        raise Failure(f"{failed} of {len(outcomes)} models failed", worst)


def run_each(work: Work, models, outputs, *, jobs: int, silent: bool) -> list[Outcome]:
    """Each model's Outcome, in order: a line on stderr as each ends, a bar on a terminal."""
    from rich.console import Console  # (only here: one model's run stays light)
    from rich.markup import escape
    from rich.progress import Progress

    console = Console(stderr=True, highlight=False, soft_wrap=True)
    outcomes: dict[int, Outcome] = {}
    with Progress(console=console, disable=silent or not console.is_terminal) as progress:
        task = progress.add_task("models", total=len(models))

        def done(index: int, outcome: Outcome) -> None:
            outcomes[index] = outcome
            progress.advance(task)
            if not silent:
                mark = outcome.status if outcome.code else "ok"
                detail = outcome.record.get("error") or outcome.record.get("summary", "")
                style = {"ok": "green", "mismatch": "red"}.get(mark, "bold red")
                text = escape(f"{outcome.source}  {detail}")
                console.print(f"[{style}]{mark}[/]: {text}", markup=True)

        if jobs == 1:
            for index, (model, out) in enumerate(zip(models, outputs, strict=True)):
                if index:
                    collector.between_models()
                done(index, attempt(work, model, out))
        else:  # (workers collect as usual: they cannot tell their last model)
            with concurrent.futures.ProcessPoolExecutor(jobs, initializer=gc.enable) as pool:
                futures = {
                    pool.submit(attempt, work, model, out): index
                    for index, (model, out) in enumerate(zip(models, outputs, strict=True))
                }
                for future in concurrent.futures.as_completed(futures):
                    done(futures[future], future.result())
    return [outcomes[index] for index in range(len(models))]


def _json_record(outcome: Outcome) -> dict[str, Any]:
    return {"input": str(outcome.source), "status": outcome.status, **outcome.record}


def _table(outcomes: list[Outcome], columns: Mapping[str, Callable[[dict], str]]) -> str:
    from gridsample_lower.text import table

    rows = []
    for outcome in outcomes:
        row = {"model": str(outcome.source), "status": outcome.status}
        for name, cell in columns.items():
            row[name] = "" if outcome.code == 2 else cell(outcome.record)
        row["error"] = outcome.record.get("error", "")
        rows.append(row)
    if not any(row["error"] for row in rows):
        for row in rows:
            del row["error"]
    return table(rows)
