"""Deformable attentions lowered as one unit, checked as one: original subgraph against region.

Where the lowering fused a multi-scale deformable attention (``lowering/attention.py``), no
GridSample of it has a region of its own. Its check runs the reference's nodes from the levels'
X and grid and the attention weights to the weighted sum (the GridSamples, the stack, the
Reshape and whatever computes its shape, the Mul, the ReduceSum) alone, by the same oracle as a
node alone, and the candidate's nodes named ``<attention>/<Op>_<k>`` on the same values, which
the reference run exposes. Each of its GridSamples' checks names the attention instead.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx
from onnx import helper

from gridsample_lower.check.oracle import Oracle, Runner, candidate_runner
from gridsample_lower.check.report import NodeCheck, compare
from gridsample_lower.check.switches import repeats_to_switch, switches
from gridsample_lower.lowering.attention import DeformableAttention, find_attentions
from gridsample_lower.lowering.inventory import Site
from gridsample_lower.runtime import onnxruntime_runs
from gridsample_lower.text import one_line

__all__ = ["AttentionProbe", "probe_attentions"]


@dataclasses.dataclass
class AttentionProbe:
    """One fused attention: its reference subgraph and the candidate's region, runnable alone."""

    check: NodeCheck
    inputs: list[str]  # what the region reads: levels (or their source), grids, weights
    subgraph: onnx.ModelProto
    region: onnx.ModelProto
    native: bool
    types: dict[str, int]  # ONNX element type of each input, by name
    mode: str
    x_dtype: np.dtype  # the samples' type: its tolerance
    synthetic: bool = False  # (never: an attention in a subgraph is not isolated)
    whole: bool = False
    # Its inputs' query axes (the grids', the weights'), and from how many queries the region
    # takes its tiles (an If: ``costs.attention_tiles``; 0: one form).
    query_axes: dict[str, int] = dataclasses.field(default_factory=dict)
    tiles_at: int = 0
    notes: list[str] = dataclasses.field(default_factory=list)
    _oracles: dict[bool, Oracle] = dataclasses.field(default_factory=dict)
    _region_runner: Runner | None = None

    def run_on(self, values: dict[str, np.ndarray], atol: float, rtol: float) -> None:
        """Run both on the values the reference saw; fold the comparison into ``check``.

        Where the region picks tiles of queries by their count, the other form runs too: the
        queries cut to one, or repeated up to the count that takes the tiles.
        """
        feeds = {name: np.asarray(values[name]) for name in self.inputs}
        self._compare(feeds, atol, rtol)
        if self.tiles_at and not self.check.problem:
            other = self._other_queries(feeds)
            if other is not None:
                self._compare(other, atol, rtol)

    def _other_queries(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray] | None:
        name, axis = next(iter(self.query_axes.items()))
        values = sum(feeds[n].size for n in self.query_axes)
        repeats = repeats_to_switch(feeds[name].shape[axis], self.tiles_at, values)
        if repeats == 0:
            cut = {n: np.take(feeds[n], [0], axis=a) for n, a in self.query_axes.items()}
            return feeds | cut
        if repeats is None:
            note = f"its tiles for {self.tiles_at}+ queries were not run: too many values"
            if note not in self.notes:
                self.notes.append(note)
            return None
        tiled = {
            n: np.concatenate([feeds[n]] * repeats, axis=a) for n, a in self.query_axes.items()
        }
        return feeds | tiled

    def _compare(self, feeds: dict[str, np.ndarray], atol: float, rtol: float) -> None:
        finite = all(np.isfinite(v.astype(np.float64)).all() for v in feeds.values())
        native = self.native and finite
        if native not in self._oracles:
            what = f"deformable attention {self.check.name!r} alone"
            self._oracles[native] = Oracle(
                self.subgraph, native=native, threads=1, what=what, notes=self.notes
            )
        oracle = self._oracles[native]
        (expected,) = oracle(feeds)
        known = self.check.oracle.split("+") if self.check.oracle else []
        if oracle.runtime not in known:
            self.check.oracle = "+".join([*known, oracle.runtime])
        if self._region_runner is None:
            self._region_runner = candidate_runner(self.region, threads=1)[0]
        try:
            (actual,) = self._region_runner(feeds)
        except Exception as error:  # noqa: BLE001  (any failure of the candidate is a finding)
            self.check.problem = f"its region in the candidate failed: {one_line(error, tail=True)}"
            return
        self.check.merge(compare(self.check.name, expected, actual, atol, rtol))


def probe_attentions(
    sites: list[Site],
    checks: list[NodeCheck],
    reference: onnx.ModelProto,
    candidate: onnx.ModelProto,
    regions: dict[str, list[onnx.NodeProto]],
    initializers: dict[str, onnx.TensorProto],
) -> tuple[list[NodeCheck], list[AttentionProbe]]:
    """A check and a probe per attention of the reference that the candidate fused.

    The checks of its GridSamples (in ``checks``, in site order) are marked as checked within
    it. ``regions``: the candidate's nodes by name prefix.
    """
    found = [
        a
        for a in find_attentions([s for s in sites if s.location == "main graph"])
        if a.name in regions
    ]
    by_name = {check.name: check for check in checks}
    by_node = {site.node: site for site in sites}
    new_checks, probes = [], []
    for attention in found:
        members = [n.name for n in attention.samplers]
        check = NodeCheck(attention.name, members=members)
        names = ", ".join(repr(name) for name in members)
        check.note = f"is the deformable attention of {names}: lowered and checked as one unit"
        check.configuration = f"deformable attention of {len(attention.samplers)} x " + (
            attention.spec.label
        )
        new_checks.append(check)
        for sampler in attention.samplers:
            member = by_name.get(sampler.name)
            if member is not None:
                member.checked = False
                member.note = f"lowered as part of deformable attention {attention.name!r}"
        sites_in = [by_node[sampler] for sampler in attention.samplers]
        region = regions[attention.name]
        probe = _probe(check, attention, sites_in, reference, region, initializers)
        if isinstance(probe, str):
            check.checked, check.note = False, probe
        else:
            probes.append(probe)
    return new_checks, probes


def _probe(check, attention: DeformableAttention, members, reference, region, initializers):
    """The probe of ``attention`` (``members``: its sites), or why it cannot be isolated.

    Its inputs are what the region reads: the levels' X (or the values they were split from,
    which the lowering reads directly) and grids, and the attention weights.
    """
    x_type = attention.samplers[0].inputs[0].dtype
    if x_type is None or any(s.inputs[1].dtype is None for s in attention.samplers):
        return "the types of its inputs are not known"
    # Everything on the way from the values to the weighted sum keeps X's type.
    types = {s.inputs[1].name: int(s.inputs[1].dtype) for s in attention.samplers}
    sources = [s.inputs[0] for s in attention.samplers] + [attention.weights]
    if attention.source is not None:
        sources.append(attention.source.value)
    types.update({v.name: int(x_type) for v in sources})
    output = attention.output.name
    produced = {o for n in region for o in n.output}
    if output not in produced:
        return "its region in the candidate does not produce its output"
    needed = _outer_reads(region)
    inputs = sorted(needed - set(initializers))
    foreign = [name for name in inputs if name not in types]
    if foreign:
        return f"its region in the candidate reads {foreign[0]!r}, not only its inputs"
    nodes = _closure(reference.graph, output, set(inputs))
    if isinstance(nodes, str):
        return nodes
    outer = {t.name: t for t in reference.graph.initializer}
    types = {name: types[name] for name in inputs}
    subgraph = _model(reference, nodes, inputs, types, output, _read(nodes, outer), x_type)
    kept = [initializers[i] for i in sorted(needed & set(initializers))]
    region_model = _model(reference, region, inputs, types, output, kept, x_type)  # (same opsets)
    native = onnxruntime_runs(attention.spec) and all(site.spelling_ok for site in members)
    x_dtype = np.dtype(x_type.numpy())
    mode = attention.spec.mode
    probe = AttentionProbe(check, inputs, subgraph, region_model, native, types, mode, x_dtype)
    grids = [s.inputs[1].name for s in attention.samplers]
    probe.query_axes = {**dict.fromkeys(grids, 1), attention.weights.name: 2}
    probe.tiles_at = switches(region).get(grids[0], 0)
    return probe


def _outer_reads(nodes: list[onnx.NodeProto]) -> set[str]:
    """What ``nodes`` read from outside them, their subgraphs' reads of outer scopes included.

    (A region's If or Loop reads the values its branches or body use without naming them.)
    """
    made: set[str] = set()
    read: set[str] = set()

    def walk(inner: list[onnx.NodeProto], own: list[str]) -> None:
        made.update(own)
        for node in inner:
            made.update(node.output)
            read.update(name for name in node.input if name)
            for attribute in node.attribute:
                if attribute.type == onnx.AttributeProto.GRAPH:
                    graph = attribute.g
                    names = [v.name for v in graph.input] + [t.name for t in graph.initializer]
                    walk(list(graph.node), names)

    walk(nodes, [])
    return read - made


def _closure(graph: onnx.GraphProto, output: str, inputs: set[str]):
    """The nodes of ``graph`` that compute ``output`` from ``inputs`` and constants, in order."""
    producers = {o: n for n in graph.node for o in n.output}
    initializers = {t.name for t in graph.initializer}
    needed, pending = set(), [output]
    while pending:
        name = pending.pop()
        if name in inputs or name in initializers or not name:
            continue
        node = producers.get(name)
        if node is None:
            return f"its subgraph reads {name!r}, not only its levels and attention weights"
        if id(node) in needed:
            continue
        needed.add(id(node))
        pending.extend(node.input)
    return [n for n in graph.node if id(n) in needed]


def _read(nodes, initializers: dict[str, onnx.TensorProto]) -> list[onnx.TensorProto]:
    names = {i for n in nodes for i in n.input}
    return [initializers[name] for name in sorted(names & set(initializers))]


def _model(like, nodes, inputs, types, output, initializers, x_type) -> onnx.ModelProto:
    """A model of ``nodes`` with untyped-shape inputs, ``like``'s opsets and IR version."""
    graph = helper.make_graph(
        list(nodes),
        "isolated",
        [helper.make_tensor_value_info(name, types[name], None) for name in inputs],
        [helper.make_tensor_value_info(output, int(x_type), None)],  # the samples' type
        list(initializers),
    )
    return helper.make_model(graph, opset_imports=like.opset_import, ir_version=like.ir_version)
