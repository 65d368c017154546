"""Many models at once, and what a rewrite did, as a user sees it from the real command."""

from __future__ import annotations

import json
import shutil

import numpy as np
import onnx
import pytest
from conftest import assert_close, gridsample_model, inspect_rows, make_grid, run_ort
from test_main import EXAMPLE, cli

from gridsample_lower.check.reference import grid_sample


@pytest.fixture
def folder(tmp_path):
    """Three models: the bundled example, a 3-D one onnxruntime cannot run, and a broken file."""
    models = tmp_path / "models"
    models.mkdir()
    shutil.copy(EXAMPLE, models / "stn.onnx")
    onnx.save(
        gridsample_model([1, 2, 4, 5, 6], [1, 3, 3, 2, 3], "cubic", "border", 1),
        models / "cubic3d.onnx",
    )
    (models / "broken.onnx").write_bytes(b"not a model")
    return models


def test_one_bad_model_does_not_stop_the_others(folder, tmp_path, rng):
    out = tmp_path / "out"
    result = cli("lower", folder, "-o", f"{out}/", "--jobs", "2", "--samples", "1")
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines()[-1] == "error: 1 of 3 models failed"
    table = result.stdout.splitlines()
    assert table[0].split()[:3] == ["model", "status", "lowered"]
    status = {line.split()[0].rsplit("/", 1)[-1]: line.split()[1] for line in table[1:]}
    assert status == {"broken.onnx": "error", "cubic3d.onnx": "ok", "stn.onnx": "ok"}
    assert sorted(p.name for p in out.iterdir()) == ["cubic3d.onnx", "stn.onnx"]
    x = rng.standard_normal((1, 2, 4, 5, 6)).astype(np.float32)
    grid = make_grid(rng, (1, 3, 3, 2, 3))
    expected = grid_sample(x, grid, "cubic", "border", 1).astype(np.float32)
    assert_close(
        run_ort(onnx.load(out / "cubic3d.onnx"), {"X": x, "grid": grid}), expected, "cubic"
    )


def test_json_is_one_document_with_what_each_rewrite_did(folder, tmp_path):
    (folder / "broken.onnx").unlink()
    result = cli("lower", folder / "*.onnx", "-o", f"{tmp_path}/out/", "--json", "--no-verify")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["ok"] is True
    stn = {model["input"].rsplit("/", 1)[-1]: model for model in document["models"]}["stn.onnx"]
    assert stn["status"] == "ok" and stn["nodes"] == "13 -> 172"
    assert stn["lowered"] == {
        "r2 cubic border align_corners=1": 1,
        "r2 linear zeros align_corners=0": 1,
    }
    assert "GatherElements" in stn["ops_added"] and "GridSample" not in stn["ops_added"]
    assert stn["bytes"][1] == (tmp_path / "out" / "stn.onnx").stat().st_size
    assert stn["check"] == "not verified" and stn["kept"] == []


def test_one_model_says_what_the_rewrite_did(tmp_path):
    result = cli(
        "lower", EXAMPLE, "-o", tmp_path / "o.onnx", "--target", "onnxruntime", "--samples", "1"
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "1 x r2 cubic border align_corners=1"
    assert lines[1].startswith("nodes 13 -> ") and " kB -> " in lines[1]
    assert lines[2].startswith("ops added: ") and "Floor" in lines[2]
    assert lines[3] == "kept stn_sample (onnxruntime runs it natively)"
    assert lines[4].startswith(f"wrote {tmp_path / 'o.onnx'}: 1 GridSample lowered, verified")


def test_a_folder_output_gets_each_model_under_its_name(tmp_path):
    result = cli("lower", EXAMPLE, "-o", f"{tmp_path}/new/", "--no-verify", "-q")
    assert result.returncode == 0 and result.stdout == "", result.stderr
    assert [p.name for p in (tmp_path / "new").iterdir()] == ["stn.onnx"]


def test_standard_output_is_refused(tmp_path):
    result = cli("lower", EXAMPLE, "-o", "-", cwd=tmp_path)
    assert result.returncode == 2 and "-o -: a model cannot go to standard output" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_upgrade_and_inspect_take_many_models(tmp_path):
    old = tmp_path / "old"
    old.mkdir()
    for mode in ("linear", "cubic"):
        onnx.save(
            gridsample_model([1, 2, 5, 6], [1, 3, 4, 2], mode, "zeros", 0, opset=16),
            old / f"{mode}.onnx",
        )
    result = cli("upgrade", old, "-o", f"{tmp_path}/new/", "--samples", "1")
    assert result.returncode == 0, result.stderr
    assert [line.split()[1:3] for line in result.stdout.splitlines()[1:]] == [["ok", "16"]] * 2
    listed = cli("inspect", old, tmp_path / "new", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [row["mode"] for row in inspect_rows(listed.stdout)] == [
        "bicubic",
        "bilinear",
        "cubic",
        "linear",
    ]


def test_inspect_exits_2_when_a_node_cannot_be_lowered(tmp_path):
    model = gridsample_model([1, 1, 4, 5], [1, 2, 2, 2], x_dtype=np.float32)
    model.graph.node[0].attribute.append(onnx.helper.make_attribute("mode", "lanczos"))
    del model.graph.node[0].attribute[0]
    onnx.save(model, tmp_path / "m.onnx")
    result = cli("inspect", tmp_path / "m.onnx")
    assert result.returncode == 2, result.stdout
    assert "cannot lower" in result.stdout and result.stderr.startswith("error: ")


def test_a_batch_in_one_process_frees_each_model_before_the_next(tmp_path):
    """The command runs with the collector off (collector.one_command_process), so a batch
    frees what each model left in reference cycles itself; the last model's leftovers wait
    for the process to end."""
    import gc
    import weakref

    from gridsample_lower.cli.batch import Outcome, run_each

    class Cycle:
        pass

    left = []

    def work(source, output):
        garbage = Cycle()
        garbage.itself = garbage  # freed only by a collection
        left.append(weakref.ref(garbage))
        return Outcome(source)

    models = [tmp_path / f"{k}.onnx" for k in range(3)]
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        run_each(work, models, [None] * 3, jobs=1, silent=True)
        assert [ref() is None for ref in left] == [True, True, False]
    finally:
        gc.collect()
        if was_enabled:
            gc.enable()
