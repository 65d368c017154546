"""Property tests: the lowered graph against independent oracles, over every kind of node.

Hypothesis draws the spatial rank (1-4), mode, padding, align_corners, X and grid dtypes, sizes
(1 included), channel counts (1-3, 17 and 40: every gather path), static or symbolic shapes,
and grid values: a dyadic lattice (exact in every
float type, so it holds half-way ties, exact borders and pixel centres), far values up to
2**19, huge ones (1e30, float32's max), NaN and +-inf, and for linear/cubic arbitrary floats.
The oracle is ``gridsample_lower.check.reference`` (float64, itself checked against onnxruntime and
the ONNX reference); where onnxruntime runs the configuration natively and every coordinate is
finite and moderate, onnxruntime's own kernel must agree too.

Nearest sees no arbitrary floats: near a tie, float32 and float64 unnormalize may round to
different pixels, and both are right. Under reflection, finite coordinates beyond what the
float type resolves land on some pixel that depends on rounding (onnxruntime's differ again),
so there the property is only that every output is a value X could give.

``HYPOTHESIS_PROFILE=long pytest tests/test_properties.py`` runs ten thousand examples (the CI
profile runs 600, derandomized).
"""

from __future__ import annotations

import functools
import math
import os

import ml_dtypes
import numpy as np
from conftest import assert_close, gridsample_model
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from gridsample_lower import lower
from gridsample_lower.check.reference import grid_sample
from gridsample_lower.runtime import onnxruntime_runner
from gridsample_lower.spec import MODES, PADDING_MODES

_COMMON = {
    "deadline": None,
    "database": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
}
settings.register_profile("ci", max_examples=600, derandomize=True, **_COMMON)
settings.register_profile("long", max_examples=10000, **_COMMON)
PROFILE = settings.get_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

FLOATS = [np.float32, np.float64, np.float16, ml_dtypes.bfloat16]
INTEGERS = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64]
HUGE = [1e30, -1e30, 3.4e38, -3.4e38, 1e300]  # 1e300 is inf in every type but float64
NON_FINITE = [math.nan, math.inf, -math.inf]
FAR = 2.0**19  # past this, float32 cannot unnormalize dyadic values exactly
ORT_NATIVE = {np.dtype(np.float32), np.dtype(np.float64)}


def coordinates(mode: str, *, special: bool, huge: bool) -> st.SearchStrategy[float]:
    """Grid values; ``special`` mixes in NaN and +-inf, ``huge`` magnitudes like 1e30."""
    lattice = st.integers(-3 * 64, 3 * 64).map(lambda j: j / 64)  # ties, borders, centres
    far = st.integers(-int(FAR) * 4, int(FAR) * 4).map(lambda j: j / 4)
    options = [lattice, lattice, lattice, far]
    if mode != "nearest":
        options += [st.floats(-1.5, 1.5)] * 2
    if special:
        options.append(st.sampled_from(NON_FINITE))
    if huge:
        options.append(st.sampled_from(HUGE))
    return st.one_of(options)


@st.composite
def cases(draw, *, reflection_far: bool = False, native: bool = False):
    """A GridSample configuration, static or symbolic shapes, X and grid values.

    ``native``: only what onnxruntime's kernel runs and defines (finite grids, float32/64).
    """
    rank = draw(st.sampled_from([2, 3] if native else [1, 1, 2, 2, 2, 3, 3, 4]))
    modes = ["linear", "nearest"] if native and rank == 3 else MODES
    mode = draw(st.sampled_from(modes))
    padding = "reflection" if reflection_far else draw(st.sampled_from(PADDING_MODES))
    align = draw(st.sampled_from([0, 1]))
    gather_only = [np.bool_] if mode == "nearest" and not native else []
    x_types = [np.float32, np.float64] if native else FLOATS + INTEGERS + gather_only
    x_dtype = np.dtype(draw(st.sampled_from(x_types)))
    same = native or (x_dtype in FLOATS and draw(st.booleans()))  # what onnxruntime runs
    grid_dtype = x_dtype if same else np.dtype(draw(st.sampled_from(FLOATS)))
    largest = 5 if rank < 4 else 3
    sizes = [draw(st.integers(1, largest)) for _ in range(rank)]
    points = [draw(st.integers(1, 4 if rank < 4 else 2)) for _ in range(rank)]
    batch, channels = draw(st.integers(1, 2)), draw(st.sampled_from([1, 2, 3, 17, 40]))
    special = not native and draw(st.booleans())
    huge = reflection_far or (special and padding != "reflection")
    elements = coordinates(mode, special=special, huge=huge)
    values = hnp.arrays(np.float64, (batch, *points, rank), elements=elements)
    with np.errstate(over="ignore"):  # huge values become inf in the narrower types
        grid = draw(values).astype(grid_dtype)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x = _x_values(rng, (batch, channels, *sizes), x_dtype)
    return (mode, padding, align), x, grid, draw(st.booleans())


def _x_values(rng: np.random.Generator, shape, dtype: np.dtype) -> np.ndarray:
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return rng.integers(
            max(info.min, -1000), min(info.max, 1000), size=shape, endpoint=True
        ).astype(dtype)
    return (rng.standard_normal(shape) * 4).astype(dtype)


@functools.cache
def _symbolic_runner(rank, config, x_dtype, grid_dtype, lowered: bool):
    """One session per configuration and dtypes: symbolic shapes run on any sizes."""
    x_shape = ["N", "C", *(f"D{k}" for k in range(rank))]
    grid_shape = ["N", *(f"O{k}" for k in range(rank)), rank]
    model = gridsample_model(x_shape, grid_shape, *config, x_dtype=x_dtype, grid_dtype=grid_dtype)
    return onnxruntime_runner(lower(model) if lowered else model, threads=1)


def _run_lowered(config, x, grid, symbolic: bool) -> np.ndarray:
    rank, feeds = grid.shape[-1], {"X": x, "grid": grid}
    if symbolic:
        return _symbolic_runner(rank, config, x.dtype, grid.dtype, True)(feeds)[0]
    model = gridsample_model(
        list(x.shape), list(grid.shape), *config, x_dtype=x.dtype, grid_dtype=grid.dtype
    )
    return onnxruntime_runner(lower(model), threads=1)(feeds)[0]


def _onnxruntime_defines(config, x, grid) -> bool:
    """Whether onnxruntime runs this natively with a defined result (finite, moderate grid)."""
    mode, padding, align = config
    rank = grid.shape[-1]
    native = rank == 2 or (rank == 3 and mode != "cubic")
    coords = grid.astype(np.float64)
    defined = np.isfinite(coords).all() and np.abs(coords).max(initial=0) <= FAR
    size_one_reflection = padding == "reflection" and align and 1 in x.shape[2:]
    same = x.dtype == grid.dtype and x.dtype in ORT_NATIVE
    return native and defined and same and not size_one_reflection


@given(cases())
@settings(PROFILE)
def test_lowered_matches_the_reference(case):
    config, x, grid, symbolic = case
    event(f"rank {grid.shape[-1]}, {config[0]}, {'symbolic' if symbolic else 'static'}")
    event("grid not finite" if not np.isfinite(grid.astype(np.float64)).all() else "grid finite")
    actual = _run_lowered(config, x, grid, symbolic)
    expected = grid_sample(x, grid, *config)
    assert actual.dtype == x.dtype
    assert_close(actual, expected, config[0], x.dtype)
    if _onnxruntime_defines(config, x, grid):
        event("onnxruntime's kernel checked too")
        native = _symbolic_runner(grid.shape[-1], config, x.dtype, grid.dtype, False)
        assert_close(actual, native({"X": x, "grid": grid})[0], config[0], x.dtype)


@given(cases(native=True))
@settings(PROFILE, max_examples=max(PROFILE.max_examples // 4, 20))
def test_lowered_matches_onnxruntime_where_it_runs(case):
    """Finite grids, float32/float64: onnxruntime's kernel and the reference agree with us."""
    config, x, grid, symbolic = case
    assume(_onnxruntime_defines(config, x, grid))  # not size-1 axes under reflection, align=1
    actual = _run_lowered(config, x, grid, symbolic)
    native = _symbolic_runner(grid.shape[-1], config, x.dtype, grid.dtype, False)
    assert_close(actual, native({"X": x, "grid": grid})[0], config[0], x.dtype)
    assert_close(actual, grid_sample(x, grid, *config), config[0], x.dtype)


@given(cases(reflection_far=True))
@settings(PROFILE, max_examples=max(PROFILE.max_examples // 6, 20))
def test_reflection_far_beyond_precision_stays_in_range(case):
    """Huge finite coordinates under reflection: no crash, and only values X could give."""
    config, x, grid, symbolic = case
    actual = _run_lowered(config, x, grid, symbolic)
    expected = grid_sample(x, grid, *config)
    resolvable = np.abs(grid.astype(np.float64)) <= FAR
    exact_points = resolvable.all(axis=-1)[:, None]  # (N, 1, O...) broadcast over channels
    same = (actual == expected) | np.isnan(expected.astype(np.float64))
    if config[0] == "nearest":  # a pixel of X (per batch and channel), or X's first pixel
        assert np.isin(actual, x).all()
        assert (same | ~exact_points).all()
        return
    values = x.astype(np.float64)
    bound = np.abs(values).max(initial=0) * 1.5 ** grid.shape[-1] + 1
    finite = np.isfinite(actual.astype(np.float64))
    assert (np.abs(np.where(finite, actual.astype(np.float64), 0)) <= bound).all()
    assert_close(
        np.where(exact_points, actual, np.zeros((), actual.dtype)).astype(actual.dtype),
        np.where(exact_points, expected, np.zeros((), expected.dtype)).astype(actual.dtype),
        config[0],
        x.dtype,
    )
