"""Python's cyclic garbage collector in the command's own process.

Lowering builds the new graph as onnx_ir objects that refer to each other in cycles: about
450,000 for 500 GridSamples. The one collection that frees them took 0.4 s, a third of the
lowering, and Python makes a last one at exit. The installed command ends with its work, so it
runs with the collector off and freezes what is left at exit (the system takes the memory back
at once). Between the models of a batch it collects, so memory stays that of one model; the
numerical check, which makes many short-lived models, runs with the collector on.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
from collections.abc import Iterator

__all__ = ["between_models", "collecting", "one_command_process"]


def one_command_process() -> None:
    """This process runs one command and exits: no collections but those asked for."""
    gc.disable()
    atexit.register(gc.freeze)  # (runs before the interpreter's last collection)


def between_models() -> None:
    """Free what the last model left, where the collector would not."""
    if not gc.isenabled():
        gc.collect()


@contextlib.contextmanager
def collecting() -> Iterator[None]:
    """The collector on inside, as it was after."""
    was_enabled = gc.isenabled()
    gc.enable()
    try:
        yield
    finally:
        if not was_enabled:
            gc.disable()
