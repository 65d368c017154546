"""Replace files atomically: write beside the target, sync, rename; never a half-written file.

A staged file is created with the permissions a new file gets (the umask applies); a file it
replaces keeps its permissions. Several staged files are renamed in the order given, under one
lock, so a data file lands before the model that reads it.
"""

from __future__ import annotations

import os
import pathlib
import secrets
import shutil
import threading
from collections.abc import Callable

__all__ = ["commit", "directory_of", "same_file", "temporary", "write_atomically"]

_RENAMES = threading.Lock()


def write_atomically(target: pathlib.Path, write: Callable[[str], object]) -> None:
    """Call ``write(tmp)`` on a temporary file beside ``target``, then rename it over ``target``.

    Raises whatever ``write`` raises, or OSError; in every case no temporary file is left and
    ``target`` is as it was.
    """
    tmp = temporary(directory_of(target), target.name)
    try:
        write(str(tmp))
        commit([(tmp, target)])
    finally:
        tmp.unlink(missing_ok=True)


def directory_of(target: pathlib.Path) -> pathlib.Path:
    return target.parent if str(target.parent) else pathlib.Path(".")


def temporary(directory: pathlib.Path, name: str) -> pathlib.Path:
    """A new empty hidden file in ``directory``, named after ``name``."""
    path = directory / f".{name}.{secrets.token_hex(8)}.tmp"
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    return path


def commit(pairs: list[tuple[pathlib.Path, pathlib.Path]]) -> None:
    """Sync each staged file, then rename each over its target, in order, and sync the renames."""
    for staged, target in pairs:
        if target.exists():
            shutil.copymode(target, staged)
        with open(staged, "rb") as file:
            os.fsync(file.fileno())
    with _RENAMES:
        for staged, target in pairs:
            os.replace(staged, target)
    for directory in {os.path.dirname(os.path.abspath(target)) for _, target in pairs}:
        _sync_directory(directory)


def same_file(a: pathlib.Path, b: pathlib.Path) -> bool:
    """Whether two paths name one file (links included), or would once created."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return a.resolve() == b.resolve()


def _sync_directory(directory: str) -> None:
    """Make the renames durable where the platform allows it (not on Windows)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
