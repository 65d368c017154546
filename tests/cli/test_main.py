"""The real ``gridsample-lower`` command, run as a user runs it; every model it writes is re-run."""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys

import numpy as np
import onnx
import pytest
from conftest import assert_close, gridsample_model, inspect_rows, make_grid, run_ort

from gridsample_lower.models import deformable_attention_model

ROOT = pathlib.Path(__file__).parents[2]
EXAMPLE = ROOT / "testdata" / "stn.onnx"


def cli(*args: str, cwd=None) -> subprocess.CompletedProcess:
    script = pathlib.Path(sys.executable).parent / "gridsample-lower"
    command = [str(script)] if script.exists() else [shutil.which("gridsample-lower")]
    return subprocess.run([*command, *map(str, args)], capture_output=True, text=True, cwd=cwd)


def test_lower_the_bundled_example(tmp_path, rng):
    out = tmp_path / "stn_lowered.onnx"
    before = EXAMPLE.read_bytes()
    result = cli("lower", EXAMPLE, "-o", out)
    assert result.returncode == 0, result.stderr
    assert "1 x r2 linear zeros align_corners=0" in result.stdout
    assert "1 x r2 cubic border align_corners=1" in result.stdout
    assert "verified against onnxruntime" in result.stdout
    assert EXAMPLE.read_bytes() == before
    lowered, original = onnx.load(out), onnx.load(EXAMPLE)
    assert "GridSample" not in {n.op_type for n in lowered.graph.node}
    assert lowered.ir_version == original.ir_version
    feeds = {"image": rng.standard_normal((2, 3, 32, 32)).astype(np.float32)}
    assert_close(run_ort(lowered, feeds), run_ort(original, feeds), "cubic")
    assert [p.name for p in tmp_path.iterdir()] == ["stn_lowered.onnx"]  # no temporary left


def test_lower_a_model_onnxruntime_cannot_run(tmp_path, rng):
    model = gridsample_model(["N", 2, 5, 4, 3], ["N", 2, 2, 3, 3], "cubic", "reflection", 1)
    src, out = tmp_path / "cubic3d.onnx", tmp_path / "out.onnx"
    onnx.save(model, src)
    result = cli("lower", src, "-o", out, "--dim", "N=2", "--samples", "1")
    assert result.returncode == 0, result.stderr
    assert "verified against onnx.reference" in result.stdout
    x = rng.standard_normal((1, 2, 5, 4, 3)).astype(np.float32)
    grid = make_grid(rng, (1, 2, 2, 3, 3))
    from gridsample_lower.check.reference import grid_sample

    assert_close(
        run_ort(onnx.load(out), {"X": x, "grid": grid}),
        grid_sample(x, grid, "cubic", "reflection", 1),
        "cubic",
    )


def test_model_without_gridsample_is_copied_unchanged(tmp_path):
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Relu", ["x"], ["y"])],
        "g",
        [onnx.helper.make_tensor_value_info("x", 1, [2])],
        [onnx.helper.make_tensor_value_info("y", 1, [2])],
    )
    src, out = tmp_path / "relu.onnx", tmp_path / "out.onnx"
    onnx.save(onnx.helper.make_model(graph, ir_version=9), src)
    result = cli("lower", src, "-o", out)
    assert result.returncode == 0 and "no GridSample" in result.stdout
    assert out.read_bytes() == src.read_bytes()


def test_inspect_lists_every_node(tmp_path):
    result = cli("inspect", EXAMPLE, "--json")
    assert result.returncode == 0, result.stderr
    rows = inspect_rows(result.stdout)
    assert [(r["name"], r["mode"], r["rank"], r["onnxruntime_native"]) for r in rows] == [
        ("stn_sample", "linear", 2, True),
        ("flow_warp", "cubic", 2, True),
    ]
    assert rows[0]["X"] == "float[batch,3,32,32]"
    table = cli("inspect", EXAMPLE)
    assert "stn_sample" in table.stdout and "ort_native" in table.stdout


# Every configuration of ONNX GridSample-20 (linear | nearest | cubic x zeros | border |
# reflection x align_corners 0 | 1, any rank >= 1), written out by hand; "ort native" where
# onnxruntime's CPU kernel runs it itself: 4-D and 5-D X (r=2, r=3), cubic for 4-D only.
SUPPORTED_TABLE = """\
| mode | padding_mode | align_corners | r=1 | r=2 | r=3 | r>=4 |
|---|---|---|---|---|---|---|
| linear | zeros | 0 | lowered | lowered (ort native) | lowered (ort native) | lowered |
| linear | zeros | 1 | lowered | lowered (ort native) | lowered (ort native) | lowered |
| linear | border | 0 | lowered | lowered (ort native) | lowered (ort native) | lowered |
| linear | border | 1 | lowered | lowered (ort native) | lowered (ort native) | lowered |
| linear | reflection | 0 | lowered | lowered (ort native) | lowered (ort native) | lowered |
| linear | reflection | 1 | lowered | lowered (ort native) | lowered (ort native) | lowered |
| nearest | zeros | 0 | lowered | lowered (ort native) | lowered (ort native) | lowered |
| nearest | zeros | 1 | lowered | lowered (ort native) | lowered (ort native) | lowered |
| nearest | border | 0 | lowered | lowered (ort native) | lowered (ort native) | lowered |
| nearest | border | 1 | lowered | lowered (ort native) | lowered (ort native) | lowered |
| nearest | reflection | 0 | lowered | lowered (ort native) | lowered (ort native) | lowered |
| nearest | reflection | 1 | lowered | lowered (ort native) | lowered (ort native) | lowered |
| cubic | zeros | 0 | lowered | lowered (ort native) | lowered | lowered |
| cubic | zeros | 1 | lowered | lowered (ort native) | lowered | lowered |
| cubic | border | 0 | lowered | lowered (ort native) | lowered | lowered |
| cubic | border | 1 | lowered | lowered (ort native) | lowered | lowered |
| cubic | reflection | 0 | lowered | lowered (ort native) | lowered | lowered |
| cubic | reflection | 1 | lowered | lowered (ort native) | lowered | lowered |"""


def test_supported_prints_every_configuration_of_the_spec():
    result = cli("supported")
    assert result.returncode == 0, result.stderr
    table = [line for line in result.stdout.splitlines() if line.startswith("|")]
    assert table == SUPPORTED_TABLE.splitlines()


@pytest.mark.parametrize(
    "content,message",
    [
        (None, "no such file"),
        (b"", "not an ONNX model"),
        (b"this is not protobuf \x00\xff\xfe", "not a readable ONNX model"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, content, message):
    src, out = tmp_path / "bad.onnx", tmp_path / "out.onnx"
    if content is not None:
        src.write_bytes(content)
    result = cli("lower", src, "-o", out)
    assert result.returncode == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr and not out.exists()


def test_unlowerable_node_is_named(tmp_path):
    model = gridsample_model([1, 1, 3, 3], [1, 2, 2, 2], name="warp7")
    (mode,) = [a for a in model.graph.node[0].attribute if a.name == "mode"]
    mode.s = b"quintic"
    src, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(model, src)
    result = cli("lower", src, "-o", out)
    assert result.returncode == 2 and "'warp7'" in result.stderr and "quintic" in result.stderr
    assert not out.exists()


def test_targets_lists_every_profile():
    from gridsample_lower.lowering.targets import TARGETS

    result = cli("targets")
    assert result.returncode == 0
    assert [line.split()[0] for line in result.stdout.splitlines()] == list(TARGETS)


def test_inspect_and_lower_with_a_target(tmp_path, rng):
    rows = inspect_rows(cli("inspect", EXAMPLE, "--json", "--target", "onnxruntime").stdout)
    assert [r["would"] for r in rows] == ["keep: onnxruntime runs it natively", "lower"]
    out = tmp_path / "out.onnx"
    result = cli("lower", EXAMPLE, "-o", out, "--target", "onnxruntime", "--as-functions")
    assert result.returncode == 0, result.stderr
    assert "1 x r2 cubic border align_corners=1" in result.stdout
    lowered = onnx.load(out)
    assert [n.op_type for n in lowered.graph.node].count("GridSample") == 1
    assert len(lowered.functions) == 1
    feeds = {"image": rng.standard_normal((1, 3, 32, 32)).astype(np.float32)}
    assert_close(run_ort(lowered, feeds), run_ort(onnx.load(EXAMPLE), feeds), "cubic")


def test_inspect_names_the_deformable_attention_lowered_as_one_unit(tmp_path):
    model = ROOT / "testdata" / "corpus" / "rt_detr_dynamo.onnx"
    kept = inspect_rows(cli("inspect", model, "--json", "--target", "onnxruntime").stdout)
    assert {r["would"] for r in kept} == {"keep: onnxruntime runs it natively"}
    result = cli("inspect", model, "--json", "--target", "onnxruntime", "--lower-all")
    rows = inspect_rows(result.stdout)
    assert len(rows) == 3, result.stderr
    assert {r["would"] for r in rows} == {"lower as one unit: deformable attention 'node_sum_1'"}
    assert {r["plan"] for r in rows} == {"deformable attention: one Gather of every level's taps"}


def test_lower_fuses_an_attention_with_heads_of_32_channels_by_default(tmp_path):
    """The onnxruntime target keeps these GridSamples alone, not as one unit with heads of
    32 channels: inspect, lower's summary and its output agree (none said to be kept)."""
    model = tmp_path / "attention.onnx"
    onnx.save(deformable_attention_model([(7, 9), (4, 5), (2, 3)], 2, 32, 5, 3), model)
    rows = inspect_rows(cli("inspect", model, "--json", "--target", "onnxruntime").stdout)
    assert {r["would"] for r in rows} == {"lower as one unit: deformable attention 'sample0+'"}
    out = tmp_path / "out.onnx"
    result = cli("lower", model, "-o", out, "--target", "onnxruntime")
    assert result.returncode == 0, result.stderr
    assert "kept" not in result.stdout and "1 deformable attention(s)" in result.stdout
    assert "GridSample" not in {n.op_type for n in onnx.load(out).graph.node}


def test_inspect_judges_a_target_by_the_node(tmp_path, rng):
    """inspect says what lower does when the target looks at shapes and constants."""
    for channels, would in [(1, "lower"), (8, "keep: onnxruntime runs it natively")]:
        model = gridsample_model([1, channels, 6, 5], [1, 4, 3, 2])
        grid = onnx.numpy_helper.from_array(make_grid(rng, (1, 4, 3, 2)), "grid")
        model.graph.initializer.append(grid)
        del model.graph.input[1]
        onnx.save(model, tmp_path / "m.onnx")
        result = cli("inspect", tmp_path / "m.onnx", "--json", "--target", "onnxruntime")
        (row,) = inspect_rows(result.stdout)
        assert row["would"] == would, result.stderr


def test_inspect_plans_the_float32_tail_as_lower_does(tmp_path):
    """A GridSample of symbolic sizes whose output is the model's runs in OpenVINO's float32
    tail, unfenced; before a Conv, in a Loop: inspect's plan and lower's graph agree."""
    model = gridsample_model(["N", 3, "H", "W"], ["N", "h", "w", 2], "linear", "border", 0)
    conv = onnx.helper.make_node("Conv", ["s", "W"], [model.graph.output[0].name])
    weights = onnx.numpy_helper.from_array(np.ones((2, 3, 1, 1), np.float32), "W")
    before_conv = onnx.ModelProto.FromString(model.SerializeToString())
    before_conv.graph.node[-1].output[0] = "s"
    before_conv.graph.node.append(conv)
    before_conv.graph.initializer.append(weights)
    for candidate, fenced in ((model, False), (before_conv, True)):
        onnx.save(candidate, tmp_path / "m.onnx")
        args = ("--target", "openvino", "--lower-all")
        (row,) = inspect_rows(cli("inspect", tmp_path / "m.onnx", "--json", *args).stdout)
        assert ("in a float32 Loop" in row["plan"]) == fenced, row["plan"]
        cli("lower", tmp_path / "m.onnx", "-o", tmp_path / "out.onnx", *args)
        ops = {n.op_type for n in onnx.load(tmp_path / "out.onnx").graph.node}
        assert ("Loop" in ops) == fenced, ops


def test_inspect_judges_a_node_in_a_branch_as_lower_does(tmp_path):
    """Inside an If branch X has no declared shape; both commands infer it to judge."""
    branch = onnx.helper.make_graph(
        [
            onnx.helper.make_node("Identity", ["X"], ["x1"]),
            onnx.helper.make_node("GridSample", ["x1", "grid"], ["y1"], mode="cubic", name="gs"),
        ],
        "branch",
        [],
        [onnx.helper.make_tensor_value_info("y1", onnx.TensorProto.FLOAT, [1, 1, 4, 3])],
    )
    model = onnx.helper.make_model(
        onnx.helper.make_graph(
            [onnx.helper.make_node("If", ["c"], ["Y"], then_branch=branch, else_branch=branch)],
            "g",
            [
                onnx.helper.make_tensor_value_info("c", onnx.TensorProto.BOOL, []),
                onnx.helper.make_tensor_value_info("X", onnx.TensorProto.FLOAT, [1, 1, 6, 5]),
                onnx.helper.make_tensor_value_info("grid", onnx.TensorProto.FLOAT, [1, 4, 3, 2]),
            ],
            [onnx.helper.make_tensor_value_info("Y", onnx.TensorProto.FLOAT, [1, 1, 4, 3])],
        ),
        opset_imports=[onnx.helper.make_opsetid("", 20)],
        ir_version=9,
    )
    onnx.save(model, tmp_path / "m.onnx")
    rows = cli("inspect", tmp_path / "m.onnx", "--json", "--target", "onnxruntime").stdout
    assert {row["would"] for row in inspect_rows(rows)} == {
        "keep: onnxruntime runs it natively"  # 2-D cubic with one channel
    }
    out = tmp_path / "out.onnx"
    result = cli("lower", tmp_path / "m.onnx", "-o", out, "--target", "onnxruntime")
    assert result.returncode == 0, result.stderr
    assert "nothing to lower (2 GridSample kept)" in result.stdout


@pytest.mark.parametrize(
    "args,message",
    [
        (["lower", EXAMPLE, "--target", "tpu9000"], "'tpu9000' is not one of 'generic'"),
        (["lower", EXAMPLE, "--bogus"], "--bogus"),  # click's wording varies by version
        (["lower"], "Missing argument 'IN...'. (try 'gridsample-lower lower --help')"),
        (["lower", EXAMPLE, "a.onnx"], "a.onnx does not exist; to write the result there, use -o"),
        (["frobnicate"], "No such command 'frobnicate'. (try 'gridsample-lower --help')"),
        (["--bogus"], "--bogus"),
    ],
)
def test_usage_errors_are_one_line(tmp_path, args, message):
    result = cli(*args, "-o", tmp_path / "o.onnx") if args[0] == "lower" else cli(*args)
    assert result.returncode == 2 and result.stderr.startswith("error: "), result.stderr
    assert message in result.stderr and len(result.stderr.splitlines()) == 1
    command = "gridsample-lower lower" if args[0] == "lower" else "gridsample-lower"
    assert result.stderr.rstrip().endswith(f"(try '{command} --help')")
    assert not (tmp_path / "o.onnx").exists()


def test_a_bare_command_shows_its_help():
    result = cli()
    assert result.returncode == 2 and "Commands:" in result.stderr + result.stdout


@pytest.mark.parametrize(
    "args,message",
    [
        (["--only", "warp_0"], "only: no GridSample named 'warp_0' in the model (it has: 'warp')"),
        (["--skip", "nosuch"], "skip: no GridSample named 'nosuch'"),
        (["--ranks", "7"], "ranks: no GridSample of rank 7 in the model (it has: 2)"),
        (["--modes", "cubic"], "modes: no GridSample of mode 'cubic' in the model"),
    ],
)
def test_a_filter_that_matches_nothing_is_refused(tmp_path, args, message):
    src, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(gridsample_model([1, 1, 3, 3], [1, 2, 2, 2], name="warp"), src)
    result = cli("lower", src, "-o", out, *args)
    assert result.returncode == 2 and not out.exists()
    assert result.stderr.startswith(f"error: {src}: {message}")
    assert len(result.stderr.splitlines()) == 1
    listed = cli("inspect", src, *args)
    assert listed.returncode == 2 and message in listed.stderr


def test_inspect_names_unnamed_nodes_as_lower_does(tmp_path):
    src = tmp_path / "m.onnx"
    onnx.save(gridsample_model([1, 1, 3, 3], [1, 2, 2, 2], name=""), src)
    result = cli("inspect", src, "--json", "--only", "GridSample_0")
    assert result.returncode == 0, result.stderr
    (row,) = inspect_rows(result.stdout)
    assert (row["name"], row["would"]) == ("GridSample_0", "lower")


def test_a_check_that_compares_nothing_writes_nothing(tmp_path):
    src, out = tmp_path / "m.onnx", tmp_path / "out.onnx"
    onnx.save(gridsample_model(["N", 1, 3, 3], ["N", 2, 2, 2]), src)
    result = cli("lower", src, "-o", out, "--dim", "N=0")
    assert result.returncode == 2 and not out.exists()
    assert "dimension 'N' must be at least 1, not 0" in result.stderr
    assert len(result.stderr.splitlines()) == 1
