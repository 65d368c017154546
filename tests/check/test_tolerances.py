"""The tolerance table, pinned to the errors the lowering really makes.

The table (``gridsample_lower.check.tolerances``) says how far a lowered output may be from the truth.
Too tight and the check refuses correct lowerings; too loose and it passes wrong ones. Here the
lowering's error is measured against the float64 witness (``reference.grid_sample(...,
witness=True)``) over every mode, padding and align_corners in 2-D and 3-D, with few channels
and many (each gather and sum path, MatMul for the onnxruntime target), and each bound must lie
between that measured error and 100 times it: the table is meant to be 10x the worst error.
"""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest
from conftest import make_grid, run_ort

from gridsample_lower import lower
from gridsample_lower.check.reference import grid_sample
from gridsample_lower.check.tolerances import tolerance
from gridsample_lower.lowering.costs import ROWS_MIN_CHANNELS
from gridsample_lower.models import gridsample_model

CASES = [
    (x_shape, grid_shape, padding, align, channels, target)
    for (x_shape, grid_shape), padding, align, (channels, target) in itertools.product(
        [((7, 10), (9, 11)), ((5, 6, 7), (4, 3, 5))],
        ["zeros", "border", "reflection"],
        [0, 1],
        [(3, "generic"), (ROWS_MIN_CHANNELS, "generic"), (ROWS_MIN_CHANNELS, "onnxruntime")],
    )
]


def _measured(dtype, mode: str) -> float:
    """The largest ``|lowered - witness| / (1 + |witness|)`` over ``CASES``."""
    rng = np.random.default_rng(7)
    worst = 0.0
    for sizes, points, padding, align, channels, target in CASES:
        rank = len(sizes)
        x = (4 * rng.standard_normal((2, channels, *sizes))).astype(dtype)
        grid = make_grid(rng, (2, *points, rank), far=True).astype(dtype)
        model = gridsample_model(
            [2, channels, *sizes],
            [2, *points, rank],
            mode,
            padding,
            align,
            x_dtype=dtype,
            grid_dtype=dtype,
        )
        lowered = lower(model, target=target, lower_all=True)
        actual = run_ort(lowered, {"X": x, "grid": grid}).astype(np.float64)
        truth = grid_sample(x, grid, mode, padding, align, witness=True).astype(np.float64)
        # the witness in float64 of the values as stored: compare after the output's rounding
        truth = truth.astype(dtype).astype(np.float64) if np.dtype(dtype).itemsize < 4 else truth
        worst = max(worst, float((np.abs(actual - truth) / (1 + np.abs(truth))).max()))
    return worst


@pytest.mark.parametrize(
    "dtype",
    [np.float64, np.float32, np.float16, ml_dtypes.bfloat16],
    ids=lambda d: np.dtype(d).name,
)
def test_each_bound_lies_between_the_measured_error_and_100_times_it(dtype):
    measured = max(_measured(dtype, mode) for mode in ("linear", "cubic"))
    atol, rtol = tolerance(dtype, "linear")
    assert (atol, rtol) == tolerance(dtype, "cubic")
    assert 0 < measured <= min(atol, rtol), (np.dtype(dtype).name, measured, atol)
    assert max(atol, rtol) <= 100 * measured, (np.dtype(dtype).name, measured, atol)


@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.int32, np.int64])
def test_integers_and_nearest(dtype):
    """Integers may land one apart (a float result within rounding of a whole number truncates
    either way); nearest moves values and is exact."""
    assert tolerance(dtype, "linear") == tolerance(dtype, "cubic") == (1.0, 0.0)
    for any_dtype in (dtype, np.float32, np.float16):
        assert tolerance(any_dtype, "nearest") == (0.0, 0.0)
