"""How close a lowered GridSample must be to its reference: one table, per dtype and mode.

Nearest moves values and must be exact. Linear and cubic may differ by the rounding of a
different summation order; the bounds below are about 10x the largest error measured by
``bench/measure_tolerances.py`` against a float64 oracle (the figures are in README).
Integers truncate a float result, so a value within rounding of an integer may land one apart.
"""

from __future__ import annotations

import numpy as np

__all__ = ["tolerance"]

# dtype name -> (atol, rtol) for linear and cubic
_INTERPOLATED = {
    "float64": (1e-12, 1e-12),
    "float32": (2e-5, 2e-5),
    "float16": (2e-3, 2e-3),
    "bfloat16": (1.6e-2, 1.6e-2),
}
_INTEGER = (1.0, 0.0)


def tolerance(dtype: np.dtype, mode: str) -> tuple[float, float]:
    """``(atol, rtol)`` for comparing outputs of ``dtype`` produced by a GridSample of ``mode``."""
    if mode == "nearest":
        return 0.0, 0.0
    dtype = np.dtype(dtype)
    if np.issubdtype(dtype, np.integer):
        return _INTEGER
    return _INTERPOLATED.get(dtype.name, _INTERPOLATED["float32"])
