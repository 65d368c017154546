"""The commands never lose or corrupt a model: bad input, safe writes, external data, sizes.

Bad input gives one line on stderr naming the file or node, exit 2 (1 for a failed check),
and leaves no file behind; outputs appear complete or not at all; the input and its weights
are written only with --in-place. Most runs are in-process (starting Python dominates); a few
run the real command to show there is no traceback.
"""

from __future__ import annotations

import json
import os
import pathlib
import stat

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from conftest import (
    BAD_NODES,
    X_SHAPE,
    gridsample_model,
    run_path,
    snapshot,
    weighted_model,
)
from onnx import helper
from test_main import cli

from gridsample_lower.cli.main import main
from gridsample_lower.files import model_io
from gridsample_lower.lowering.inventory import find_gridsamples


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def assert_refused(result, exit_code: int, *texts: str) -> None:
    """One line on stderr, ``error: ...`` with every text, the exit code, no traceback."""
    assert result.exit_code == exit_code, (result.exit_code, result.stdout, result.stderr)
    assert result.exception is None or isinstance(result.exception, SystemExit)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert all(text in lines[0] for text in texts), lines[0]


@pytest.fixture
def inline(tmp_path) -> pathlib.Path:
    path = tmp_path / "m.onnx"
    onnx.save_model(weighted_model(), path)
    return path


def _bad_file(tmp_path: pathlib.Path, kind: str) -> pathlib.Path:
    path = tmp_path / "bad.onnx"
    whole = weighted_model().SerializeToString()
    if kind == "directory":
        path.mkdir()
    elif kind == "truncated":
        path.write_bytes(whole[: len(whole) // 2])
    elif kind != "missing":
        path.write_bytes({"empty": b"", "text": b"graph {\n  node { op_type: 'Relu' }\n}\n"}[kind])
    return path


FILES = {
    "missing": "no such file",
    "directory": "is a directory",
    "empty": "empty file",
    "text": "not a readable ONNX model",
    "truncated": "not a readable ONNX model (truncated",
}


@pytest.mark.parametrize("command", ["lower", "upgrade", "downgrade", "inspect", "verify"])
@pytest.mark.parametrize("kind", FILES)
def test_unreadable_files(tmp_path, command, kind):
    path = _bad_file(tmp_path, kind)
    before = sorted(p.name for p in tmp_path.iterdir())
    args = {"inspect": [path], "verify": [path, path]}.get(
        command, [path, "-o", tmp_path / "o.onnx"]
    )
    result = run(command, *args)
    # A folder is a batch of its *.onnx files, for every command but verify.
    reason = (
        "a folder with no .onnx file"
        if kind == "directory" and command != "verify"
        else FILES[kind]
    )
    assert_refused(result, 2, str(path), reason)
    assert sorted(p.name for p in tmp_path.iterdir()) == before


@pytest.mark.parametrize("model,reason", BAD_NODES.values(), ids=BAD_NODES.keys())
def test_unlowerable_nodes(tmp_path, model, reason):
    src, out = tmp_path / "m.onnx", tmp_path / "o.onnx"
    onnx.save_model(model, src)
    assert_refused(run("lower", src, "-o", out), 2, str(src), "GridSample 'warp9'", reason)
    assert [p.name for p in tmp_path.iterdir()] == ["m.onnx"]


@pytest.mark.parametrize("damage", ["missing", "truncated"])
def test_damaged_external_data(external, damage):
    data = external.parent / "weights.bin"
    data.unlink() if damage == "missing" else data.write_bytes(data.read_bytes()[:100])
    before = snapshot(external.parent)
    result = run("lower", external, "-o", external.parent / "o.onnx")
    assert_refused(result, 2, "weights.bin", "missing" if damage == "missing" else "truncated")
    assert snapshot(external.parent) == before


def _failing_checker(tmp_path: pathlib.Path) -> pathlib.Path:
    """A model onnxruntime runs but the checker refuses: nodes not in topological order."""
    model = gridsample_model([1, 2, 4, 5], [1, 3, 3, 2])
    model.graph.node.insert(0, helper.make_node("Identity", ["grid0"], ["grid"]))
    model.graph.input[1].name = "grid0"
    model.graph.node.reverse()
    path = tmp_path / "unsorted.onnx"
    onnx.save_model(model, path)
    return path


def test_input_failing_the_checker(tmp_path):
    src, out = _failing_checker(tmp_path), tmp_path / "o.onnx"
    result = run("lower", src, "-o", out)
    assert_refused(
        result, 2, str(src), "fails the ONNX checker", "topologically sorted", "--no-check"
    )
    assert not out.exists()
    quiet = run("lower", src, "-o", out, "--no-verify")  # --no-check is not safe there
    assert_refused(quiet, 2, "fails the ONNX checker")
    assert "--no-check" not in quiet.stderr
    result = run("lower", src, "-o", out, "--no-check", "--samples", "1")
    assert result.exit_code == 0 and "verified against onnxruntime" in result.stdout, result.stderr
    assert not find_gridsamples(_ir(out))
    assert run("lower", src, "-o", out, "--no-check", "--no-verify").exit_code == 2  # usage


def test_custom_domain_op_is_left_alone(tmp_path):
    model = gridsample_model([1, 2, 4, 5], [1, 3, 3, 2])
    model.graph.node.append(helper.make_node("Foo", ["Y"], ["Z"], domain="my.custom"))
    model.graph.output[0].name = "Z"
    model.opset_import.append(helper.make_opsetid("my.custom", 1))
    src, out = tmp_path / "custom.onnx", tmp_path / "o.onnx"
    onnx.save_model(model, src)
    result = run("lower", src, "-o", out)  # no runtime runs Foo: each GridSample is checked alone
    assert result.exit_code == 0, result.stderr
    assert "checked alone" in result.stdout and "whole model was not run" in result.stdout
    assert "my.custom" in result.stdout  # the note says why
    out.unlink()
    result = run("lower", src, "-o", out, "--no-verify")
    assert result.exit_code == 0, result.stderr
    lowered = onnx.load_model(out)
    assert [(n.domain, n.op_type) for n in lowered.graph.node if n.domain] == [("my.custom", "Foo")]
    assert "GridSample" not in {n.op_type for n in lowered.graph.node}


def test_a_failed_check_is_exit_1_and_keeps_the_old_output(inline, tmp_path):
    out = tmp_path / "o.onnx"
    out.write_bytes(b"an earlier result")
    result = run("lower", inline, "-o", out, "--atol", "0", "--rtol", "0", "--samples", "1")
    assert result.exit_code == 1 and "nothing written" in result.stderr
    assert "MISMATCH" in result.stdout  # the report, unless -q
    assert out.read_bytes() == b"an earlier result"
    quiet = run("lower", inline, "-o", out, "--atol", "0", "--rtol", "0", "--samples", "1", "-q")
    assert quiet.exit_code == 1 and quiet.stdout == ""  # -q: errors only
    assert len(quiet.stderr.splitlines()) == 1 and "nothing written" in quiet.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx", "o.onnx"]


def test_the_real_command_has_no_traceback(tmp_path):
    for src in (_bad_file(tmp_path, "directory"), _failing_checker(tmp_path)):
        result = cli("lower", src, "-o", tmp_path / "o.onnx")
        assert result.returncode == 2 and "Traceback" not in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr


@pytest.mark.parametrize(
    "args,message",
    [
        ([], "give -o OUT (or -o DIR/), or --in-place"),
        (["-o", "other.onnx", "--in-place"], "--in-place writes over IN: drop -o"),
        (["-o", "o.onnx", "--no-check", "--no-verify"], "--no-check needs the numerical check"),
    ],
)
def test_output_usage_errors(inline, args, message):
    with_dir = [inline.parent / a if a.endswith(".onnx") else a for a in args]
    result = run("lower", inline, *with_dir)
    assert result.exit_code == 2 and message in result.stderr
    assert len(result.stderr.splitlines()) == 1


def test_a_folder_output_is_written_into(inline):
    """-o DIR means "into this folder", under IN's name: here that is IN itself."""
    result = run("lower", inline, "-o", inline.parent)
    assert_refused(result, 2, "is the input; --in-place writes over it")
    assert [p.name for p in inline.parent.iterdir()] == ["m.onnx"]


@pytest.mark.parametrize("out,message", [("no/o.onnx", "does not exist")])
def test_unwritable_destinations(inline, out, message):
    result = run("lower", inline, "-o", inline.parent / out)
    assert_refused(result, 2, message)
    assert "--in-place" not in result.stderr  # it would not help
    assert [p.name for p in inline.parent.iterdir()] == ["m.onnx"]


@pytest.mark.parametrize("command", ["lower", "upgrade", "downgrade"])
@pytest.mark.parametrize(
    "target,data,message",
    [
        ("m.onnx", None, "is the input; --in-place writes over it"),
        ("weights.bin", None, "is one of the input's files"),
        ("o.onnx", "weights.bin", "is one of the input's files"),
    ],
)
def test_input_files_are_written_only_in_place(external, command, target, data, message):
    before = snapshot(external.parent)
    extra = ["--external-data", data] if data else []
    result = run(command, external, "-o", external.parent / target, *extra, "--samples", "1")
    assert_refused(result, 2, message)
    assert ("--in-place" in result.stderr) == (target == "m.onnx")  # the hint only where it helps
    assert snapshot(external.parent) == before


@pytest.mark.parametrize("command", ["lower", "upgrade"])
@pytest.mark.parametrize(
    "report,args,message",
    [
        ("m.onnx", ["-o", "o.onnx"], "is one of the input's files"),
        ("weights.bin", ["-o", "o.onnx"], "is one of the input's files"),
        ("weights.bin", ["--in-place"], "is one of the input's files"),
        ("o.onnx", ["-o", "o.onnx"], "is one of the output's files"),
        ("o.onnx.data", ["-o", "o.onnx"], "is one of the output's files"),
        ("w.bin", ["-o", "o.onnx", "--external-data", "w.bin"], "is one of the output's files"),
    ],
)
def test_the_report_never_replaces_a_model_file(external, command, report, args, message):
    before = snapshot(external.parent)
    args = [external.parent / a if a.endswith(".onnx") else a for a in args]
    result = run(command, external, *args, "--report", external.parent / report, "--samples", "1")
    assert_refused(result, 2, f"--report {external.parent / report}", message)
    assert snapshot(external.parent) == before


@pytest.mark.parametrize("report", ["m.onnx", "weights.bin", "c.onnx"])
def test_verify_report_never_replaces_a_model(external, report):
    candidate = external.parent / "c.onnx"
    onnx.save_model(weighted_model(), candidate)
    before = snapshot(external.parent)
    result = run("verify", external, candidate, "--report", external.parent / report)
    assert_refused(result, 2, "--report", "is one of the input's files")
    assert snapshot(external.parent) == before


def test_no_report_when_the_model_cannot_be_written(inline, tmp_path, monkeypatch):
    """The report follows the outcome: none for a failed save, "ok": false for a mismatch."""
    out, report = tmp_path / "o.onnx", tmp_path / "r.json"

    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patch:
        patch.setattr(onnx, "save_model", disk_full)
        result = run("lower", inline, "-o", out, "--report", report, "--samples", "1")
    assert_refused(result, 2, f"{out}: cannot write (No space left on device)")
    assert [p.name for p in tmp_path.iterdir()] == ["m.onnx"]
    result = run("lower", inline, "-o", out, "--report", report, "--atol", "0", "--rtol", "0")
    assert result.exit_code == 1 and not out.exists()
    assert json.loads(report.read_text())["ok"] is False


def test_a_failed_external_data_write_leaves_nothing(inline, tmp_path):
    """A name the temporary file cannot have (too long): one line, no staged data file left."""
    out = tmp_path / ("a" * 240 + ".onnx")
    result = cli("lower", inline, "-o", out, "--external-data", "w.data", "--samples", "1")
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.strip().splitlines() == [
        f"error: {out}: cannot write (File name too long)"
    ]
    assert [p.name for p in tmp_path.iterdir()] == ["m.onnx"]


@pytest.mark.parametrize("key,value", [("offset", "-4"), ("length", "-3072")])
@pytest.mark.parametrize("command", ["lower", "inspect", "verify"])
def test_a_negative_offset_or_length_is_refused(external, command, key, value):
    model = onnx.load_model(external, load_external_data=False)
    entry = next(e for e in model.graph.initializer[0].external_data if e.key == key)
    entry.value = value
    onnx.save_model(model, external)
    before = snapshot(external.parent)
    args = {"inspect": [external], "verify": [external, external]}.get(
        command, [external, "-o", external.parent / "o.onnx"]
    )
    result = run(command, *args)
    assert_refused(result, 2, str(external), "tensor 'W' has a bad offset or length")
    assert snapshot(external.parent) == before


def test_symbolic_links_are_written_through(inline, tmp_path, x):
    """--in-place, -o and --report on a link replace the file it points at; the link stays."""
    expected = run_path(inline, x)
    link = tmp_path / "link.onnx"
    link.symlink_to(inline.name)
    report, report_link = tmp_path / "r.json", tmp_path / "r_link.json"
    report_link.symlink_to(report.name)
    result = run("lower", link, "--in-place", "--samples", "1", "--report", report_link)
    assert result.exit_code == 0, result.stderr
    assert link.is_symlink() and report_link.is_symlink()
    assert not find_gridsamples(_ir(inline)) and json.loads(report.read_text())["ok"]
    np.testing.assert_allclose(run_path(inline, x), expected, atol=2e-5)
    out, out_link = tmp_path / "o.onnx", tmp_path / "o_link.onnx"
    out.write_bytes(b"an earlier result")
    out_link.symlink_to(out.name)
    assert run("lower", inline, "-o", out_link).exit_code == 0
    assert out_link.is_symlink() and out.read_bytes() == inline.read_bytes()  # copied unchanged


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes")
@pytest.mark.parametrize("option", ["-o", "--report", "--external-data"])
def test_special_files_are_not_replaced(inline, option):
    special = inline.parent / "special"
    os.mkfifo(special)
    out = [] if option == "-o" else ["-o", inline.parent / "o.onnx"]
    name = "special" if option == "--external-data" else special
    result = run("lower", inline, *out, option, name, "--samples", "1")
    assert_refused(result, 2, "special: is not a regular file")
    assert stat.S_ISFIFO(special.lstat().st_mode)
    assert sorted(p.name for p in inline.parent.iterdir()) == ["m.onnx", "special"]


def test_a_link_as_external_data_file_is_refused(inline):
    (inline.parent / "w.bin").symlink_to("elsewhere.bin")
    result = run("lower", inline, "-o", inline.parent / "o.onnx", "--external-data", "w.bin")
    assert_refused(result, 2, "w.bin: is a symbolic link")
    assert sorted(p.name for p in inline.parent.iterdir()) == ["m.onnx", "w.bin"]


def test_in_place_inline(inline, x):
    expected = run_path(inline, x)
    inline.chmod(0o640)
    result = run("lower", inline, "--in-place", "--samples", "1")
    assert result.exit_code == 0 and f"wrote {inline}" in result.stdout, result.stderr
    assert not find_gridsamples(_ir(inline))
    assert stat.S_IMODE(inline.stat().st_mode) == 0o640
    np.testing.assert_allclose(run_path(inline, x), expected, atol=2e-5)
    lowered = inline.read_bytes()
    again = run("lower", inline, "--in-place")
    assert (
        again.exit_code == 0
        and f"no GridSample in {inline}; {inline} left as it was" in again.stdout
    )
    assert inline.read_bytes() == lowered
    assert [p.name for p in inline.parent.iterdir()] == ["m.onnx"]


def test_in_place_external_leaves_the_weights(external, x):
    expected = run_path(external, x)
    weights = (external.parent / "weights.bin").read_bytes()
    result = run("lower", external, "--in-place", "--samples", "1")
    assert result.exit_code == 0, result.stderr
    assert (external.parent / "weights.bin").read_bytes() == weights
    np.testing.assert_allclose(run_path(external, x), expected, atol=2e-5)
    assert sorted(p.name for p in external.parent.iterdir()) == ["m.onnx", "weights.bin"]


@pytest.mark.parametrize("name", [None, "w.bin"])
def test_external_weights_are_kept_external(external, tmp_path, x, name):
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    before = snapshot(external.parent)
    extra = ["--external-data", name] if name else []
    result = run("lower", external, "-o", out_dir / "l.onnx", *extra, "--samples", "1")
    assert result.exit_code == 0, result.stderr
    assert snapshot(external.parent) == before
    assert sorted(p.name for p in out_dir.iterdir()) == sorted(["l.onnx", name or "l.onnx.data"])
    np.testing.assert_allclose(run_path(out_dir / "l.onnx", x), run_path(external, x), atol=2e-5)


def test_inline_weights_can_be_made_external(inline, tmp_path, x):
    result = run("lower", inline, "-o", tmp_path / "l.onnx", "--external-data", "l.bin", "-q")
    assert result.exit_code == 0 and result.stdout == "", result.stderr
    assert (tmp_path / "l.bin").stat().st_size == np.prod(X_SHAPE) * 4
    np.testing.assert_allclose(run_path(tmp_path / "l.onnx", x), run_path(inline, x), atol=2e-5)


@pytest.mark.parametrize("command,opset", [("upgrade", "21"), ("downgrade", "17")])
def test_convert_external_and_in_place(external, tmp_path, x, command, opset):
    expected = run_path(external, x)
    out = tmp_path / "c.onnx"
    assert run(command, external, "-o", out, "--opset", opset, "--samples", "1").exit_code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "c.onnx",
        "c.onnx.data",
        "m.onnx",
        "weights.bin",
    ]
    np.testing.assert_allclose(run_path(out, x), expected, atol=2e-5)
    result = run(command, external, "--in-place", "--opset", opset, "--samples", "1")
    assert result.exit_code == 0, result.stderr
    assert onnx.load_model(external, load_external_data=False).opset_import[0].version == int(opset)
    np.testing.assert_allclose(run_path(external, x), expected, atol=2e-5)


def test_above_2_gb_in_place_without_reading_the_weights(tmp_path):
    """2.5 GB of weights (a sparse file): the check cannot hold them, --no-verify lowers."""
    path = tmp_path / "big.onnx"
    model = gridsample_model([1, 2, 4, 5], [1, 3, 3, 2])
    count = 5 * 2**27
    tensor = onnx.TensorProto(name="W", data_type=onnx.TensorProto.FLOAT, dims=[count])
    tensor.data_location = onnx.TensorProto.EXTERNAL
    tensor.external_data.add(key="location", value="big.bin")
    model.graph.initializer.append(tensor)
    onnx.save_model(model, path)
    with open(tmp_path / "big.bin", "wb") as data:
        data.truncate(count * 4)
    result = run("lower", path, "--in-place")
    assert_refused(result, 2, str(path), "2.5 GiB", "--no-verify")
    result = run("lower", path, "--in-place", "--no-verify")
    assert result.exit_code == 0, result.stderr
    assert not find_gridsamples(_ir(path))
    assert (tmp_path / "big.bin").stat().st_size == count * 4
    assert (tmp_path / "big.bin").stat().st_blocks == 0  # never written


def test_lowering_is_deterministic_and_idempotent(external, tmp_path):
    """Two runs (separate processes) give the same bytes; lowering the result changes nothing."""
    outs = [tmp_path / f"run{k}" for k in range(2)]
    for out in outs:
        out.mkdir()
        result = cli("lower", external, "-o", out / "l.onnx", "--samples", "1")
        assert result.returncode == 0, result.stderr
    assert snapshot(outs[0]) == snapshot(outs[1])
    again = run("lower", outs[0] / "l.onnx", "-o", outs[1] / "again.onnx")
    assert again.exit_code == 0, again.stderr
    assert f"no GridSample in {outs[0] / 'l.onnx'}; written unchanged to" in again.stdout
    assert (outs[1] / "again.onnx.data").read_bytes() == (outs[0] / "l.onnx.data").read_bytes()
    first, second = (_graph_only(p) for p in (outs[0] / "l.onnx", outs[1] / "again.onnx"))
    assert first == second


def _graph_only(path: pathlib.Path) -> bytes:
    """The model without its weights, data file names given the same length."""
    model = onnx.load_model(path, load_external_data=False)
    for tensor in model_io.external_tensors(model):
        for entry in tensor.external_data:
            entry.value = entry.value.replace("again.onnx.data", "l.onnx.data")
    return model.SerializeToString()


def _ir(path: pathlib.Path):
    import onnx_ir as ir

    return ir.serde.deserialize_model(onnx.load_model(path, load_external_data=False))
