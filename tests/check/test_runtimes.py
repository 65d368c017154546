"""Lowered models run on the runtimes that lack GridSample (or get it wrong), and match the truth.

tract, IREE (llvm-cpu), TVM (relax, llvm) and tinygrad (CPU, compiled with clang), through
``other_runtimes`` (beside this folder); OpenVINO has its own file. Every target is run on each, over
a set of configurations that covers every rank 1-3, mode, padding and align_corners, with static
shapes, symbolic ones, and float16 where the runtime takes it. The truth is onnxruntime's kernel
where it runs the original, else the numpy reference. Where a runtime fails on a form, the case
is an expected failure that names the runtime's bug (strict: it must go on failing).
"""

from __future__ import annotations

import importlib
import itertools
import os
import shutil
import sys

import numpy as np
import pytest
from conftest import assert_close, make_grid, oracle

from gridsample_lower import lower
from gridsample_lower.lowering.plan import plan_of
from gridsample_lower.lowering.targets import TARGETS
from gridsample_lower.models import gridsample_model
from gridsample_lower.spec import ALIGN_CORNERS, MODES, PADDING_MODES, GridSampleSpec

RUNTIMES = {"tract": "tract", "iree": "iree.runtime", "tvm": "tvm", "tinygrad": "tinygrad"}
CONFIGS = list(itertools.product(MODES, PADDING_MODES, ALIGN_CORNERS))
X_SIZES = {1: [7], 2: [5, 6], 3: [4, 5, 6]}
OUT_SIZES = {1: [5], 2: [4, 3], 3: [3, 2, 4]}


def _cases() -> list[tuple[str, GridSampleSpec, str]]:
    """Each target with 3 configurations, one per rank, rotating so that the 27 cover all 18
    (mode, padding, align_corners), 9 of them at each rank; plus one with symbolic shapes."""
    cases = []
    for t, target in enumerate(TARGETS):
        if TARGETS[target].centre_reader_ranks:  # MNN's, ncnn's: bench/mnn_ncnn.py runs them
            continue
        for rank in (1, 2, 3):
            mode, padding, align = CONFIGS[(2 * t + 7 * rank) % len(CONFIGS)]
            cases.append((target, GridSampleSpec(rank, mode, padding, align), "static"))
        mode, padding, align = CONFIGS[(5 * t + 3) % len(CONFIGS)]
        cases.append((target, GridSampleSpec(1 + t % 3, mode, padding, align), "symbolic"))
    return cases


CASES = _cases()


def _known_failure(runtime: str, target: str, spec: GridSampleSpec, shapes: str) -> str:
    """Why ``runtime`` fails this case today (a bug or limit of the runtime, named), or ""."""
    x_shape, grid_shape = _shapes(spec, shapes)
    tail = bool(TARGETS[target].float32_tail)  # (the GridSample's output is the model's)
    plan = plan_of(spec, x_shape, grid_shape, TARGETS[target], tail=tail)
    if runtime == "tract" and plan.sum == "scaled":
        return "tract takes only constant BatchNormalization parameters (this target scales rows)"
    shape_products = not TARGETS[target].allows("ReduceProd")  # (then sizes are gathered)
    if shapes == "symbolic" and runtime == "tract" and TARGETS[target].allows("Flatten"):
        return "tract 0.23.9 cannot infer Flatten's shape from a product of symbols ('square of symbols')"
    if shapes == "symbolic" and runtime == "tract" and not shape_products:
        return (
            "tract 0.23.9 cannot Reshape to a shape ReduceProd computed ('shape input is variable')"
        )
    if shapes == "symbolic" and runtime == "tvm" and not shape_products:
        return "TVM 0.27's relax ONNX frontend: ReduceProd cannot take a ShapeExpr input"
    if shapes == "symbolic" and runtime == "tvm" and plan.rows:
        return "TVM 0.27 sizes a Range up to the symbolic batch by a new symbol (rows' offsets)"
    return ""


def _runner(runtime: str):
    """The runtime's runner; a missing runtime skips, or fails where CI requires them all."""
    import other_runtimes

    required = os.environ.get("GRIDSAMPLE_REQUIRE_RUNTIMES") == "1"
    if runtime == "tinygrad" and "tinygrad" not in sys.modules:
        other_runtimes.compile_tinygrad_unoptimized()  # (as TVM's runs leave LLVM's passes out)
    missing = ""
    try:
        importlib.import_module(RUNTIMES[runtime])
    except ImportError as error:
        missing = f"{runtime} is not installed ({error}): pip install -e '.[test]'"
    if runtime == "tinygrad" and not shutil.which("clang"):
        missing = "tinygrad's CPU backend needs clang: apt-get install clang"
    if missing:
        (pytest.fail if required else pytest.skip)(missing)
    return other_runtimes.RUNNERS[runtime]


def _shapes(spec: GridSampleSpec, shapes: str, channels: int = 3) -> tuple[list, list]:
    """X's and the grid's shapes as the model declares them."""
    if shapes == "symbolic":
        x = ["N", channels, *[f"d{a}" for a in range(spec.rank)]]
        return x, ["N", *[f"o{a}" for a in range(spec.rank)], spec.rank]
    return [2, channels, *X_SIZES[spec.rank]], [2, *OUT_SIZES[spec.rank], spec.rank]


def _run_case(runtime, target, spec, shapes, dtype, rng, channels=3):
    run = _runner(runtime)
    x_shape, out = _shapes(spec, "static", channels)
    declared_x, declared_grid = _shapes(spec, shapes, channels)
    model = gridsample_model(
        declared_x,
        declared_grid,
        spec.mode,
        spec.padding_mode,
        spec.align_corners,
        x_dtype=dtype,
        grid_dtype=dtype,
    )
    lowered = lower(model, target=target, lower_all=True)
    assert all(node.op_type != "GridSample" for node in lowered.graph.node)
    x = rng.standard_normal(x_shape).astype(dtype)
    grid = make_grid(rng, out, far=True, dtype=dtype)
    (actual,) = run(lowered, {"X": x, "grid": grid})
    expected = oracle(spec, x.astype(np.float32), grid.astype(np.float32)).astype(dtype)
    assert_close(actual, expected, spec.mode)


def _params(runtimes, cases):
    params = []
    for runtime, (target, spec, shapes) in itertools.product(runtimes, cases):
        why = _known_failure(runtime, target, spec, shapes)
        marks = [pytest.mark.xfail(strict=True, reason=why)] if why else []
        label = f"{runtime}-{target}-{spec.label}-{shapes}".replace(" ", "-")
        params.append(pytest.param(runtime, target, spec, shapes, marks=marks, id=label))
    return params


PARAMS = ("runtime", "target", "spec", "shapes")


@pytest.mark.parametrize(PARAMS, _params(RUNTIMES, CASES))
def test_every_target_on_every_runtime(runtime, target, spec, shapes, rng):
    _run_case(runtime, target, spec, shapes, np.float32, rng)


HALF = [
    ("generic", GridSampleSpec(2, mode, "zeros", 0), "static")
    for mode in ("linear", "nearest", "cubic")
]


@pytest.mark.parametrize(PARAMS, _params(RUNTIMES, HALF))
def test_float16(runtime, target, spec, shapes, rng):
    _run_case(runtime, target, spec, shapes, np.float16, rng)


# Every rank and mode with symbolic sizes, each padding three times and each align_corners at
# every rank, on the runtimes whose targets gather their sizes without ReduceProd (and, for
# tract, without Flatten): N, the spatial sizes and the output's all symbolic. (Nine a runtime:
# all 27 of rank, mode and padding took 151 s on TVM alone, most of it LLVM's.)
SYMBOLIC = [
    (runtime, GridSampleSpec(rank, mode, PADDING_MODES[(m + rank) % 3], (m + rank) % 2), "symbolic")
    for runtime in ("tract", "tvm")
    for rank in (1, 2, 3)
    for m, mode in enumerate(MODES)
]


@pytest.mark.parametrize(
    ("runtime", "spec", "shapes"),
    SYMBOLIC,
    ids=[f"{r}-{s.label}".replace(" ", "-") for r, s, _ in SYMBOLIC],
)
def test_symbolic_sizes_on_their_own_target(runtime, spec, shapes, rng):
    _run_case(runtime, runtime, spec, shapes, np.float32, rng)


# The openvino target's rows summed by one ReduceSum (8+ taps, channels enough for rows, not
# planes) with symbolic sizes: IREE 3.13 once read garbage from a view of them. (Every padding
# across the two runtimes, each at 2-D cubic and 3-D linear.)
REDUCED_ROWS = [
    (runtime, GridSampleSpec(rank, mode, PADDING_MODES[(r + rank) % 3], rank % 2))
    for r, runtime in enumerate(("iree", "tinygrad"))
    for rank, mode in ((2, "cubic"), (3, "linear"))
]


@pytest.mark.parametrize(
    ("runtime", "spec"),
    REDUCED_ROWS,
    ids=[f"{r}-{s.label}".replace(" ", "-") for r, s in REDUCED_ROWS],
)
def test_reduced_rows_of_symbolic_size(runtime, spec, rng):
    x_shape, grid_shape = _shapes(spec, "symbolic", channels=32)
    plan = plan_of(spec, x_shape, grid_shape, TARGETS["openvino"])
    assert (plan.sum, plan.rows, plan.planes) == ("reduce_sum", True, False), plan.describe()
    _run_case(runtime, "openvino", spec, "symbolic", np.float32, rng, channels=32)


# The tinygrad target reads an X of few channels unpadded by GatherElements, zeros padding's
# outside taps masked once gathered (linear and cubic): tinygrad 0.14 ran its rows of 3 values
# 7-14x slower than that at 1x3x224x224 (linear border 18.2 vs 1.4 ms), and their weights of 0
# gave NaN beside an infinite pixel, where a masked tap adds 0 as the reference's does.
FEW_CHANNELS = [
    GridSampleSpec(2, "cubic", "border", 0),
    GridSampleSpec(2, "linear", "reflection", 1),
    GridSampleSpec(1, "linear", "border", 1),
    GridSampleSpec(2, "linear", "zeros", 0),
    GridSampleSpec(2, "cubic", "zeros", 1),
    GridSampleSpec(3, "linear", "zeros", 1),
]


@pytest.mark.parametrize("spec", FEW_CHANNELS, ids=lambda s: s.label.replace(" ", "-"))
def test_tinygrad_reads_few_channels_unpadded_by_gather_elements(spec, rng):
    run = _runner("tinygrad")
    x_shape, grid_shape = _shapes(spec, "static")
    plan = plan_of(spec, x_shape, grid_shape, TARGETS["tinygrad"])
    assert (plan.gather, plan.ring) == ("elements", 0), plan.describe()
    args = (spec.mode, spec.padding_mode, spec.align_corners)
    lowered = lower(gridsample_model(x_shape, grid_shape, *args), target="tinygrad")
    assert "Pad" not in {node.op_type for node in lowered.graph.node}
    x = rng.standard_normal(x_shape).astype(np.float32)
    x.reshape(-1)[[0, 7]] = [np.inf, -np.inf]  # where outside taps are clamped to, among others
    grid = make_grid(rng, grid_shape, far=True)
    (actual,) = run(lowered, {"X": x, "grid": grid})
    assert_close(actual, oracle(spec, x, grid).astype(np.float32), spec.mode)
