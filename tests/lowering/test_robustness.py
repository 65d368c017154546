"""The Python API on bad nodes, foreign ops, repeated and concurrent calls.

A node that cannot be lowered raises UnsupportedGridSample naming it and why, in one line;
ops of other domains are left alone; lowering is deterministic to the byte, idempotent, and
safe from several threads at once.
"""

from __future__ import annotations

import concurrent.futures
import gc
import os
import pathlib
import subprocess
import sys

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from conftest import (
    BAD_NODES,
    FUNCTION,
    IF_LOOP,
    assert_close,
    gridsample_model,
    make_grid,
    one_warp,
    retyped,
    run_ort,
)
from onnx import TensorProto, helper

from gridsample_lower import LowerGridSamplePass, UnsupportedGridSample, lower, lower_with_report
from gridsample_lower.check.reference import grid_sample
from gridsample_lower.lowering.costs import ROWS_MIN_CHANNELS

ROOT = pathlib.Path(__file__).parents[2]


@pytest.mark.parametrize("model,reason", BAD_NODES.values(), ids=BAD_NODES.keys())
def test_unlowerable_nodes_are_named_with_the_reason(model, reason):
    with pytest.raises(UnsupportedGridSample, match=reason) as caught:
        lower(model)
    assert caught.value.node_name == "warp9" and "\n" not in str(caught.value)
    assert (
        lower(model, strict=False).SerializeToString()
        == lower(model, strict=False).SerializeToString()
    )


def test_string_x_with_nearest_is_lowered(rng):
    """Strings move like any value; zeros padding gives the empty string."""
    model = retyped(one_warp(mode="nearest"), x=TensorProto.STRING)
    x = rng.choice(np.array(["a", "bb", "ccc"], dtype=object), size=(1, 2, 4, 5))
    grid = make_grid(rng, (1, 3, 3, 2))
    actual = run_ort(lower(model), {"X": x, "grid": grid})
    expected = grid_sample(x, grid, "nearest", "zeros", 0)  # zeros are 0 in an object array
    np.testing.assert_array_equal(actual, np.where(expected == 0, "", expected))
    assert (actual == "").any() and (actual != "").any()


def test_ops_of_other_domains_are_left_alone(rng):
    """A custom op (unknown to every checker) and a contrib GridSample are not ours."""
    model = one_warp()
    model.graph.node.append(helper.make_node("Foo", ["Y"], ["Z"], domain="my.custom", name="foo"))
    model.graph.node.append(
        helper.make_node("GridSample", ["X", "grid"], ["W"], domain="com.microsoft", name="ms")
    )
    model.graph.output.extend([helper.make_tensor_value_info(n, 1, [1, 2, 3, 3]) for n in "ZW"])
    model.opset_import.extend(
        [helper.make_opsetid("my.custom", 1), helper.make_opsetid("com.microsoft", 1)]
    )
    lowered, report = lower_with_report(model)
    assert report == {"r2 linear zeros align_corners=0": 1}
    kept = [(n.domain, n.op_type, list(n.input)) for n in lowered.graph.node if n.domain]
    assert kept == [("my.custom", "Foo", ["Y"]), ("com.microsoft", "GridSample", ["X", "grid"])]
    onnx.checker.check_model(lowered)


MODELS = {
    "cubic": lambda: one_warp(mode="cubic"),
    "stn": lambda: onnx.load(ROOT / "testdata" / "stn.onnx"),
    "symbolic": lambda: gridsample_model(
        ["N", 3, "H", "W"], ["N", 5, 6, 2], "cubic", "reflection", 1
    ),
    "many channels": lambda: gridsample_model(
        [2, ROWS_MIN_CHANNELS, 5, 6], [2, 10, 12, 2], "nearest", "border", 0
    ),
    "if and loop": lambda: onnx.parser.parse_model(IF_LOOP),
    "function": lambda: onnx.parser.parse_model(FUNCTION),
}


@pytest.mark.parametrize(
    "make,as_functions",
    [(make, False) for make in MODELS.values()] + [(make, True) for make in MODELS.values()],
    ids=[*MODELS, *(f"{name}-as-functions" for name in MODELS)],
)
def test_deterministic_and_idempotent(make, as_functions):
    """Twice the same bytes; lowering the result again changes nothing and says so."""
    model = make()
    first = lower(model, as_functions=as_functions).SerializeToString()
    assert lower(make(), as_functions=as_functions).SerializeToString() == first
    again, report = lower_with_report(onnx.ModelProto.FromString(first))
    assert report == {} and again.SerializeToString() == first


def test_deterministic_across_processes():
    """Names and order do not depend on hash seeds or anything else a new process changes."""
    script = (
        "import sys, hashlib, onnx; sys.path[:0] = ['tests', 'tests/lowering'];"
        "from test_robustness import MODELS;"
        "from gridsample_lower import lower;"
        "print([hashlib.sha256(lower(m()).SerializeToString()).hexdigest() for m in MODELS.values()])"
    )
    digests = {
        subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("1", "2")
    }
    assert len(digests) == 1


def test_lower_from_many_threads_at_once(rng):
    models = [make() for make in MODELS.values()]
    serial = [lower(m).SerializeToString() for m in models]
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        results = list(
            pool.map(
                lambda k: (k, lower(models[k]).SerializeToString()),
                [k % len(models) for k in range(40)],
            )
        )
    assert all(blob == serial[k] for k, blob in results)
    assert gc.isenabled()  # the last of the overlapping lowerings restored the collector
    x, grid = rng.standard_normal((1, 2, 4, 5)).astype(np.float32), make_grid(rng, (1, 3, 3, 2))
    lowered = onnx.ModelProto.FromString(serial[0])
    assert_close(run_ort(lowered, {"X": x, "grid": grid}), grid_sample(x, grid, "cubic"), "cubic")


def test_cyclic_gc_is_paused_while_lowering_and_restored_after():
    """Collections rescanning the new nodes cost a third of the conversion time."""
    seen = []

    def select(name, spec):
        seen.append(gc.isenabled())
        return True

    model = gridsample_model([1, 2, 4, 5], [1, 3, 3, 2], "linear", "zeros", 0)
    LowerGridSamplePass(select=select)(ir.serde.deserialize_model(model))
    assert seen and not any(seen) and gc.isenabled()
    with pytest.raises(UnsupportedGridSample):  # restored when a lowering fails too
        lower(BAD_NODES["unknown mode"][0])
    assert gc.isenabled()
    gc.disable()  # a caller's own choice is kept
    try:
        lower(model)
        assert not gc.isenabled()
    finally:
        gc.enable()
