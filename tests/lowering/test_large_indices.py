"""Flat gather indices stay exact past 2**24 elements (float32's last exact integer) and 2**31.

Past 2**24 the flat index must not be float32 arithmetic (it is combined in integers) and past
2**31 the gather index must be int64. The first is run on a 67 MB X; the second would need an X
of 2**31 elements, so the lowered graph is inspected instead (its static shape is never run).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from click.testing import CliRunner
from conftest import assert_close, gridsample_model, inspect_rows, run_ort
from onnx import TensorProto
from onnxscript import rewriter

from gridsample_lower import GridSampleSpec, UnsupportedGridSample, lower, lower_with_report
from gridsample_lower.check.reference import grid_sample
from gridsample_lower.cli.main import main
from gridsample_lower.lowering.costs import ROWS_MIN_CHANNELS
from gridsample_lower.lowering.decompositions.cubic import CUBIC
from gridsample_lower.lowering.decompositions.linear import LINEAR
from gridsample_lower.lowering.index_range import ring_width
from gridsample_lower.lowering.plan import plan_of
from gridsample_lower.lowering.rule import gridsample_rule
from gridsample_lower.lowering.targets import get_target

SIDE = 4097  # 4097 * 4097 = 2**24 + 8193 elements in one channel plane
GATHERS = ("GatherElements", "Gather")


def _pixel_coordinates(rows, cols, size, align):
    """Normalized coordinates of pixel centres (exact in float32 for this size and align)."""
    scale = (size - 1) / 2 if align else size / 2
    shift = 0.0 if align else 0.5
    to_g = lambda i: (np.asarray(i, np.float64) + shift) / scale - 1  # noqa: E731
    return np.stack([to_g(cols), to_g(rows)], axis=-1)


@pytest.fixture(scope="module")
def big_x():
    return np.random.default_rng(7).standard_normal((1, 1, SIDE, SIDE)).astype(np.float32)


@pytest.mark.parametrize(
    "shape", [[1, 1, SIDE, SIDE], ["N", "C", "H", "W"]], ids=["static", "symbolic"]
)
@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_indices_past_2_to_the_24_are_exact(big_x, shape, mode):
    """Pixels whose flat index is odd and above 2**24 (float32 would round it to a neighbour)."""
    rows = np.array([4096, 4095, 4096, 4096, 4096])
    cols = np.array([4095, 4096, 4093, 1, 3])
    flat = rows * SIDE + cols
    assert (flat > 2**24).all() and (flat.astype(np.float32) != flat).all()
    grid = _pixel_coordinates(rows, cols, SIDE, 1)[None, None].astype(np.float32)
    if mode == "linear":  # a quarter pixel off: two taps per axis, all past 2**24
        grid = grid + np.float32(0.25 / ((SIDE - 1) / 2))
    model = gridsample_model(shape, [*shape[:1], 1, 5, 2], mode, "zeros", 1)
    actual = run_ort(lower(model), {"X": big_x, "grid": grid})
    expected = grid_sample(big_x, grid, mode, "zeros", 1)
    assert_close(actual, expected, mode)
    if mode == "nearest":  # the exact pixels, not neighbours
        np.testing.assert_array_equal(actual.ravel(), big_x.reshape(-1)[flat])


def _index_types(model: onnx.ModelProto) -> list[tuple[int, int | None]]:
    """(index type, type of the arithmetic before it) of each gather's index, found upstream.

    The second is that of an earlier Cast on the way up, None if there is none (the taps then
    stay in the compute type, float32 here, until they become integers).
    """
    producer = {out: node for node in model.graph.node for out in node.output}
    found = []
    for node in model.graph.node:
        if node.op_type not in GATHERS or node.input[1] not in producer:
            continue
        casts, value = [], node.input[1]
        while value in producer and len(casts) < 2:
            step = producer[value]
            if step.op_type == "Cast":
                casts.append(onnx.helper.get_attribute_value(step.attribute[0]))
            data = 1 if step.op_type == "Where" else 0  # Where(inside, index, zero slot)
            value = step.input[data] if step.input else ""
        if casts:
            found.append((casts[0], casts[1] if len(casts) > 1 else None))
    return found


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize(
    "side",
    [
        (4095, 4096),  # 2**24 - 4096 elements
        (4096, 4096),  # nearest's zero slot is 2**24: still int32, no float
        (46332, 46332),  # in cubic's ring of zeros (4 either side), 46340**2 = 2**31 - 88048
        (46336, 46336),  # in linear's ring (2 either side) 46340**2; in cubic's, 2**31 + 97316
        (46338, 46338),  # 2**31 - 273388; in linear's ring, 2**31 + 97316
        (46341, 46341),  # 2**31 + 4633
        (65536, 65536, 2),  # 2**33, 3-D
    ],
)
def test_index_types_at_the_thresholds(mode, side):
    """Each axis' index is cast to an integer before any arithmetic, and the axes are combined
    in the index type: int32, or int64 once what is gathered reaches 2**31 elements (X, or for
    linear and cubic X in its ring of zeros, as many either side as the kernel has taps: 2, 4,
    where the points read enough of X to pay for padding it: else X, its taps masked).
    An int64 index starts from int32 positions: float32 ones are exact only below 2**24."""
    rank = len(side)
    for points, ring in ((2, 0), (side[0] // 2, {"nearest": 0, "linear": 2, "cubic": 4}[mode])):
        grid_shape = [1, *[points] * rank, rank]
        model = gridsample_model([1, 1, *side], grid_shape, mode, "zeros", 0)
        spec = GridSampleSpec(rank, mode, "zeros", 0)
        assert plan_of(spec, [1, 1, *side], grid_shape, get_target("generic")).ring == ring
        gathered = math.prod(s + 2 * ring for s in side)
        int32 = (TensorProto.INT32, None)
        expected = int32 if gathered < 2**31 else (TensorProto.INT64, TensorProto.INT32)
        kinds = _index_types(lower(model))
        assert kinds and set(kinds) == {expected}, (kinds, points)


@pytest.mark.parametrize(
    ("dtype", "positions"), [(np.float32, TensorProto.INT32), (np.float64, None)]
)
def test_symbolic_sizes_use_int64(dtype, positions):
    """Symbolic sizes gather with int64 indices, combined from int32 positions per axis; in
    float64, whose positions may pass 2**31, from int64 ones."""
    model = gridsample_model(
        ["N", "C", "H", "W"], ["N", 3, 3, 2], "cubic", "border", 0, x_dtype=dtype, grid_dtype=dtype
    )
    kinds = _index_types(lower(model))
    assert kinds and set(kinds) == {(TensorProto.INT64, positions)}, kinds


@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_an_axis_past_2_to_the_31_keeps_int64_positions_where_they_reach_it(mode, padding):
    """Positions lie in [0, L-1]: with L past 2**31 they are int32 only where float32
    coordinates are bounded by 2**23 (zeros or border padding, but nearest with zeros), and
    every gather index is int64."""
    model = gridsample_model([1, 1, 2**31 + 5], [1, 2, 1], mode, padding, 0)
    bounded = padding == "border" or (padding == "zeros" and mode != "nearest")
    expected = (TensorProto.INT64, TensorProto.INT32 if bounded else None)
    kinds = _index_types(lower(model))
    assert kinds and set(kinds) == {expected}, kinds


@pytest.mark.parametrize(
    "channels,expected",
    [(3, (TensorProto.INT32, None)), (ROWS_MIN_CHANNELS, (TensorProto.INT64, TensorProto.INT32))],
    ids=["gather-elements", "rows"],
)
def test_a_symbolic_batch_keeps_int32_within_a_sample(channels, expected):
    """Within-sample indices are bounded by the static spatial size: int32. Only the rows'
    batch offsets, added last, make the gathered index int64 when the batch is symbolic."""
    model = gridsample_model(["N", channels, 8, 8], ["N", 8, 8, 2], "linear", "zeros", 0)
    kinds = _index_types(lower(model))
    assert kinds and set(kinds) == {expected}, kinds


def test_rows_past_2_to_the_31_are_refused_in_int32_or_gathered_in_int64():
    """Each sample fits int32 (40000**2 < 2**31), all rows of the batch do not."""
    model = gridsample_model([2, 1, 40000, 40000], [2, 2, 2, 2], name="rows")
    with pytest.raises(UnsupportedGridSample, match="'rows'.*too many for int32"):
        lower(model, target="webnn")  # plain Gather of rows, int32 indices
    kinds = _index_types(lower(model, target="webnn", index_dtype="int64"))
    assert kinds and {k[0] for k in kinds} == {TensorProto.INT64}, kinds


def test_int32_indices_are_refused_past_2_to_the_31():
    model = gridsample_model([1, 1, 46341, 46341], [1, 2, 2, 2], name="huge")
    with pytest.raises(UnsupportedGridSample, match="'huge'.*too many for int32"):
        lower(model, index_dtype="int32")


# Refusals are decided by the rule (``index_range``), before anything is emitted: strict=False
# keeps the node, strict raises naming it, inspect says so. Shapes only: nothing here is run.

ROWS_REACH = 2 * 40002**2  # 2 samples of 40000**2 in a ring of one zero (zeros padding, rows)


def _ops(model: onnx.ModelProto) -> list[str]:
    return [n.op_type for n in model.graph.node]


def test_a_node_int32_rows_cannot_index_is_kept_or_refused_by_name():
    model = gridsample_model([2, 1, 40000, 40000], [2, 2, 2, 2], name="rows")
    kept, report = lower_with_report(model, target="webnn", strict=False)
    assert _ops(kept) == ["GridSample"] and report == {}
    as_functions = lower(model, target="webnn", strict=False, as_functions=True)
    assert _ops(as_functions) == ["GridSample"] and not as_functions.functions
    message = f"GridSample 'rows': indices reach {ROWS_REACH}: too many for int32"
    with pytest.raises(UnsupportedGridSample, match=message) as refused:
        lower(model, target="webnn")
    assert refused.value.node_name == "rows"
    alone = rewriter.rewrite(model, pattern_rewrite_rules=[gridsample_rule(target="webnn")])
    assert _ops(alone) == ["GridSample"]  # the rule's check declines it
    assert "GridSample" not in _ops(lower(model, target="webnn", index_dtype="int64"))


def test_a_symbolic_batch_is_a_promise_but_one_sample_must_fit_int32():
    fits = gridsample_model(["N", 1, 40000, 40000], ["N", 2, 2, 2], name="fits")
    assert "GridSample" not in _ops(lower(fits, target="webnn"))
    huge = gridsample_model(["N", 1, 46341, 46341], ["N", 2, 2, 2], "nearest", name="huge")
    with pytest.raises(UnsupportedGridSample, match=f"'huge': indices reach {46341**2}: too"):
        lower(huge, target="webnn")
    assert _ops(lower(huge, target="webnn", strict=False)) == ["GridSample"]


@pytest.mark.parametrize(
    ("x_shape", "options", "reach"),
    [
        ([2, 1, 40000, 40000], ["--target", "webnn"], ROWS_REACH),
        ([1, 1, 46341, 46341], ["--index-dtype", "int32"], 46341**2),  # 8 points: taps masked
    ],
    ids=["webnn-rows", "index-dtype-int32"],
)
def test_inspect_and_lower_say_int32_cannot_index_the_node(tmp_path, x_shape, options, reach):
    path = tmp_path / "m.onnx"
    onnx.save(gridsample_model(x_shape, [x_shape[0], 2, 2, 2], name="big"), path)
    reason = f"indices reach {reach}: too many for int32"
    listed = CliRunner().invoke(main, ["inspect", str(path), "--json", *options])
    assert listed.exit_code == 2, listed.output  # something cannot be lowered
    (row,) = inspect_rows(listed.stdout)
    assert row["would"] == f"cannot lower: {reason}"
    table = CliRunner().invoke(main, ["inspect", str(path), *options])
    assert f"cannot lower: {reason}" in table.stdout
    wide = CliRunner().invoke(
        main, ["inspect", str(path), "--json", *options, "--index-dtype", "int64"]
    )
    assert inspect_rows(wide.stdout)[0]["would"] == "lower" and wide.exit_code == 0
    out = tmp_path / "out.onnx"
    refused = CliRunner().invoke(
        main, ["lower", str(path), "-o", str(out), "--no-verify", *options]
    )
    assert refused.exit_code == 2 and not out.exists()
    assert f"GridSample 'big': {reason}" in refused.stderr


@pytest.mark.parametrize(
    "choice", [{"target": "int32"}, {"index_dtype": "int32"}], ids=["int32", "index-dtype-int32"]
)
def test_int32_rows_that_would_overflow_are_gathered_by_gather_elements(choice):
    """33 channels and a symbolic grid: rows pay. One sample of 40000**2 gathers them in int32;
    across two, their indices would reach 3.2e9, while each sample's GatherElements indices
    stay below 2**31: those are taken instead of refusing the node."""

    def lowered(batch, **options):
        x_shape = [batch, ROWS_MIN_CHANNELS, 40000, 40000]
        model = gridsample_model(x_shape, [batch, "H", "W", 2], "linear", "border", 0)
        return lower(model, **options)

    assert "GatherElements" not in _ops(lowered(1, **choice))  # rows: N*S < 2**31
    assert "GatherElements" not in _ops(lowered(2))  # rows, in int64
    two = lowered(2, **choice)
    assert "GatherElements" in _ops(two) and "GridSample" not in _ops(two)
    kinds = _index_types(two)
    assert kinds and {k[0] for k in kinds} == {TensorProto.INT32}, kinds


def test_the_ring_counted_is_the_ring_emitted():
    """index_range pads X as the lowering does: the kernel's taps per axis (GatherElements)."""
    for mode, kernel in (("linear", LINEAR), ("cubic", CUBIC)):
        spec = GridSampleSpec(2, mode, "zeros", 0)
        assert ring_width(spec, rows=False) == len(kernel.offsets)
        assert ring_width(spec, rows=True) == 1
        assert ring_width(GridSampleSpec(2, mode, "border", 0), rows=False) == 0
    assert ring_width(GridSampleSpec(2, "nearest", "zeros", 0), rows=False) == 0


@pytest.mark.parametrize("target", ["webnn", "int32"])
@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_the_plan_refuses_exactly_where_its_gather_cannot_index(target, mode):
    """The plan refuses a node iff the largest index of the gather it chose, the zero slot past
    the data (X padded by the ring; N*S for rows, whose indices span every sample, one sample
    where the batch is symbolic), passes int32; and the rule declines exactly those."""
    rule = rewriter.RewriteRuleSet([gridsample_rule(target=target)])
    spec = GridSampleSpec(2, mode, "zeros", 0)
    for side, batch, (channels, points) in itertools.product(
        (46332, 46338, 46341), (1, 2, "N"), ((1, 2), (ROWS_MIN_CHANNELS, "P"))
    ):
        x_shape, grid_shape = [batch, channels, side, side], [batch, points, 2, 2]
        plan = plan_of(spec, x_shape, grid_shape, get_target(target))
        largest = (side + 2 * plan.ring) ** 2 * (batch if plan.rows and batch != "N" else 1)
        case = (x_shape, points, plan.gather, plan.ring)
        assert bool(plan.refusal) == (largest >= 2**31), case
        model = gridsample_model(x_shape, grid_shape, mode, "zeros", 0)
        assert rule.apply_to_model(ir.serde.deserialize_model(model)) == int(not plan.refusal)


def test_rows_that_fit_are_taken_where_gather_elements_would_not():
    """One sample of 33x46338x46338, linear zeros on the int32 target, symbolic grid: rows pay
    (a ring of one: 46340**2 < 2**31) where GatherElements' ring of two would pass 2**31."""
    x_shape, grid_shape = [1, ROWS_MIN_CHANNELS, 46338, 46338], [1, "P", 2, 2]
    model = gridsample_model(x_shape, grid_shape, "linear", "zeros", 0)
    ops = _ops(lower(model, target="int32"))
    assert "GridSample" not in ops and "GatherElements" not in ops and "Gather" in ops
