"""Choosing what to lower: targets keep their native configurations, filters narrow the rest,
and --as-functions emits one function per configuration."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir
import pytest
from conftest import assert_close, gridsample_model, make_grid, ort_outputs, run_ort
from onnx import numpy_helper

from gridsample_lower import UnsupportedGridSample, lower, lower_with_report
from gridsample_lower.lowering.functions import DOMAIN
from gridsample_lower.lowering.targets import FOLDED_GRID_MAX_CHANNELS, native_cubic_channels

FLOAT, DOUBLE = onnx_ir.DataType.FLOAT, onnx_ir.DataType.DOUBLE

TWO_NODES = """
<ir_version: 9, opset_import: ["" : 20]>
g (float[2,3,5,6] X, float[2,4,3,2] grid, float[1,2,3,4,5] V, float[1,2,2,2,3] vgrid)
  => (float[2,3,4,3] A, float[2,3,4,3] B, float[1,2,2,2,2] C) {
  A = GridSample <mode="linear"> (X, grid)
  B = GridSample <mode="nearest", padding_mode="border"> (X, grid)
  C = GridSample <mode="linear", padding_mode="reflection"> (V, vgrid)
}
"""


def _kept(model: onnx.ModelProto) -> list[str]:
    return sorted(n.output[0] for n in model.graph.node if n.op_type == "GridSample")


@pytest.fixture
def model():
    parsed = onnx.parser.parse_model(TWO_NODES)
    for node in parsed.graph.node:
        node.name = node.output[0]  # nodes named after their outputs: A, B, C
    return parsed


@pytest.mark.parametrize(
    "target,kept",
    [
        ("generic", []),
        ("onnxruntime", ["A"]),  # its 2-D linear+zeros kernel beats the lowering here
        ("openvino", ["A", "B"]),  # 4-D float: runs natively
        ("tensorrt", ["A", "B"]),
        ("webnn", []),
        ("litert", ["A"]),  # onnx2tf's emulation: right and faster for linear, zeros or border
    ],
)
def test_targets_keep_what_they_run(model, target, kept):
    assert _kept(lower(model, target=target)) == kept
    assert _kept(lower(model, target=target, lower_all=True)) == []


def _one_node_model(rng, config, channels, dtype, grid_as):
    """One GridSample; its grid an input, an initializer, a Constant, or an overridable one."""
    rank, mode, padding = config
    x_shape, grid_shape = [1, channels, *[6, 5, 4][:rank]], (1, *[4, 3, 2][:rank], rank)
    model = gridsample_model(x_shape, grid_shape, mode, padding, x_dtype=dtype, grid_dtype=dtype)
    grid = numpy_helper.from_array(make_grid(rng, grid_shape, dtype=dtype), "grid")
    if grid_as == "constant":
        model.graph.node.insert(0, onnx.helper.make_node("Constant", [], ["grid"], value=grid))
    elif grid_as != "input":
        model.graph.initializer.append(grid)
    if grid_as in ("constant", "initializer"):  # an overridable initializer stays an input
        del model.graph.input[1]
    return model


FAST = (2, "linear", "zeros")  # with align_corners=0: onnxruntime's one fast kernel
CUBIC = native_cubic_channels(4 * 3, FLOAT, "zeros")  # the 4x3 points of these grids: one
DOUBLE_CUBIC = native_cubic_channels(4 * 3, DOUBLE, "zeros")  # two
FOLDS = FOLDED_GRID_MAX_CHANNELS


@pytest.mark.parametrize(
    ("config", "channels", "dtype", "grid_as", "kept"),
    [
        (FAST, 1, np.float32, "input", True),
        (FAST, 64, np.float32, "input", True),
        (FAST, 1, np.float32, "initializer", False),  # a folded grid: the lowering wins
        (FAST, FOLDS, np.float32, "initializer", False),
        (FAST, FOLDS, np.float32, "constant", False),
        (FAST, FOLDS + 1, np.float32, "initializer", True),
        (FAST, "C", np.float32, "initializer", True),
        (FAST, FOLDS, np.float64, "initializer", True),
        (FAST, FOLDS, np.float32, "overridable", True),
        ((3, "linear", "zeros"), 1, np.float32, "input", False),  # 3-D: lowering 2-3x faster
        ((2, "cubic", "zeros"), 1, np.float32, "input", True),  # few channels: kernel wins
        ((2, "cubic", "border"), CUBIC, np.float32, "input", True),
        ((2, "cubic", "border"), DOUBLE_CUBIC, np.float64, "input", True),  # slow double ops
        ((2, "cubic", "border"), DOUBLE_CUBIC + 1, np.float64, "input", False),
        ((2, "cubic", "reflection"), 1, np.float64, "input", True),
        ((2, "cubic", "reflection"), 2, np.float64, "input", False),
        ((2, "cubic", "zeros"), CUBIC + 1, np.float32, "input", False),
        ((2, "cubic", "zeros"), "C", np.float32, "input", False),
        ((2, "cubic", "reflection"), 1, np.float32, "input", False),
        ((2, "cubic", "border"), CUBIC, np.float32, "initializer", False),  # a folded grid
        ((2, "cubic", "zeros"), 1, np.float32, "constant", False),
    ],
)
def test_onnxruntime_keeps_what_its_kernel_runs_faster(rng, config, channels, dtype, grid_as, kept):
    """bench/target_choices.py measures each of these choices (README, Performance)."""
    model = _one_node_model(rng, config, channels, dtype, grid_as)
    out = lower(model, target="onnxruntime")
    assert (_kept(out) == ["Y"]) is kept
    rank = config[0]
    x = rng.standard_normal((1, 2 if channels == "C" else channels, *[6, 5, 4][:rank]))
    feeds = {
        "X": x.astype(dtype),
        "grid": make_grid(rng, (1, *[4, 3, 2][:rank], rank), dtype=dtype),
    }
    feeds = {"X": feeds["X"]} if grid_as in ("constant", "initializer") else feeds
    assert_close(run_ort(out, feeds), run_ort(model, feeds), config[1])


@pytest.mark.parametrize(
    ("points", "channels", "dtype", "kept"),
    [
        ((256, 255), 1, np.float32, True),  # below 2**16 points the kernel wins...
        ((256, 256), 1, np.float32, False),  # ...from there one channel lowered in tiles...
        ((256, 256), 2, np.float32, True),
        ((720, 727), 4, np.float32, True),  # (just under 2**19)
        ((720, 729), 4, np.float32, False),  # ...and from 2**19 up to 4
        ((720, 729), 5, np.float32, True),
        ((720, 729), 1, np.float64, True),  # (measured in float32)
        (("h", "w"), 1, np.float32, True),
    ],
)
def test_onnxruntime_lowers_its_fast_path_where_tiles_beat_it(points, channels, dtype, kept):
    """2-D linear, zeros, align_corners=0: kept, but where many points of few channels run
    faster lowered in tiles (``TILED_FAST_PATH``; measured at 320x320 to 720x1280)."""
    model = gridsample_model(
        [1, channels, 8, 8], [1, *points, 2], "linear", "zeros", 0, x_dtype=dtype, grid_dtype=dtype
    )
    assert (_kept(lower(model, target="onnxruntime")) == ["Y"]) is kept


@pytest.mark.parametrize(
    ("points", "channels", "kept"),
    [
        ((64, 64), 1, True),  # the kernel wins with one channel...
        ((64, 64), 2, False),
        ((362, 362), 1, True),  # (just under 2**17 points)
        ((362, 362), 2, False),
        ((384, 384), 2, True),  # ...past 2**17 with two...
        ((384, 384), 3, False),
        ((480, 640), 3, True),  # ...and past 2**18 with three
        ((480, 640), 4, False),
        (("h", "w"), 1, True),  # unknown: one
        (("h", "w"), 2, False),
    ],
)
def test_onnxruntime_keeps_2d_cubic_by_points_and_channels(points, channels, kept):
    """bench/target_choices.py measures both sides of each bound, on random and smooth grids."""
    for padding in ("zeros", "border"):
        model = gridsample_model([1, channels, 8, 8], [1, *points, 2], "cubic", padding)
        assert (_kept(lower(model, target="onnxruntime")) == ["Y"]) is kept


@pytest.mark.parametrize(
    ("points", "padding", "channels", "kept"),
    [
        ((128, 256), "border", 2, True),  # up to 2**15 points, up to 2 channels...
        ((128, 256), "border", 3, False),
        ((128, 257), "zeros", 64, True),  # ...and past 2**15, any...
        ((256, 256), "reflection", 1, True),  # ...but with reflection one, at any size
        ((256, 256), "reflection", 2, False),
        ((480, 640), "reflection", 1, True),
        ((480, 640), "reflection", 2, False),
        (("h", "w"), "zeros", 64, True),
        (("h", "w"), "reflection", 64, True),
    ],
)
def test_onnxruntime_keeps_float64_cubic_on_large_maps(points, padding, channels, kept):
    """onnxruntime runs double Mul and MatMul slowly: its kernel wins but on small maps."""
    model = gridsample_model(
        [1, channels, 8, 8], [1, *points, 2], "cubic", padding,
        x_dtype=np.float64, grid_dtype=np.float64,
    )  # fmt: skip
    assert (_kept(lower(model, target="onnxruntime")) == ["Y"]) is kept


@pytest.mark.parametrize(("x_dims", "kept"), [(["N", 3, 6, 5], False), ([1, 3, "H", "W"], True)])
def test_a_constant_grid_folds_only_with_static_spatial_sizes(rng, x_dims, kept):
    """With symbolic spatial sizes the lowered coordinates need X's shape at run time, so
    onnxruntime cannot fold them (bench/run.py: 1.5x native): its kernel stays."""
    model = gridsample_model(x_dims, [1, 4, 3, 2])
    model.graph.initializer.append(numpy_helper.from_array(make_grid(rng, (1, 4, 3, 2)), "grid"))
    del model.graph.input[1]
    out = lower(model, target="onnxruntime")
    assert (_kept(out) == ["Y"]) is kept
    x = rng.standard_normal((1, 3, 6, 5)).astype(np.float32)
    assert_close(run_ort(out, {"X": x}), run_ort(model, {"X": x}), "linear")


def test_filters(model):
    assert _kept(lower(model, only=["B"])) == ["A", "C"]
    assert _kept(lower(model, skip=["B"])) == ["B"]
    assert _kept(lower(model, modes=["nearest"])) == ["A", "C"]
    assert _kept(lower(model, ranks=[3])) == ["A", "B"]


def test_a_bare_str_is_one_name_or_mode_and_opset16_names_are_aliases(model):
    assert _kept(lower(model, only="B")) == ["A", "C"]
    assert _kept(lower(model, skip="B")) == ["B"]
    assert _kept(lower(model, modes="linear")) == ["B"]
    assert _kept(lower(model, modes=["bilinear"])) == ["B"]
    assert _kept(lower(model, ranks=3)) == ["A", "B"]


@pytest.mark.parametrize(
    "choices,error,message",
    [
        ({"only": ["b"]}, ValueError, r"only: no GridSample named 'b' .*\(it has: 'A', 'B', 'C'\)"),
        ({"skip": "D"}, ValueError, "skip: no GridSample named 'D'"),
        ({"modes": ["cubic"]}, ValueError, "modes: no GridSample of mode 'cubic'"),
        ({"ranks": [1]}, ValueError, r"ranks: no GridSample of rank 1 .*\(it has: 2, 3\)"),
        ({"modes": ["foo"]}, ValueError, "unknown mode 'foo'; expected one of linear, nearest"),
        ({"ranks": [0]}, ValueError, "ranks must be at least 1, not 0"),
        ({"ranks": ["2"]}, TypeError, "ranks: expected int values, got str"),
        ({"only": 5}, TypeError, "only: expected str values, got int"),
        ({"index_dtype": "int16"}, ValueError, "index_dtype must be int32 or int64"),
        ({"index_dtype": 1.5}, TypeError, "index_dtype must be a str or a data type"),
    ],
)
def test_bad_choices_are_refused(model, choices, error, message):
    with pytest.raises(error, match=message):
        lower(model, **choices)


def test_index_dtype_as_an_onnx_tensor_type(model):
    lowered = lower(model, index_dtype=onnx.TensorProto.INT32)
    assert lowered.SerializeToString() == lower(model, index_dtype="int32").SerializeToString()
    assert lowered.SerializeToString() != lower(model, index_dtype="int64").SerializeToString()


def test_a_path_is_not_a_model(tmp_path, model):
    onnx.save(model, tmp_path / "m.onnx")
    with pytest.raises(TypeError, match="expects an onnx.ModelProto or an onnx_ir.Model, not str"):
        lower(str(tmp_path / "m.onnx"))


def test_lowered_with_kept_nodes_still_computes_the_same(model, rng):
    lowered = lower(model, target="openvino")
    feeds = {
        "X": rng.standard_normal((2, 3, 5, 6)).astype(np.float32),
        "grid": make_grid(rng, (2, 4, 3, 2)),
        "V": rng.standard_normal((1, 2, 3, 4, 5)).astype(np.float32),
        "vgrid": make_grid(rng, (1, 2, 2, 2, 3)),
    }
    for got, want in zip(
        ort_outputs(lowered, feeds),
        ort_outputs(model, feeds),
        strict=True,
    ):
        assert_close(got, want, "linear")


def test_int32_indices_refused_when_too_large():
    model = gridsample_model([1, 1, 50000, 50000], [1, 2, 2, 2])
    with pytest.raises(UnsupportedGridSample, match="too many for int32"):
        lower(model, index_dtype="int32")
    lower(model, index_dtype="int64")  # fine


def test_as_functions_one_per_configuration(model, rng):
    lowered, report = lower_with_report(model, as_functions=True)
    onnx.checker.check_model(lowered, full_check=True)
    assert sum(report.values()) == 3
    assert [n.domain for n in lowered.graph.node] == [DOMAIN] * 3
    assert len(lowered.functions) == 3
    assert {o.domain for o in lowered.opset_import} == {"", DOMAIN}
    # the same configuration twice gives one function
    twice = onnx.parser.parse_model(TWO_NODES.replace('nearest", padding_mode="border', "linear"))
    assert len(lower(twice, as_functions=True).functions) == 2
    x = rng.standard_normal((2, 3, 5, 6)).astype(np.float32)
    grid = make_grid(rng, (2, 4, 3, 2))
    single = gridsample_model([2, 3, 5, 6], [2, 4, 3, 2], "cubic", "zeros", 1)
    assert_close(
        run_ort(lower(single, as_functions=True), {"X": x, "grid": grid}),
        run_ort(single, {"X": x, "grid": grid}),
        "cubic",
    )
