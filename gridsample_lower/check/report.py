"""Compare tensors within a tolerance and hold the outcome: per output, per GridSample node.

A tensor passes when ``|actual - expected| <= atol + rtol * |expected|`` element-wise, with NaN
equal to NaN and an infinity equal to itself. ``max_rel`` is taken over the elements whose
expected value is non-zero (``max_abs`` covers the others). A ``VerificationReport`` is plain
data: ``to_dict``/``to_json`` serialise it (non-finite numbers as the strings ``"inf"``,
``"nan"``) and ``from_dict`` reads it back.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

import numpy as np

from gridsample_lower.check.tolerances import SPREAD_FACTOR
from gridsample_lower.text import table

__all__ = [
    "Comparison",
    "NodeCheck",
    "OutputCheck",
    "VerificationReport",
    "compare",
    "largest_error",
]

_CHUNK = 2**20  # elements compared at once: a large output needs no float64 copies of itself


@dataclasses.dataclass
class Comparison:
    """How an actual tensor compares with the expected one, accumulated over samples."""

    name: str
    dtype: str = ""
    shape: list[int] = dataclasses.field(default_factory=list)
    max_abs: float = 0.0
    max_rel: float = 0.0
    mismatches: int = 0
    elements: int = 0
    atol: float = 0.0
    rtol: float = 0.0
    problem: str = ""
    checked: bool = True
    note: str = ""

    @property
    def ok(self) -> bool:
        """Unchecked, or every element within tolerance and no problem (dtype, shape, a run)."""
        return not self.checked or (not self.problem and self.mismatches == 0)

    def merge(self, other: Comparison) -> None:
        """Fold the figures of another sample into this one (worst error, summed counts)."""
        if not self.elements and not self.dtype:  # the first sample says what was compared
            self.dtype, self.shape = other.dtype, other.shape
            self.atol, self.rtol = other.atol, other.rtol
        self.max_abs = max(self.max_abs, other.max_abs)
        self.max_rel = max(self.max_rel, other.max_rel)
        self.mismatches += other.mismatches
        self.elements += other.elements
        self.problem = self.problem or other.problem


@dataclasses.dataclass
class OutputCheck(Comparison):
    """One graph output of the candidate against the reference's.

    ``checked`` is False when the whole model could not be run (``note`` says why); each
    GridSample was then checked alone.

    Where it is off on a sample, ``spread`` is how far the original's own output moved there
    when each GridSample's output moved at random by as much as its lowered form differed
    alone (``check.spread``; the largest over such samples), and ``unexplained`` counts the
    samples where it was off by more than ``SPREAD_FACTOR`` times that, or where the move
    could not be measured.
    """

    spread: float = 0.0
    unexplained: int = 0

    @property
    def within_spread(self) -> bool:
        """Off past its tolerance only by what the original's own rounding makes of it.

        The report takes it so where every GridSample matches alone.
        """
        return (
            bool(self.checked and self.mismatches and not self.problem and not self.unexplained)
            and self.spread > 0
        )


@dataclasses.dataclass
class NodeCheck(Comparison):
    """One GridSample of the reference, alone, against the candidate's region lowered from it.

    Or, with ``members``, a deformable attention lowered as one unit: its subgraph alone
    against its region (``check.regions``). ``checked`` is False when the node could not be
    isolated (a subgraph or function body, no lowered region found); ``note`` then says why,
    and only the whole-model check covers it.
    """

    location: str = "main graph"
    configuration: str = ""
    oracle: str = ""
    # A deformable attention lowered as one unit: the GridSamples its region covers.
    members: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class VerificationReport:
    """The outcome of checking that a candidate model computes what a reference computes.

    Attributes:
        oracle: What ran the reference: ``"onnxruntime"`` or ``"onnx.reference"``.
        candidate_runtime: What ran the candidate (onnxruntime unless it could not).
        samples: How many input sets were run.
        seed: The seed of the random inputs.
        outputs: One check per graph output of the reference.
        nodes: One check per GridSample of the reference.
        notes: What the reader should know: unchecked nodes, fallbacks.
    """

    oracle: str
    candidate_runtime: str = "onnxruntime"
    samples: int = 0
    seed: int = 0
    outputs: list[OutputCheck] = dataclasses.field(default_factory=list)
    nodes: list[NodeCheck] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Every isolated GridSample node within tolerance, and every output.

        Within its tolerance, or within the original's spread (``OutputCheck.within_spread``).
        """
        return all(c.ok for c in self.nodes) and not self._outputs_off

    @property
    def _outputs_off(self) -> list[OutputCheck]:
        """The outputs that do not match: off past tolerance, unexplained by the spread."""
        explained = all(c.ok for c in self.nodes)
        return [c for c in self.outputs if not (c.ok or (explained and c.within_spread))]

    @property
    def _outputs_spread(self) -> list[OutputCheck]:
        """The outputs that match only within the original's spread."""
        off = self._outputs_off
        return [c for c in self.outputs if not c.ok and c not in off]

    @property
    def culprits(self) -> list[str]:
        """Names of the GridSample nodes whose lowered region differs from the node alone."""
        return [c.name for c in self.nodes if not c.ok]

    @property
    def whole_model(self) -> bool:
        """Whether the whole models were run and their outputs compared."""
        return all(c.checked for c in self.outputs)

    def summary(self) -> str:
        """One verdict line."""
        regions = [c for c in self.nodes if c.members]
        covered = {m for c in regions if c.checked for m in c.members}
        checked = sum(c.checked for c in self.nodes if not c.members)
        if self.ok:
            unchecked = sum(not c.checked and c.name not in covered for c in self.nodes)
            aside = f" ({unchecked} not checked alone, see notes)" if unchecked else ""
            nodes, joint = f"{checked} GridSample node(s)", " and "
            if regions:
                nodes, joint = (
                    f"{sum(c.checked for c in regions)} deformable attention(s) of "
                    f"{len(covered)} GridSamples as one region each, and {checked} other "
                    "GridSample node(s)",
                    ", ",
                )
            if not self.whole_model:
                return (
                    f"each GridSample checked alone on {self.samples} synthetic input set(s): "
                    f"{nodes} match{aside}; the whole model was not run "
                    "(see notes)"
                )
            spread = ", ".join(repr(c.name) for c in self._outputs_spread)
            if spread:
                aside += f" (output(s) {spread} within the original's own spread, see notes)"
            return (
                f"verified against {self.oracle} on {self.samples} input set(s): "
                f"{len(self.outputs)} output(s){joint}{nodes} match{aside}"
            )
        parts = [_what(c, "output") for c in self._outputs_off]
        culprits = ", ".join(repr(name) for name in self.culprits)
        if culprits:
            parts.append(f"GridSample node(s) responsible: {culprits}")
        elif checked:
            parts.append("every GridSample matches alone: the difference is elsewhere")
        return f"mismatch against {self.oracle}: " + "; ".join(parts)

    def note_lines(self) -> list[str]:
        """The notes, and why each unchecked node was not checked alone."""
        notes = [f"note: {note}" for note in self.notes]
        notes += [
            f"note: {_what(c, 'output')}: within {SPREAD_FACTOR:g}x how far the original's "
            f"own output moves (up to {c.spread:.3g}) when each GridSample's output moves at "
            "random by as much as its lowered form differs alone"
            for c in self._outputs_spread
        ]
        covered = {m for c in self.nodes if c.members and c.checked for m in c.members}
        return notes + [
            f"note: {c.name!r} " + (f"{c.note}" if c.checked else f"not checked alone: {c.note}")
            for c in self.nodes
            if c.note and c.name not in covered  # (its region's note names it)
        ]

    def table(self) -> str:
        """Readable tables (outputs, then GridSample nodes), the notes and the verdict line."""
        blocks = []
        if self.outputs:
            spread = self._outputs_spread
            rows = [_row("output", c, within_spread=c in spread) for c in self.outputs]
            blocks.append(table(rows))
        if self.nodes:
            blocks.append(table([_node_row(c) for c in self.nodes]))
        if self.note_lines():
            blocks.append("\n".join(self.note_lines()))
        return "\n\n".join([*blocks, self.summary()])

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data; non-finite floats become ``"inf"``, ``"-inf"``, ``"nan"``."""
        return _finite(dataclasses.asdict(self))

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps({**self.to_dict(), "ok": self.ok}, indent=indent)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> VerificationReport:
        """The report ``to_dict`` (or ``json.loads(to_json())``) described."""
        data = {k: v for k, v in data.items() if k != "ok"}
        outputs = [OutputCheck(**_floats(c)) for c in data.pop("outputs", [])]
        nodes = [NodeCheck(**_floats(c)) for c in data.pop("nodes", [])]
        return cls(**data, outputs=outputs, nodes=nodes)


def compare(
    name: str, expected: np.ndarray, actual: np.ndarray, atol: float, rtol: float
) -> Comparison:
    """Compare ``actual`` with ``expected`` (dtype, shape, then values) within atol/rtol."""
    want, got = np.asarray(expected), np.asarray(actual)
    result = Comparison(name, str(want.dtype), list(want.shape), atol=atol, rtol=rtol)
    result.elements = want.size
    if want.shape != got.shape or want.dtype != got.dtype:
        result.problem = (
            f"expected {want.dtype}{list(want.shape)}, got {got.dtype}{list(got.shape)}"
        )
        result.max_abs = result.max_rel = math.inf
        result.mismatches = max(want.size, got.size)
        return result
    want, got = want.reshape(-1), got.reshape(-1)
    for start in range(0, want.size, _CHUNK):  # float64 temporaries of one chunk at a time
        err, scale = _errors(want[start : start + _CHUNK], got[start : start + _CHUNK])
        rel = np.where(
            scale > 0, err / np.where(scale > 0, scale, 1.0), np.where(err == np.inf, err, 0)
        )
        result.max_abs = max(result.max_abs, float(err.max(initial=0.0)))
        result.max_rel = max(result.max_rel, float(rel.max(initial=0.0)))
        result.mismatches += int((err > atol + rtol * scale).sum())
    return result


def largest_error(expected: np.ndarray, actual: np.ndarray) -> float:
    """The largest ``|actual - expected|`` of two arrays of one shape, chunk by chunk.

    inf where only one is NaN, as ``compare`` takes it.
    """
    want, got = np.asarray(expected).reshape(-1), np.asarray(actual).reshape(-1)
    largest = 0.0
    for start in range(0, want.size, _CHUNK):
        err, _ = _errors(want[start : start + _CHUNK], got[start : start + _CHUNK])
        largest = max(largest, float(err.max(initial=0.0)))
    return largest


@np.errstate(invalid="ignore", over="ignore")
def _errors(want: np.ndarray, got: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Element-wise ``|got - want|`` (inf where only one is NaN) and ``|want|``, in float64."""
    if want.dtype.kind in "OUSb":  # strings, objects, bool: equal or not
        err = (want != got).astype(np.float64)
        return err, np.zeros(want.shape)
    if want.dtype.kind in "iu":  # exact even past 2**53 where the difference is small
        wrapped = (want - got).view(want.dtype.str.replace("u", "i")).astype(np.float64)
        err = np.abs(want.astype(np.float64) - got.astype(np.float64))
        err = np.where(err < 2.0**62, np.abs(wrapped), err)
        return np.where(want == got, 0.0, err), np.abs(want.astype(np.float64))
    w, g = want.astype(np.float64), got.astype(np.float64)
    err = np.abs(w - g)
    if np.isfinite(err).all():  # both finite everywhere: the usual case, in three passes
        return err, np.abs(w)
    same = (w == g) | (np.isnan(w) & np.isnan(g))
    err = np.where(same, 0.0, np.abs(w - g))
    return np.where(np.isnan(err), np.inf, err), np.abs(np.nan_to_num(w, posinf=0, neginf=0))


def _what(check: Comparison, kind: str) -> str:
    what = check.problem or (
        f"{check.mismatches} element(s) off by up to {check.max_abs:.3g} "
        f"(atol={check.atol:g}, rtol={check.rtol:g})"
    )
    if isinstance(check, OutputCheck) and not check.problem and check.unexplained and check.spread:
        what += f", past {SPREAD_FACTOR:g}x the original's own spread ({check.spread:.3g})"
    return f"{kind} {check.name!r}: {what}"


def _row(kind: str, check: Comparison, within_spread: bool = False) -> dict[str, str]:
    unchecked = not check.checked
    figures = {
        "dtype": check.dtype or "-",
        "shape": "[" + ",".join(map(str, check.shape)) + "]" if check.dtype else "-",
        "max_abs": f"{check.max_abs:.3g}",
        "max_rel": f"{check.max_rel:.3g}",
        "out_of_tol": f"{check.mismatches}/{check.elements}",
        "atol": f"{check.atol:g}",
        "rtol": f"{check.rtol:g}",
    }
    if unchecked:
        figures = dict.fromkeys(figures, "-")
    verdict = "not checked" if unchecked else ("ok" if check.ok else "MISMATCH")
    if within_spread:
        verdict = "ok (spread)"
    return {kind: check.name, **figures, "verdict": verdict}


def _node_row(check: NodeCheck) -> dict[str, str]:
    row = _row("GridSample", check)
    head = {"GridSample": row.pop("GridSample"), "configuration": check.configuration or "?"}
    return {**head, "oracle": check.oracle or "-", **row}


def _finite(data: Any) -> Any:
    if isinstance(data, float) and not math.isfinite(data):
        return str(data)
    if isinstance(data, dict):
        return {k: _finite(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_finite(v) for v in data]
    return data


def _floats(data: dict[str, Any]) -> dict[str, Any]:
    return {k: float(v) if k in ("max_abs", "max_rel", "spread") else v for k, v in data.items()}
