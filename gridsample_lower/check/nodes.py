"""Isolate each GridSample: run the node alone and the candidate's region lowered from it.

The reference is run with every main graph GridSample's X and grid exposed as extra outputs
(``expose``). Each node is then run alone on those values by an ``oracle.Oracle``, the same
choice of runtime the whole reference gets: onnxruntime where it runs the configuration
natively, else (or once onnxruntime refuses the node at run time, say for an empty spatial
axis) ``onnx.reference`` with ``reference.GridSampleKernel``. So is its region in the
candidate: the nodes the lowering named ``<GridSample name>/<Op>_<k>``, whose output is the one
produced for the GridSample's output name (or else the only one used outside the region), or
the GridSample of that name if the candidate kept it (partial lowering, opset conversion).
A node in an If, Loop or Scan body, whose values the reference cannot expose, is run alone on
synthetic X and grid of its inferred shapes (``synthetic``). A node in a function body (the
lowering inlines it under other names), or without such a region, is not isolated: it gets an
unchecked ``NodeCheck`` saying why, and only the whole-model comparison covers it.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import onnx
import onnx_ir as ir
from onnx import helper

from gridsample_lower.check.oracle import Oracle, Runner, candidate_runner
from gridsample_lower.check.regions import AttentionProbe, probe_attentions
from gridsample_lower.check.report import NodeCheck, compare
from gridsample_lower.check.switches import switches
from gridsample_lower.graphs import graphs
from gridsample_lower.lowering.inventory import Site
from gridsample_lower.runtime import onnxruntime_runs
from gridsample_lower.spec import GridSampleSpec
from gridsample_lower.text import one_line

__all__ = ["NodeProbe", "expose", "probe_nodes"]

_REGION_NODE = re.compile(r"[A-Za-z][A-Za-z0-9]*_\d+")  # what the emitter appends to the prefix


@dataclasses.dataclass
class NodeProbe:
    """One GridSample of the reference, runnable alone, and the candidate's region for it.

    The region is the nodes lowered from it or, where the candidate kept the node (a partial
    lowering, an opset conversion), that GridSample.
    """

    check: NodeCheck
    x_name: str
    grid_name: str
    node_model: onnx.ModelProto
    region_model: onnx.ModelProto
    native: bool
    types: dict[str, int]  # ONNX element type of X and grid by name
    spec: GridSampleSpec
    shapes: tuple  # X's and grid's inferred shapes: ints, names, None (unknown); None: no rank
    elem_types: tuple[int, int]  # ONNX element types of X and grid
    kept_native: bool = True  # False: the candidate kept a GridSample onnxruntime cannot run
    whole: bool = False  # the node is the whole reference, its region the whole candidate
    synthetic: bool = False  # in a subgraph: run on synthetic X and grid, not the values seen
    y_name: str = ""  # the node's output in the reference
    # The region picks its form by X's size at run time (an If: ``Plan.small_x``): the fewest
    # values a channel of X holds for masked taps, else the ring; 0: one form.
    switch_at: int = 0
    # ... or by the grid's points a sample (``Plan.tiles_from``): the fewest for its tiles.
    tiles_at: int = 0
    notes: list[str] = dataclasses.field(default_factory=list)  # where an oracle fell back
    _oracles: dict[bool, Oracle] = dataclasses.field(default_factory=dict)  # by native
    _region_runner: Runner | None = None

    @property
    def mode(self) -> str:
        return self.spec.mode

    def run(self, x: np.ndarray, grid: np.ndarray, atol: float, rtol: float) -> None:
        """Run both on one sample's X and grid; fold the comparison into ``check``.

        onnxruntime's result is undefined for non-finite grid values: the reference judges those.
        """
        oracle = self._oracle(self.native and bool(np.isfinite(grid.astype(np.float64)).all()))
        (expected,) = oracle({"X": x, "grid": grid})
        known = self.check.oracle.split("+") if self.check.oracle else []
        if oracle.runtime not in known:  # what judged it, after any fallback
            self.check.oracle = "+".join([*known, oracle.runtime])
        if self._region_runner is None:
            region = candidate_runner(self.region_model, native=self.kept_native, threads=1)
            self._region_runner = region[0]
        try:
            (actual,) = self._region_runner({self.x_name: x, self.grid_name: grid})
        except Exception as error:  # noqa: BLE001  (any failure of the candidate is a finding)
            self.check.problem = f"its region in the candidate failed: {one_line(error, tail=True)}"
            return
        self.check.merge(compare(self.check.name, expected, actual, atol, rtol))

    def _oracle(self, native: bool) -> Oracle:
        if native not in self._oracles:
            what = f"GridSample {self.check.name!r} alone"
            self._oracles[native] = Oracle(
                self.node_model, native=native, threads=1, what=what, notes=self.notes
            )
        return self._oracles[native]


def probe_nodes(
    sites: list[Site], reference: onnx.ModelProto, candidate: onnx.ModelProto
) -> tuple[list[NodeCheck], list[NodeProbe | AttentionProbe]]:
    """A check per site (in order) and a probe for each site that can be isolated.

    Then a check and a probe per deformable attention the candidate lowered as one unit
    (``regions``), whose GridSamples' checks say so.

    ``sites`` must still carry their inferred types (inside ``inventory.inferred_types``).
    """
    names = [site.name for site in sites if not site.location.startswith("function")]
    consumed = _consumed(candidate.graph) | {
        o.name for g in graphs(candidate.graph) for o in g.output
    }
    index = _Index(candidate.graph)
    originals = {n.name: n for g in graphs(reference.graph) for n in g.node}
    checks, probes = [], []
    for site in sites:
        check = NodeCheck(site.name, location=site.location)
        check.configuration = site.spec.label if site.spec else ""
        checks.append(check)
        why = _why_not_isolated(site, names)
        region = None if why else _region(index, site, consumed)
        if isinstance(region, str) or why:
            check.checked, check.note = False, why or region
            continue
        probe = _probe(check, site, originals[site.name], reference, candidate, region)
        if site.location != "main graph":  # its values are not outputs the reference can show
            probe.synthetic = True
            check.note = f"checked alone on synthetic inputs: it lives in {site.location}"
        probe.y_name = site.node.outputs[0].name
        alone = len(reference.graph.node) == 1 and len(region[0]) == len(candidate.graph.node)
        probe.whole = alone and probe.y_name in {o.name for o in reference.graph.output}
        probes.append(probe)
    fused, attention_probes = probe_attentions(
        sites, checks, reference, candidate, index.regions, index.initializers
    )
    return [*checks, *fused], [*probes, *attention_probes]


class _Index:
    """The candidate's nodes by the GridSample they were lowered from, found in one pass."""

    def __init__(self, graph: onnx.GraphProto) -> None:
        self.regions: dict[str, list[onnx.NodeProto]] = {}
        self.kept: dict[str, list[onnx.NodeProto]] = {}
        self.initializers: dict[str, onnx.TensorProto] = {}
        for sub in graphs(graph):  # a region lies in the graph its GridSample was in
            for node in sub.node:
                prefix, _, last = node.name.rpartition("/")
                if prefix and _REGION_NODE.fullmatch(last):
                    self.regions.setdefault(prefix, []).append(node)
                if node.op_type == "GridSample":
                    self.kept.setdefault(node.name, []).append(node)
            self.initializers.update({t.name: t for t in sub.initializer})


def expose(reference: onnx.ModelProto, probes: list[NodeProbe]) -> tuple[onnx.ModelProto, list]:
    """A copy of ``reference`` that also outputs its main graph probes' X and grid, and names."""
    graph = reference.graph
    present = {i.name for i in graph.input} | {o.name for o in graph.output}
    types = {name: elem for p in probes if not p.synthetic for name, elem in p.types.items()}
    extra = [name for name in types if name not in present]
    if not extra:
        return reference, []
    exposed = onnx.ModelProto()
    exposed.CopyFrom(reference)
    outputs = [helper.make_tensor_value_info(name, types[name], None) for name in extra]
    exposed.graph.output.extend(outputs)
    return exposed, extra


def _why_not_isolated(site: Site, graph_names: list[str]) -> str:
    if site.location.startswith("function"):  # inlined when lowered: its region is renamed
        return f"it lives in {site.location}; checked through the whole model only"
    if site.spec is None:
        return f"it cannot be lowered ({site.problem})"
    if graph_names.count(site.name) > 1:
        return "its name is not unique, so its lowered region cannot be told apart"
    return ""


def _region(index: _Index, site: Site, consumed: set[str]):
    """(nodes, initializers, output name) of the site's region, or why there is none."""
    nodes = index.kept.get(site.name) or index.regions.get(site.name, [])
    if not nodes:
        return f"no lowered region (nodes named '{site.name}/<Op>_<k>') in the candidate"
    produced = [o for n in nodes for o in n.output if o]
    initializers = index.initializers
    x_name, grid_name = (v.name for v in site.node.inputs[:2])
    needed = {i for n in nodes for i in n.input if i and i not in produced}
    foreign = sorted(needed - {x_name, grid_name} - set(initializers))
    if foreign:
        return f"its region in the candidate reads {foreign[0]!r}, not only X, grid, constants"
    y_name = site.node.outputs[0].name
    outputs = [o for o in produced if o in consumed or o == y_name]
    output = y_name if y_name in produced else (outputs[0] if len(outputs) == 1 else None)
    if output is None:
        return "the output of its region in the candidate cannot be told"
    return nodes, [initializers[i] for i in sorted(needed & set(initializers))], output


def _probe(check, site: Site, node: onnx.NodeProto, reference, candidate, region) -> NodeProbe:
    x, grid = site.node.inputs[:2]
    x_type, grid_type = int(x.dtype), int(grid.dtype)
    alone = onnx.NodeProto()
    alone.CopyFrom(node)
    alone.ClearField("input")
    alone.input.extend(["X", "grid"])
    alone.ClearField("output")
    alone.output.append("Y")
    node_model = _model(reference, [alone], [("X", x_type), ("grid", grid_type)], ("Y", x_type))
    nodes, initializers, output = region
    inputs = {x.name: x_type, grid.name: grid_type}  # one input if X and grid are one value
    region_model = _model(candidate, nodes, list(inputs.items()), (output, x_type), initializers)
    native = onnxruntime_runs(site.spec) and site.spelling_ok
    kept_native = native or nodes[0].op_type != "GridSample"
    shapes = tuple(_shape(value) for value in (x, grid))
    probe = NodeProbe(
        check,
        x.name,
        grid.name,
        node_model,
        region_model,
        native,
        inputs,
        site.spec,
        shapes,
        (x_type, grid_type),
        kept_native,
    )
    found = switches(nodes)
    probe.switch_at, probe.tiles_at = found.get(x.name, 0), found.get(grid.name, 0)
    return probe


def _shape(value: ir.Value) -> tuple | None:
    """``value``'s shape as ints, symbolic names and None (unknown), or None (unknown rank)."""
    if value.shape is None:
        return None
    return tuple(d if isinstance(d, int) else (d.value or None) for d in value.shape)


def _model(like: onnx.ModelProto, nodes, inputs, output, initializers=()) -> onnx.ModelProto:
    """A model of ``nodes`` with untyped-shape inputs and output, ``like``'s opsets and IR."""
    graph = helper.make_graph(
        nodes,
        "isolated",
        [helper.make_tensor_value_info(name, elem, None) for name, elem in inputs],
        [helper.make_tensor_value_info(output[0], output[1], None)],
        list(initializers),
    )
    return helper.make_model(graph, opset_imports=like.opset_import, ir_version=like.ir_version)


def _consumed(graph: onnx.GraphProto) -> set[str]:
    """Every name read by a node of ``graph`` or of its subgraphs at any depth."""
    return {name for sub in graphs(graph) for node in sub.node for name in node.input}
