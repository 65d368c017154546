"""Failures as one line on stderr with a chosen exit code, never a traceback (click only)."""

from __future__ import annotations

import contextlib

import click

__all__ = ["Failure", "OneLineUsage"]


class Failure(click.ClickException):
    """One line on stderr and a chosen exit code, never a traceback."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code

    def show(self, file=None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


class OneLineUsage(click.Group):
    """A command group whose usage errors, like every other failure, are one line on stderr.

    click prints three (usage, a hint, the error); here the hint joins the error's line. Help
    for a bare ``gridsample-lower`` is kept.
    """

    def make_context(self, *args, **kwargs) -> click.Context:
        with _one_line_usage():
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx: click.Context):
        with _one_line_usage():
            return super().invoke(ctx)


@contextlib.contextmanager
def _one_line_usage():
    try:
        yield
    except click.exceptions.NoArgsIsHelpError:  # a bare command: its help, kept
        raise
    except click.UsageError as error:
        path = error.ctx.command_path if error.ctx else "gridsample-lower"
        raise Failure(f"{error.format_message()} (try '{path} --help')", error.exit_code) from None
