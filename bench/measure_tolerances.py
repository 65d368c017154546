"""Measure how far lowered GridSample outputs fall from a float64 oracle, per dtype and mode.

The figures justify ``gridsample_lower/check/tolerances.py``: for each (dtype, mode) the largest
``|lowered - oracle| / (1 + |oracle|)`` over random 1-D/2-D/3-D cases with every padding and
align_corners, grids with lattice points, ties and far-out values, with few channels and with
many (each gather path; half of each for the onnxruntime target, whose MatMul sums the taps
of cubic and 3-D linear, by rows or channel by channel). The oracle is
``gridsample_lower.check.reference`` (float64), rounded to the output dtype the way the spec asks.
Run: ``python bench/measure_tolerances.py [--cases N]``.
"""

from __future__ import annotations

import argparse
import itertools

import ml_dtypes
import numpy as np

from gridsample_lower import lower
from gridsample_lower.check.reference import grid_sample
from gridsample_lower.check.tolerances import tolerance
from gridsample_lower.models import gridsample_model
from gridsample_lower.runtime import onnxruntime_runner

DTYPES = [np.float64, np.float32, np.float16, ml_dtypes.bfloat16, np.int16, np.int32]


def measure(cases: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    worst = {}
    for dtype, mode in itertools.product(DTYPES, ["linear", "cubic"]):
        m = 0.0
        for k in range(cases):
            rank = 1 + k % 3
            padding = ["zeros", "border", "reflection"][k % 3]
            rows = k % 4 >= 2  # many channels and points: the channels-last rows path
            # half of each for onnxruntime (its MatMul sums taps, by rows or channel by channel)
            target = "onnxruntime" if k % 8 >= 4 else "generic"
            x_shape = [2, 40 if rows else 3, *map(int, rng.integers(2, 7, rank))]
            grid_shape = [
                2,
                *map(int, rng.integers(4, 9, rank) if rows else rng.integers(1, 5, rank)),
                rank,
            ]
            x = rng.standard_normal(x_shape) * (100 if np.dtype(dtype).kind in "iu" else 1)
            x = x.astype(dtype)
            grid = rng.uniform(-1.3, 1.3, grid_shape)
            grid = np.where(
                rng.random(grid_shape) < 0.3, rng.integers(-9, 10, grid_shape) / 8, grid
            )
            grid = grid.astype(
                dtype if np.dtype(dtype).kind == "f" or dtype == ml_dtypes.bfloat16 else np.float32
            )
            grid_dtype = grid.dtype
            model = lower(
                gridsample_model(
                    x_shape,
                    grid_shape,
                    mode,
                    padding,
                    k % 2,
                    x_dtype=dtype,
                    grid_dtype=grid_dtype,
                    opset=22,
                    ir_version=10,
                ),
                target=target,
                lower_all=True,
            )
            got = onnxruntime_runner(model)({"X": x, "grid": grid})[0].astype(np.float64)
            want = grid_sample(x, grid.astype(np.float64), mode, padding, k % 2).astype(np.float64)
            m = max(m, float(np.max(np.abs(got - want) / (1 + np.abs(want)), initial=0.0)))
        worst[(np.dtype(dtype).name, mode)] = m
    return worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=60)
    args = parser.parse_args()
    print("| X dtype | mode | measured max err/(1+|ref|) | table atol, rtol |")
    print("|---|---|---|---|")
    for (dtype, mode), m in measure(args.cases).items():
        atol, rtol = tolerance(np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else dtype, mode)
        print(f"| {dtype} | {mode} | {m:.3g} | {atol:g}, {rtol:g} |")


if __name__ == "__main__":
    main()
