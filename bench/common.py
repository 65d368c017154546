"""What the speed benchmarks share: bench/run.py's shapes and configurations, the timing loop."""

from __future__ import annotations

import statistics
import time

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
