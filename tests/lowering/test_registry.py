"""The registry is the one list of what works: it feeds the CLI, README and the tests.

What it lists is checked against statements made here, independently of the package: the ONNX
spec's GridSample (modes, paddings and ranks per opset, written out by hand), onnxruntime's own
kernel (which configurations it runs) and, for every entry, the lowered model run against the
ONNX reference evaluator.
"""

from __future__ import annotations

import functools
import pathlib
import re

import numpy as np
import onnx
import pytest
from conftest import (
    ORT_REFUSAL,
    assert_close,
    gridsample_model,
    make_grid,
    run_onnx_reference,
    run_ort,
)

from gridsample_lower import lower
from gridsample_lower.lowering import registry
from gridsample_lower.spec import GridSampleSpec

# ONNX GridSample (https://onnx.ai/onnx/operators/onnx__GridSample.html), written out by hand:
#   opset 16-19: mode bilinear | nearest | bicubic; X must be 4-D (2 spatial axes).
#   opset 20+:   mode linear | nearest | cubic; X of rank r + 2, any r >= 1 spatial axes.
#   every opset: padding_mode zeros | border | reflection; align_corners 0 | 1.
OPSET16_MODES = ("bilinear", "nearest", "bicubic")
OPSET20_MODES = ("linear", "nearest", "cubic")
SPEC_PADDINGS = ("zeros", "border", "reflection")
SPEC_ALIGN_CORNERS = (0, 1)
# Opset 20 renamed bilinear/bicubic without changing what they compute.
OPSET20_NAME = {"bilinear": "linear", "nearest": "nearest", "bicubic": "cubic"}
# The ranks the matrix has a column for (the last one stands for every rank above).
MATRIX_RANKS = (1, 2, 3, 4)


def spec_configurations(opset: int, ranks) -> list[tuple[int, str, str, int]]:
    """(rank, mode, padding_mode, align_corners) the spec allows at ``opset``, in spec order."""
    modes = OPSET16_MODES if opset < 20 else OPSET20_MODES
    return [
        (rank, mode, padding, align)
        for rank in ranks
        if (rank == 2 if opset < 20 else rank >= 1)
        for mode in modes
        for padding in SPEC_PADDINGS
        for align in SPEC_ALIGN_CORNERS
    ]


_ORT_REFUSALS = ("Only 4-D or 5-D tensor is supported", "Only support GridSample Cubic mode in 4-D")


@functools.cache
def onnxruntime_runs(rank: int, mode: str, padding: str, align: int) -> bool:
    """Whether onnxruntime's own GridSample kernel runs this float32 configuration (tried)."""
    x_shape, grid_shape = [1, 1, *[2] * rank], [1, *[2] * rank, rank]
    model = gridsample_model(x_shape, grid_shape, mode, padding, align)
    feeds = {"X": np.ones(x_shape, np.float32), "grid": np.zeros(grid_shape, np.float32)}
    try:
        run_ort(model, feeds)
    except ORT_REFUSAL as error:
        assert any(refusal in str(error) for refusal in _ORT_REFUSALS), error
        return False
    return True


def expected_matrix() -> str:
    """The support matrix as it should read: every opset-20 configuration, lowered at every
    rank, marked where onnxruntime itself runs it."""
    head = "| mode | padding_mode | align_corners | r=1 | r=2 | r=3 | r>=4 |"
    lines = [head, "|---|---|---|---|---|---|---|"]
    for _, mode, padding, align in spec_configurations(20, ranks=(1,)):
        cells = [
            "lowered (ort native)" if onnxruntime_runs(rank, mode, padding, align) else "lowered"
            for rank in MATRIX_RANKS
        ]
        lines.append(f"| {mode} | {padding} | {align} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


@pytest.mark.parametrize("opset", [16, 20, onnx.defs.onnx_opset_version()])
def test_the_spec_written_here_is_the_one_onnx_ships(opset):
    """The hand-written statement above agrees with the GridSample schema onnx itself carries."""
    schema = onnx.defs.get_schema("GridSample", opset)
    attributes = schema.attributes
    modes = re.fullmatch(
        r"Three interpolation modes: (\w+) \(default\), (\w+) and (\w+)\..*",
        attributes["mode"].description,
        flags=re.DOTALL,
    )
    assert modes is not None and modes.groups() == (OPSET16_MODES if opset < 20 else OPSET20_MODES)
    paddings = re.findall(r"`(\w+)`", attributes["padding_mode"].description)
    assert tuple(paddings) == SPEC_PADDINGS
    assert attributes["align_corners"].default_value.i == SPEC_ALIGN_CORNERS[0]
    ranks = {rank for rank, *_ in spec_configurations(opset, ranks=(1, 2, 3, 4))}
    if opset < 20:
        assert "only spatial (4-D) inputs are supported" in schema.doc
        assert ranks == {2}
    else:
        assert "for an input `X` of rank r+2 with shape (N, C, d1, d2, ..., dr)" in schema.doc
        assert ranks == {1, 2, 3, 4}


def _key(spec) -> tuple[int, str, str, int]:
    return (spec.rank, spec.mode, spec.padding_mode, spec.align_corners)


def test_the_registry_lists_every_configuration_the_spec_allows():
    listed = [_key(spec) for spec in registry.supported_specs()]
    assert len(listed) == len(set(listed)) == 3 * 18
    assert set(listed) == set(spec_configurations(20, ranks=(1, 2, 3)))
    beyond = [_key(spec) for spec in registry.supported_specs(ranks=(4, 5))]
    assert set(beyond) == set(spec_configurations(20, ranks=(4, 5)))
    # Every opset-16 configuration is one of them under its opset-20 name.
    for rank, mode, padding, align in spec_configurations(16, ranks=(1, 2, 3)):
        assert (rank, OPSET20_NAME[mode], padding, align) in listed


def test_onnxruntime_native_column_is_what_onnxruntime_runs():
    """onnxruntime runs 4-D and 5-D inputs, cubic only 4-D: checked by running its kernel."""
    native = {
        (r, m)
        for r, m, p, a in spec_configurations(20, MATRIX_RANKS)
        if onnxruntime_runs(r, m, p, a)
    }
    assert native == {(2, "linear"), (2, "nearest"), (2, "cubic"), (3, "linear"), (3, "nearest")}
    assert registry.support_matrix() == expected_matrix()


def test_readme_shows_the_current_support_matrix():
    readme = (pathlib.Path(__file__).parents[2] / "README.md").read_text()
    assert expected_matrix() in readme


def _entries():
    for rank, mode, padding, align in spec_configurations(20, ranks=(1, 2, 3)):
        yield pytest.param(
            20, rank, mode, padding, align, id=f"opset20-r{rank}-{mode}-{padding}-{align}"
        )
    for rank, mode, padding, align in spec_configurations(16, ranks=(1, 2, 3)):
        yield pytest.param(
            16, rank, mode, padding, align, id=f"opset16-r{rank}-{mode}-{padding}-{align}"
        )


@pytest.mark.parametrize("opset,rank,mode,padding,align", list(_entries()))
def test_every_entry_lowers_and_matches_the_onnx_reference(opset, rank, mode, padding, align, rng):
    """Lower each configuration the spec allows and compare with the ONNX reference evaluator.

    The reference rejects the opset-16 spellings, so an opset-16 model is compared with the
    opset-20 model of the same configuration. Its cubic + border clamps the coordinate before
    the taps (the documented disagreement), so that grid stays within [-1, 1]; the others
    see points far outside too.
    """
    x_shape = [1, 2, *[3, 4, 5][:rank]]
    grid_shape = [1, *[2, 3, 2][:rank], rank]
    x = rng.standard_normal(x_shape).astype(np.float32)
    name = OPSET20_NAME.get(mode, mode)
    if name == "cubic" and padding == "border":
        grid = np.clip(make_grid(rng, grid_shape), -1, 1)
    else:
        grid = make_grid(rng, grid_shape, far=True)
    model = gridsample_model(x_shape, grid_shape, name, padding, align, opset=opset)
    assert onnx.helper.get_node_attr_value(model.graph.node[0], "mode").decode() == mode
    lowered = lower(model, lower_all=True)
    assert "GridSample" not in {node.op_type for node in lowered.graph.node}
    onnx.checker.check_model(lowered, full_check=True)
    reference_model = gridsample_model(x_shape, grid_shape, name, padding, align, opset=20)
    feeds = {"X": x, "grid": grid}
    assert_close(run_ort(lowered, feeds), run_onnx_reference(reference_model, feeds), name)


def test_every_mode_has_exactly_one_decomposition():
    found = [registry.lookup(GridSampleSpec(2, m, "zeros", 0)) for m in OPSET20_MODES]
    assert [(f.__module__.rsplit(".", 1)[1], f.__name__) for f in found] == [
        (mode, mode) for mode in OPSET20_MODES
    ]
