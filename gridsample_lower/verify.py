"""Check numerically that a candidate model computes what a reference model computes.

``verify`` runs both models on the same inputs (random ones that stress GridSample, or given
ones) and compares every output, dtype and shape included. The reference runs in onnxruntime
when it runs every GridSample natively, else in ``onnx.reference`` with GridSample evaluated by
``reference.GridSampleKernel`` (1-D or 4+-D spatial, 3-D cubic, integer or half X, ...); the
candidate runs in onnxruntime, the point of lowering. Each GridSample of the reference is also
checked alone against the candidate's region lowered from it (``verify_nodes``), so that a
mismatch names the node responsible. Tolerances come from ``tolerances.tolerance`` (nearest
exact), per output dtype and the least exact GridSample mode, unless overridden.
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Callable, Mapping

import numpy as np
import onnx
import onnx_ir as ir

from gridsample_lower import model_io
from gridsample_lower.inventory import Site, find_gridsamples, inferred_types
from gridsample_lower.passes import name_unnamed
from gridsample_lower.runtime import onnxruntime_runs
from gridsample_lower.verify_bounds import Bounds, Tolerance, op_types, whole_model_mode
from gridsample_lower.verify_inputs import (
    InputPlan,
    VerificationSetupError,
    load_inputs,
    synthetic,
)
from gridsample_lower.verify_nodes import (
    NodeProbe,
    Oracle,
    Runner,
    candidate_runner,
    expose,
    first_line,
    probe_nodes,
)
from gridsample_lower.verify_report import NodeCheck, OutputCheck, VerificationReport, compare

__all__ = [
    "NodeCheck",
    "OutputCheck",
    "VerificationError",
    "VerificationReport",
    "VerificationSetupError",
    "load_inputs",
    "verify",
]

ModelLike = onnx.ModelProto | ir.Model | str | os.PathLike
Progress = Callable[[int, int, str], None]
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
    run = _Run(ref, cand, sites, probes, bounds, _why_not_onnxruntime(plan), plan, rng)
    samples = 1 if plan.complete else samples
    progress = progress or (lambda *_: None)
    for k in range(samples):
        if run.unusable:
            break
        run.sample(plan.draw(rng), k, samples, progress)
    if run.unusable:
        run.alone(samples, rng, progress)
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


class _Run:
    """The runners of one verification, and the checks they fill in sample after sample.

    ``unusable`` says why the whole model cannot be compared (then ``alone`` checks each
    GridSample on synthetic inputs), or is "".
    """

    def __init__(
        self,
        ref,
        cand,
        sites,
        probes: list[NodeProbe],
        bounds,
        untrusted: str,
        plan: InputPlan,
        rng: np.random.Generator,
    ) -> None:
        """``untrusted``: why onnxruntime must not judge the given inputs, or "".

        ``rng`` draws the synthetic inputs of the nodes in subgraphs.
        """
        self.reference, self.exposed = expose(ref, probes)
        self.notes = [untrusted] if untrusted else []
        self.plan, self.unusable, self.untrusted = plan, "", bool(untrusted)
        self.rng = rng
        self.probes, self.bounds = probes, bounds
        if plan.dims.chosen:
            self.notes.append(f"symbolic sizes chosen: {plan.dims.describe()}")
        if plan.missing:
            self.unusable = f"the whole model was not run: {plan.missing}"
        native = all(_native(site) for site in sites) and not untrusted
        try:
            self.run_reference = Oracle(self.reference, native=native, notes=self.notes)
        except Exception as error:  # noqa: BLE001
            self.run_reference = None
            self.unusable = self.unusable or f"no runtime can run the original: {first_line(error)}"
        for probe in probes:
            probe.native = probe.native and not untrusted
            probe.notes = self.notes
        self.run_candidate, self.candidate_runtime = self._candidate_runner(cand)
        self.names = [o.name for o in ref.graph.output]
        self.inputs = {i.name for i in cand.graph.input}
        self.pairs = self._pairs(self.names, [o.name for o in cand.graph.output])
        self.mode = whole_model_mode(ref, sites, self.oracle != self.candidate_runtime)
        if self.mode[1]:
            self.notes.append(self.mode[1])
        self.outputs = {name: OutputCheck(name) for name in self.names}

    def _candidate_runner(self, cand: onnx.ModelProto) -> tuple[Runner, str]:
        native = "GridSample" not in op_types(cand.graph) or all(
            _native(site) for site in find_gridsamples(ir.serde.deserialize_model(cand), infer=True)
        )
        runner, runtime, reason = candidate_runner(cand, native=native)
        if reason:
            self.notes.append(f"the candidate {reason}")
        elif runtime != "onnxruntime":
            self.notes.append(f"onnxruntime cannot run the candidate: it ran in {runtime}")
        return runner, runtime

    def _pairs(self, names: list[str], cand_names: list[str]) -> list[int | None]:
        """Index of each reference output among the candidate's: by name, else by position."""
        if set(names) <= set(cand_names) or len(names) != len(cand_names):
            return [cand_names.index(n) if n in cand_names else None for n in names]
        self.notes.append("output names differ: outputs compared by position")
        return list(range(len(names)))

    @property
    def oracle(self) -> str:
        """What runs the reference now (alone: what judged the nodes)."""
        if self.run_reference is not None and not self.unusable:
            return self.run_reference.runtime
        judges = [j for p in self.probes for j in p.check.oracle.split("+") if j]
        return "+".join(dict.fromkeys(judges)) or "onnxruntime"

    def sample(self, feeds: dict, k: int, samples: int, progress: Progress) -> None:
        """Run one input set through everything and fold the figures into the checks."""
        total = samples * (2 + len(self.probes))
        done = k * (2 + len(self.probes))
        progress(done, total, f"sample {k + 1}: reference ({self.oracle})")
        try:
            values = self.run_reference(feeds)
        except Exception as error:  # noqa: BLE001  (runtimes' errors have many types)
            self.unusable = f"the original failed on {self._inputs_text()}: {first_line(error)}"
            return
        captured = {**dict(zip(self.names + self.exposed, values, strict=True)), **feeds}
        if not self.untrusted:  # the model itself made them: sizes it does not accept
            for probe in (p for p in self.probes if not p.synthetic):
                if not np.isfinite(np.asarray(captured[probe.grid_name], np.float64)).all():
                    self.unusable = (
                        f"the grid of GridSample {probe.check.name!r} holds NaN or infinity "
                        f"on {self._inputs_text()}"
                    )
                    return
        progress(done + 1, total, f"sample {k + 1}: candidate ({self.candidate_runtime})")
        compared = self._compare_outputs(values[: len(self.names)], feeds)
        for j, probe in enumerate(self.probes):
            progress(done + 2 + j, total, f"sample {k + 1}: GridSample {probe.check.name!r}")
            if probe.whole:  # the node alone is the model just compared: no need to run it twice
                self._as_whole(probe, compared, captured[probe.x_name])
            elif probe.synthetic:  # in a subgraph, whose values the reference cannot show
                self._probe(probe, *synthetic(probe, self.plan.dims, self.rng))
            else:
                self._probe(probe, captured[probe.x_name], captured[probe.grid_name])

    def alone(self, samples: int, rng: np.random.Generator, progress: Progress) -> None:
        """Check each GridSample alone on synthetic X and grid: the whole model cannot run."""
        self.notes.append(f"{self.unusable}; each GridSample was checked alone instead")
        self.notes.append(_how_to_run_whole(self.plan))
        for check in self.outputs.values():
            check.checked, check.note = False, "the whole model was not run"
        total = samples * len(self.probes)
        for k in range(samples):
            for j, probe in enumerate(self.probes):
                step = f"GridSample {probe.check.name!r} alone, synthetic set {k + 1}"
                progress(k * len(self.probes) + j, total, step)
                self._probe(probe, *synthetic(probe, self.plan.dims, rng))

    def _inputs_text(self) -> str:
        sizes = self.plan.dims.describe(chosen_only=False)
        if self.plan.complete:
            return "the given inputs"
        return "invented inputs" + (f" ({sizes})" if sizes else "")

    def _probe(self, probe: NodeProbe, x, grid) -> None:
        atol, rtol = self.bounds(probe.check.name, np.asarray(x).dtype, probe.mode)
        try:  # the candidate's failures are findings, caught inside; this is the node's
            probe.run(np.asarray(x), np.asarray(grid), atol, rtol)
        except Exception as error:  # noqa: BLE001  (runtimes' errors have many types)
            raise VerificationSetupError(
                f"GridSample {probe.check.name!r} alone failed on the values it sees: "
                f"{first_line(error)}"
            ) from None

    def _as_whole(self, probe: NodeProbe, compared: dict | str, x) -> None:
        """A node that is the whole model: its check is the output's, at the node's bound."""
        known = probe.check.oracle.split("+") if probe.check.oracle else []
        probe.check.oracle = "+".join(dict.fromkeys([*known, self.oracle]))
        if isinstance(compared, str):
            probe.check.problem = probe.check.problem or compared
            return
        if probe.y_name not in compared:
            probe.check.problem = "its output is missing from the candidate's outputs"
            return
        want, got, figures = compared[probe.y_name]
        atol, rtol = self.bounds(probe.check.name, np.asarray(x).dtype, probe.mode)
        if (atol, rtol) != (figures.atol, figures.rtol):  # an override for the node
            figures = compare(probe.check.name, want, got, atol, rtol)
        probe.check.merge(figures)

    def _compare_outputs(self, expected: list, feeds: dict) -> dict | str:
        """The candidate's outputs compared: (expected, actual, figures) by name, or why not."""
        try:
            actual = self.run_candidate({k: v for k, v in feeds.items() if k in self.inputs})
        except Exception as error:  # noqa: BLE001  (a candidate that fails is a finding)
            failure = f"the candidate failed: {first_line(error)}"
            for check in self.outputs.values():
                check.problem = check.problem or failure
            return failure
        compared = {}
        for name, want, index in zip(self.names, expected, self.pairs, strict=True):
            check = self.outputs[name]
            if index is None:
                check.problem = "missing from the candidate's outputs"
                continue
            want, got = np.asarray(want), np.asarray(actual[index])
            atol, rtol = self.bounds(name, want.dtype, self.mode[0])
            figures = compare(name, want, got, atol, rtol)
            check.merge(figures)
            compared[name] = want, got, figures
        return compared


def _how_to_run_whole(plan: InputPlan) -> str:
    """The fixes that let the whole model run, the CLI's spelling first."""
    symbols = plan.dims.symbols
    sizes = (
        f", or other sizes with --dim SYMBOL=N (dims= in Python; symbols: {', '.join(symbols)})"
        if symbols
        else ""
    )
    return (
        "to check the whole model, give real inputs with --inputs NAME:FILE.npy or FILE.npz "
        f"(inputs= in Python){sizes}"
    )


def _native(site: Site) -> bool:
    """Whether onnxruntime runs the site itself (in a function body, known at the call only)."""
    if site.spec is None:
        return site.location.startswith("function")
    return onnxruntime_runs(site.spec) and site.spelling_ok


def _why_not_onnxruntime(plan: InputPlan) -> str:
    """Why onnxruntime cannot judge the given inputs (its GridSample is undefined), or ""."""
    if not _finite(plan.given):
        return _NON_FINITE
    return _FAR_GRID if plan.far_grid() else ""


def _finite(given: dict[str, np.ndarray]) -> bool:
    """Whether no given float input holds NaN or infinity."""
    floats = [v for v in given.values() if v.dtype.kind == "f" or v.dtype.name == "bfloat16"]
    return all(np.isfinite(v.astype(np.float64)).all() for v in floats)
