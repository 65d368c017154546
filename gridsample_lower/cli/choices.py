"""The options that choose what to lower and for which target, shared by lower and inspect."""

from __future__ import annotations

import click

from gridsample_lower.lowering.targets import TARGETS
from gridsample_lower.spec import MODE_NAMES

__all__ = ["selection_options", "target_option"]

target_option = click.option(
    "--target",
    type=click.Choice(list(TARGETS)),
    default="generic",
    show_default=True,
    help="What the model will run on: the ops it may use, its index type, what it runs "
    "natively (kept). See `gridsample-lower targets`.",
)


def selection_options(command):
    """--target, --lower-all, --only, --skip, --modes, --ranks, --index-dtype."""
    options = [
        target_option,
        click.option("--lower-all", is_flag=True, help="Also lower what the target runs natively."),
        click.option("--only", multiple=True, metavar="NODE", help="Lower only these nodes."),
        click.option("--skip", multiple=True, metavar="NODE", help="Leave these nodes alone."),
        click.option(
            "--modes",
            multiple=True,
            type=click.Choice(list(MODE_NAMES)),
            help="Lower only these modes (repeatable; bilinear and bicubic are opset 16's names).",
        ),
        click.option(
            "--ranks",
            multiple=True,
            type=click.IntRange(min=1),
            help="Lower only these spatial ranks (repeatable).",
        ),
        click.option(
            "--index-dtype",
            type=click.Choice(["int32", "int64"]),
            help="Gather index type, overriding the target's (int32 with symbolic sizes "
            "promises they stay below 2**31 elements).",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command
