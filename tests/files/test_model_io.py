"""Reading and writing models safely (``gridsample_lower.files.model_io``), external weights included.

Every model written is read back: by onnx (weights loaded from the files named) and by
onnxruntime from its path, and compared with the original on the same inputs.
"""

from __future__ import annotations

import os
import pathlib
import stat
import threading

import numpy as np
import onnx
import pytest
from conftest import X_SHAPE, gridsample_model, run_path, snapshot, weighted_model
from onnx import helper, numpy_helper

from gridsample_lower import lower
from gridsample_lower.files import model_io
from gridsample_lower.files.model_io import ModelCheckError, ModelFileError


@pytest.mark.parametrize(
    "content,message",
    [
        (None, "no such file"),
        ("dir", "is a directory"),
        (b"", "empty file"),
        (b"ir_version: 9\nthis is text, not protobuf\n", "not a readable ONNX model"),
        ("truncated", r"not a readable ONNX model \(truncated"),
        (onnx.ModelProto(ir_version=9).SerializeToString(), "no graph"),
    ],
)
def test_unreadable_files_name_the_file(tmp_path, content, message):
    path = tmp_path / "bad.onnx"
    if content == "dir":
        path.mkdir()
    elif content == "truncated":
        whole = gridsample_model([1, 1, 3, 3], [1, 2, 2, 2]).SerializeToString()
        path.write_bytes(whole[: len(whole) // 2])
    elif content is not None:
        path.write_bytes(content)
    with pytest.raises(ModelFileError, match=message) as caught:
        model_io.load_model(path)
    assert str(path) in str(caught.value) and "\n" not in str(caught.value)


def test_external_weights_are_not_read(external):
    """Loading reads the graph only; the weights are checked for size, not read."""
    loaded = model_io.load_model(external)
    assert loaded.data_files == (external.parent.resolve() / "weights.bin",)
    assert loaded.external_bytes == (external.parent / "weights.bin").stat().st_size
    tensors = list(model_io.external_tensors(loaded.proto))
    assert {t.name for t in tensors} == {"W", "G"} and not any(t.raw_data for t in tensors)


def test_above_2_gb_loads_without_reading(tmp_path):
    """2.5 GB of weights (a sparse file: no disk used) load in an instant, graph only."""
    path = tmp_path / "big.onnx"
    count = 5 * 2**27  # float32: 2.5 GiB
    tensor = onnx.TensorProto(name="W", data_type=onnx.TensorProto.FLOAT, dims=[count])
    tensor.data_location = onnx.TensorProto.EXTERNAL
    tensor.external_data.add(key="location", value="big.bin")
    tensor.external_data.add(key="length", value=str(count * 4))
    model = gridsample_model([1, 1, 3, 3], [1, 2, 2, 2])
    model.graph.initializer.append(tensor)
    onnx.save_model(model, path)
    with open(tmp_path / "big.bin", "wb") as data:
        data.truncate(count * 4)
    loaded = model_io.load_model(path)
    assert loaded.external_bytes == count * 4 and not loaded.fits_in_memory()
    assert loaded.proto.ByteSize() < 10_000


@pytest.mark.parametrize(
    "damage,message",
    [
        ("missing", "external data weights.bin of tensor '.' is missing"),
        ("truncated", "truncated or wrong: tensor"),
        ("outside", "points outside the model's directory"),
        ("negative offset", "tensor 'W' has a bad offset or length"),
    ],
)
def test_bad_external_data_is_refused(external, damage, message):
    data = external.parent / "weights.bin"
    if damage == "missing":
        data.unlink()
    elif damage == "truncated":
        data.write_bytes(data.read_bytes()[:-100])
    else:
        key, value = ("location", "../weights.bin") if damage == "outside" else ("offset", "-4")
        model = onnx.load_model(external, load_external_data=False)
        for entry in model.graph.initializer[0].external_data:
            if entry.key == key:
                entry.value = value
        onnx.save_model(model, external)
    with pytest.raises(ModelFileError, match=message):
        model_io.load_model(external)


def test_checker_failure_is_reported_and_can_be_skipped(tmp_path):
    model = gridsample_model([1, 1, 3, 3], [1, 2, 2, 2])
    model.graph.node.append(helper.make_node("Relu", ["nowhere"], ["r"]))
    path = tmp_path / "m.onnx"
    onnx.save_model(model, path)
    with pytest.raises(ModelCheckError, match=r"m.onnx: fails the ONNX checker: .*nowhere"):
        model_io.load_model(path)
    assert model_io.load_model(path, check=False).proto.graph.node[-1].op_type == "Relu"


def test_external_weights_are_written_to_the_file_named(external, x, tmp_path):
    loaded = model_io.load_model(external)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    before = snapshot(external.parent)
    lowered = lower(loaded.proto)
    model_io.save_model(
        lowered,
        out_dir / "l.onnx",
        base_dir=loaded.base_dir,
        external_data="l.bin",
        protect=loaded.files,
    )
    assert snapshot(external.parent) == before  # the input and its weights untouched
    assert sorted(p.name for p in out_dir.iterdir()) == ["l.bin", "l.onnx"]
    written = onnx.load_model(out_dir / "l.onnx", load_external_data=False)
    assert {t.name for t in model_io.external_tensors(written)} == {"W"}  # G is below 1 kB
    reread = onnx.load_model(out_dir / "l.onnx")
    original = onnx.load_model(external)
    for name in ("W", "G"):
        np.testing.assert_array_equal(_initializer(reread, name), _initializer(original, name))
    np.testing.assert_allclose(run_path(out_dir / "l.onnx", x), run_path(external, x), atol=2e-5)


def test_inline_weights_can_be_moved_out(tmp_path, x):
    source = tmp_path / "inline.onnx"
    onnx.save_model(weighted_model(), source)
    loaded = model_io.load_model(source)
    model_io.save_model(loaded.proto, tmp_path / "out.onnx", external_data="out.bin")
    assert (tmp_path / "out.bin").stat().st_size == np.prod(X_SHAPE) * 4
    np.testing.assert_array_equal(run_path(tmp_path / "out.onnx", x), run_path(source, x))


def test_in_place_keeps_the_weights_where_they_are(external, x):
    loaded = model_io.load_model(external)
    expected = run_path(external, x)
    data = (external.parent / "weights.bin").read_bytes()
    model_io.save_model(lower(loaded.proto), external, base_dir=loaded.base_dir)
    assert (external.parent / "weights.bin").read_bytes() == data
    assert "GridSample" not in {
        n.op_type for n in onnx.load_model(external, load_external_data=False).graph.node
    }
    np.testing.assert_allclose(run_path(external, x), expected, atol=2e-5)
    assert sorted(p.name for p in external.parent.iterdir()) == ["m.onnx", "weights.bin"]


def test_in_place_rewrite_of_the_weights_file_itself(external, x):
    """--in-place --external-data naming the file the model reads: staged, then renamed."""
    loaded = model_io.load_model(external)
    expected = run_path(external, x)
    model_io.save_model(
        lower(loaded.proto), external, base_dir=loaded.base_dir, external_data="weights.bin"
    )
    np.testing.assert_allclose(run_path(external, x), expected, atol=2e-5)
    assert sorted(p.name for p in external.parent.iterdir()) == ["m.onnx", "weights.bin"]


@pytest.mark.parametrize(
    "target,data", [("m.onnx", None), ("o.onnx", "weights.bin"), ("weights.bin", None)]
)
def test_the_input_files_are_protected(external, target, data):
    loaded = model_io.load_model(external)
    before = snapshot(external.parent)
    with pytest.raises(ModelFileError, match="is one of the input's files"):
        model_io.save_model(
            loaded.proto,
            external.parent / target,
            base_dir=loaded.base_dir,
            external_data=data,
            protect=loaded.files,
        )
    assert snapshot(external.parent) == before


@pytest.mark.parametrize("name", ["", "sub/w.bin", "..", "/tmp/w.bin"])
def test_external_data_must_be_a_plain_file_name(tmp_path, name):
    with pytest.raises(ModelFileError, match="plain file name"):
        model_io.save_model(weighted_model(), tmp_path / "o.onnx", external_data=name)


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / "out.onnx"
    target.write_bytes(b"the previous model")

    def half_then_fail(proto, path, *args, **kwargs):  # (onnx.save_model takes either)
        data = proto if isinstance(proto, bytes) else proto.SerializeToString()
        pathlib.Path(path).write_bytes(data[:10])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(onnx, "save_model", half_then_fail)
    with pytest.raises(ModelFileError, match="out.onnx: cannot write .No space left on device"):
        model_io.save_model(weighted_model(), target)
    assert snapshot(tmp_path) == {"out.onnx": b"the previous model"}


@pytest.mark.parametrize("external_data", [None, "out.bin"])
def test_a_model_failing_the_checker_is_not_written(tmp_path, external_data):
    model = weighted_model()
    model.graph.node.append(helper.make_node("Relu", ["nowhere"], ["r"]))
    target = tmp_path / "out.onnx"
    with pytest.raises(ModelCheckError, match="out.onnx: fails the ONNX checker"):
        model_io.save_model(model, target, external_data=external_data)
    assert list(tmp_path.iterdir()) == []


def test_a_failed_staging_leaves_no_temporary(tmp_path):
    """The data file is staged, then the model's temporary cannot be made (name too long)."""
    target = tmp_path / ("a" * 240 + ".onnx")
    with pytest.raises(ModelFileError, match="cannot write .File name too long"):
        model_io.save_model(weighted_model(), target, external_data="w.data")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("old_data", ["out.bin", None])
def test_a_failed_model_rename_puts_the_old_data_back(tmp_path, monkeypatch, old_data):
    """The new data file is renamed in, then the model's rename fails: the old pair is kept."""
    target = tmp_path / "out.onnx"
    model_io.save_model(weighted_model(0), target, external_data=old_data)
    before = snapshot(tmp_path)
    real = os.replace

    def refuse_the_model(src, dst):
        if pathlib.Path(dst) == target:
            raise OSError(16, "Device or resource busy")
        return real(src, dst)

    monkeypatch.setattr(os, "replace", refuse_the_model)
    with pytest.raises(ModelFileError, match="out.onnx: cannot write .Device or resource busy"):
        model_io.save_model(weighted_model(1), target, external_data="out.bin")
    assert snapshot(tmp_path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(before)


def test_a_link_is_written_through(tmp_path):
    """Saving to a symbolic link replaces the file it points at, not the link."""
    (tmp_path / "real.onnx").write_bytes(b"old")
    link = tmp_path / "link.onnx"
    link.symlink_to("real.onnx")
    model_io.save_model(weighted_model(), link)
    model_io.write_atomically(link, lambda tmp: pathlib.Path(tmp).write_bytes(b"new"))
    assert link.is_symlink() and (tmp_path / "real.onnx").read_bytes() == b"new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.onnx", "real.onnx"]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes")
def test_special_files_are_refused(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(ModelFileError, match="pipe: is not a regular file"):
        model_io.save_model(weighted_model(), tmp_path / "pipe")
    with pytest.raises(ModelFileError, match="pipe: is not a regular file"):
        model_io.write_atomically(tmp_path / "pipe", lambda tmp: None)
    with pytest.raises(ModelFileError, match="pipe: is not a regular file"):
        model_io.save_model(weighted_model(), tmp_path / "o.onnx", external_data="pipe")
    assert stat.S_ISFIFO((tmp_path / "pipe").lstat().st_mode)
    assert [p.name for p in tmp_path.iterdir()] == ["pipe"]


def test_write_atomically_protects_files(external):
    before = snapshot(external.parent)
    with pytest.raises(ModelFileError, match="is one of the input's files"):
        protect = model_io.load_model(external).files
        model_io.write_atomically(external.parent / "weights.bin", lambda tmp: None, protect)
    assert snapshot(external.parent) == before


def test_too_large_for_one_file_asks_for_external_data(tmp_path, monkeypatch):
    monkeypatch.setattr(model_io, "PROTOBUF_LIMIT", 1000)
    with pytest.raises(ModelFileError, match="exceeds 2 GiB: name an external data file"):
        model_io.save_model(weighted_model(), tmp_path / "o.onnx")
    model_io.save_model(weighted_model(), tmp_path / "o.onnx", external_data="o.bin")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o.bin", "o.onnx"]


def test_a_replaced_file_keeps_its_permissions(tmp_path):
    target = tmp_path / "out.onnx"
    target.write_bytes(b"old")
    target.chmod(0o640)
    model_io.save_model(weighted_model(), target)
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    fresh = tmp_path / "new.onnx"
    model_io.save_model(weighted_model(), fresh)
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o666 & ~umask


def test_writes_are_deterministic(external, tmp_path):
    loaded = model_io.load_model(external)
    lowered = [lower(loaded.proto) for _ in range(2)]
    for k, proto in enumerate(lowered):
        (tmp_path / f"out{k}").mkdir()
        model_io.save_model(
            proto, tmp_path / f"out{k}" / "l.onnx", base_dir=loaded.base_dir, external_data="l.bin"
        )
    assert snapshot(tmp_path / "out0") == snapshot(tmp_path / "out1")


def test_with_weights_reads_each_chunk_once(external, monkeypatch):
    loaded = model_io.load_model(external)
    reads = []
    real = model_io.read_chunk
    monkeypatch.setattr(model_io, "read_chunk", lambda *a: reads.append(a[1].name) or real(*a))
    reference, candidate = model_io.with_weights(
        [loaded.proto, lower(loaded.proto)], loaded.base_dir
    )
    assert sorted(reads) == ["G", "W"]
    original = onnx.load_model(external)
    for proto in (reference, candidate):
        assert not list(model_io.external_tensors(proto))
        np.testing.assert_array_equal(_initializer(proto, "W"), _initializer(original, "W"))
    assert list(model_io.external_tensors(loaded.proto))  # the source is left as it was


def test_concurrent_writers_leave_one_complete_model(tmp_path):
    """Threads writing the same target: the survivor is one complete model, no temporary."""
    target = tmp_path / "out.onnx"
    models = [weighted_model(seed) for seed in range(8)]
    threads = [threading.Thread(target=model_io.save_model, args=(m, target)) for m in models]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [p.name for p in tmp_path.iterdir()] == ["out.onnx"]
    assert target.read_bytes() in {m.SerializeToString() for m in models}


def _initializer(model: onnx.ModelProto, name: str) -> np.ndarray:
    (tensor,) = [t for t in model.graph.initializer if t.name == name]
    return numpy_helper.to_array(tensor)
