"""``gridsample-lower upgrade`` and ``downgrade``, run as a user runs them; every model written is re-run."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from conftest import assert_close, gridsample_model, inspect_rows, make_grid, run_ort
from test_main import cli

from gridsample_lower.check.reference import grid_sample
from gridsample_lower.lowering.inventory import find_gridsamples


def _modes(model: onnx.ModelProto) -> list[str]:
    return [a.s.decode() for n in model.graph.node for a in n.attribute if a.name == "mode"]


def _feeds(rng, x_shape, grid_shape):
    return {
        "X": rng.standard_normal(x_shape).astype(np.float32),
        "grid": make_grid(rng, grid_shape),
    }


def test_upgrade_then_downgrade(tmp_path, rng):
    src, up, back = tmp_path / "m16.onnx", tmp_path / "m22.onnx", tmp_path / "m17.onnx"
    original = gridsample_model([1, 2, 4, 5], [1, 3, 3, 2], "cubic", "border", 1, opset=16)
    onnx.save(original, src)
    result = cli("upgrade", src, "-o", up, "--opset", "22")
    assert result.returncode == 0, result.stderr
    assert "opset 16 -> 22" in result.stdout and "verified against onnxruntime" in result.stdout
    result = cli("downgrade", up, "-o", back, "--opset", "17", "-q")
    assert result.returncode == 0 and result.stdout == "", result.stderr
    feeds = _feeds(rng, (1, 2, 4, 5), (1, 3, 3, 2))
    for path, opset, mode in [(up, 22, "cubic"), (back, 17, "bicubic")]:
        model = onnx.load(path)
        assert (model.opset_import[0].version, _modes(model)) == (opset, [mode])
        assert model.ir_version == original.ir_version
        np.testing.assert_array_equal(run_ort(model, feeds), run_ort(original, feeds))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m16.onnx", "m17.onnx", "m22.onnx"]


GELU = '<ir_version: 9, opset_import: ["" : 20]> g (float[2] X) => (float[2] Y) { Y = Gelu (X) }'


@pytest.mark.parametrize(
    "model,expected",
    [
        (
            gridsample_model([1, 2, 3, 4, 5], [1, 2, 2, 2, 3], name="warp3d"),
            ["GridSample 'warp3d' (main graph)", "spatial rank is 3", "gridsample-lower lower"],
        ),
        (onnx.parser.parse_model(GELU), ["Gelu producing 'Y' (main graph) does not exist"]),
    ],
    ids=["5-D GridSample", "Gelu"],
)
def test_downgrade_refusal_names_the_node_and_writes_nothing(tmp_path, model, expected):
    src, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(model, src)
    result = cli("downgrade", src, "-o", out, "--opset", "16")
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert all(text in result.stderr for text in expected), result.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["m.onnx"]  # no output, no temporary


def test_downgrade_lower_rest(tmp_path, rng):
    src, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    original = gridsample_model([1, 2, 3, 4, 5], [1, 2, 2, 2, 3], "nearest", "reflection", 0)
    onnx.save(original, src)
    result = cli("downgrade", src, "-o", out, "--lower-rest", "--samples", "1")
    assert result.returncode == 0, result.stderr
    assert "opset 20 -> 16, 0 GridSample" in result.stdout
    lowered = onnx.load(out)
    assert lowered.opset_import[0].version == 16
    feeds = _feeds(rng, (1, 2, 3, 4, 5), (1, 2, 2, 2, 3))
    assert_close(run_ort(lowered, feeds), run_ort(original, feeds), "nearest")


def test_inspect_flags_a_misspelled_mode_and_upgrade_repairs_it(tmp_path, rng):
    src, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    model = gridsample_model([1, 2, 4, 5], [1, 3, 3, 2], "linear", "zeros", 0, opset=16)
    (mode,) = [a for a in model.graph.node[0].attribute if a.name == "mode"]
    mode.s = b"linear"  # what onnxruntime rejects at opset 16
    onnx.save(model, src)
    (row,) = inspect_rows(cli("inspect", src, "--json").stdout)
    assert row["problem"] == "mode spelled for another opset"
    result = cli("upgrade", src, "-o", out, "--samples", "1")
    assert result.returncode == 0, result.stderr
    (site,) = find_gridsamples(ir.serde.deserialize_model(onnx.load(out)))
    assert site.describe()["problem"] == "" and site.opset == 20  # what inspect prints
    feeds = _feeds(rng, (1, 2, 4, 5), (1, 3, 3, 2))
    expected = grid_sample(feeds["X"], feeds["grid"], "linear", "zeros", 0)
    assert_close(run_ort(onnx.load(out), feeds), expected.astype(np.float32), "linear")


def test_an_opset_outside_the_range_is_a_usage_error(tmp_path):
    src = tmp_path / "m.onnx"
    onnx.save(gridsample_model([1, 1, 3, 3], [1, 2, 2, 2], opset=16), src)
    result = cli("upgrade", src, "-o", tmp_path / "out.onnx", "--opset", "19")
    assert result.returncode == 2 and "20<=x<=22" in result.stderr
    assert not (tmp_path / "out.onnx").exists()
