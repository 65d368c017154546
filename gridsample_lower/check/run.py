"""One verification's runners, and the checks they fill in sample after sample.

``Run.sample`` runs both models on one input set, compares their outputs and each GridSample
alone against its region; ``Run.alone`` checks each GridSample on synthetic inputs where the
whole model cannot run (``Run.unusable`` says why).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import onnx
import onnx_ir as ir

from gridsample_lower.check.bounds import op_types, whole_model_mode
from gridsample_lower.check.given import VerificationSetupError
from gridsample_lower.check.inputs import InputPlan, synthetic
from gridsample_lower.check.nodes import NodeProbe, expose
from gridsample_lower.check.oracle import Oracle, Runner, candidate_runner
from gridsample_lower.check.regions import AttentionProbe
from gridsample_lower.check.report import OutputCheck, compare
from gridsample_lower.check.spread import perturbed, spread
from gridsample_lower.check.switches import OTHER_FORM_MAX_VALUES, repeats_to_switch
from gridsample_lower.check.tolerances import SPREAD_FACTOR
from gridsample_lower.lowering.inventory import Site, find_gridsamples
from gridsample_lower.runtime import onnxruntime_runs
from gridsample_lower.text import one_line

__all__ = ["Progress", "Run"]

Progress = Callable[[int, int, str], None]


class Run:
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

        ``rng`` draws the synthetic inputs (nodes in subgraphs; every node in ``alone``).
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
        self._native, self._moved = native, None
        try:
            self.run_reference = Oracle(self.reference, native=native, notes=self.notes)
        except Exception as error:  # noqa: BLE001
            self.run_reference = None
            self.unusable = (
                self.unusable or f"no runtime can run the original: {one_line(error, tail=True)}"
            )
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
            self.unusable = (
                f"the original failed on {self._inputs_text()}: {one_line(error, tail=True)}"
            )
            return
        captured = {**dict(zip(self.names + self.exposed, values, strict=True)), **feeds}
        if not self.untrusted:  # the model itself made them: sizes it does not accept
            for probe in (p for p in self.probes if isinstance(p, NodeProbe) and not p.synthetic):
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
            if isinstance(probe, AttentionProbe):  # a fused attention: its subgraph, alone
                probe.run_on(
                    captured,
                    *self.bounds(probe.check.name, probe.x_dtype, probe.mode),
                )
            elif probe.whole:  # the node alone is the model just compared: no need to run it twice
                self._as_whole(probe, compared, captured[probe.x_name])
                self._other_form(probe, captured[probe.x_name], captured[probe.grid_name])
            elif probe.synthetic:  # in a subgraph, whose values the reference cannot show
                x, grid = synthetic(probe, self.plan.dims, self.rng)
                self._probe(probe, x, grid)
                self._other_form(probe, x, grid)
            else:
                self._probe(probe, captured[probe.x_name], captured[probe.grid_name])
                self._other_form(probe, captured[probe.x_name], captured[probe.grid_name])
        self._spread(compared, values[: len(self.names)], feeds)

    def _spread(self, compared: dict | str, expected: list, feeds: dict) -> None:
        """Where an output is off on this sample, the original's own spread there.

        Each GridSample's output in the original moves at random by as much as its lowered
        form has differed alone (``check.spread``); an output off by more than
        ``SPREAD_FACTOR`` times the original's move, or whose move cannot be measured, counts
        as unexplained (``OutputCheck``). Not where the caller gave the output's tolerance.
        """
        if isinstance(compared, str):
            return
        off = [
            name
            for name, (_, _, figures) in compared.items()
            if figures.mismatches and not figures.problem and not self.bounds.given(name)
        ]
        if not off:
            return
        moved = self._moved_outputs(feeds)
        for name in off:
            check, figures = self.outputs[name], compared[name][2]
            index = self.names.index(name)
            measured = spread(expected[index], moved[index]) if moved is not None else None
            if measured is None or figures.max_abs > SPREAD_FACTOR * measured:
                check.unexplained += 1
            check.spread = max(check.spread, measured or 0.0)

    def _moved_outputs(self, feeds: dict) -> list | None:
        """The original's outputs with each GridSample's moved by its lowered error, or None."""
        errors = {}  # every probe's nodes, so that the moved model's inputs stay the same
        for probe in self.probes:  # (in a body: its error on synthetic inputs; unchecked: 0)
            members = probe.check.members if isinstance(probe, AttentionProbe) else []
            for name in members or [probe.check.name]:
                errors[name] = probe.check.max_abs if probe.check.checked else 0.0
        if not any(errors.values()):
            return None
        if self._moved is None:
            scales = {name: f"gridsample_lower/spread/{k}" for k, name in enumerate(errors)}
            try:
                moved = perturbed(self.reference, scales)
                oracle = Oracle(moved, native=self._native, what="the original moved")
            except Exception:  # noqa: BLE001  (then no spread is measured)
                oracle = None
            self._moved = oracle, scales
        oracle, scales = self._moved
        if oracle is None:
            return None
        moves = {scales[n]: np.array(error, np.float32) for n, error in errors.items()}
        try:
            return oracle({**feeds, **moves})[: len(self.names)]
        except Exception:  # noqa: BLE001  (runtimes' errors have many types)
            return None

    def alone(self, samples: int, progress: Progress) -> None:
        """Check each GridSample alone on synthetic X and grid: the whole model cannot run."""
        self.notes.append(f"{self.unusable}; each GridSample was checked alone instead")
        self.notes.append(_how_to_run_whole(self.plan))
        for check in self.outputs.values():
            check.checked, check.note = False, "the whole model was not run"
        for probe in self.probes:
            if isinstance(probe, AttentionProbe):  # (its inputs cannot be invented alone)
                probe.check.checked = False
                probe.check.note = "the whole model was not run, nor could this be run alone"
        probes = [p for p in self.probes if isinstance(p, NodeProbe)]
        total = samples * len(probes)
        for k in range(samples):
            for j, probe in enumerate(probes):
                step = f"GridSample {probe.check.name!r} alone, synthetic set {k + 1}"
                progress(k * len(self.probes) + j, total, step)
                x, grid = synthetic(probe, self.plan.dims, self.rng)
                self._probe(probe, x, grid)
                self._other_form(probe, x, grid)

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
                f"{one_line(error, tail=True)}"
            ) from None

    def _other_form(self, probe: NodeProbe, x, grid) -> None:
        """Run the form these values did not take, where the region picks one by X's size.

        On X cropped to one pixel an axis (the ring), or tiled up to the size that switches
        (masked taps), up to ``OTHER_FORM_MAX_VALUES``.
        """
        x = np.asarray(x)
        if probe.tiles_at:
            self._other_tiling(probe, x, np.asarray(grid))
        if not probe.switch_at or x.size == 0:
            return
        rank, spatial = probe.spec.rank, math.prod(x.shape[2:])
        if spatial >= probe.switch_at:
            self._probe(probe, x[(..., *[slice(0, 1)] * rank)], grid)
            return
        factor = math.ceil((probe.switch_at / max(spatial, 1)) ** (1 / rank))
        while math.prod(size * factor for size in x.shape[2:]) < probe.switch_at:
            factor += 1
        if x.size * factor**rank > OTHER_FORM_MAX_VALUES:
            note = (
                f"GridSample {probe.check.name!r}: its form for an X of {probe.switch_at}+ "
                f"values a channel (masked taps) was not run: X tiled that far is too large"
            )
            if note not in probe.notes:
                probe.notes.append(note)
            return
        self._probe(probe, np.tile(x, (1, 1, *[factor] * rank)), grid)

    def _other_tiling(self, probe: NodeProbe, x: np.ndarray, grid: np.ndarray) -> None:
        """Run the points' other form (``point_tiles``).

        The grid cut to one point a sample, or tiled along its first point axis up to the
        points that take the tiles.
        """
        rank = probe.spec.rank
        repeats = repeats_to_switch(math.prod(grid.shape[1:-1]), probe.tiles_at, grid.size)
        if repeats == 0:
            self._probe(probe, x, grid[(slice(None), *[slice(0, 1)] * rank)])
            return
        if repeats is None:
            note = (
                f"GridSample {probe.check.name!r}: its tiles for {probe.tiles_at}+ points a "
                "sample were not run: the grid tiled that far is too large"
            )
            if note not in probe.notes:
                probe.notes.append(note)
            return
        self._probe(probe, x, np.tile(grid, (1, repeats, *[1] * rank)))

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
            failure = f"the candidate failed: {one_line(error, tail=True)}"
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
