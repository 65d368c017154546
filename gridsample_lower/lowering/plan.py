"""Every strategy choice for one GridSample node, made before anything is emitted.

``plan_of`` reads only the spec, X's and the grid's static shapes and the target, and returns
a ``Plan``: which gather (GatherElements or channels-last rows), which sum of the taps, the ring
of zeros, the zero slot, the index types, the channels-last copy's form, each with the reason
it was chosen. The rule's check builds it, so every refusal is decided there; the emitters in
``sampling``, ``flat_index`` and ``gathers`` only carry it out.

Shapes are judged twice, explicitly: as given (the gather and sum forms, whose thresholds were
measured on X's own sizes) and as gathered, X padded by the ring (the index types and the copy).
The thresholds and the predicates that read them are ``costs.py``'s.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import onnx_ir as ir

from gridsample_lower.lowering import costs
from gridsample_lower.lowering.costs import (
    FLOAT_INDEX_LIMIT,
    PAD_TYPES,
    SLOT_MAX_RATIO,
    WHERE_TYPES,
)
from gridsample_lower.lowering.index_range import (
    INT32_LIMIT,
    TAPS_PER_AXIS,
    int32_overflow,
    largest_index,
    ring_width,
)
from gridsample_lower.lowering.targets import ELEMENTWISE, Target
from gridsample_lower.spec import GridSampleSpec, compute_dtype

if TYPE_CHECKING:
    from gridsample_lower.lowering.inventory import Site

__all__ = ["Plan", "node_plan", "plan_of"]

INT32, INT64 = ir.DataType.INT32, ir.DataType.INT64
PLANE_SUMS = ("chain", "none", "reduce_sum")  # the sums rows from X's planes can carry out
# The sums each gather can carry out: (rows, nearest) -> forms.
SUMS = {
    (False, False): ("reduce_sum", "by_channel"),
    (True, False): ("chain", "scaled", "matmul", "reduce_sum"),
    (False, True): ("none",),
    (True, True): ("none",),
}


@dataclasses.dataclass(frozen=True)
class Plan:
    """How one GridSample is lowered; ``why`` gives the reason for each choice, by field name.

    Attributes:
        taps: tap combinations per point: 1 (nearest), 2**r (linear), 4**r (cubic).
        gather: "elements" (GatherElements on X viewed as ``(N*C, S)``) or "rows" (Gather of
            C-vectors from a channels-last copy of X).
        sum: how the weighted taps are summed: "none" (nearest), "reduce_sum" or "by_channel"
            (GatherElements); "chain", "scaled" or "matmul" (rows).
        ring: zeros padded on either side of every spatial axis of X (0: none).
        per_point: one index per point, the taps' flat offsets added last (a ring as wide as
            the kernel); the rows add each tap's where they gather it
            (``Target.offsets_at_gather``).
        masks: points outside X are masked (nearest, zeros); they read a zero appended to X
            (``zero_slot``; by Pad where ``slot_by_pad``, else Concat), else are zeroed once
            gathered.
        small_x: masked taps or values of an X of unknown size (``Target.unknown_x`` "if"):
            an If runs them where X proves large at run time (``costs.masked_min_spatial``),
            and this plan, X padded by its ring or a zero slot, where it does not (an X with an
            empty axis too, which no gather can read unpadded).
        flat_in_float: the axes are combined into the flat index in float and cast once.
        position_type: each axis' integer positions before they are combined.
        sample_type: the flat index within one sample; ``index_type``: across every sample
            (where the rows add their batch offsets).
        tiled: the channels-last copy is made in tiles of ``TILE`` pixels.
        interleaved: the coordinates are computed on the grid as it is, ``(N, O.., r)``, in
            elementwise regions that end in small integers and weights, each axis' weights
            kept apart (bfloat16-safe: ``_choose_interleaved``); else planar, axis by axis.
        merged: interleaved coordinates with the grid's last axis (and the short static axes
            before it) and its components on one axis, ``(N, O1.., Or*r)``
            (``Target.short_innermost``): the same values in the same order, with an
            innermost axis long enough to vectorize over.
        components_first: interleaved coordinates computed on the grid transposed once to
            ``(r, N, O1..Or)``, the points innermost (``choose_components_first``): where the
            grid is stored before it is read, that Transpose rounds nothing the runtime had
            not, and no Transpose of the coordinates' results follows.
        fenced: symbolic sizes on a target that keeps subgraphs' tails in float32
            (``Target.float32_bodies``): the lowering runs in the body of a Loop run once (its
            trip count X's size >= 0), a graph of its own whose ops the runtime keeps in
            float32 (``choose_fenced``).
        float32_kept: a target that may store bfloat16 keeps this node in float32 (the tail,
            or fenced): interleaved coordinates leave their regions whole, no ``hi + lo``.
        fraction: (interleaved linear rows) each axis' weights leave their region as one
            fraction per point, ``f = x - floor(x)`` as ``hi + lo``; each tap's weight,
            ``1 - f`` or ``f``, is made in the region that sums the taps.
        integer_indices: every index combined and bounded as an integer: no float flat index,
            each axis' positions clamped into the axis once cast (``Target.integer_indices``).
        positions_from_grid: with ``integer_indices`` and static sizes: every axis' final
            position (nearest) or floor and fraction (linear, cubic) computed at once on the
            grid as it is, ``(N, O.., r)``, in elementwise regions that end in exact integers
            (outside points: a power of two that puts the flat index past the sample) and
            fractions (bfloat16-safe).
        float_index: every index computed in float (exact), cast to ``index_type`` once at the
            gather (targets with ``float_index_math``).
        flat_points: the per-point tensors hold the output points on one axis, ``(N, T.., P)``,
            rather than ``(N, T.., O1..Or)`` (targets slow past ``max_fast_rank`` axes).
        flat_grid: merged interleaved coordinates of a grid whose last axis is short: the
            grid is reshaped to ``(N, 1.., P, r)`` first and Y back to ``(N, C, O..)`` last,
            so that every per-point tensor holds the points on its last axis
            (``_choose_flat_grid``).
        planes: the rows of one sample are gathered from X's planes ``(C, S)`` along its
            pixels, C values per tap: no channels-last copy, no final Transpose, and each tap's
            weight broadcast over the leading (channel) axis. Several samples (or an unknown
            batch): X moved to ``(C, N*S)``, or with ``in_place``
            (``costs.planes_in_place_pay``) every value of X read on one axis, each channel's
            index its own, ``(C, N, .., P)``.
        point_tiles: the grid's points are split into this many tiles, each lowered alone on
            the same X and the outputs concatenated (``point_tiles``), so that each tile's
            per-point tensors stay in cache between ops (``costs.point_tiles``); 1: one piece.
        tiles_from: symbolic points: an If takes the tiles only where a sample holds at least
            this many points, else one piece; 0: the tiles always (static points).
        empty: X has no values (a static 0 batch or channel): Y is X reshaped.
        reader: "" (the gathers above), or the target's own GridSample reads the taps
            (``native_taps``): "centres" (nearest at pixel centres) or "samples" (linear
            samples: reflection's folded coordinate, cubic's merged inner taps).
        refusal: why the target cannot take this node, or "".
    """

    taps: int
    gather: str
    sum: str
    ring: int
    per_point: bool
    masks: bool
    zero_slot: bool
    slot_by_pad: bool
    flat_in_float: bool
    position_type: ir.DataType
    sample_type: ir.DataType
    index_type: ir.DataType
    tiled: bool
    small_x: Plan | None = None
    interleaved: bool = False
    merged: bool = False
    components_first: bool = False
    fenced: bool = False
    float32_kept: bool = False
    fraction: bool = False
    integer_indices: bool = False
    positions_from_grid: bool = False
    float_index: bool = False
    planes: bool = False
    in_place: bool = False
    flat_points: bool = False
    flat_grid: bool = False
    point_tiles: int = 1
    tiles_from: int = 0
    empty: bool = False
    refusal: str = ""
    reader: str = ""
    why: dict[str, str] = dataclasses.field(default_factory=dict, compare=False, repr=False)

    @property
    def rows(self) -> bool:
        return self.gather == "rows"

    @property
    def masks_values(self) -> bool:
        """Whether masked points are zeroed once gathered (rather than read from a zero slot)."""
        return self.masks and not self.zero_slot

    def describe(self) -> str:
        """One line, as ``inspect`` shows it: ``rows + matmul, ring 1, int32 indices``."""
        if self.empty:
            return "reshape (empty X)"
        if self.reader == "centres":
            return "native nearest GridSample at pixel centres"
        if self.reader == "samples":
            return "native linear GridSample samples"
        parts = [self.gather if self.sum == "none" else f"{self.gather} + {self.sum}"]
        if self.ring:
            parts.append(f"ring {self.ring}")
        if self.planes:
            parts.append("from X's planes")
        if self.zero_slot:
            parts.append("zero slot")
        elif self.masks_values and self.sum != "none":
            parts.append("masked taps")
        if self.small_x is not None:
            other = f"ring {self.small_x.ring}" if self.small_x.ring else "zero slot"
            parts.append(f"else {other} (an If: X's size)")
        if self.flat_points or self.flat_grid:
            parts.append("points on one axis")
        if self.fenced:
            parts.append("in a float32 Loop")
        if self.point_tiles > 1:
            where = f" where a sample has {self.tiles_from}+ (an If)" if self.tiles_from else ""
            parts.append(f"points in {self.point_tiles} tiles{where}")
        index = f"{self.index_type.name.lower()} indices"
        parts.append(f"{index} computed in float" if self.float_index else index)
        return ", ".join(parts)


def node_plan(spec: GridSampleSpec, node: ir.Node, target: Target, tail: bool = False) -> Plan:
    """``plan_of`` a GridSample node, judged by its inputs' static shapes.

    ``tail``: the node lies in the runtime's float32 graph tail (``Target.float32_tail``).
    """
    shapes = [value.shape if value is not None else None for value in node.inputs[:2]]
    return plan_of(spec, *shapes, target, tail=tail, grid_from=grid_origin(node.inputs[1]))


def in_float32_tail(site: Site, target: Target) -> bool:
    """Whether ``lower`` plans ``site`` as in ``target``'s float32 tail (``plan_of``'s ``tail``).

    Its output reaches a model output through the tail's ops alone (main graph only).
    """
    return site.reaches_output_through(target.float32_tail)


def grid_origin(grid: ir.Value | None) -> str:
    """Where ``grid`` comes from, ``plan_of``'s ``grid_from``.

    "shapes", "stored", "computed" (by an elementwise op) or "input" (the graph's, or an
    outer scope's). Casts between floats are looked through: they change no value a stored
    float had not already lost (a float16 model's grid, cast to float16 and back to float32,
    is read as it was stored).
    """
    if _from_shapes(grid):
        return "shapes"
    source = _source(grid)
    if _stored(source):
        return "stored"
    return "input" if source is None or source.producer() is None else "computed"


def _from_shapes(value: ir.Value | None, most: int = 10_000) -> bool:
    """Whether ``value`` is made of constants and shapes alone: folded at static sizes.

    A runtime folds it once the model is reshaped to static sizes. False past ``most`` values.
    """
    if value is None:
        return False
    seen: set[int] = set()
    stack = [value]
    while stack:
        value = stack.pop()
        if value is None or id(value) in seen or value.const_value is not None:
            continue
        seen.add(id(value))
        producer = value.producer()
        if producer is None or len(seen) > most:  # an input, of the graph or an outer scope
            return False
        if producer.op_type not in ("Shape", "Size"):
            stack.extend(producer.inputs)
    return True


def _float_cast(node: ir.Node | None) -> bool:
    """Whether ``node`` is a standard Cast of a float value."""
    if node is None or node.op_type != "Cast" or node.domain not in ("", "ai.onnx"):
        return False
    source = node.inputs[0]
    return source is not None and source.dtype is not None and source.dtype.is_floating_point()


def _source(value: ir.Value | None) -> ir.Value | None:
    """``value`` before any Casts between floats."""
    while value is not None and _float_cast(value.producer()):
        value = value.producer().inputs[0]
    return value


def _stored(value: ir.Value | None) -> bool:
    """Whether ``value`` is made by an op whose output a fusing runtime stores.

    Not a graph's input (nor a value from an outer scope), nor an elementwise op's output,
    which would fuse with the ops reading it; a constant is stored.
    """
    producer = value.producer() if value is not None else None
    if producer is None:
        return value is not None and value.const_value is not None
    return producer.domain not in ("", "ai.onnx") or producer.op_type not in ELEMENTWISE


def plan_of(
    spec: GridSampleSpec,
    x_shape: Sequence | None,
    grid_shape: Sequence | None,
    target: Target,
    force: Mapping[str, object] | None = None,
    tail: bool = False,
    grid_from: str = "input",
) -> Plan:
    """Every choice for a node of ``spec`` with these shapes (ints where static) on ``target``.

    ``tail``: the node's output reaches a model output through the ops of the target's
    float32 graph tail alone (``Target.float32_tail``), where the runtime keeps it in float32.
    ``grid_from``: where the grid comes from: "stored", an op whose output the runtime stores
    (``_stored``); "shapes", constants and shapes alone (``_from_shapes``); "computed", an
    elementwise op that fuses with the coordinates' kernel; else "input" (the model's inputs).

    ``force`` (tests only) overrides the forms ``gather``, ``sum``, ``masks``, ``zero_slot``,
    ``tiled``, ``interleaved``, ``integer_indices`` or ``point_tiles`` before the choices that
    depend on them are made: every form can then be run on tiny shapes.
    """
    force = dict(force or {})
    given = costs.Sizes.of(spec.rank, x_shape, grid_shape)
    taps = TAPS_PER_AXIS[spec.mode] ** spec.rank
    why: dict[str, str] = {}
    rows, why["gather"] = _choose_gather(spec, given, taps, target)
    masked_taps, why["masks"] = _choose_masked_taps(spec, given, taps, target)
    if "masks" in force:
        masked_taps, why["masks"] = bool(force.pop("masks")), "forced"
    elif "gather" in force or "sum" in force:  # (a forced form is run as it is: with a ring)
        masked_taps, why["masks"] = False, "forced"
    if masked_taps and not target.reduced_storage:  # (GatherElements: masked before weighed)
        rows = False
    if "gather" in force:
        rows, why["gather"] = force.pop("gather") == "rows", "forced"
    ring, why["ring"] = _choose_ring(spec, rows, target)
    if masked_taps:
        ring, why["ring"] = 0, "the taps are masked once gathered: X is not padded"
    gathered = given.padded(ring)  # what the index types and the copy are judged by
    sample_type, index_type, why["index_type"] = _choose_index_types(gathered, rows, target)
    masks = spec.padding_mode == "zeros" and (spec.mode == "nearest" or masked_taps)
    zero_slot, why["zero_slot"] = _choose_zero_slot(spec, gathered, masks, rows, target)
    if masked_taps:
        zero_slot, why["zero_slot"] = False, "X is far larger than the taps: a Where masks them"
    if "zero_slot" in force:
        zero_slot, why["zero_slot"] = bool(force.pop("zero_slot")) and masks, "forced"
    per_point = ring > 0 and (not rows or target.offsets_at_gather)
    flat_in_float, why["flat_in_float"] = _choose_float_flat(spec, gathered, masks or per_point)
    position_type = sample_type
    if not flat_in_float and costs.positions_fit_int32(spec, gathered):
        position_type = INT32
        why["position_type"] = "int32's Cast, Clip and Mul run 3-5x faster than int64's"
    combine, why["sum"] = _choose_sum(spec, given, taps, target, rows, sample_type == INT64)
    if masked_taps and combine == "by_channel":
        combine, why["sum"] = "reduce_sum", "masked taps: one Where, one Mul, one ReduceSum"
    fenced, why["fenced"] = choose_fenced(given.symbolic, target, tail)
    kept = target.reduced_storage and (tail or fenced)
    if (
        rows
        and combine == "chain"
        and target.reduced_storage
        and costs.reduced_rows_pay(given, taps)
        and not (kept and costs.float32_chain_pays(given))
    ):
        combine, why["sum"] = (
            "reduce_sum",
            (
                f"{taps} taps: a chain this long is split in OpenVINO's kernels, its partial sums "
                "stored in bfloat16; one Gather, one ReduceSum"
            ),
        )
    # (not where only the reorder's perm runs fast: the tiles' perms are the slow ones)
    tiled = rows and target.tiled_copy and not target.reorder_transposes
    tiled = tiled and costs.tiled_pays(spec, gathered)
    if "sum" in force:
        combine, why["sum"] = str(force.pop("sum")), "forced"
    if "tiled" in force:
        tiled = rows and bool(force.pop("tiled"))
    interleaved, why["interleaved"] = _choose_interleaved(
        spec, target, tail, fenced, grid_from, given.symbolic
    )
    if "interleaved" in force:
        interleaved, why["interleaved"] = bool(force.pop("interleaved")), "forced"
    integer_indices, why["integer_indices"] = _choose_integer_indices(target)
    if "integer_indices" in force:
        integer_indices, why["integer_indices"] = bool(force.pop("integer_indices")), "forced"
    from_grid, why["positions_from_grid"] = _choose_positions_from_grid(
        spec, gathered, integer_indices and not interleaved
    )
    if "positions_from_grid" in force:
        from_grid, why["positions_from_grid"] = bool(force.pop("positions_from_grid")), "forced"
    small_x = _small_x(
        spec, x_shape, grid_shape, target, given, masked_taps, masks and not (zero_slot or rows),
        tail=tail, grid_from=grid_from,
    )  # fmt: skip
    merged, why["merged"] = choose_merged(
        interleaved or from_grid, given.symbolic, target, tail, grid_from
    )
    if "merged" in force:
        merged, why["merged"] = bool(force.pop("merged")) and (interleaved or from_grid), "forced"
    first, why["components_first"] = choose_components_first(
        interleaved or from_grid, target, tail, grid_from, grid_shape
    )
    if "components_first" in force:
        first, why["components_first"] = bool(force.pop("components_first")), "forced"
        first = first and (interleaved or from_grid)
    if first:
        merged, why["merged"] = False, "the components first: the points innermost already"
    if (interleaved or integer_indices) and flat_in_float:  # (it would be stored in bfloat16)
        flat_in_float, why["flat_in_float"] = False, "float tensors may be bfloat16: integers"
        if costs.positions_fit_int32(spec, gathered):
            position_type = INT32
    fraction, why["fraction"] = _choose_fraction(
        spec, interleaved, rows, ring, combine, masked_taps
    )
    if "fraction" in force:
        fraction, why["fraction"] = bool(force.pop("fraction")), "forced"
        chosen = _choose_fraction(spec, interleaved, rows, ring, combine, masked_taps)
        fraction = fraction and chosen[0]
    reader, why["reader"] = _choose_reader(spec, given, target)
    if "reader" in force:
        reader, why["reader"] = str(force.pop("reader")), "forced"
    float_index, why["float_index"] = _choose_float_index(spec, x_shape, rows, target)
    planes, why["planes"] = _choose_planes(spec, gathered, taps, rows, combine, target)
    if "planes" in force:
        planes, why["planes"] = bool(force.pop("planes")) and rows, "forced"
        several = target.slow_transpose and given.batch != 0
        planes = planes and combine in PLANE_SUMS and (given.batch == 1 or bool(several))
    tiled = tiled and not planes
    in_place = planes and given.batch != 1 and costs.planes_in_place_pay(gathered, taps)
    if in_place:  # every value of X on one axis (``gathers``)
        why["in_place"] = "each channel's indices cost less than moving X"
        _, index_type, why["index_type"] = _choose_index_types(gathered, rows, target, whole=True)
    flat_points, why["flat_points"] = _choose_flat_points(
        spec, given, grid_shape, target, interleaved or from_grid
    )
    flat_grid, why["flat_grid"] = _choose_flat_grid(spec, grid_shape, target, merged)
    (tiles, tiles_from), why["point_tiles"] = costs.point_tiles(given, taps, target)
    if "point_tiles" in force:  # (symbolic points: behind an If as the target would put them)
        tiles, why["point_tiles"] = int(force.pop("point_tiles")), "forced"
        tiles = min(tiles, given.points) if given.points else tiles
        tiles_from = costs.tiling(taps)[0] if tiles > 1 and given.points is None else 0
    if force or combine not in SUMS[rows, spec.mode == "nearest"]:
        raise ValueError(f"cannot force {force or combine!r} with {'rows' if rows else 'elements'}")
    refusal = int32_overflow(spec, given.dims, target, rows=rows, ring=ring, whole=in_place)
    if target.reads_only and not reader and not refusal:
        refusal = f"the {target.name} target reads only through its GridSample: {why['reader']}"
    return Plan(
        taps=taps,
        gather="rows" if rows else "elements",
        sum=combine,
        ring=ring,
        per_point=per_point,
        masks=masks,
        small_x=small_x,
        zero_slot=zero_slot,
        slot_by_pad=spec.x_dtype in PAD_TYPES and target.allows("Pad"),
        flat_in_float=flat_in_float,
        position_type=position_type,
        sample_type=sample_type,
        index_type=index_type,
        tiled=tiled,
        float_index=float_index,
        planes=planes,
        flat_points=flat_points,
        flat_grid=flat_grid,
        point_tiles=tiles,
        tiles_from=tiles_from,
        empty=given.batch == 0 or given.channels == 0,
        refusal=refusal,
        in_place=in_place,
        interleaved=interleaved,
        merged=merged,
        components_first=first,
        fenced=fenced,
        float32_kept=kept,
        fraction=fraction,
        integer_indices=integer_indices,
        positions_from_grid=from_grid,
        reader=reader,
        why=why,
    )


def _choose_gather(
    spec: GridSampleSpec, sizes: costs.Sizes, taps: int, target: Target
) -> tuple[bool, str]:
    """Rows (True) or GatherElements, and why. Judged by X's own sizes, before any ring."""
    if not target.allows("GatherElements"):
        return True, f"the {target.name} target has no GatherElements"
    if target.elements_max_channels:
        if _few_channels_unpadded(spec, sizes, target):
            return False, f"{sizes.channels} channels of X read unpadded: GatherElements"
        if spec.mode == "nearest":
            return True, f"nearest: the {target.name} target reads rows of X unpadded"
        channels = sizes.channels if sizes.channels is not None else "an unknown count of"
        return True, f"{channels} channels, over {target.elements_max_channels}: rows"
    if int32_overflow(spec, sizes.dims, target, rows=True):
        return False, "the rows' indices, which span every sample, would pass int32"
    if sizes.batch is None and not target.allows("Range"):
        return False, f"a symbolic batch's row offsets need Range (not on the {target.name} target)"
    if costs.rows_pay(sizes, taps, target):
        return True, f"{sizes.channels} channels: contiguous rows beat one value per tap"
    return False, "few channels, or too few points to pay for a channels-last copy of X"


def _few_channels_unpadded(spec: GridSampleSpec, sizes: costs.Sizes, target: Target) -> bool:
    """Whether linear or cubic taps of few channels are read unpadded by GatherElements.

    ``Target.elements_max_channels``; zeros padding's outside taps are masked once gathered.
    """
    channels, most = sizes.channels, target.elements_max_channels
    return spec.mode != "nearest" and channels is not None and channels <= most


def _choose_reader(spec: GridSampleSpec, sizes: costs.Sizes, target: Target) -> tuple[str, str]:
    """Whether the target's own GridSample reads the taps (``native_taps``), and why (not)."""
    ranks = target.centre_reader_ranks | target.sample_reader_ranks
    if not ranks:
        return "", ""
    if spec.rank not in ranks:
        return "", f"rank {spec.rank}: its GridSample reads ranks {sorted(ranks)} only"
    x_type = spec.x_dtype.name.lower()
    if spec.x_dtype not in (ir.DataType.FLOAT, ir.DataType.DOUBLE):
        return "", f"{x_type} X: its GridSample reads float32 or float64 X"
    if compute_dtype(spec) != spec.x_dtype:
        grid_type = spec.grid_dtype.name.lower()
        return "", f"a {grid_type} grid on {x_type} X: its GridSample would sample in {x_type}"
    if spec.grid_dtype != spec.x_dtype and not target.allows("Cast"):
        return "", "a grid of another type than X would need a Cast"
    if any(d is None for d in sizes.dims[2:]):
        return "", "symbolic spatial sizes: the readers' pixel centres are constants"
    channels = sizes.channels
    rows = target.allows("Gather") and spec.mode == "cubic" and channels is not None
    if rows and channels > costs.READER_CUBIC_MAX_CHANNELS:
        return "", f"{channels} channels: row Gathers beat 9-16 reads of every channel"
    folds = spec.mode == "cubic" or (spec.mode == "linear" and spec.padding_mode == "reflection")
    small = max(sizes.dims[2:]) <= costs.SAMPLES_MAX_SIZE
    if folds and spec.rank in target.sample_reader_ranks and small:
        return "samples", "its linear kernel is right: cubic 3 samples an axis, reflection folded"
    if spec.rank in target.centre_reader_ranks:
        return "centres", "its nearest kernel reads each tap exactly at its pixel centre"
    return "", f"rank {spec.rank}: its GridSample reads no {spec.mode} samples there"


def _choose_sum(
    spec: GridSampleSpec, sizes: costs.Sizes, taps: int, target: Target, rows: bool, int64: bool
) -> tuple[str, str]:
    """How the weighted taps are summed, and why (judged by X's own sizes)."""
    if spec.mode == "nearest":
        return "none", "one tap: the values are moved, never computed"
    if rows and costs.matmul_pays(sizes, taps, target):
        return "matmul", f"{taps} taps x {sizes.channels} channels: one batched MatMul"
    if rows and costs.scaled_pays(sizes, taps, target):
        return "scaled", f"{taps} taps: one BatchNormalization scales every row"
    if rows:
        return "chain", "one Gather per tap, weighted and summed by a chain of Adds"
    if costs.by_channel_pays(sizes, taps, target, int64):
        return "by_channel", "each channel's taps summed by a MatMul with ones"
    return "reduce_sum", "every tap of every channel in one GatherElements, one ReduceSum"


def _choose_masked_taps(
    spec: GridSampleSpec, sizes: costs.Sizes, taps: int, target: Target
) -> tuple[bool, str]:
    """Whether zeros padding masks linear or cubic taps once gathered, and why (not).

    Exact as the ring is (an outside tap adds 0, whatever pixel it was clamped to), without
    padding X: where X is far larger than what the taps read (``costs.masked_taps_pay``).
    """
    if spec.mode == "nearest" or spec.padding_mode != "zeros" or not ring_width(spec, False):
        return False, ""
    if target.elements_max_channels:  # X never padded: masked or read as rows with a zero row
        if _few_channels_unpadded(spec, sizes, target):
            return True, f"{sizes.channels} channels of X read unpadded by GatherElements"
        return False, ""
    if target.reduced_storage:  # (interleaved: its rows or planes are masked once gathered)
        able = target.allows("Where")
    else:
        forms = all(map(target.allows, ("GatherElements", "Where", "Pad")))
        able = forms and not (target.float_index_math or target.slow_where)
    if not able:
        return False, ""
    ratio = costs.MASKED_TAPS_MIN_RATIO
    if costs.masked_taps_pay(sizes, taps, target.unknown_x != "padded"):
        if sizes.spatial is None and target.unknown_x == "masked":
            return True, f"X of unknown size: the {target.name} target's If would copy it"
        if sizes.spatial is None:
            return True, f"X of unknown size: where it holds {ratio}x the taps' values at run time"
        return True, f"X holds {ratio}x the values the taps read or more: a ring would copy it"
    return False, "X padded by a ring of zeros: its copy costs less than masking every tap"


def _small_x(
    spec,
    x_shape,
    grid_shape,
    target: Target,
    given: costs.Sizes,
    masked_taps: bool,
    masked_values: bool,
    **where: Any,
) -> Plan | None:
    """The plan for an X that proves small at run time (``Plan.small_x``), or None.

    Where taps or values are masked once gathered from an X of unknown size: the same node,
    its taps read from X padded by a ring, or its values from a zero slot appended to X.
    ``where``: ``plan_of``'s ``tail`` and ``grid_from``, as the node's.
    """
    if given.spatial is not None or target.unknown_x != "if":
        return None
    if masked_taps:
        return plan_of(spec, x_shape, grid_shape, target, force={"masks": False}, **where)
    if masked_values and spec.mode == "nearest":
        return plan_of(spec, x_shape, grid_shape, target, force={"zero_slot": True}, **where)
    return None


def _choose_ring(spec: GridSampleSpec, rows: bool, target: Target) -> tuple[int, str]:
    ring = ring_width(spec, rows and not target.offsets_at_gather)
    if ring and not target.allows("Pad"):  # (an infinite pixel beside a masked tap: NaN)
        return 0, f"no Pad on the {target.name} target (it defeats the gather): weights masked"
    if ring and rows and target.offsets_at_gather:
        return ring, "zeros padding: a ring as wide as the kernel, one index per point"
    if ring:
        return ring, "zeros padding: outside taps read zeros, exact beside infinite pixels"
    if spec.mode != "nearest" and spec.padding_mode == "zeros":
        return 0, f"no Pad for {spec.x_dtype.name.lower()}: the weights are masked"
    return 0, ""


def _choose_interleaved(
    spec: GridSampleSpec,
    target: Target,
    tail: bool,
    fenced: bool,
    grid_from: str,
    symbolic: bool,
) -> tuple[bool, str]:
    """Whether the coordinates are computed on the grid as it is (bfloat16-safe), and why.

    OpenVINO's CPU plugin, at its default precision on CPUs with bfloat16, stores every float
    tensor between its kernels in bfloat16 upstream of a Conv or MatMul (8 bits: a coordinate
    of 37.4 to 0.25, integers exact to 256), while its fused elementwise kernels compute in
    float32. The interleaved form keeps the coordinates inside such kernels: from the grid,
    which it reads in float32 only into an elementwise kernel, to small integers and weights;
    each axis' weights multiply the taps apart. It costs onnxruntime 1.38x (geomean over
    bench/run.py's shapes; up to 4.5x for 3-D linear: ops on interleaved values, the weights'
    hi + lo and a Mul per axis on every gathered value), so only the openvino target takes it.
    Where the runtime keeps float32 (``Plan.float32_kept``) they buy nothing: planar in a
    fenced Loop's body, where OpenVINO runs symbolic sizes op by op and the interleaved
    values' innermost axis is the grid's r components (a 1x3x224x224 linear GridSample before
    a Conv, as exported: 3.7 -> 1.8x native, cubic 9.6 -> 2.9, nearest 2.8 -> 1.3); in the
    tail where ``costs.planar_tail_pays``.
    """
    if not target.reduced_storage:
        return False, ""
    if fenced and grid_from in ("computed", "input"):
        return False, "in a Loop's body, kept in float32 and run op by op: planar"
    if tail and costs.planar_tail_pays(spec, symbolic):
        return False, "on a path to the model's output that its runtime keeps in float32: planar"
    if tail:
        return True, "kept in float32 on a path to the model's output: whole, faster than planar"
    if fenced and grid_from == "shapes":
        return True, "in a Loop's body, whole; a grid of shapes (planar: OpenVINO fails static)"
    if fenced:
        return True, "in a Loop's body, whole; a stored grid, its components first"
    return True, f"the {target.name} target's runtime may store float tensors in bfloat16"


def choose_merged(
    on_grid: bool, symbolic: bool, target: Target, tail: bool, grid_from: str
) -> tuple[bool, str]:
    """Whether interleaved coordinates take the grid's last axis and components as one.

    OpenVINO runs a model of symbolic sizes op by op, each elementwise kernel looping over the
    innermost axis alone: 18 ms for six ops on a 2x480x640x2 grid, 1.6 ms on (2, 480, 1280);
    kornia's warp_perspective as exported 4.2 -> 1.5x the original, the STN 2.9 -> 1.3. Only
    for symbolic sizes (static ones run fused, either form alike), and only where the grid
    is stored before it is read (made by a Conv, a move, ..., or in the float32 tail): the
    Reshape that merges the axes is stored too, in bfloat16 at OpenVINO's default precision,
    which would round a grid its kernel reads in float32 (0.15 against native's 0.007). A
    grid of constants and shapes alone too, which OpenVINO folds once sizes are static either
    way (RAFT's lookups of (N, 7, 7, 2) points as exported: 0.74-0.79x the time planar, each
    op 6.5 ns a value over the grid's last axis of 2; merged in an If's branch, OpenVINO
    2026.4 failed to compile the first, reshaped to static sizes: the openvino target has no
    If now, ``Target.unknown_x``).
    """
    if not (on_grid and target.short_innermost):
        return False, ""
    if not symbolic:
        return False, "static sizes: fused kernels run either form alike"
    if grid_from == "shapes":
        return True, "a grid of constants and shapes, run op by op until sizes are static"
    if grid_from != "stored" and not tail:
        return False, "the grid may be read in float32 only by the coordinates' own kernel"
    return True, f"{target.name} runs each elementwise op of symbolic sizes over its last axis"


def choose_components_first(
    on_grid: bool, target: Target, tail: bool, grid_from: str, grid_shape
) -> tuple[bool, str]:
    """Whether interleaved coordinates are computed on the grid transposed to ``(r, N, O..)``.

    The interleaved regions read the grid as it is (``(N, O.., r)``) so that a grid OpenVINO
    would otherwise read in float32 is not stored first, in bfloat16 at its default precision;
    each of their results is then transposed to planar (the STN at 480x640, static: four
    Transposes, 1.1 of the lowered GridSample's 5.9 ms; native 1.1). A grid stored before it is
    read (``grid_from`` "stored": AffineGrid, a move, a Conv), or in the float32 tail, loses
    nothing by one Transpose first, and every region then runs with the points innermost,
    which OpenVINO's kernels of symbolic sizes need too (``merged``). Not for a grid of
    constants and shapes (folded once sizes are static: ``choose_merged``), nor one whose last
    axis is static and short (its points would be innermost but few: ``merged`` instead).
    """
    if not (on_grid and target.short_innermost):
        return False, ""
    if grid_from == "shapes":
        return False, "a grid of constants and shapes: folded once the sizes are static"
    if grid_from != "stored" and not tail:
        return False, "the grid may be read in float32 only by the coordinates' own kernel"
    last = grid_shape[-2] if grid_shape is not None and len(grid_shape) > 2 else None
    if isinstance(last, int) and last < target.short_innermost:
        return False, f"its last axis, {last} points, would be innermost: too short"
    return True, "a stored grid: one Transpose first, none after the coordinates"


def choose_fenced(symbolic: bool, target: Target, tail: bool) -> tuple[bool, str]:
    """Whether the lowering runs in the body of a Loop run once, kept in float32 so.

    OpenVINO runs symbolic sizes op by op, each value stored in bfloat16 at its default
    precision, except in a graph's tail, which it keeps in float32: the Loop's body is a graph
    of its own, all tail. The TorchScript STN as exported erred by 0.34 (native 0.15), 0.16
    fenced; a Deformable DETR's attention 0.021 (native 0.002), 0.002 fenced. A grid read
    straight from the model's inputs enters the Loop in float32 (OpenVINO 2026.4): fenced,
    GridSample -> Conv errs as native does (nearest 0.0066 where it erred 2.75 unfenced at
    20x300, 3.7-4.2 with border or reflection at 32x40; linear and cubic equal to native).
    """
    if not target.float32_bodies:
        return False, ""
    if not symbolic:
        return False, "static sizes: fused kernels keep the coordinates in float32"
    if tail:
        return False, "in the float32 tail: kept in float32 already"
    return True, f"{target.name} runs symbolic sizes op by op, storing bfloat16 by default"


def _choose_flat_points(
    spec: GridSampleSpec, given: costs.Sizes, grid_shape, target: Target, on_grid: bool
) -> tuple[bool, str]:
    """Whether per-point tensors hold the output points on one axis, ``(N, T.., P)``.

    Targets slow past ``max_fast_rank`` axes (the grid's components are then gathered from
    ``(N, P, r)``: ``Target.grid_by_gather``); and planar coordinates of symbolic sizes where
    the output's last axis is static and short (``Target.short_innermost``): GLM-4V's cubic
    position embedding, a grid of one column, (N, P, 1, 2), ran 2.9x the original as
    exported on OpenVINO with (N, 4, 4, P, 1) tensors, 1.2 on (N, 4, 4, P).
    """
    axes = 1 + 2 * spec.rank
    if target.grid_by_gather and 0 < target.max_fast_rank < axes:
        return True, f"(N, T.., O..) has {axes} axes: past {target.name}'s fast kernels"
    if on_grid or not target.short_innermost or spec.rank < 2 or not given.symbolic:
        return False, ""
    return _short_last_axis(grid_shape, target)


def _choose_flat_grid(
    spec: GridSampleSpec, grid_shape, target: Target, merged: bool
) -> tuple[bool, str]:
    """Whether merged interleaved coordinates are computed on the grid as ``(N, 1.., P, r)``.

    The interleaved regions keep the grid's point axes in every per-point tensor: RAFT's
    lookups, a grid of (N, 7, 7, 2), ran their taps' inside tests and products on
    (N, 1, 2, 2, 7, 7) as exported on OpenVINO, op by op over an innermost axis of 7 at
    5-9 ns a value. On the grid reshaped to (N, 1, 49, 2), and Y back, RAFT's TorchScript
    export ran 0.74-0.87x the time as exported (paired), 1.29-1.35 of the original where it
    had run 1.56-1.62; kornia's warp_affine3d, (N, 12, 16, 20, 3): 0.77-0.85x (static sizes
    0.71-0.80x). Only where the coordinates are
    ``merged``: symbolic sizes (static ones run fused), and a grid whose Reshape rounds
    nothing at OpenVINO's default precision (stored before it is read, of constants and
    shapes, or in the float32 tail). Not where a point axis is symbolic: RT-DETR's decoder,
    (N, Q, 4, 2), ran 0.94-1.22x (its Reshape's sizes computed at run time).
    """
    if not merged or spec.rank < 2 or grid_shape is None:
        return False, ""
    points = grid_shape[1:-1]
    if not all(isinstance(d, int) for d in points):
        return False, "a point axis is symbolic: the Reshape's sizes cost more than it saves"
    if all(d == 1 for d in points[:-1]):
        return False, "the points are on one axis already"
    return _short_last_axis(grid_shape, target)


def _short_last_axis(grid_shape, target: Target) -> tuple[bool, str]:
    """Whether the output's last axis is static and shorter than the target's kernels need."""
    last = grid_shape[-2] if grid_shape is not None else None
    if isinstance(last, int) and last < target.short_innermost:
        return True, f"its last axis, {last} points, runs near scalar on {target.name}"
    return False, ""


def _choose_fraction(
    spec: GridSampleSpec, interleaved: bool, rows: bool, ring: int, combine: str, masked: bool
) -> tuple[bool, str]:
    """Whether linear's interleaved weights leave their region as one fraction an axis.

    A linear tap weighs ``1 - f`` or ``f``: one ``(hi, lo)`` pair an axis instead of one a
    tap halves the weights' region, which OpenVINO evaluates once per output value (its
    broadcast taps and hi/lo included), and its rearranging; the sum's region then takes 4
    weight inputs for 2-D rather than 8, under the about 11 inputs past which OpenVINO splits
    it and stores partial sums. Not where zeros padding masks the weights (no ring).
    """
    summed = combine in ("chain", "reduce_sum")
    if not (interleaved and rows and spec.mode == "linear" and summed):
        return False, ""
    if spec.padding_mode == "zeros" and not ring and not masked:
        return False, "zeros padding without a ring masks each tap's weight"
    return True, "each axis' fraction (hi + lo if bfloat16): 1 - f and f made where summed"


def _choose_integer_indices(target: Target) -> tuple[bool, str]:
    """Whether every index is combined and bounded as an integer (no float flat index), and why.

    A runtime that stores float tensors between its kernels in bfloat16 (OpenVINO's CPU default)
    keeps integers exact only up to 256: a float flat index, or a position clamped in float, may
    then fail the gather or read another row. Integer Cast, Mul and Add cost onnxruntime no more
    than the float ones (bench/generic_forms.py).
    """
    if target.integer_indices:
        return True, f"the {target.name} target's runtime may store floats in bfloat16"
    return False, ""


def _choose_positions_from_grid(
    spec: GridSampleSpec, sizes: costs.Sizes, integer_indices: bool
) -> tuple[bool, str]:
    """Whether the coordinates are computed on the grid as it is, ending in exact integers.

    A runtime that stores float tensors in bfloat16 reads the grid in float32 only into an
    elementwise kernel, and rounds what a kernel stores to 8 bits (OpenVINO: a coordinate of
    37.4 to 0.25 once the grid is transposed): one region from the grid to nearest's final
    positions stores only integers, exact up to 256 (larger axes leave as 256 hi + lo); static
    sizes: an outside point's position is a power of two putting its flat index past the
    sample. Linear and cubic: regions end in the floors (past 256, with the ring or twice the
    axis for reflection, as 256 hi + lo) and in the fractions, whose rounding to bfloat16
    costs the weights 2**-10 (``sampling._floors``).
    """
    if not integer_indices:
        return False, ""
    dims = sizes.dims[2:]
    if any(d is None for d in dims):
        return False, "symbolic sizes: the outside points' positions are constants"
    if spec.mode != "nearest":
        return True, "elementwise regions from the grid to the floors and the fractions"
    if 2 * sizes.spatial >= INT32_LIMIT:
        return False, "past 2**30 pixels: the outside points' flat index would pass int32"
    return True, "one elementwise region from the grid to exact integer positions"


def _choose_index_types(
    sizes: costs.Sizes, rows: bool, target: Target, whole: bool = False
) -> tuple[ir.DataType, ir.DataType, str]:
    """The flat index's type within a sample and across samples (rows), and why.

    ``whole``: the rows read every value of X flattened (several samples' planes).
    """
    if target.index_dtype is not None:
        return target.index_dtype, target.index_dtype, f"the {target.name} target's"
    sample = sizes.spatial
    largest = sample
    if rows:
        per_sample = sizes.channels if whole else 1
        factors = (sample, sizes.batch, per_sample)
        largest = math.prod(factors) if None not in factors else None
    sample_type = INT32 if sample is not None and sample < INT32_LIMIT else INT64
    index_type = INT32 if largest is not None and largest < INT32_LIMIT else INT64
    return sample_type, index_type, "int32 where the sizes are static and below 2**31"


def _choose_zero_slot(
    spec: GridSampleSpec, sizes: costs.Sizes, masks: bool, rows: bool, target: Target
) -> tuple[bool, str]:
    """Whether masked points read a zero appended to X rather than being zeroed once gathered.

    Appending copies X, while onnxruntime's Where costs about 4 copies per element: with
    GatherElements the slot pays while X is at most SLOT_MAX_RATIO times the points, unknown
    sizes counting as one point per pixel (symbolic 1x3x224x224: 0.37 -> 0.28 of native).
    Rows are masked after the gather: appending a row would copy the channels-last copy again.
    Types onnxruntime's Where lacks always read the slot.
    """
    if not masks:
        return False, ""
    if spec.x_dtype not in WHERE_TYPES:
        return True, f"onnxruntime's Where has no {spec.x_dtype.name.lower()}"
    if not target.allows("Pad"):
        return False, f"the {target.name} target appends nothing to X: a Where masks the values"
    if target.slow_where:
        return True, f"the {target.name} target's Where costs more than a copy of X"
    if rows:
        return False, "appending a row would copy the channels-last copy again"
    if sizes.spatial is None and sizes.points is not None and target.unknown_x != "padded":
        ratio = SLOT_MAX_RATIO
        return (
            False,
            f"X of unknown size: a Where where it is over {ratio}x the points, at run time",
        )
    if sizes.spatial is None or sizes.points is None:
        return True, "unknown sizes count as one point per pixel"
    if sizes.spatial <= SLOT_MAX_RATIO * sizes.points:
        return True, f"X is at most {SLOT_MAX_RATIO}x the points: a copy beats a Where"
    return False, f"X is over {SLOT_MAX_RATIO}x the points: a Where beats a copy"


def _choose_float_index(
    spec: GridSampleSpec, x_shape: Sequence | None, rows: bool, target: Target
) -> tuple[bool, str]:
    """Whether every index is computed in float and cast once (``Target.float_index_math``).

    Exact while the largest index (the zero slot past the data) is below FLOAT_INDEX_LIMIT;
    symbolic sizes, float64 coordinates and larger X take the integer path.
    """
    if not target.float_index_math:
        return False, ""
    if compute_dtype(spec) != ir.DataType.FLOAT:
        return False, "float64 coordinates: the integer path"
    largest = largest_index(spec, x_shape, rows=rows)
    if rows and (x_shape is None or not isinstance(x_shape[0], int)):
        largest = None  # the rows' indices span every sample
    if largest is None or largest >= FLOAT_INDEX_LIMIT:
        return False, "sizes symbolic or past 2**24: float32 would not be exact"
    return True, f"the {target.name} target's integer ops are slow; float32 is exact below 2**24"


def _choose_planes(
    spec: GridSampleSpec,
    sizes: costs.Sizes,
    taps: int,
    rows: bool,
    combine: str,
    target: Target,
) -> tuple[bool, str]:
    """Whether one sample's rows are gathered from X's planes along its pixels (``Plan.planes``).

    Where the target broadcasts a per-point weight over a short innermost axis slowly
    (``Target.slow_inner_broadcast``), a sample of few channels (``costs.planes_pay``) gathers
    C values per tap from ``(C, S)`` and weighs them broadcast over the leading axis; where its
    transposes are slow (``Target.slow_transpose``), a sample whose copy of X and transposed
    output cost more than its taps, whatever its channels. ``sizes``: X padded by its ring.
    """
    wanted = target.slow_inner_broadcast or target.slow_transpose
    sums = PLANE_SUMS if target.slow_transpose else ("chain", "none")
    if not (rows and wanted) or combine not in sums:
        return False, ""
    if sizes.batch != 1 and not (target.slow_transpose and sizes.batch != 0):
        return False, "more than one sample (or unknown): the rows span every sample"
    if not costs.planes_pay(sizes, taps, target):
        return False, f"{sizes.channels} channels: contiguous rows gather them faster"
    if target.slow_transpose and sizes.channels >= costs.PLANES_MAX_CHANNELS and taps > 1:
        why = f"X's {sizes.spatial} pixels outweigh {taps} taps x {sizes.points} points"
        return True, f"{why}: no copy of X, no transposed output"
    if sizes.batch != 1:
        count = "several" if sizes.batch is None else f"{sizes.batch}"
        return True, f"{count} samples' planes: no channels-last copy, no transposed output"
    return True, f"{sizes.channels} channels of one sample: no copy of X, no transposed output"


def _choose_float_flat(
    spec: GridSampleSpec, sizes: costs.Sizes, one_per_point: bool
) -> tuple[bool, str]:
    """Whether the axes are combined in float and cast once (one index per point, exact)."""
    sample = sizes.spatial
    bits = 24 if compute_dtype(spec) == ir.DataType.FLOAT else 53
    if one_per_point and sample is not None and sample <= 2**bits:
        return True, f"one index per point, exact below 2**{bits}: one cast"
    return False, "each axis cast, combined in integers"
