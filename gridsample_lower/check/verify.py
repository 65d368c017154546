"""Check numerically that a candidate model computes what a reference model computes.

``verify`` runs both models on the same inputs (random ones that stress GridSample, or given
ones) and compares every output, dtype and shape included. The reference runs in onnxruntime
when it runs every GridSample natively, else in ``onnx.reference`` with GridSample evaluated by
``reference.GridSampleKernel`` (1-D or 4+-D spatial, 3-D cubic, integer or half X, ...); the
candidate runs in onnxruntime, the point of lowering. Each GridSample of the reference is also
checked alone against the candidate's region lowered from it (``check.nodes``), so that a
mismatch names the node responsible. Tolerances come from ``tolerances.tolerance`` (nearest
exact), per output dtype and the least exact GridSample mode, unless overridden.
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Mapping

import numpy as np
import onnx
import onnx_ir as ir

from gridsample_lower.check.bounds import Bounds, Tolerance
from gridsample_lower.check.given import VerificationSetupError, load_inputs
from gridsample_lower.check.inputs import InputPlan
from gridsample_lower.check.nodes import probe_nodes
from gridsample_lower.check.report import VerificationReport
from gridsample_lower.check.run import Progress, Run
from gridsample_lower.files import model_io
from gridsample_lower.lowering.inventory import find_gridsamples, inferred_types, name_unnamed

__all__ = ["VerificationError", "verify"]

ModelLike = onnx.ModelProto | ir.Model | str | os.PathLike
_NON_FINITE = (
    "given inputs hold NaN or infinity, for which onnxruntime's GridSample is undefined: "
    "the reference ran in onnx.reference"
)
_FAR_GRID = (
    "given grid values reach coordinates beyond 2**23 pixels, where onnxruntime's GridSample "
    "is undefined: the reference ran in onnx.reference"
)


class VerificationError(RuntimeError):
    """The candidate model does not compute what the reference computes."""

    def __init__(self, report: VerificationReport) -> None:
        super().__init__(report.summary())
        self.report = report


def verify(
    reference: ModelLike,
    candidate: ModelLike,
    inputs: Mapping[str, np.ndarray] | str | os.PathLike | None = None,
    *,
    atol: Tolerance = None,
    rtol: Tolerance = None,
    samples: int = 3,
    seed: int = 0,
    dims: Mapping[str, int] | None = None,
    progress: Progress | None = None,
) -> VerificationReport:
    """Check that ``candidate`` computes what ``reference`` computes, per output and per node.

    Args:
        reference: The original model (``onnx.ModelProto``, ``onnx_ir.Model`` or a path).
        candidate: The model to check, typically ``lower(reference)``.
        inputs: Values for some or all graph inputs, or the path of an ``.npz`` holding them;
            the rest are drawn at random for each sample.
        atol: Absolute tolerance (finite, >= 0) for every output and GridSample node, or a
            mapping from an output or node name (``"*"``: all others) to one. Default: the
            tolerance table.
        rtol: Relative tolerance, likewise.
        samples: Random input sets to run, at least 1 (one when every input is given).
        seed: Seed of the random inputs, at least 0.
        dims: Sizes (ints >= 1) of symbolic dimensions by name, or of the symbols a dimension
            is written with (``{"h": 5}`` for ``32*h``). Default: what given inputs show, else
            128 along image axes and 3 elsewhere (``dims.Dims``).
        progress: Called as ``progress(done, total, step)`` before each run.

    Returns:
        The report; ``report.ok`` says whether everything is within tolerance.

    Raises:
        TypeError: An argument of the wrong type (a str for a number, a list for a mapping).
        VerificationSetupError: A value out of range (negative seed or size, a tolerance that
            is negative or not finite), a model file that cannot be read, an input that cannot
            be read or used, an override that names nothing, or nothing to compare (no output,
            only empty ones, or a model that cannot run with no GridSample to check alone).

    When the whole model cannot run on the inputs at hand (an input that cannot be invented,
    a reference that fails, a grid the model itself makes NaN or infinite at the chosen sizes)
    each GridSample is checked alone on synthetic X and grid of its inferred shapes instead;
    the report's notes say why and how to check the whole model.
    """
    samples, seed = _integer(samples, "samples", 1), _integer(seed, "seed", 0)
    atol, rtol = _tolerance(atol, "atol"), _tolerance(rtol, "rtol")
    if dims is not None and not isinstance(dims, Mapping):
        raise TypeError(f"dims must be a mapping from names to sizes, not {type(dims).__name__}")
    dims = {n: _integer(v, f"the size of dimension {n!r}", 1) for n, v in (dims or {}).items()}
    ref, cand = _as_proto(reference, "reference"), _as_proto(candidate, "candidate")
    ref, sites, plan, checks, probes = _prepare(ref, cand, _given(inputs), dims)
    bounds = Bounds(atol, rtol, {o.name for o in ref.graph.output} | {c.name for c in checks})
    rng = np.random.default_rng(seed)
    run = Run(ref, cand, sites, probes, bounds, _why_not_onnxruntime(plan), plan, rng)
    samples = 1 if plan.complete else samples
    progress = progress or (lambda *_: None)
    for k in range(samples):
        if run.unusable:
            break
        run.sample(plan.draw(rng), k, samples, progress)
    if run.unusable:
        run.alone(samples, progress)
    outputs = list(run.outputs.values())
    report = VerificationReport(
        run.oracle, run.candidate_runtime, samples, seed, outputs, checks, run.notes
    )
    if report.ok and not sum(c.elements for c in [*outputs, *checks] if c.checked):
        if run.unusable:
            raise VerificationSetupError(f"nothing could be checked: {run.unusable}")
        what = "every output is empty with these input sizes" if outputs else "no output"
        raise VerificationSetupError(f"nothing to compare: {what}")
    return report


def _integer(value, what: str, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    if value < least:
        raise VerificationSetupError(f"{what} must be at least {least}, not {value}")
    return int(value)


def _tolerance(value: Tolerance, what: str) -> Tolerance:
    """``value`` checked: inf would pass anything, and inf * 0 is NaN in the comparison."""
    if value is None:
        return None
    for name, bound in (value if isinstance(value, Mapping) else {"*": value}).items():
        if isinstance(bound, bool) or not isinstance(bound, numbers.Real):
            raise TypeError(
                f"{what} must be a number or a mapping from names to numbers, "
                f"not {type(bound).__name__}"
            )
        if not (bound >= 0 and math.isfinite(bound)):
            where = "" if name == "*" else f" for {name!r}"
            raise VerificationSetupError(f"{what}{where} must be finite and >= 0, not {bound}")
    return value


def _as_proto(model: ModelLike, role: str) -> onnx.ModelProto:
    """The model itself, or the file read and checked as the command line reads it."""
    if isinstance(model, onnx.ModelProto):
        return model
    if isinstance(model, ir.Model):
        return ir.serde.serialize_model(model)
    if not isinstance(model, str | os.PathLike):
        raise TypeError(
            f"{role} must be an onnx.ModelProto, an onnx_ir.Model or a path, "
            f"not {type(model).__name__}"
        )
    try:
        source = model_io.load_model(model, check=False)
        return model_io.with_weights([source.proto], source.base_dir)[0]
    except model_io.ModelFileError as error:
        raise VerificationSetupError(f"{role}: {error}") from None


def _given(inputs) -> dict[str, np.ndarray]:
    if inputs is None:
        return {}
    if isinstance(inputs, str | os.PathLike):
        return load_inputs([inputs])
    if not isinstance(inputs, Mapping):
        raise TypeError(
            "inputs must be a mapping from input names to arrays or the path of an .npz, "
            f"not {type(inputs).__name__}"
        )
    return {name: np.asarray(value) for name, value in inputs.items()}


def _prepare(ref: onnx.ModelProto, cand: onnx.ModelProto, given: dict, dims):
    """Name unnamed GridSamples as the pass does; plan the inputs; isolate every node."""
    model = ir.serde.deserialize_model(ref)
    sites = find_gridsamples(model)
    if any(not site.node.name for site in sites):
        name_unnamed(model, sites)
        ref = ir.serde.serialize_model(model)
    with inferred_types(model):
        sites = find_gridsamples(model)
        plan = InputPlan(model, sites, given, dims)
        checks, probes = probe_nodes(sites, ref, cand)
    return ref, sites, plan, checks, probes


def _why_not_onnxruntime(plan: InputPlan) -> str:
    """Why onnxruntime cannot judge the given inputs (its GridSample is undefined), or ""."""
    if not _finite(plan.given):
        return _NON_FINITE
    return _FAR_GRID if plan.far_grid() else ""


def _finite(given: dict[str, np.ndarray]) -> bool:
    """Whether no given float input holds NaN or infinity."""
    floats = [v for v in given.values() if v.dtype.kind == "f" or v.dtype.name == "bfloat16"]
    return all(np.isfinite(v.astype(np.float64)).all() for v in floats)
