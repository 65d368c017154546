"""Input values the user gives: read from ``.npz`` / ``.npy`` files and fitted to the model.

Files are read without pickles, each error named with its file; a value must have its input's
dtype (bfloat16 may come as float32 or raw 2-byte records) and fit its static dimensions.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Iterable

import ml_dtypes
import numpy as np
import onnx_ir as ir

from gridsample_lower.text import one_line

__all__ = ["VerificationSetupError", "checked_given", "load_inputs"]


class VerificationSetupError(ValueError):
    """The check cannot run: an input it cannot read or use, nothing to compare."""


def load_inputs(specs: Iterable[str | os.PathLike]) -> dict[str, np.ndarray]:
    """Read ``FILE.npz`` (keys are input names) and ``NAME:FILE.npy`` specs into one mapping."""
    values: dict[str, np.ndarray] = {}
    for spec in specs:
        for name, array in _read_spec(os.fspath(spec)).items():
            if name in values:
                raise VerificationSetupError(f"input {name!r} is given twice")
            values[name] = array
    return values


def _read_spec(spec: str) -> dict[str, np.ndarray]:
    if spec.endswith(".npz"):
        return _load(spec, dict)
    # NAME:FILE.npy; a name may hold ':' (tf2onnx's "x:0"), so try each split.
    for k, char in enumerate(spec):
        if char == ":" and k and spec.endswith(".npy") and os.path.isfile(spec[k + 1 :]):
            return {spec[:k]: _load(spec[k + 1 :], np.ndarray)}
    raise VerificationSetupError(
        f"{spec}: expected FILE.npz or NAME:FILE.npy naming an existing file"
    )


def _load(path: str, kind: type):
    """An array (``kind`` np.ndarray) or an archive's arrays by name (``dict``); no pickles.

    An archive's arrays are read here, where their errors (an object array) can be named.
    """
    try:
        loaded = np.load(path, allow_pickle=False)
        if isinstance(loaded, np.lib.npyio.NpzFile):
            with loaded:
                loaded = {name: loaded[name] for name in loaded.files}
    except FileNotFoundError:
        raise VerificationSetupError(f"{path}: no such file") from None
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as error:
        reason = one_line(error)
        raise VerificationSetupError(f"{path}: not readable ({reason})") from None
    if not isinstance(loaded, kind):
        what = "an .npz archive of arrays by input name" if kind is dict else "one .npy array"
        raise VerificationSetupError(f"{path}: not {what}")
    return loaded


def checked_given(inputs: list[ir.Value], given: dict) -> dict[str, np.ndarray]:
    by_name = {v.name: v for v in inputs}
    for name in given:
        if name not in by_name:
            known = ", ".join(repr(n) for n in by_name) or "none"
            raise VerificationSetupError(f"no graph input named {name!r} (inputs: {known})")
    return {name: _fit(by_name[name], np.asarray(value)) for name, value in given.items()}


def _fit(value: ir.Value, array: np.ndarray) -> np.ndarray:
    """``array`` as ``value``'s dtype (bfloat16 read from float32 or raw 2-byte records)."""
    want = np.dtype(value.dtype.numpy()) if value.dtype is not None else array.dtype
    if want == ml_dtypes.bfloat16 and array.dtype in (np.float32, np.dtype("V2")):
        array = array.astype(want) if array.dtype == np.float32 else array.view(want)
    if want.kind == "O" and array.dtype.kind in "US":
        array = array.astype(object)
    if array.dtype != want:
        raise VerificationSetupError(
            f"input {value.name!r} is {np.dtype(want).name}, the value given is {array.dtype}"
        )
    shape = value.shape
    fits = shape is None or (
        len(shape) == array.ndim
        and all(not isinstance(d, int) or d == n for d, n in zip(shape, array.shape, strict=True))
    )
    if not fits:
        raise VerificationSetupError(
            f"input {value.name!r} has shape {_text(shape)}, the value given {list(array.shape)}"
        )
    return array


def _text(shape: ir.Shape) -> str:
    return "[" + ",".join(str(d) if isinstance(d, int) else d.value or "?" for d in shape) + "]"
