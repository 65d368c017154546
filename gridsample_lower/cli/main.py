"""``gridsample-lower``: find GridSample in ONNX models and lower it to primitive ops.

Each command lives in its own module, imported only when it runs (or its own help is asked
for), so ``--help`` and ``--version`` start without loading onnx or numpy. Exit codes: 0
success, 1 a numerical check failed, 2 bad usage or a model that cannot be read or lowered.
"""

from __future__ import annotations

import importlib
import sys

import click

from gridsample_lower import __version__
from gridsample_lower.cli.errors import OneLineUsage

__all__ = ["COMMANDS", "main", "run"]

# name -> (module, the first line of its help): ``--help`` lists commands from here; a test
# keeps each line equal to the command's own.
COMMANDS = {
    "downgrade": (
        "gridsample_lower.cli.convert",
        "Convert IN to opset 16-19 and write OUT, for runtimes that only know GridSample-16.",
    ),
    "inspect": (
        "gridsample_lower.cli.info",
        "List every GridSample in IN: where it lives, its configuration, whether it can be "
        "lowered.",
    ),
    "lower": (
        "gridsample_lower.cli.lower",
        "Lower the GridSample nodes in IN (graph, subgraphs, functions) and write OUT.",
    ),
    "supported": (
        "gridsample_lower.cli.info",
        "Print the configurations gridsample-lower lowers, and which onnxruntime runs natively.",
    ),
    "targets": (
        "gridsample_lower.cli.info",
        "List the targets --target accepts, with what each one means.",
    ),
    "upgrade": (
        "gridsample_lower.cli.convert",
        "Convert IN to opset 20, 21 or 22 and write OUT, GridSample modes spelled linear/cubic.",
    ),
    "verify": (
        "gridsample_lower.cli.verify",
        "Check that CANDIDATE, a lowered model say, computes what REFERENCE computes.",
    ),
}


class LazyCommands(OneLineUsage):
    """A group that imports a command's module only when the command is needed."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        return getattr(importlib.import_module(COMMANDS[name][0]), name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        limit = formatter.width - 6 - max(map(len, COMMANDS))
        rows = [
            (name, click.Command(name, help=first).get_short_help_str(limit))
            for name, (_, first) in COMMANDS.items()
        ]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyCommands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gridsample-lower")
def main() -> None:
    """Lower ONNX GridSample to ops every runtime has (Gather, Floor, Where, Mul, ...)."""


def run() -> None:
    """The installed command and ``python -m gridsample_lower``: one command, then exit."""
    from gridsample_lower.cli.collector import one_command_process

    one_command_process()
    main(prog_name="gridsample-lower")


if __name__ == "__main__":
    sys.exit(run())
