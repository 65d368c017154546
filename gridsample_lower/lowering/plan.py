"""Every strategy choice for one GridSample node, made before anything is emitted.

``plan_of`` reads only the spec, X's and the grid's static shapes and the target, and returns
a ``Plan``: which gather (GatherElements or channels-last rows), which sum of the taps, the ring
of zeros, the zero slot, the index types, the channels-last copy's form, each with the reason
it was chosen. The rule's check builds it, so every refusal is decided there; the emitters in
``sampling``, ``flat_index`` and ``gathers`` only carry it out.

Shapes are judged twice, explicitly: as given (the gather and sum forms, whose thresholds were
measured on X's own sizes) and as gathered, X padded by the ring (the index types and the copy).
Unknown sizes count as one point per pixel, a symbolic batch as one sample.
The thresholds come from ``bench/run.py`` timed against onnxruntime's kernel; ``CHOICES`` says
what each choice does and when, and README's table of strategies is generated from it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

import onnx_ir as ir

from gridsample_lower.lowering.coords import bounds_coordinate
from gridsample_lower.lowering.index_range import INT32_LIMIT, int32_overflow, ring_width
from gridsample_lower.lowering.spec import GridSampleSpec, compute_dtype
from gridsample_lower.lowering.targets import Target

__all__ = ["Plan", "node_plan", "plan_of"]

INT32, INT64 = ir.DataType.INT32, ir.DataType.INT64
ROWS_MIN_CHANNELS = 33  # from here on, gathering channels-last rows beats GatherElements...
ROWS_MAX_ELEMENTS = 2**18  # ...while X stays cache-sized (1 MB of float32)
SCALED_MIN_CHANNELS = 24  # rows scaled all at once win from here...
SCALED_FULL_COPY_CHANNELS = 32  # ...from here even where X has as many values as the taps...
SCALED_MAX_VALUES = 2**21  # ...below ROWS_MIN_CHANNELS while they gather at most this many
TILE = 128  # pixels per tile of the channels-last copy, where a plain Transpose thrashes...
ALIASED_BYTES = 2048  # ...as it does where a channel's pixels take a multiple of this...
TILED_MAX_VALUES = 2**20  # ...up to this many values per sample
MATMUL_MIN_TAPS = 8  # with this many taps (3-D linear, cubic), rows are summed by one MatMul...
MATMUL_MIN_VALUES = 256  # ...once channels x taps reach this
TAPS_MAX_VALUES = 2**25  # one Gather of every tap (scaled, MatMul) holds at most this many values
BY_CHANNEL_MAX_CHANNELS = 16  # up to this many channels with 8+ taps are gathered one by one...
BY_CHANNEL_MIN_VALUES = 2**21  # ...and any of GatherElements' few once it gathers this many...
BY_CHANNEL_WIDE_CHANNELS = 4  # ...and up to this many whose indices are int64
SLOT_MAX_RATIO = 4  # a zero slot appended to X pays while X is at most this many times the points
TAPS_PER_AXIS = {"nearest": 1, "linear": 2, "cubic": 4}

# Types onnxruntime's Where takes: gathered values can be masked; for the others (int8, int16,
# uint16, uint32, uint64, bool, bfloat16) a zero is appended to X. (int8 and uint32 only from
# onnxruntime 1.31 on.)
WHERE_TYPES = frozenset(
    {
        ir.DataType.FLOAT,
        ir.DataType.DOUBLE,
        ir.DataType.FLOAT16,
        ir.DataType.UINT8,
        ir.DataType.INT32,
        ir.DataType.INT64,
        ir.DataType.STRING,
    }
)
# Types onnxruntime's Pad takes: a zero slot appended by Pad needs no zeros tensor built first.
# (float16 runs there only between two Casts that onnxruntime inserts: three copies of X.)
PAD_TYPES = frozenset(
    {
        ir.DataType.FLOAT,
        ir.DataType.DOUBLE,
        ir.DataType.INT8,
        ir.DataType.UINT8,
        ir.DataType.INT32,
        ir.DataType.UINT32,
        ir.DataType.INT64,
        ir.DataType.UINT64,
        ir.DataType.BOOL,
    }
)

Dims = tuple[int | None, ...]
# The sums each gather can carry out: (rows, nearest) -> forms.
SUMS = {
    (False, False): ("reduce_sum", "by_channel"),
    (True, False): ("chain", "scaled", "matmul"),
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
            the kernel).
        masks: points outside X are masked (nearest, zeros); they read a zero appended to X
            (``zero_slot``; by Pad where ``slot_by_pad``, else Concat), else are zeroed once
            gathered.
        flat_in_float: the axes are combined into the flat index in float and cast once.
        position_type: each axis' integer positions before they are combined.
        sample_type: the flat index within one sample; ``index_type``: across every sample
            (where the rows add their batch offsets).
        tiled: the channels-last copy is made in tiles of ``TILE`` pixels.
        empty: X has no values (a static 0 batch or channel): Y is X reshaped.
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
    empty: bool = False
    refusal: str = ""
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
        parts = [self.gather if self.sum == "none" else f"{self.gather} + {self.sum}"]
        if self.ring:
            parts.append(f"ring {self.ring}")
        if self.zero_slot:
            parts.append("zero slot")
        parts.append(f"{self.index_type.name.lower()} indices")
        return ", ".join(parts)


def node_plan(spec: GridSampleSpec, node: ir.Node, target: Target) -> Plan:
    """``plan_of`` a GridSample node, judged by its inputs' static shapes."""
    shapes = [value.shape if value is not None else None for value in node.inputs[:2]]
    return plan_of(spec, *shapes, target)


def plan_of(
    spec: GridSampleSpec,
    x_shape: Sequence | None,
    grid_shape: Sequence | None,
    target: Target,
    force: Mapping[str, object] | None = None,
) -> Plan:
    """Every choice for a node of ``spec`` with these shapes (ints where static) on ``target``.

    ``force`` (tests only) overrides the forms ``gather``, ``sum``, ``zero_slot`` or ``tiled``
    before the choices that depend on them are made: every form can then be run on tiny shapes.
    """
    force = dict(force or {})
    given = _Sizes.of(spec.rank, x_shape, grid_shape)
    taps = TAPS_PER_AXIS[spec.mode] ** spec.rank
    why: dict[str, str] = {}
    rows, why["gather"] = _choose_gather(spec, given, taps, target)
    if "gather" in force:
        rows, why["gather"] = force.pop("gather") == "rows", "forced"
    ring, why["ring"] = _choose_ring(spec, rows)
    gathered = given.padded(ring)  # what the index types and the copy are judged by
    sample_type, index_type, why["index_type"] = _choose_index_types(gathered, rows, target)
    masks = spec.mode == "nearest" and spec.padding_mode == "zeros"
    zero_slot, why["zero_slot"] = _choose_zero_slot(spec, gathered, masks, rows)
    if "zero_slot" in force:
        zero_slot, why["zero_slot"] = bool(force.pop("zero_slot")) and masks, "forced"
    per_point = ring > 0 and not rows
    flat_in_float, why["flat_in_float"] = _choose_float_flat(spec, gathered, masks or per_point)
    position_type = sample_type
    if not flat_in_float and _positions_fit_int32(spec, gathered):
        position_type = INT32
        why["position_type"] = "int32's Cast, Clip and Mul run 3-5x faster than int64's"
    combine, why["sum"] = _choose_sum(spec, given, taps, target, rows, sample_type == INT64)
    tiled = rows and _tiled_pays(spec, gathered)
    if "sum" in force:
        combine, why["sum"] = str(force.pop("sum")), "forced"
    if "tiled" in force:
        tiled = rows and bool(force.pop("tiled"))
    if force or combine not in SUMS[rows, spec.mode == "nearest"]:
        raise ValueError(f"cannot force {force or combine!r} with {'rows' if rows else 'elements'}")
    return Plan(
        taps=taps,
        gather="rows" if rows else "elements",
        sum=combine,
        ring=ring,
        per_point=per_point,
        masks=masks,
        zero_slot=zero_slot,
        slot_by_pad=spec.x_dtype in PAD_TYPES,
        flat_in_float=flat_in_float,
        position_type=position_type,
        sample_type=sample_type,
        index_type=index_type,
        tiled=tiled,
        empty=given.batch == 0 or given.channels == 0,
        refusal=int32_overflow(spec, given.dims, target, rows=rows),
        why=why,
    )


@dataclasses.dataclass(frozen=True)
class _Sizes:
    """The static sizes a choice reads: X's dims (None where symbolic) and the points."""

    dims: Dims
    points: int | None  # the grid's output points per sample

    @classmethod
    def of(cls, rank: int, x_shape, grid_shape) -> _Sizes:
        x, grid = _static(x_shape, 2 + rank), _static(grid_shape, 2 + rank)
        points = grid[1 : 1 + rank]
        return cls(x, math.prod(points) if None not in points else None)

    @property
    def batch(self) -> int | None:
        return self.dims[0]

    @property
    def channels(self) -> int | None:
        return self.dims[1]

    @property
    def spatial(self) -> int | None:
        """S, the values of one channel of one sample."""
        return math.prod(self.dims[2:]) if None not in self.dims[2:] else None

    def gathered_values(self, taps: int) -> int:
        """N x C x taps x points: the values the taps gather (0 where unknown, N=1 if symbolic)."""
        if self.channels is None or self.points is None:
            return 0
        return (self.batch or 1) * self.channels * taps * self.points

    def padded(self, ring: int) -> _Sizes:
        spatial = [d + 2 * ring if d is not None else None for d in self.dims[2:]]
        return dataclasses.replace(self, dims=(*self.dims[:2], *spatial))


def _static(shape, length: int) -> Dims:
    """Static dims (None where symbolic); all None where the shape or its rank is unknown."""
    if shape is None or len(shape) != length:
        return (None,) * length
    return tuple(d if isinstance(d, int) else None for d in shape)


def _choose_gather(spec, sizes: _Sizes, taps: int, target: Target) -> tuple[bool, str]:
    """Rows (True) or GatherElements, and why. Judged by X's own sizes, before any ring."""
    if not target.allows("GatherElements"):
        return True, f"the {target.name} target has no GatherElements"
    if int32_overflow(spec, sizes.dims, target, rows=True):
        return False, "the rows' indices, which span every sample, would pass int32"
    if _rows_pay(sizes, taps, target):
        return True, f"{sizes.channels} channels: contiguous rows beat one value per tap"
    return False, "few channels, or too few points to pay for a channels-last copy of X"


def _rows_pay(sizes: _Sizes, taps: int, target: Target) -> bool:
    """Whether gathering channels-last rows beats GatherElements (bench/run.py measures both).

    Rows need a channels-last copy of X, so the points must gather at least about as many
    values as the copy moves. Summed tap by tap they read X at random, which pays only while X
    fits in cache; gathered at once (``_matmul_pays``, ``_scaled_pays``) at any size of X.
    Unknown sizes: rows wherever there is more than one tap.
    """
    channels = sizes.channels
    matmul, scaled = _matmul_pays(sizes, taps, target), _scaled_pays(sizes, taps, target)
    fewest = SCALED_MIN_CHANNELS if scaled else ROWS_MIN_CHANNELS
    if channels is None or not (matmul or channels >= fewest):
        return False
    spatial, points = sizes.spatial, sizes.points
    if spatial is None or points is None:
        return taps >= 2
    cached = (sizes.batch or 1) * channels * spatial <= ROWS_MAX_ELEMENTS
    copies = 1 if scaled and channels >= SCALED_FULL_COPY_CHANNELS else 2
    return (matmul or scaled or cached) and copies * spatial <= taps * points


def _matmul_pays(sizes: _Sizes, taps: int, target: Target) -> bool:
    """Whether rows are summed by one batched MatMul of every tap: 8+ taps, 256+ values a point.

    2-D cubic, 64 channels: 2.8 vs 3.9 ms for the per-tap chain; 3-D linear: 10%; side by side
    with the native kernel, 3-D linear 160 channels at 16**3: 4.9 vs 9.1 ms, 2-D cubic 512
    channels at 64x64: 28 vs 50. Past ``TAPS_MAX_VALUES`` the chain's K times smaller
    intermediates keep the memory in bounds. Only where the target allows MatMul: most
    runtimes run it in reduced precision by default (``targets.py``).
    """
    channels = sizes.channels
    if taps < MATMUL_MIN_TAPS or channels is None or not target.allows("MatMul"):
        return False
    fits = sizes.gathered_values(taps) <= TAPS_MAX_VALUES
    return channels * taps >= MATMUL_MIN_VALUES and fits


def _scaled_pays(sizes: _Sizes, taps: int, target: Target) -> bool:
    """Whether rows (fewer than 8 taps) are scaled by one BatchNormalization, summed by a MatMul.

    64 channels x 4096 points, 4 taps: 0.80 vs 1.0 ms for the per-tap chain, whose broadcast
    Mul of ``(P, C)`` by ``(P, 1)`` pays for every short row; 192 channels at 48x48: 1.15 vs
    2.03 ms. Below ROWS_MIN_CHANNELS, past SCALED_MAX_VALUES gathered values, GatherElements
    channel by channel wins instead (8x32x64x64: 4.9 vs 6.0 ms). Only where the target allows
    both ops: BatchNormalization's parameters must be constants on TensorRT and most NPUs.
    """
    channels = sizes.channels
    if not (1 < taps < MATMUL_MIN_TAPS and channels is not None):
        return False
    if not (target.allows("BatchNormalization") and target.allows("MatMul")):
        return False
    gathered = sizes.gathered_values(taps)
    few = channels < ROWS_MIN_CHANNELS and gathered > SCALED_MAX_VALUES
    return not few and gathered <= TAPS_MAX_VALUES


def _by_channel_pays(sizes: _Sizes, taps: int, target: Target, wide: bool) -> bool:
    """Whether GatherElements reads X channel by channel, each channel's taps summed by a MatMul.

    Measured (bench/run.py): one channel; 8+ taps and up to 16 channels (cubic 3x224x224:
    2.4 -> 1.5 ms of gathers; 3-D linear 16 channels: 0.32 -> 0.26 of native); fewer taps once
    the gather moves 2**21 values (linear 8x32x64x64: 2.2 -> 1.9); up to 4 channels whose
    indices are int64 (``wide``: symbolic sizes), which cost twice as much to expand over the
    channels (symbolic 1x3x224x224 linear 1.17-1.25 -> 0.98-1.07 of native). Smaller gathers
    spend more on the extra nodes than they save (1x3x32x32: 56 -> 61 us). Only where the
    target allows MatMul.
    """
    channels = sizes.channels
    if channels is None or not target.allows("MatMul"):
        return False
    if channels == 1 or (taps >= MATMUL_MIN_TAPS and channels <= BY_CHANNEL_MAX_CHANNELS):
        return True
    if wide and channels <= BY_CHANNEL_WIDE_CHANNELS:
        return True
    return channels < ROWS_MIN_CHANNELS and sizes.gathered_values(taps) >= BY_CHANNEL_MIN_VALUES


def _choose_sum(spec, sizes, taps, target, rows: bool, wide: bool) -> tuple[str, str]:
    """How the weighted taps are summed, and why (judged by X's own sizes)."""
    if spec.mode == "nearest":
        return "none", "one tap: the values are moved, never computed"
    if rows and _matmul_pays(sizes, taps, target):
        return "matmul", f"{taps} taps x {sizes.channels} channels: one batched MatMul"
    if rows and _scaled_pays(sizes, taps, target):
        return "scaled", f"{taps} taps: one BatchNormalization scales every row"
    if rows:
        return "chain", "one Gather per tap, weighted and summed by a chain of Adds"
    if _by_channel_pays(sizes, taps, target, wide):
        return "by_channel", "each channel's taps summed by a MatMul with ones"
    return "reduce_sum", "every tap of every channel in one GatherElements, one ReduceSum"


def _choose_ring(spec: GridSampleSpec, rows: bool) -> tuple[int, str]:
    ring = ring_width(spec, rows)
    if ring:
        return ring, "zeros padding: outside taps read zeros, exact beside infinite pixels"
    if spec.mode != "nearest" and spec.padding_mode == "zeros":
        return 0, f"no Pad for {spec.x_dtype.name.lower()}: the weights are masked"
    return 0, ""


def _choose_index_types(sizes: _Sizes, rows: bool, target: Target):
    """The flat index's type within a sample and across samples (rows), and why."""
    if target.index_dtype is not None:
        return target.index_dtype, target.index_dtype, f"the {target.name} target's"
    sample = sizes.spatial
    largest = sample
    if rows:
        largest = sample * sizes.batch if sample is not None and sizes.batch is not None else None
    sample_type = INT32 if sample is not None and sample < INT32_LIMIT else INT64
    index_type = INT32 if largest is not None and largest < INT32_LIMIT else INT64
    return sample_type, index_type, "int32 where the sizes are static and below 2**31"


def _choose_zero_slot(spec, sizes: _Sizes, masks: bool, rows: bool) -> tuple[bool, str]:
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
    if rows:
        return False, "appending a row would copy the channels-last copy again"
    if sizes.spatial is None or sizes.points is None:
        return True, "unknown sizes count as one point per pixel"
    if sizes.spatial <= SLOT_MAX_RATIO * sizes.points:
        return True, f"X is at most {SLOT_MAX_RATIO}x the points: a copy beats a Where"
    return False, f"X is over {SLOT_MAX_RATIO}x the points: a Where beats a copy"


def _choose_float_flat(spec, sizes: _Sizes, one_per_point: bool) -> tuple[bool, str]:
    """Whether the axes are combined in float and cast once (one index per point, exact)."""
    sample = sizes.spatial
    bits = 24 if compute_dtype(spec) == ir.DataType.FLOAT else 53
    if one_per_point and sample is not None and sample <= 2**bits:
        return True, f"one index per point, exact below 2**{bits}: one cast"
    return False, "each axis cast, combined in integers"


def _positions_fit_int32(spec: GridSampleSpec, sizes: _Sizes) -> bool:
    """Whether every axis' tap positions fit int32 (before any are combined into a flat index).

    They lie in [0, L-1], so they do where every spatial size is static and below 2**31; and in
    float32 whatever the sizes where ``source_coordinate`` bounds the coordinates by 2**23.
    """
    if all(size is not None and size < 2**31 for size in sizes.dims[2:]):
        return True
    return compute_dtype(spec) == ir.DataType.FLOAT and bounds_coordinate(spec)


def _tiled_pays(spec: GridSampleSpec, sizes: _Sizes) -> bool:
    """Whether the channels-last copy is made in tiles, where one Transpose would thrash.

    onnxruntime transposes a ``(C, S)`` plane at about a copy's speed, unless each channel's
    row of S values is a multiple of 2 kB: the reads then fall into the same cache sets (64
    channels x 4096 pixels: 195 us, 82 in tiles of ``(C, 128)``, which two Transposes copy
    twice; 64 x 4160: 46 vs 85). Past 2**20 values per sample the tiles lose again (256 x
    6144: 1.2 vs 1.4 ms).
    """
    spatial, channels = sizes.spatial, sizes.channels
    if spec.x_dtype == ir.DataType.STRING or spatial is None or not channels:
        return False
    aliased = spatial * spec.x_dtype.itemsize % ALIASED_BYTES == 0
    return aliased and channels * spatial <= TILED_MAX_VALUES
