"""Every supported configuration, lowered, against the best independent oracle.

onnxruntime's native kernel where it runs (4-D, 5-D non-cubic), else the ONNX reference,
else (cubic + border, float64) gridsample_lower.reference; see conftest.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import (
    assert_close,
    gridsample_model,
    make_grid,
    oracle,
    run_ort,
    spatial_shapes,
    spec_model,
)

from gridsample_lower import lower, supported_specs


def _run_case(spec, rng, dtype, *, batch=2, channels=2, far=False):
    native = spec.onnxruntime_native
    sizes_in, sizes_out = spatial_shapes(spec.rank, small=not native)
    x = rng.standard_normal((batch, channels, *sizes_in)).astype(dtype)
    grid = make_grid(rng, (batch, *sizes_out, spec.rank), far=far, dtype=dtype)
    lowered = lower(spec_model(spec, x, grid))
    assert all(n.op_type != "GridSample" for n in lowered.graph.node)
    actual = run_ort(lowered, {"X": x, "grid": grid})
    assert_close(actual, oracle(spec, x, grid), spec.mode)


@pytest.mark.parametrize("spec", supported_specs(), ids=lambda s: s.label.replace(" ", "-"))
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
def test_every_configuration(spec, dtype, rng):
    _run_case(spec, rng, dtype)


@pytest.mark.parametrize("spec", supported_specs(), ids=lambda s: s.label.replace(" ", "-"))
def test_every_configuration_many_channels(spec, rng):
    """C >= 17 gathers channels-last rows, one Gather per tap: a second code path."""
    _run_case(spec, rng, np.float32, batch=2, channels=20, far=True)


@pytest.mark.parametrize(
    "spec", supported_specs(ranks=(2, 3)), ids=lambda s: s.label.replace(" ", "-")
)
def test_far_out_of_range_grid(spec, rng):
    """|g| up to 1e4 for every padding: many reflections, long clamps, all-zero taps."""
    _run_case(spec, rng, np.float64 if spec.mode == "cubic" else np.float32, far=True)


@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
def test_four_spatial_dims(mode, rng):
    """Rank 4 spatial (input rank 6) through the same rank-generic code."""
    from gridsample_lower.spec import GridSampleSpec

    spec = GridSampleSpec(4, mode, "reflection" if mode != "cubic" else "zeros", 0)
    x = rng.standard_normal((1, 2, 3, 2, 3, 2)).astype(np.float32)
    grid = make_grid(rng, (1, 2, 1, 2, 2, 4))
    model = gridsample_model(list(x.shape), list(grid.shape), mode, spec.padding_mode, 0)
    actual = run_ort(lower(model), {"X": x, "grid": grid})
    assert_close(actual, oracle(spec, x, grid), mode)
