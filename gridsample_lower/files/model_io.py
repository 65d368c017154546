"""Load and save ONNX models without ever losing one: checked input, atomic writes, weights kept.

``load_model`` reads the graph and leaves external weights on disk (checked for presence and
size, not read); ``save_model`` writes through temporary files beside the target, checked,
synced and renamed only when complete, the weights either moved to the external data file
named (read once, memory-mapped, by ``onnx_ir``) or left in the files they are in;
``with_weights`` gives the in-memory copies that a runtime fed with bytes needs. Every failure
is a ``ModelFileError`` whose message is one line naming the file.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
from collections.abc import Callable, Iterable

import onnx
import onnx_ir as ir

from gridsample_lower.files import atomic
from gridsample_lower.files.external_data import (
    ExternalDataError,
    data_files,
    external_tensors,
    read_chunk,
    read_into,
    relocate,
)
from gridsample_lower.text import one_line

__all__ = [
    "PROTOBUF_LIMIT",
    "ModelCheckError",
    "ModelFile",
    "ModelFileError",
    "check_destination",
    "check_model",
    "external_tensors",
    "load_model",
    "save_model",
    "with_weights",
    "write_atomically",
]

PROTOBUF_LIMIT = 2**31 - 2**20  # protobuf refuses messages of 2 GiB; keep a margin
EXTERNAL_THRESHOLD = 1024  # bytes: smaller initializers stay inline (shape inference reads them)


class ModelFileError(ValueError):
    """A model file that cannot be read, checked or written; the message names the file."""


class ModelCheckError(ModelFileError):
    """A model that fails ``onnx.checker``."""


@dataclasses.dataclass(frozen=True)
class ModelFile:
    """A model read from disk: its graph, with external weights left in their files."""

    proto: onnx.ModelProto
    path: pathlib.Path
    data_files: tuple[pathlib.Path, ...] = ()
    external_bytes: int = 0

    @property
    def base_dir(self) -> pathlib.Path:
        """The directory the external data locations are relative to."""
        return atomic.directory_of(self.path)

    @property
    def files(self) -> tuple[pathlib.Path, ...]:
        """The model file and every external data file it reads."""
        return (self.path, *self.data_files)

    def fits_in_memory(self) -> bool:
        """Whether the model with its weights fits in one protobuf message (below 2 GiB)."""
        return self.proto.ByteSize() + self.external_bytes < PROTOBUF_LIMIT


def load_model(path: str | os.PathLike, *, check: bool = True) -> ModelFile:
    """Read the model at ``path``; external weights are checked for presence and size only.

    Raises:
        ModelFileError: The file is missing, a directory, empty, not an ONNX model or
            truncated; an external data file is missing, too short or outside its directory.
        ModelCheckError: ``check`` is set and the model fails ``onnx.checker``.
    """
    path = pathlib.Path(path)
    proto = _parse(path)
    try:
        files, size = data_files(proto, atomic.directory_of(path))
    except ExternalDataError as error:
        raise ModelFileError(f"{path}: {error}") from None
    if check:
        check_model(proto, path)
    return ModelFile(proto, path, files, size)


def check_model(
    proto: onnx.ModelProto | bytes,
    path: str | os.PathLike | None = None,
    *,
    full: bool = False,
    label: str | os.PathLike | None = None,
) -> None:
    """Run ``onnx.checker`` on ``proto``; a model with external weights, as the file ``path``.

    The checker resolves external data locations against the model file's directory, so such
    a model is checked as the file at ``path``, which must hold ``proto``. The error names
    ``label`` (default: ``path``). A model without external weights may be given serialized.
    """
    try:
        if path is not None and any(True for _ in external_tensors(proto)):
            onnx.checker.check_model(os.fspath(path), full_check=full)
        else:
            onnx.checker.check_model(proto, full_check=full)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as error:
        where = label if label is not None else path
        raise ModelCheckError(f"{where}: fails the ONNX checker: {one_line(error)}") from None


def with_weights(
    protos: Iterable[onnx.ModelProto], base_dir: str | os.PathLike
) -> list[onnx.ModelProto]:
    """Copies of ``protos`` with their external weights in memory, each chunk read once.

    For runtimes given a model as bytes (they resolve external files against the working
    directory). A model without external weights is returned as it is.
    """
    chunks: dict[tuple, bytes] = {}
    loaded = []
    for proto in protos:
        if any(True for _ in external_tensors(proto)):
            proto = _copy(proto)
            for tensor in external_tensors(proto):
                key = tuple((entry.key, entry.value) for entry in tensor.external_data)
                if key not in chunks:
                    chunks[key] = _read(pathlib.Path(base_dir), tensor)
                read_into(tensor, chunks[key])
        loaded.append(proto)
    return loaded


def save_model(
    proto: onnx.ModelProto,
    path: str | os.PathLike,
    *,
    base_dir: str | os.PathLike | None = None,
    external_data: str | None = None,
    check: bool = True,
    full_check: bool = False,
    protect: Iterable[str | os.PathLike] = (),
) -> None:
    """Write ``proto`` to ``path`` atomically: complete and checked, or not at all.

    Args:
        proto: The model; its external weights (if any) are read from ``base_dir``.
        path: Where to write it; replaced only once everything is written and checked (a
            symbolic link: the file it points at).
        base_dir: The directory ``proto``'s external data locations are relative to
            (default: ``path``'s).
        external_data: A file name beside ``path`` to hold every initializer of 1 kB or more,
            written first (through a temporary file) and renamed just before the model. None
            keeps the layout: inline weights stay inline, external ones in their files, which
            must then be beside ``path``.
        check: Run ``onnx.checker`` on what is written before it replaces anything.
        full_check: Make that check a full one (strict shape inference).
        protect: Files that must not be replaced (the input and its data files).

    Raises:
        ModelFileError: Nothing was written: a protected file would be replaced, the
            directory is missing, the model is too large for one file, or writing failed.
        ModelCheckError: The model fails the checker; nothing was written.
    """
    path = pathlib.Path(path)
    base = pathlib.Path(base_dir) if base_dir is not None else atomic.directory_of(path)
    path = atomic.followed(path)
    check_destination(path, external_data, protect)
    checked = (check, full_check)
    if external_data is not None:
        _save_external(proto, path, base, external_data, checked)
    elif any(True for _ in external_tensors(proto)):
        _save_referencing(proto, path, base, checked)
    elif proto.ByteSize() >= PROTOBUF_LIMIT:
        raise ModelFileError(f"{path}: the model exceeds 2 GiB: name an external data file")
    else:
        data = proto.SerializeToString()  # once, for the checker and the file
        if check:
            check_model(data, full=full_check, label=path)
        write_atomically(path, lambda tmp: onnx.save_model(data, tmp))


def check_destination(
    path: pathlib.Path, external_data: str | None, protect: Iterable[str | os.PathLike]
) -> None:
    """Refuse, before any work, a destination that cannot be written or is a protected file.

    A symbolic link ``path`` stands for its file; as the external data file, one is refused.
    """
    path = atomic.followed(path)
    if path.is_dir():
        raise ModelFileError(f"{path}: is a directory")
    if not atomic.directory_of(path).is_dir():
        raise ModelFileError(f"{path}: directory {path.parent} does not exist")
    targets = [path]
    if external_data is not None:
        name = external_data
        if not name or os.path.basename(name) != name or name in (".", ".."):
            raise ModelFileError(f"{name!r}: the external data file must be a plain file name")
        if name == path.name:
            raise ModelFileError(f"{name}: the external data file cannot be the model file")
        if (path.parent / name).is_symlink():
            raise ModelFileError(f"{path.parent / name}: is a symbolic link, not a data file")
        targets.append(path.parent / name)
    for target in targets:
        if target.exists() and not target.is_file():
            raise ModelFileError(f"{target}: is not a regular file")
        for kept in map(pathlib.Path, protect):
            if atomic.same_file(target, kept):
                raise ModelFileError(f"{target}: is one of the input's files ({kept.name})")


def write_atomically(
    target: str | os.PathLike,
    write: Callable[[str], object],
    protect: Iterable[str | os.PathLike] = (),
) -> None:
    """Call ``write(tmp)`` on a temporary file beside ``target``; rename it when complete.

    ``target`` is refused as ``save_model`` refuses a model's (``check_destination``).
    """
    target = pathlib.Path(target)
    check_destination(target, None, protect)
    try:
        atomic.write_atomically(target, write)
    except OSError as error:
        raise ModelFileError(f"{target}: cannot write ({error.strerror or error})") from None


def _parse(path: pathlib.Path) -> onnx.ModelProto:
    if not path.exists():
        raise ModelFileError(f"{path}: no such file")
    if path.is_dir():
        raise ModelFileError(f"{path}: is a directory, not an ONNX model")
    if path.stat().st_size == 0:
        raise ModelFileError(f"{path}: not an ONNX model (empty file)")
    try:
        proto = onnx.load_model(path, load_external_data=False)
    except OSError as error:
        raise ModelFileError(f"{path}: cannot read ({error.strerror or error})") from None
    except Exception as error:  # noqa: BLE001  (protobuf errors have many types)
        reason = f"truncated, or not protobuf: {type(error).__name__}"
        raise ModelFileError(f"{path}: not a readable ONNX model ({reason})") from None
    if not proto.HasField("graph"):
        raise ModelFileError(f"{path}: not an ONNX model (no graph)")
    return proto


def _save_external(proto, path: pathlib.Path, base_dir: pathlib.Path, name: str, checked):
    """Weights to ``name`` beside ``path`` (staged under a temporary name), then the model."""
    model = ir.serde.deserialize_model(_constants_inline(proto, base_dir))
    ir.external_data.set_base_dir(model.graph, base_dir)
    directory = atomic.directory_of(path)
    try:
        with atomic.temporaries(directory / name, path) as (staged, tmp):
            ir.external_data.unload_from_model(
                model, directory, staged.name, size_threshold_bytes=EXTERNAL_THRESHOLD
            )
            out = ir.serde.serialize_model(model)
            del model  # drops the memory maps of the source weights
            onnx.save_model(out, tmp)
            if checked[0]:  # while the model still points at the staged data
                check_model(out, tmp, full=checked[1], label=path)
            moved = list(external_tensors(out))
            for tensor in moved:
                relocate(tensor, name)
            onnx.save_model(out, tmp)
            atomic.commit([*([(staged, directory / name)] if moved else []), (tmp, path)])
    except OSError as error:
        raise ModelFileError(f"{path}: cannot write ({error.strerror or error})") from None


def _save_referencing(proto, path: pathlib.Path, base_dir: pathlib.Path, checked) -> None:
    """The model alone, its external weights left in the files it already reads."""
    if not atomic.same_file(atomic.directory_of(path), base_dir):
        raise ModelFileError(
            f"{path}: the weights are external files beside the input: name a file for them"
        )

    def write(tmp: str) -> None:
        onnx.save_model(proto, tmp)
        if checked[0]:
            check_model(proto, tmp, full=checked[1], label=path)

    write_atomically(path, write)


def _constants_inline(proto: onnx.ModelProto, base_dir: pathlib.Path) -> onnx.ModelProto:
    """``proto``, or a copy whose external tensors outside initializers are read in.

    ``unload_from_model`` moves initializers only; a Constant whose value is an external file
    would otherwise point at a file that is not beside the output.
    """
    if not any(True for _ in external_tensors(proto, initializers=False)):
        return proto
    proto = _copy(proto)
    for tensor in external_tensors(proto, initializers=False):
        read_into(tensor, _read(base_dir, tensor))
    return proto


def _read(base_dir: pathlib.Path, tensor: onnx.TensorProto) -> bytes:
    try:
        return read_chunk(base_dir, tensor)
    except (OSError, ExternalDataError) as error:
        reason = f"cannot read the weights of {tensor.name!r}: {error}"
        raise ModelFileError(f"{base_dir}: {reason}") from None


def _copy(proto: onnx.ModelProto) -> onnx.ModelProto:
    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    return copy
