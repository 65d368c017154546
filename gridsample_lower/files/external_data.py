"""Find, check and read the external data of an ONNX model, which ``onnx.load`` left on disk.

A tensor stored externally names a file (relative to the model's directory, never outside it),
an offset and a length; ``data_files`` checks every such file exists and holds what the tensor's
shape needs, without reading it. Errors are ``ExternalDataError``, naming the file and the tensor.
"""

from __future__ import annotations

import math
import os
import pathlib
from collections.abc import Iterator

import onnx

__all__ = [
    "ExternalDataError",
    "data_files",
    "external_tensors",
    "read_chunk",
    "read_into",
    "relocate",
]

_PACKED_TYPES = {  # several elements per byte: the length is not dims * itemsize
    getattr(onnx.TensorProto, name)
    for name in ("INT4", "UINT4", "FLOAT4E2M1", "INT2", "UINT2")
    if hasattr(onnx.TensorProto, name)
}


class ExternalDataError(ValueError):
    """External data that is missing, too short, or outside the model's directory."""


def external_tensors(
    proto: onnx.ModelProto, *, initializers: bool = True
) -> Iterator[onnx.TensorProto]:
    """Every tensor of ``proto`` whose data lives in an external file, at any depth.

    With ``initializers=False``, only those that are not initializers (Constant values,
    sparse tensors): what ``onnx_ir`` does not move to a new external data file.
    """
    external = onnx.TensorProto.EXTERNAL
    graphs = [proto.graph]
    nodes = [node for function in proto.functions for node in function.node]
    while graphs or nodes:
        if graphs:
            graph = graphs.pop()
            tensors = [*(graph.initializer if initializers else ())]
            tensors += [s.values for s in graph.sparse_initializer]
            yield from (t for t in tensors if t.data_location == external)
            nodes.extend(graph.node)
            continue
        for attr in nodes.pop().attribute:
            tensors = [attr.t, *attr.tensors, attr.sparse_tensor.values]
            tensors += [s.values for s in attr.sparse_tensors]
            yield from (t for t in tensors if t.data_location == external)
            graphs.extend([attr.g, *attr.graphs] if attr.HasField("g") else attr.graphs)


def data_files(
    proto: onnx.ModelProto, base_dir: pathlib.Path
) -> tuple[tuple[pathlib.Path, ...], int]:
    """The external data files ``proto`` reads and their bytes in use, every tensor checked."""
    sizes: dict[pathlib.Path, int] = {}
    total = 0
    for tensor in external_tensors(proto):
        file, offset, length = _chunk(base_dir, tensor)
        if file not in sizes:
            if not file.is_file():
                missing = f"external data {file.name} of tensor {tensor.name!r} is missing"
                raise ExternalDataError(missing)
            sizes[file] = file.stat().st_size
        length = sizes[file] - offset if length is None else length
        needed = _nbytes(tensor)
        if offset + length > sizes[file] or (needed is not None and needed != length):
            raise ExternalDataError(
                f"{file.name} is truncated or wrong: tensor {tensor.name!r} needs "
                f"{needed or length} bytes at offset {offset}, the file has {sizes[file]}"
            )
        total += length
    return tuple(sizes), total


def read_chunk(base_dir: pathlib.Path, tensor: onnx.TensorProto) -> bytes:
    """The bytes of one external tensor."""
    file, offset, length = _chunk(base_dir, tensor)
    with open(file, "rb") as data:
        data.seek(offset)
        return data.read() if length is None else data.read(length)


def read_into(tensor: onnx.TensorProto, data: bytes) -> None:
    """Make ``tensor`` hold ``data`` itself instead of pointing at a file."""
    tensor.raw_data = data
    del tensor.external_data[:]
    tensor.data_location = onnx.TensorProto.DEFAULT


def relocate(tensor: onnx.TensorProto, location: str) -> None:
    """Point an external tensor at another file (same offset and length)."""
    for entry in tensor.external_data:
        if entry.key == "location":
            entry.value = location


def _chunk(base_dir: pathlib.Path, tensor: onnx.TensorProto):
    """(file, offset, length or None) of an external tensor; the file must lie in base_dir."""
    info = {entry.key: entry.value for entry in tensor.external_data}
    location = info.get("location", "")
    file = (base_dir / location).resolve()
    if not location or os.path.isabs(location) or not file.is_relative_to(base_dir.resolve()):
        raise ExternalDataError(
            f"tensor {tensor.name!r} points outside the model's directory "
            f"({location or 'no location'})"
        )
    offset, length = info.get("offset", "0"), info.get("length")
    if not offset.isdecimal() or not (length is None or length.isdecimal()):  # no sign: >= 0
        raise ExternalDataError(f"tensor {tensor.name!r} has a bad offset or length")
    return file, int(offset), None if length is None else int(length)


def _nbytes(tensor: onnx.TensorProto) -> int | None:
    """The bytes a tensor's shape needs (None where that is not dims * itemsize)."""
    if tensor.data_type in _PACKED_TYPES or tensor.data_type == onnx.TensorProto.STRING:
        return None
    try:
        itemsize = onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize
    except (KeyError, ValueError, TypeError):
        return None
    return math.prod(tensor.dims) * itemsize
