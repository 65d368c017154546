"""What the benchmarks share: shapes, configurations, the timing loop, the correctness inputs.

bench/run.py's shapes and configurations, the interleaved timing loop, and the correctness
sets' shapes and inputs (bench/litert.py, bench/mlprodict_check.py).

Numpy and the standard library only: it is imported in the runtimes' own environments too.
"""

from __future__ import annotations

import pathlib
import statistics
import time

import numpy as np

SHAPES_2D = [  # (N, C, H, W), output (H_out, W_out)
    ((1, 3, 224, 224), (224, 224)),
    ((1, 64, 64, 64), (64, 64)),
    ((1, 256, 32, 32), (32, 32)),
    ((8, 32, 64, 64), (64, 64)),
    ((1, 32, 128, 128), (1, 4096)),
]
SHAPE_3D = ((1, 16, 24, 24, 24), (24, 24, 24))
CONFIGS_2D = [  # (mode, padding, align_corners)
    ("linear", "zeros", 0),
    ("linear", "zeros", 1),
    ("nearest", "zeros", 0),
    ("linear", "border", 0),
    ("linear", "reflection", 0),
    ("cubic", "zeros", 0),
]


def before_after_options(parser, rounds: int) -> None:
    """A bench's options to time this checkout's lowered models against an earlier one's.

    ``--save DIR`` (run by the earlier checkout), ``--before DIR``; ``--only`` (cases whose
    label has it), ``--rounds``, ``--budget`` (seconds per variant a round), ``--out``.
    """
    parser.add_argument("--before", type=pathlib.Path, help="lowered models saved by --save")
    parser.add_argument("--save", type=pathlib.Path, help="save this checkout's lowered models")
    parser.add_argument("--only", action="append", default=[], help="cases whose label has it")
    parser.add_argument("--rounds", type=int, default=rounds)
    parser.add_argument("--budget", type=float, default=0.1, help="seconds per variant a round")
    parser.add_argument("--out", type=pathlib.Path)


def median_ms(calls: dict, rounds: int, budget: float) -> dict[str, float]:
    """Each call's median time per run (ms), the calls interleaved round by round.

    Each round runs a call for ``budget`` seconds (at least once) and counts its runs.
    """
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            start, runs = time.perf_counter(), 0
            while (elapsed := time.perf_counter() - start) < budget or runs == 0:
                call()
                runs += 1
            times[name].append(1e3 * elapsed / runs)
    return {name: statistics.median(values) for name, values in times.items()}


CORRECT_SHAPES = {  # batch 2, odd sizes, H != W; 1-D nearest reflection of the old failure
    1: ((2, 3, 9), (7,)),
    2: ((2, 3, 6, 9), (5, 7)),
    3: ((2, 3, 4, 5, 6), (3, 4, 5)),
}


def sample_inputs(rng, x_shape, out, far: bool) -> tuple[np.ndarray, np.ndarray]:
    """X (standard normal) and a grid for ``out`` points, float32.

    ``far``: uniform in [-1.6, 1.6], outside [-1, 1] on every side, every 7th value an exact
    multiple of 1/8 (pixel centres and nearest's ties); else uniform in [-1.1, 1.1].
    """
    x = rng.standard_normal(x_shape).astype(np.float32)
    spread = 1.6 if far else 1.1
    grid = rng.uniform(-spread, spread, (x_shape[0], *out, len(out))).astype(np.float32)
    if far:
        grid.reshape(-1)[::7] = np.round(grid.reshape(-1)[::7] * 8) / 8
    return x, grid
