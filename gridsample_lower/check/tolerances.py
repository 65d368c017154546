"""How close a lowered GridSample must be to its reference: one table, per dtype and mode.

Nearest moves values and must be exact. Linear and cubic may differ by the rounding of a
different summation order. Each bound is 10x the largest error ``bench/measure_tolerances.py``
measured against a float64 oracle (figures in docs/semantics.md), or for the halves, whose
errors are flips of the last bit (float32 and float64 sums rounded to neighbours), one unit in
the last place.
Integers truncate a float result, so a value within rounding of an integer may land one apart.
A pair (atol, rtol) accepts ``|actual - expected| <= atol + rtol * |expected|``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["SPREAD_FACTOR", "tolerance"]

# dtype name -> (atol, rtol) for linear and cubic
_INTERPOLATED = {
    "float64": (1e-14, 1e-14),  # measured 6.6e-16
    "float32": (5e-5, 5e-5),  # measured 3.9e-6
    "float16": (1e-3, 1e-3),  # measured 6.4e-4: a last-bit flip at |y| ~ 2; one ulp is 2**-10
    "bfloat16": (8e-3, 8e-3),  # measured 3.4e-3: a last-bit flip; one ulp is 2**-7
}
_INTEGER = (1.0, 0.0)
# A model's output off past its tolerance still matches where it is off by at most this many
# times the original's own spread, and every GridSample matches alone (``check.spread``):
# RAFT at 440x1024, lowered, 6.0e-5 against a spread of 5.9-6.0e-5 from random moves of 1e-6
# and 1.5e-5 alike (the rounding of the layers after its lookups).
SPREAD_FACTOR = 2.0


def tolerance(dtype: np.dtype, mode: str) -> tuple[float, float]:
    """``(atol, rtol)`` for comparing outputs of ``dtype`` produced by a GridSample of ``mode``."""
    if mode == "nearest":
        return 0.0, 0.0
    dtype = np.dtype(dtype)
    if np.issubdtype(dtype, np.integer):
        return _INTEGER
    return _INTERPOLATED.get(dtype.name, _INTERPOLATED["float32"])
