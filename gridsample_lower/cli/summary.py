"""What a rewrite did to a model, for people: nodes before and after, ops added, size, kept."""

from __future__ import annotations

import collections
import pathlib
from collections.abc import Sequence

import onnx
import onnx_ir as ir

from gridsample_lower.files.model_io import ModelFile
from gridsample_lower.graphs import graphs
from gridsample_lower.lowering.attention import selected_attentions
from gridsample_lower.lowering.inventory import find_gridsamples, inferred_types, name_unnamed
from gridsample_lower.lowering.selection import Selection

__all__ = ["changes", "kept_gridsamples"]


def changes(source: ModelFile, result: onnx.ModelProto, written: Sequence[pathlib.Path]) -> dict:
    """Node count ``A -> B``, the op types new in ``result``, and the files' size before/after.

    ``written``: the files the result is made of (``Destination.result_files``).
    """
    before, after = _op_counts(source.proto), _op_counts(result)
    added = sorted(op for op in after if op not in before)
    size_before = sum(path.stat().st_size for path in source.files)
    size_after = sum(path.stat().st_size for path in written)
    return {
        "nodes": f"{sum(before.values())} -> {sum(after.values())}",
        "ops_added": added,
        "size": f"{_size(size_before)} -> {_size(size_after)}",
        "bytes": [size_before, size_after],
    }


def kept_gridsamples(model: onnx.ModelProto, selection: Selection) -> list[str]:
    """Each GridSample ``selection`` keeps, named, with why.

    Judged on the input, as the pass judges it (the lowered model is far larger to read).
    """
    graph = ir.serde.deserialize_model(model)
    named = []
    with inferred_types(graph):
        sites = find_gridsamples(graph)
        name_unnamed(graph, sites)
        fused = {n for a in selected_attentions(sites, selection) for n in a.samplers}
        for site in sites:
            if site.spec is None:
                why = site.problem or "cannot be lowered"
            elif site.node in fused:  # (kept alone, lowered with its attention)
                why = None
            else:
                why = selection.why_kept(site.node.name, site.spec, site.node)
            if why:
                named.append(f"{site.name} ({why})")
    return named


def _op_counts(model: onnx.ModelProto) -> collections.Counter[str]:
    roots = [model.graph, *model.functions]
    return collections.Counter(
        node.op_type for root in roots for g in graphs(root) for node in g.node
    )


def _size(count: int) -> str:
    for unit, scale in (("MB", 1e6), ("kB", 1e3)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} B"
