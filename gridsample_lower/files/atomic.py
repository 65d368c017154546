"""Replace files atomically: write beside the target, sync, rename; never a half-written file.

A staged file is created with the permissions a new file gets (the umask applies); a file it
replaces keeps its permissions. Several staged files are renamed in the order given, under one
lock, so a data file lands before the model that reads it. A target that is a symbolic link is
written through (``followed``): a rename would replace the link and leave its file as it was.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import secrets
import shutil
import threading
from collections.abc import Callable, Iterator

__all__ = ["commit", "directory_of", "followed", "same_file", "temporaries", "write_atomically"]

_RENAMES = threading.Lock()


def write_atomically(target: pathlib.Path, write: Callable[[str], object]) -> None:
    """Call ``write(tmp)`` on a temporary file beside ``target``, then rename it over ``target``.

    Raises whatever ``write`` raises, or OSError; in every case no temporary file is left and
    ``target`` is as it was.
    """
    target = followed(target)
    with temporaries(target) as (tmp,):
        write(str(tmp))
        commit([(tmp, target)])


def directory_of(target: pathlib.Path) -> pathlib.Path:
    return target.parent if str(target.parent) else pathlib.Path(".")


def followed(target: pathlib.Path) -> pathlib.Path:
    """The file a symbolic link ``target`` points at (the one to replace), else ``target``."""
    return pathlib.Path(os.path.realpath(target)) if target.is_symlink() else target


@contextlib.contextmanager
def temporaries(*targets: pathlib.Path) -> Iterator[list[pathlib.Path]]:
    """A new empty hidden file beside each target, named after it; all removed on exit.

    Those already renamed by ``commit`` are gone; the others are removed even when creating
    one of them fails (a name too long, a read-only directory).
    """
    made: list[pathlib.Path] = []
    try:
        for target in targets:
            path = _beside(target)
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            made.append(path)
        yield made
    finally:
        for path in made:
            path.unlink(missing_ok=True)


def commit(pairs: list[tuple[pathlib.Path, pathlib.Path]]) -> None:
    """Sync each staged file, then rename each over its target, in order, and sync the renames.

    All or nothing: a later rename failing (the model's) would leave the new data beside the
    old model it does not match, so each target but the last is first kept aside, put back if a
    rename fails, and removed once all are in place.
    """
    for staged, target in pairs:
        if target.exists():
            shutil.copymode(target, staged)
        with open(staged, "rb") as file:
            os.fsync(file.fileno())
    with _RENAMES:
        kept: list[tuple[pathlib.Path, pathlib.Path | None]] = []
        try:
            for staged, target in pairs:
                if len(kept) < len(pairs) - 1:
                    kept.append((target, _keep_aside(target)))
                os.replace(staged, target)
        except BaseException:
            for target, old in reversed(kept):
                _put_back(target, old)
            raise
        for _, old in kept:
            if old is not None:
                with contextlib.suppress(OSError):  # the write is done: a leftover is no failure
                    old.unlink(missing_ok=True)
    for directory in {os.path.dirname(os.path.abspath(target)) for _, target in pairs}:
        _sync_directory(directory)


def _beside(target: pathlib.Path) -> pathlib.Path:
    return directory_of(target) / f".{target.name}.{secrets.token_hex(8)}.tmp"


def _keep_aside(target: pathlib.Path) -> pathlib.Path | None:
    """A second name beside ``target`` for its file, or None if there is no file.

    A hard link, so ``target`` stays in place; where links fail, a rename (``target`` is then
    missing until the rename that follows).
    """
    aside = _beside(target)
    try:
        os.link(target, aside)
    except FileNotFoundError:
        return None
    except OSError:
        os.rename(target, aside)
    return aside


def _put_back(target: pathlib.Path, old: pathlib.Path | None) -> None:
    """Make ``target`` as it was: ``old``, its file kept aside, or no file if None.

    If ``old`` cannot be renamed back it is left, rather than lose the only copy.
    """
    with contextlib.suppress(OSError):
        if old is None:
            target.unlink(missing_ok=True)
        else:
            if not same_file(old, target):  # not still the same file (a link, never replaced)
                os.replace(old, target)
            old.unlink(missing_ok=True)


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
