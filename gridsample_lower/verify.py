"""Check numerically that a rewritten model computes what the original computed.

The original runs in onnxruntime where it can; elsewhere (1-D or 4+-D spatial, 3-D cubic,
integer or half X) in ``onnx.reference`` with GridSample evaluated by ``reference.grid_sample``.
The rewritten model runs in onnxruntime: running there is the point of lowering. Inputs are
random; float inputs mix values in [-1.25, 1.25] with exact lattice points and half-way ties,
where lowerings break.
"""

from __future__ import annotations

import dataclasses

import ml_dtypes
import numpy as np
import onnx
import onnx_ir as ir
from onnx.reference import ReferenceEvaluator

from gridsample_lower.inventory import Site, find_gridsamples
from gridsample_lower.reference import GridSampleKernel
from gridsample_lower.runtime import onnxruntime_runner
from gridsample_lower.tolerances import tolerance

__all__ = ["OutputCheck", "Verification", "VerificationError", "random_inputs", "verify_lowering"]

DEFAULT_DIM = 3  # value given to a symbolic dimension nobody named
_BY_EXACTNESS = ("nearest", "linear", "cubic")


@dataclasses.dataclass
class OutputCheck:
    """How one output of the rewritten model compares with the original's."""

    name: str
    max_abs: float
    mismatches: int
    atol: float
    rtol: float
    problem: str = ""

    @property
    def ok(self) -> bool:
        return not self.problem and self.mismatches == 0


@dataclasses.dataclass
class Verification:
    """The outcome of comparing a rewritten model with its original on random inputs."""

    oracle: str
    outputs: list[OutputCheck]

    @property
    def ok(self) -> bool:
        return all(check.ok for check in self.outputs)

    def summary(self) -> str:
        bad = [c for c in self.outputs if not c.ok]
        if not bad:
            return f"verified against {self.oracle}: {len(self.outputs)} output(s) match"
        worst = bad[0]
        what = worst.problem or (
            f"{worst.mismatches} element(s) off by up to {worst.max_abs:.3g} "
            f"(atol={worst.atol:g}, rtol={worst.rtol:g})"
        )
        return f"mismatch against {self.oracle} in output {worst.name!r}: {what}"


class VerificationError(RuntimeError):
    """The rewritten model does not compute what the original computed."""

    def __init__(self, verification: Verification) -> None:
        super().__init__(verification.summary())
        self.verification = verification


def verify_lowering(
    original: onnx.ModelProto,
    rewritten: onnx.ModelProto,
    *,
    samples: int = 2,
    seed: int = 0,
    dims: dict[str, int] | None = None,
) -> Verification:
    """Run both models on ``samples`` random input sets and compare every output."""
    rng = np.random.default_rng(seed)
    sites = find_gridsamples(ir.serde.deserialize_model(original), infer=True)
    run_original, oracle = _runner(original, sites)
    run_rewritten = onnxruntime_runner(rewritten)
    # Outputs are held to the tolerance of the least exact GridSample mode in the model.
    mode = max((s.spec.mode for s in sites if s.spec), key=_BY_EXACTNESS.index, default="nearest")
    checks: dict[str, OutputCheck] = {}
    for _ in range(samples):
        feeds = random_inputs(original, rng, dims or {})
        expected, actual = run_original(feeds), run_rewritten(feeds)
        for info, want, got in zip(original.graph.output, expected, actual, strict=True):
            check = _compare(info.name, np.asarray(want), np.asarray(got), mode)
            if info.name not in checks or not check.ok:
                checks[info.name] = check
    return Verification(oracle, list(checks.values()))


def random_inputs(model: onnx.ModelProto, rng: np.random.Generator, dims: dict[str, int]) -> dict:
    """Random values for every graph input that is not an initializer."""
    initializers = {init.name for init in model.graph.initializer}
    feeds = {}
    for info in model.graph.input:
        if info.name in initializers:
            continue
        tensor = info.type.tensor_type
        shape = [
            d.dim_value if d.HasField("dim_value") else dims.get(d.dim_param, DEFAULT_DIM)
            for d in tensor.shape.dim
        ]
        feeds[info.name] = _random_array(info.name, tensor.elem_type, shape, rng)
    return feeds


def _random_array(name: str, elem_type: int, shape: list[int], rng) -> np.ndarray:
    dtype = onnx.helper.tensor_dtype_to_np_dtype(elem_type)
    if elem_type == onnx.TensorProto.BFLOAT16:
        dtype = np.dtype(ml_dtypes.bfloat16)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if np.issubdtype(dtype, np.integer):
        return rng.integers(0, 4, size=shape).astype(dtype)
    if dtype.kind == "f" or dtype == ml_dtypes.bfloat16:
        values = rng.uniform(-1.25, 1.25, size=shape)
        lattice = rng.integers(-10, 11, size=shape) / 8.0  # exact points and half-way ties
        return np.where(rng.random(shape) < 0.25, lattice, values).astype(dtype)
    raise ValueError(f"cannot invent values for input {name!r} of type {dtype}")


def _runner(model: onnx.ModelProto, sites: list[Site]):
    """Onnxruntime if it runs every GridSample of ``model`` natively, else the reference."""
    if all(site.spec and site.spec.onnxruntime_native and site.spelling_ok for site in sites):
        try:
            return onnxruntime_runner(model), "onnxruntime"
        except Exception:  # noqa: BLE001  (what onnxruntime refuses goes to the reference)
            pass
    evaluator = ReferenceEvaluator(model, new_ops=[GridSampleKernel])
    return (lambda feeds: evaluator.run(None, feeds)), "onnx.reference"


def _compare(name: str, want: np.ndarray, got: np.ndarray, mode: str) -> OutputCheck:
    atol, rtol = (0.0, 0.0) if want.dtype == object else tolerance(want.dtype, mode)
    if want.shape != got.shape or want.dtype != got.dtype:
        problem = f"expected {want.dtype}{list(want.shape)}, got {got.dtype}{list(got.shape)}"
        return OutputCheck(name, float("inf"), want.size, atol, rtol, problem)
    if want.dtype == object or want.dtype == np.bool_:
        bad = want != got
        return OutputCheck(name, float(bad.any()), int(bad.sum()), atol, rtol)
    w, g = want.astype(np.float64), got.astype(np.float64)
    both_nan = np.isnan(w) & np.isnan(g)
    err = np.where(both_nan, 0.0, np.abs(w - g))
    err = np.where(np.isnan(err), np.inf, err)
    bad = err > atol + rtol * np.abs(np.nan_to_num(w))
    return OutputCheck(name, float(err.max(initial=0.0)), int(bad.sum()), atol, rtol)
