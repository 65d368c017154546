"""What each form of the lowered graph costs: the thresholds measured, and who pays them.

The numbers are ``bench/run.py``'s, timed against onnxruntime's own kernel on this machine's
kind of CPU (2 cores, 1 thread). ``plan.plan_of`` asks these predicates; ``STRATEGIES`` says in
words when each form is taken, and docs/lowered-graph.md's table of strategies is generated
from it (``tests/lowering/test_plan.py`` checks both against the plan).
Unknown sizes count as one point per pixel, a symbolic batch as one sample.
"""

from __future__ import annotations

import dataclasses
import math

import onnx_ir as ir

from gridsample_lower.lowering.coords import bounds_coordinate
from gridsample_lower.lowering.targets import Target
from gridsample_lower.spec import GridSampleSpec, compute_dtype

__all__ = ["STRATEGIES", "Sizes", "Strategy", "strategy_table"]

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
REDUCED_ROWS_MIN_TAPS = 8  # interleaved rows with this many taps are summed by a ReduceSum
CHAIN_MAX_SAMPLE_VALUES = 2**19  # where float32 is kept, 8+ taps chain while a sample is this small
TAPS_MAX_VALUES = 2**25  # one Gather of every tap (scaled, MatMul) holds at most this many values
BY_CHANNEL_MAX_CHANNELS = 16  # up to this many channels with 8+ taps are gathered one by one...
BY_CHANNEL_MIN_VALUES = 2**21  # ...and any of GatherElements' few once it gathers this many...
BY_CHANNEL_INT64_CHANNELS = 4  # ...and up to this many whose indices are int64
# TVM (fused, 1 thread, bench/results/runtimes.md): rows beat GatherElements at batch 1, where
# GatherElements' indices, expanded over the channels, make the fused index loop run once per
# channel (1x3x224x224 linear 3.42 vs 3.93 of native, cubic 5.1 vs 7.9; 1x64x64x64 linear 1.39
# vs 3.72); not at 8x32x64x64 (5.49 vs 3.88), where the per-tap row gathers cross samples; nor
# where the channels-last copy of X outweighs the taps (2 S > taps x P: 4096 points of a
# 32x128x128 X, linear 8.4 vs 5.7 ms, cubic 28 vs 21).
FUSED_ROWS_MAX_BATCH = 1
# The points lowered in tiles where onnxruntime streams a lowering's per-point tensors
# (``point_tiles``): from this many points (N x P), tiles of this many points, at most
# POINT_TILES_MAX tiles of ~50-150 nodes each...
POINT_TILES_FROM, POINT_TILE = 2**16, 2**13  # linear (3-D linear too)
CUBIC_TAPS = 16  # ...from 16 taps a point (cubic), from fewer points, in smaller tiles...
CUBIC_TILES_FROM, CUBIC_POINT_TILE = 2**14, 2**12
NEAREST_TILES_FROM, NEAREST_POINT_TILE = 2**18, 2**15  # ...and for one tap (nearest)
POINT_TILES_MAX = 32
TILE_MIN_SAMPLE_POINTS = 512  # ...and each tile at least this many of every sample's points
SYMBOLIC_POINT_TILES = 16  # symbolic points: this many tiles (nearest: half), behind an If
SLOT_MAX_RATIO = 4  # a zero slot appended to X pays while X is at most this many times the points
# Zeros padding of linear and cubic: X padded by a ring of zeros is a copy of X. Where X holds
# at least this many times the values the taps read, the taps are read unpadded and masked
# once gathered (one Where over them) instead (``masked_taps_pay``). onnxruntime target,
# lowered / native, ring -> masked, by S / (taps x P) (a loaded machine, 1 thread):
# 64 (3-D, 1x2x96x128x160 to 12x16x20): 11.3 -> 0.62; 25 (480x640 to 48x64): 4.4 -> 2.3;
# 8 (3-D, to 24x32x40): 0.66 -> 0.44; 6.2 (cubic, to 48x64): 1.0 -> 1.12; 4 (linear, to
# 120x160): 1.7 -> 2.15; 1 (cubic, to 120x160): 0.57 -> 0.97.
MASKED_TAPS_MIN_RATIO = 8
# Deformable attention as one unit against onnxruntime's own GridSample per level (the
# onnxruntime target keeps those: ``attention_pays``), 1 thread, one unit / native, levels of
# 12x12 to 40x40 (4 levels, each half the last), 20 to 2125 queries, 4 points: heads of 32 or
# 64 channels 0.39-0.93 (2 to 8 heads); of 16 channels 0.75-1.33 (1.07-1.33 with 20 queries).
ATTENTION_MIN_HEAD_CHANNELS = 32
# Deformable attention as one unit from the levels' planes (OpenVINO f32, 1 thread, one unit /
# node by node, bench/attention.py --runtime openvino): it moves every value into planes, a
# cost of the values, and saves on each tap: corpus encoder (64 taps a value) 1.24 / 2.35,
# decoder (5.1) 1.14 / 1.29; 640x640 encoder (64) 1.51 / 1.85, Mask2Former (63) 1.22 / 1.89,
# decoders of 300 queries (2.3) 1.63 / 1.22 and 1.63 / 1.33: from this many taps a value.
ATTENTION_PLANES_MIN_TAPS_PER_VALUE = 4
# One unit's queries in tiles (``attention_tiles``) of about this many gathered rows (samples x
# queries x taps a query), on targets that run each op over its whole tensor (onnxruntime):
# Mask2Former's 640x640 pixel decoder (8 samples, 48 taps a query), time per query by the
# queries a model holds: 8400 20.5 us, 2100 20.9, 1050 18.7, 525 14.9, 256 13.1, 128 16.0.
ATTENTION_TILE_ROWS = 2**17
# One unit's values gathered from planes (OpenVINO), (C, N, Q, K), in tiles of the queries of
# about this many values (``plane_tiles``): OpenVINO runs its Gather, Mul and ReduceSum each
# over the whole tensor, 70 MB for the corpus' Deformable DETR at 640x640 (16 channels, 2
# samples, 8500 queries, 64 taps). Paired, f32, one thread, the model / the original: one
# piece 1.63, 16 tiles 1.24, 32 1.20, 64 1.15, 128 (2**17 values a tile) 1.07, 256 1.11; its
# Mask2Former (12.9 M values) 1.37-1.45 -> 1.17, 1.14, 1.12, 1.08, 1.15. The real models' 8
# heads of 32 channels (bench/attention.py, one unit / native; 103-140 M values) gain less
# from more tiles: Mask2Former 48 tiles 1.40, 64 1.46, 96 1.49, 128 1.57, 512 2.08; Deformable
# DETR's encoder 1.14, 1.18, 1.20, 1.22, 1.65; the corpus' attentions alone 1.47 -> 1.38 and
# 1.72 -> 1.63 from 48 to 128 tiles. 64 at most: within 0.06 of the best of each.
PLANE_TILE_VALUES = 2**17
PLANE_TILES_MAX = 64
# Where the count of queries is symbolic (TorchScript's encoders), this many, in the fenced
# Loop's body; paired, the model / the original, static and as exported: Deformable DETR's
# TorchScript export at 640x640 1.58-1.73 -> 1.34-1.43 with 16 tiles, 1.29-1.41 with 64;
# Mask2Former's 1.48-1.50 -> 1.25-1.34, 1.19-1.31; at their exported 96x96 16 tiles cost
# 1-8% (1.23-1.29 -> 1.24-1.37), 64 tiles 11-16% (DETR as exported 1.33 -> 1.53).
SYMBOLIC_PLANE_TILES = 16
# Linear samples read by the target's own kernel (MNN, ncnn) are normalized again for it, which
# moves them by about L * 2**-24 pixels: up to this size of every sampled axis their error stays
# within float32's tolerance (random unit data, grid in [-1.1, 1.1], 64x64 points, against
# onnxruntime: error / tolerance 0.19-0.44 at 64-128, 0.77-0.94 at 160-224, 1.3-1.7 at 320;
# MNN 3.6.1 adds its own: 1.6e-4 at 224, 3x the tolerance); larger axes read whole pixels at
# their centres, which is exact.
SAMPLES_MAX_SIZE = 128
# Cubic on MNN from this many channels: channels-last rows (int32 Gathers, a chain of Adds)
# beat 9 or 16 reads by its own kernel, which reads every channel again for each
# (bench/mnn_ncnn.py, CPU ms, lowered / native: 1x64x64x64 rows 12.8-13.5x, reads 14.2-15.9x;
# 1x256x32x32 rows 5.9-6.8x, reads 14.8-15.4x; 32 channels at 128x128 reads 6.8-8.5x).
READER_CUBIC_MAX_CHANNELS = 63
# Targets with ``float_index_math`` (LiteRT) compute every gather index in float32 while the
# largest index (the zero slot past the data) stays below this: float32 holds every integer
# up to 2**24 exactly. 1x32x64x64 linear zeros on LiteRT: 1.38 -> 1.06 of onnx2tf's
# emulation (bench/results/litert/REPORT.md: TFLite runs int32 Min/Max/Mul with a scalar in
# reference kernels, 10-40x slower than XNNPACK's float ones).
FLOAT_INDEX_LIMIT = 2**24
# Where the target broadcasts per-point weights over few channels slowly, one sample of fewer
# channels than this is gathered from X's planes (LiteRT's Mul of (P, C) by (P, 1): 0.72 ms
# per 50176 points with 3 channels, fast from 16: bench/results/litert/REPORT.md).
PLANES_MAX_CHANNELS = 16
# Where the target's transposes are slow (OpenVINO), planes also pay while the padded X holds
# at least taps x points / this many pixels (costs.planes_pay).
PLANES_SPATIAL_DIVISOR = 2

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


@dataclasses.dataclass(frozen=True)
class Sizes:
    """The static sizes a choice reads: X's dims (None where symbolic) and the points."""

    dims: Dims
    points: int | None  # the grid's output points per sample

    @classmethod
    def of(cls, rank: int, x_shape, grid_shape) -> Sizes:
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

    @property
    def symbolic(self) -> bool:
        """Whether any of X's sizes or the points is unknown."""
        return None in self.dims or self.points is None

    def gathered_values(self, taps: int) -> int:
        """N x C x taps x points: the values the taps gather (0 where unknown, N=1 if symbolic)."""
        if self.channels is None or self.points is None:
            return 0
        return (self.batch or 1) * self.channels * taps * self.points

    def padded(self, ring: int) -> Sizes:
        spatial = [d + 2 * ring if d is not None else None for d in self.dims[2:]]
        return dataclasses.replace(self, dims=(*self.dims[:2], *spatial))


def _static(shape, length: int) -> Dims:
    """Static dims (None where symbolic); all None where the shape or its rank is unknown."""
    if shape is None or len(shape) != length:
        return (None,) * length
    return tuple(d if isinstance(d, int) else None for d in shape)


def rows_pay(sizes: Sizes, taps: int, target: Target) -> bool:
    """Whether gathering channels-last rows beats GatherElements (bench/run.py measures both).

    Rows need a channels-last copy of X, so the points must gather at least about as many
    values as the copy moves. Summed tap by tap they read X at random, which pays only while X
    fits in cache; gathered at once (``_matmul_pays``, ``_scaled_pays``) at any size of X.
    Unknown sizes: rows wherever there is more than one tap. Fused targets (TVM): rows up to
    ``FUSED_ROWS_MAX_BATCH`` samples, with more than one tap.
    """
    if target.fuses:
        batch, spatial, points = sizes.batch, sizes.spatial, sizes.points
        one_sample = taps >= 2 and batch is not None and batch <= FUSED_ROWS_MAX_BATCH
        return one_sample and (spatial is None or points is None or 2 * spatial <= taps * points)
    channels = sizes.channels
    matmul, scaled = matmul_pays(sizes, taps, target), scaled_pays(sizes, taps, target)
    fewest = SCALED_MIN_CHANNELS if scaled else ROWS_MIN_CHANNELS
    if channels is None or not (matmul or channels >= fewest):
        return False
    spatial, points = sizes.spatial, sizes.points
    if spatial is None or points is None:
        return taps >= 2
    cached = (sizes.batch or 1) * channels * spatial <= ROWS_MAX_ELEMENTS
    copies = 1 if scaled and channels >= SCALED_FULL_COPY_CHANNELS else 2
    return (matmul or scaled or cached) and copies * spatial <= taps * points


def masked_taps_pay(sizes: Sizes, taps: int, at_run_time: bool = False) -> bool:
    """Whether zeros padding masks linear or cubic taps once gathered rather than padding X.

    A ring of zeros around X copies all of X; a Where over the gathered taps costs about as
    much per value as a few copies, so it pays where X is ``MASKED_TAPS_MIN_RATIO`` times the
    values the taps read or more: a small output from a large X (a crop, a warp to a
    thumbnail, a volume resampled coarsely). An X of unknown size with a grid of static size
    (a warp of any image to a fixed output) is masked where the target judges it at run time
    or always masks it (``at_run_time``: ``Target.unknown_x``), else padded: a gather cannot
    read an X with an empty axis unpadded, and masked taps cost more than the ring below the
    ratio (onnxruntime, 2-D linear, 48x64 points, symbolic X, masked / ring: 1.44 at 48x64,
    1.34 at 96x128, 0.73 at 480x640; 3-D 12x16x20 points: 1.69 at 12x16x20, 0.11 at
    96x128x160; the If adds about 1 us).
    """
    spatial, points = sizes.spatial, sizes.points
    if points is None:
        return False
    if spatial is None:
        return at_run_time
    return spatial >= masked_min_spatial(taps, points)


def masked_min_spatial(taps: int, points: int) -> int:
    """The fewest values a channel of X holds where masking beats copying X.

    The taps of linear and cubic (``masked_taps_pay``); nearest's values (one tap, past
    ``SLOT_MAX_RATIO`` times the points).
    """
    if taps == 1:
        return SLOT_MAX_RATIO * points + 1
    return MASKED_TAPS_MIN_RATIO * taps * points


def attention_pays(head_channels: int | None, target: Target) -> bool:
    """Whether a deformable attention the target would keep runs faster lowered as one unit.

    One unit reads the values in place, where onnxruntime reshapes and transposes each level
    for its kernel, and sums every level's taps in one MatMul with the attention weights: it
    wins with heads of ``ATTENTION_MIN_HEAD_CHANNELS`` channels or more (Deformable DETR,
    RT-DETR, Mask2Former: 8 heads of 32), at every size measured. From planes
    (``Target.attention_planes``: OpenVINO) it never beats the runtime's own kernel.
    """
    if target.attention_planes:
        return False
    return head_channels is not None and head_channels >= ATTENTION_MIN_HEAD_CHANNELS


def attention_tiles(
    batch: int | None, queries: int | None, per_query: int | None, target: Target
) -> tuple[int, int]:
    """``(tiles, tiles_from)``: how many tiles of queries one unit is lowered in (1: one piece).

    As ``point_tiles`` for one GridSample: lowered whole, one unit's per-tap indices, weights
    and gathered rows stream through memory between onnxruntime's ops; tiles of
    ``ATTENTION_TILE_ROWS`` rows stay cached (at most ``POINT_TILES_MAX``). A symbolic count
    of queries takes ``SYMBOLIC_POINT_TILES`` behind an If, from the queries that make two
    tiles' rows (an unknown batch counted as 1); ``tiles_from`` 0: static queries.
    """
    if not target.point_tiles or per_query is None:
        return 1, 0
    if queries is None:
        least = math.ceil(2 * ATTENTION_TILE_ROWS / ((batch or 1) * per_query))
        return SYMBOLIC_POINT_TILES, least
    if batch is None:
        return 1, 0
    rows = batch * queries * per_query
    return max(1, min(POINT_TILES_MAX, rows // ATTENTION_TILE_ROWS, queries)), 0


def plane_tiles(
    channels: int | ir.Value,
    batch: int | ir.Value,
    queries: int | ir.Value,
    per_query: int | ir.Value,
) -> int:
    """How many tiles of the queries an attention's values are gathered from planes in.

    Static queries: tiles of about ``PLANE_TILE_VALUES`` values (at most ``PLANE_TILES_MAX``,
    at least a query each; a symbolic size counted as 1), one piece below two tiles' values.
    Symbolic queries: ``SYMBOLIC_PLANE_TILES``, some empty where the queries are fewer.
    """
    if not isinstance(queries, int):
        return SYMBOLIC_PLANE_TILES
    values = math.prod(s for s in (channels, batch, queries, per_query) if isinstance(s, int))
    return max(1, min(PLANE_TILES_MAX, queries, values // PLANE_TILE_VALUES))


def attention_planes_pay(taps: int, values: int) -> bool:
    """Whether an attention from planes runs faster as one unit than node by node (OpenVINO).

    ``taps``: what its queries read, per sample; ``values``: its levels' pixels, per sample.
    """
    return taps >= ATTENTION_PLANES_MIN_TAPS_PER_VALUE * values


def matmul_pays(sizes: Sizes, taps: int, target: Target) -> bool:
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


def scaled_pays(sizes: Sizes, taps: int, target: Target) -> bool:
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


def by_channel_pays(sizes: Sizes, taps: int, target: Target, int64_indices: bool) -> bool:
    """Whether GatherElements reads X channel by channel, each channel's taps summed by a MatMul.

    Measured (bench/run.py): one channel; 8+ taps and up to 16 channels (cubic 3x224x224:
    2.4 -> 1.5 ms of gathers; 3-D linear 16 channels: 0.32 -> 0.26 of native); fewer taps once
    the gather moves 2**21 values (linear 8x32x64x64: 2.2 -> 1.9); up to 4 channels with
    ``int64_indices`` (symbolic sizes), which cost twice as much to expand over the channels
    (symbolic 1x3x224x224 linear 1.17-1.25 -> 0.98-1.07 of native). Smaller gathers spend
    more on the extra nodes than they save (1x3x32x32: 56 -> 61 us). Only where the target
    allows MatMul.
    """
    channels = sizes.channels
    if channels is None or not target.allows("MatMul"):
        return False
    if channels == 1 or (taps >= MATMUL_MIN_TAPS and channels <= BY_CHANNEL_MAX_CHANNELS):
        return True
    if int64_indices and channels <= BY_CHANNEL_INT64_CHANNELS:
        return True
    return channels < ROWS_MIN_CHANNELS and sizes.gathered_values(taps) >= BY_CHANNEL_MIN_VALUES


def planar_tail_pays(spec: GridSampleSpec, symbolic: bool) -> bool:
    """Whether planar coordinates beat interleaved ones where the runtime keeps float32.

    On a path to the model's output through no Conv or MatMul, OpenVINO keeps float32 at its
    default precision, and bfloat16-safe forms buy nothing: planar coordinates (one Transpose
    of the grid) ran nearest faster (3x224x224 1.29 vs 1.60 of native; kornia's remap 1.22 vs
    1.55 of the original), linear slower (its interleaved weights leave as one fraction an
    axis: border 2.71 vs 4.84; bench/results/openvino_f32/planar_vs_interleaved.md). Cubic's
    interleaved weights, whole where float32 is kept (``Plan.float32_kept``), ran faster with
    static sizes (3x224x224 2.6 vs 4.7 of native; kornia's warp_affine, reshaped static, 1.23
    vs 1.82 of the original), slower with symbolic ones, which OpenVINO runs op by op (1.48
    vs 1.31 as exported; GLM-4V's embedding at 46x46 patches 1.75 vs 1.19).
    """
    return spec.mode == "nearest" or (spec.mode == "cubic" and symbolic)


def reduced_rows_pay(sizes: Sizes, taps: int) -> bool:
    """Rows summed by one ReduceSum (interleaved): 8+ taps, up to TAPS_MAX_VALUES gathered.

    OpenVINO splits a chain of 8 or 16 taps into several fused kernels, storing partial sums in
    bfloat16 (2-D cubic before a Conv: 0.018 against a bound of 0.0166; 3-D linear 0.0160
    against 0.0143, over three seeds); 4 taps stay within it. Where OpenVINO keeps float32,
    ``float32_chain_pays`` says which runs faster.
    """
    return taps >= REDUCED_ROWS_MIN_TAPS and sizes.gathered_values(taps) <= TAPS_MAX_VALUES


def float32_chain_pays(sizes: Sizes) -> bool:
    """Where OpenVINO keeps float32 (its graph tail, a fenced Loop), 8+ taps chained, not reduced.

    No partial sum is stored in bfloat16 there, and the chain's fused Adds beat one Gather of
    every tap, its Mul and its ReduceSum while one sample's X stays near the caches. Each tap's
    Gather passes over the whole batch; past one sample or 2**19 values (2 MB) the rows leave
    them between the passes, and the one Gather reading each point's neighbourhood at once wins.
    OpenVINO f32, 1 thread, cubic, chain / ReduceSum: one sample of 3 to 128 channels, up to
    2**19 values, 0.46-0.79 (1x64x64x64 0.52, 1x3x224x224 0.76, 1x32x128x128 0.75-0.79, GLM-4V's
    position table 0.66-0.76); past it 0.85-1.40 (1x32x181x181 1.19, 1x3x512x512 1.40); 2 to 8
    samples 1.05-1.54. 3-D linear, 1x16x24x24x24: 0.79-0.85.
    """
    if sizes.batch != 1 or sizes.channels is None or sizes.spatial is None:
        return False
    return sizes.channels * sizes.spatial <= CHAIN_MAX_SAMPLE_VALUES


def planes_pay(sizes: Sizes, taps: int = 1, target: Target | None = None) -> bool:
    """Whether one sample's channels are gathered from X's planes rather than its rows.

    Few channels, where the target broadcasts per-point weights over a short axis slowly; and
    where its transposes are slow (``Target.slow_transpose``: OpenVINO), wherever the
    channels-last copy of X (S values a channel) and the transposed output (P) cost more than
    gathering each value apart costs beyond a row's share: nearest (one tap) always, else
    while the padded X holds at least ``taps x P / PLANES_SPATIAL_DIVISOR`` pixels (OpenVINO
    f32, 1 thread, planes / rows: nearest 0.46-0.61; linear 3 channels at 224x224 0.43-0.51,
    32 channels of 128x128 to 4096 points 0.92; 64 channels at 64x64 1.35, 256 at 32x32 1.12).
    """
    if sizes.channels is None or sizes.channels <= 0:
        return False
    few = sizes.channels < PLANES_MAX_CHANNELS
    if target is None or not target.slow_transpose:
        return few
    if few or taps == 1:
        return True
    if sizes.spatial is None or sizes.points is None:
        return False
    return PLANES_SPATIAL_DIVISOR * sizes.spatial >= taps * sizes.points


def planes_in_place_pay(sizes: Sizes, taps: int) -> bool:
    """Whether several samples' planes are read from X in place rather than X moved first.

    In place, each channel's taps take indices of their own, C x taps x P a sample, where
    moving X to ``(C, N, S)`` copies C x S values (OpenVINO with symbolic sizes: 0.44 ms at
    3x480x640, where its own GridSample samples 48x64 points in 0.21; kornia's warps as
    exported 0.63-0.85x the time moved; 224x224 points of 3x224x224, 1.03-1.22x): where the
    points are known and fewer than S / taps, or X's size is unknown (a warp to a fixed
    output, as ``masked_taps_pay`` judges it too).
    """
    if sizes.points is None:
        return False
    return sizes.spatial is None or taps * sizes.points <= sizes.spatial


def positions_fit_int32(spec: GridSampleSpec, sizes: Sizes) -> bool:
    """Whether every axis' tap positions fit int32 (before any are combined into a flat index).

    They lie in [0, L-1], so they do where every spatial size is static and below 2**31; and in
    float32 whatever the sizes where ``source_coordinate`` bounds the coordinates by 2**23.
    """
    if all(size is not None and size < 2**31 for size in sizes.dims[2:]):
        return True
    return compute_dtype(spec) == ir.DataType.FLOAT and bounds_coordinate(spec)


def tiled_pays(spec: GridSampleSpec, sizes: Sizes) -> bool:
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


def point_tiles(sizes: Sizes, taps: int, target: Target) -> tuple[tuple[int, int], str]:
    """``((tiles, tiles_from), why)``: how many tiles the points are lowered in (``Plan``).

    onnxruntime runs each op over its whole tensor: past some ten thousand points a lowering's
    per-point tensors no longer stay cached between the ops that make and read them. Measured
    (1 thread, one piece against 8-32 tiles, ``docs/performance.md``): 480x640 points, 1-16
    channels, linear 1.35-1.77 -> 0.73-1.36x native, cubic 1.18-2.65 -> 0.58-1.16, nearest
    0.46-1.33 -> 0.36-1.06; cubic gains from 2**14 points (8x32x64x64: 0.60 -> 0.35), linear
    from 2**16 (8x32x64x64 lost: 2.19 -> 2.88), nearest only past 2**18. Points of all
    samples count (N x P; an unknown batch as 1), but each tile holds at least
    ``TILE_MIN_SAMPLE_POINTS`` of every sample's (RAFT's lookups, 7040 samples of 49 points at
    440x1024, ran 2.1x slower in 32 tiles); symbolic points are judged at run time, by the
    points of one sample, which also keeps every tile from being empty.
    """
    if not target.point_tiles:
        return (1, 0), ""
    least, tile = tiling(taps)
    if sizes.points is None:
        tiles = SYMBOLIC_POINT_TILES if taps > 1 else SYMBOLIC_POINT_TILES // 2
        return (tiles, least), (
            f"symbolic points: {tiles} tiles where a sample holds {_n(least)}+ (an If), so "
            "that each tile's tensors stay cached between ops"
        )
    total = (sizes.batch or 1) * sizes.points
    if total < least:
        return (1, 0), f"{total} points, below {_n(least)}: one piece"
    tiles = min(POINT_TILES_MAX, total // tile, sizes.points // TILE_MIN_SAMPLE_POINTS)
    if tiles < 2:
        return (1, 0), (
            f"{sizes.points} points a sample: tiles of fewer than {TILE_MIN_SAMPLE_POINTS} "
            "would each run every sample's per-sample work"
        )
    return (tiles, 0), f"{total} points: {tiles} tiles, each tile's tensors cached between ops"


def tiling(taps: int) -> tuple[int, int]:
    """(the least points, N x P, for tiles; the points a tile) for ``taps`` a point."""
    if taps == 1:
        return NEAREST_TILES_FROM, NEAREST_POINT_TILE
    if taps < CUBIC_TAPS:
        return POINT_TILES_FROM, POINT_TILE
    return CUBIC_TILES_FROM, CUBIC_POINT_TILE


@dataclasses.dataclass(frozen=True)
class Strategy:
    """One form a choice of the plan can take (a ``Plan`` field and its value), and when."""

    choice: str
    form: str
    when: str


def _n(value: int) -> str:
    """2**k for powers of two past 1024, else the number."""
    return (
        f"2**{value.bit_length() - 1}" if value > 1024 and value & (value - 1) == 0 else str(value)
    )


STRATEGIES = [
    Strategy(
        "gather",
        "elements",
        "GatherElements on X viewed as (N*C, S), one value per tap: few channels (below "
        f"{ROWS_MIN_CHANNELS}; below {SCALED_MIN_CHANNELS} where the rows would be scaled), too "
        "few points to pay a channels-last copy (2 S > taps x P; S > taps x P once scaled rows "
        f"have {SCALED_FULL_COPY_CHANNELS} channels), or an X over {_n(ROWS_MAX_ELEMENTS)} values "
        "for the per-tap chain; and wherever the rows' indices would pass int32",
    ),
    Strategy(
        "gather",
        "rows",
        "Gather of C-vectors from a channels-last copy (N*S, C): otherwise, and always where "
        "the target has no GatherElements; with unknown sizes, any mode but nearest; on a "
        f"fused target (tvm), any mode but nearest up to {FUSED_ROWS_MAX_BATCH} sample(s) where "
        "2 S <= taps x P, never with a symbolic batch where it has no Range",
    ),
    Strategy(
        "sum",
        "reduce_sum",
        "GatherElements: one Mul and one ReduceSum over the taps; rows with "
        f"{REDUCED_ROWS_MIN_TAPS}+ taps where coordinates are interleaved: every tap in one "
        f"Gather, one ReduceSum, up to {_n(TAPS_MAX_VALUES)} values gathered; where OpenVINO "
        "keeps float32 (its tail, a fenced Loop) only past one sample or "
        f"{_n(CHAIN_MAX_SAMPLE_VALUES)} values of X a sample (the chain's faster below)",
    ),
    Strategy(
        "sum",
        "by_channel",
        "GatherElements where the target allows MatMul: each channel gathered alone, its taps "
        f"summed by a MatMul with ones; 1 channel, {MATMUL_MIN_TAPS}+ taps and up to "
        f"{BY_CHANNEL_MAX_CHANNELS} channels, int64 indices and up to {BY_CHANNEL_INT64_CHANNELS}, "
        f"or below {ROWS_MIN_CHANNELS} once the gather moves {_n(BY_CHANNEL_MIN_VALUES)} values",
    ),
    Strategy("sum", "chain", "rows: one Gather per tap, weighted and summed by a chain of Adds"),
    Strategy(
        "sum",
        "scaled",
        f"rows, 2-{MATMUL_MIN_TAPS - 1} taps, where the target allows BatchNormalization and "
        "MatMul: every tap in one Gather, each row scaled by one BatchNormalization, summed by "
        f"a MatMul with ones; up to {_n(TAPS_MAX_VALUES)} values gathered ({_n(SCALED_MAX_VALUES)} "
        f"below {ROWS_MIN_CHANNELS} channels)",
    ),
    Strategy(
        "sum",
        "matmul",
        f"rows, {MATMUL_MIN_TAPS}+ taps, where the target allows MatMul: every tap in one Gather, "
        f"summed by one batched MatMul; channels x taps from {MATMUL_MIN_VALUES}, up to "
        f"{_n(TAPS_MAX_VALUES)} values gathered",
    ),
    Strategy("sum", "none", "nearest: one tap, moved in X's own type"),
    Strategy(
        "ring",
        "2 or 4",
        "zeros padding of linear (2) or cubic (4) on float X with GatherElements: only each "
        "point's first tap is clamped, the others follow at constant flat offsets",
    ),
    Strategy("ring", "1", "the same with rows: every tap clamped onto a ring of one zero"),
    Strategy(
        "ring",
        "0",
        "other paddings, nearest; integer and bfloat16 X mask the weights instead; and float X "
        f"with static sizes of at least {MASKED_TAPS_MIN_RATIO}x the values the taps read (S "
        ">= ratio x taps x P): the taps gathered by GatherElements unpadded and masked by a "
        "Where (on targets with Pad, GatherElements and a fast Where), or (openvino) its rows "
        "or planes masked so; with X of unknown size and a grid of static size, where the "
        "target runs an If cheaply (onnxruntime), an If picks this form or the ring by X's "
        "size at run time, and where an If copies what its branches read (openvino), this "
        "form always",
    ),
    Strategy(
        "zero_slot",
        "True",
        "nearest, zeros padding, GatherElements: masked points read a zero appended to X while "
        f"S <= {SLOT_MAX_RATIO} x P or either is unknown (else a Where masks the values; with "
        "X of unknown size and a grid of static size, where the target runs an If cheaply "
        "(onnxruntime), an If picks the Where or the slot by X's size at run time); and "
        "always for types onnxruntime's Where lacks, or where the target's Where is slow "
        "(litert: a zero row appended to the rows)",
    ),
    Strategy(
        "tiled",
        "True",
        f"rows: the channels-last copy in tiles of {TILE} pixels where each channel's pixels "
        f"take a multiple of {ALIASED_BYTES} bytes, up to {_n(TILED_MAX_VALUES)} values a sample; "
        "not where the target's Transpose does not thrash (litert), nor where only a 4-D "
        "perm (0, 3, 1, 2) runs fast (openvino: X viewed as (N, C, 1, S) moves its S so)",
    ),
    Strategy(
        "float_index",
        "True",
        "targets whose integer elementwise ops are slow (litert): every index clamped, strided "
        "and offset in float32, cast once before its gather, while the largest index stays below "
        f"{_n(FLOAT_INDEX_LIMIT)} (static sizes, float32 coordinates)",
    ),
    Strategy(
        "planes",
        "True",
        "rows summed by the chain (or nearest), one static sample of fewer than "
        f"{PLANES_MAX_CHANNELS} channels, where the target broadcasts per-point weights over a "
        "short innermost axis slowly (litert): each tap gathers C values from X's planes (C, S) "
        "along the pixels, weighed broadcast over the channels; no channels-last copy, no final "
        "Transpose. Where the target's transposes are slow (openvino, tract), any sum, one "
        "sample or several (or an unknown batch: X read in place on one axis, each channel's "
        "index its own, (C, N, .., P)): nearest, fewer channels, or "
        f"while the padded X holds taps x P / {PLANES_SPATIAL_DIVISOR} pixels",
    ),
    Strategy(
        "interleaved",
        "True",
        "targets whose runtime may store float tensors in bfloat16 (openvino: OpenVINO's CPU "
        "default): coordinates computed on the grid as it is, in elementwise regions that end in "
        "small integers (past 256 px as 256 hi + lo) and weights (hi + lo), each axis' apart; "
        "not for nearest (and cubic of symbolic sizes) on a path to the model's output through "
        "elementwise ops and moves alone, which OpenVINO keeps in float32 (planar coordinates "
        "run faster there), "
        "nor fenced where the grid is computed or a model input (planar: run op by op, the "
        "points innermost)",
    ),
    Strategy(
        "merged",
        "True",
        "interleaved, symbolic sizes, where the target's runtime runs them op by op over the "
        "innermost axis (openvino): the grid's last axis and its components as one, (N, O.., "
        "Or*r), and the static axes before it while fewer than 64 values (a one-column grid: "
        "(N, P*r)); only where the grid is stored before it is read (not a model input, nor "
        "an elementwise op's output) or the node is in the float32 tail, and not for a grid of "
        "constants and shapes alone (folded once sizes are static)",
    ),
    Strategy(
        "components_first",
        "True",
        "interleaved on a target whose runtime may store bfloat16 (openvino), where the grid is "
        "stored before it is read (not a model input, nor an elementwise op's output, nor "
        "constants and shapes alone) or in the float32 tail, and its last axis is not static "
        "and shorter than 64: the coordinates computed on the grid transposed once to (r, N, "
        "O..), the points innermost, none of their results transposed after",
    ),
    Strategy(
        "fenced",
        "True",
        "symbolic sizes on a target whose runtime runs them op by op, storing bfloat16 by "
        "default, but keeps each graph's tail in float32, a Loop's body too (openvino): the "
        "lowering runs in the body of a Loop run once (its trip count X's size >= 0); not in "
        "the float32 tail",
    ),
    Strategy(
        "float32_kept",
        "True",
        "fenced, or on a path to the model's output through elementwise ops and moves alone, "
        "on a target whose runtime may store bfloat16 elsewhere (openvino): interleaved "
        "positions and weights leave their regions whole, no hi + lo, no second region",
    ),
    Strategy(
        "flat_points",
        "True",
        "targets slow past max_fast_rank axes (litert: 3-D's (N, T1, T2, T3, O1, O2, O3)); and "
        "planar coordinates of symbolic sizes where the output's last axis is static and "
        "shorter than the target's kernels need (openvino: 64 values): per-point tensors hold "
        "the output points on one axis, (N, T.., P)",
    ),
    Strategy(
        "flat_grid",
        "True",
        "merged interleaved coordinates (openvino, symbolic sizes) of a grid whose point axes "
        "are static and whose last is shorter than 64 points (RAFT's lookups, (N, 7, 7, 2)): "
        "the grid reshaped to (N, 1.., P, r) first and Y back last, every per-point tensor "
        "then holding the points on its last axis; not where a point axis is symbolic",
    ),
    Strategy(
        "point_tiles",
        "8 or 16 or 32",
        "targets that run each op over its whole tensor (onnxruntime): the grid's points, as "
        "(N, 1.., P, r), sliced into tiles lowered alone on the same X, their outputs "
        f"concatenated; from {_n(POINT_TILES_FROM)} points (N x P) in tiles of {_n(POINT_TILE)} "
        f"(cubic: from {_n(CUBIC_TILES_FROM)}, tiles of {_n(CUBIC_POINT_TILE)}; nearest: from "
        f"{_n(NEAREST_TILES_FROM)}, tiles of {_n(NEAREST_POINT_TILE)}), at most "
        f"{POINT_TILES_MAX} tiles; symbolic points: {SYMBOLIC_POINT_TILES} tiles (nearest "
        f"{SYMBOLIC_POINT_TILES // 2}) behind an If on a sample's points, one piece below",
    ),
    Strategy(
        "fraction",
        "True",
        "interleaved linear rows (openvino) but zeros padding without a ring: each axis' "
        "weights leave their region as one fraction f = x - floor(x) a point (hi + lo); each "
        "tap's 1 - f or f is made in the region that sums the taps (4 weight inputs for 2-D "
        "rather than 8: one region, under OpenVINO's about 11 inputs)",
    ),
    Strategy(
        "integer_indices",
        "True",
        "targets whose runtime may store float tensors in bfloat16 but whose coordinates stay "
        "planar (generic): no float flat index, every index bounded as an integer, so it stays "
        "in range whatever the runtime rounds (exact up to 256 px)",
    ),
    Strategy(
        "positions_from_grid",
        "True",
        "integer_indices and static sizes: nearest's rounded (reflected) coordinates computed "
        "on the grid as it is, one elementwise region ending in integers exact in bfloat16 "
        "(past 256 px as 256 hi + lo), then each axis' clamp and mask; linear's and cubic's "
        "floors and fractions (less a half), two such regions (past 252 px, reflection 126: "
        "the floors as 256 hi + lo, three)",
    ),
    Strategy(
        "reader",
        "samples",
        "targets whose own linear GridSample is right (MNN, ncnn): cubic as 3 linear samples an "
        "axis (the inner taps merged), linear with reflection as one at the reflected coordinate; "
        f"every sampled axis up to {SAMPLES_MAX_SIZE} (renormalized samples move by L x 2**-24 "
        "pixels)",
    ),
    Strategy(
        "reader",
        "centres",
        "targets whose own nearest GridSample is right at pixel centres (MNN, ncnn): every other "
        "tap read there, on X viewed as 2-D; ncnn refuses what neither reader takes; MNN's "
        f"cubic from {READER_CUBIC_MAX_CHANNELS + 1} channels gathers int32 rows instead (its "
        "kernel reads every channel again for each of 9-16 reads)",
    ),
    Strategy(
        "index_type",
        "INT32",
        "static sizes below 2**31 (the rows: N x S), or the target's int32; else int64",
    ),
    Strategy(
        "flat_in_float",
        "True",
        "one index per point (nearest with zeros, a wide ring): the axes combined in float and "
        "cast once, while S <= 2**24 (float32) or 2**53 (float64); not with interleaved or "
        "integer_indices",
    ),
    Strategy(
        "position_type",
        "INT32",
        "static sizes below 2**31, or float32 coordinates bounded by 2**23 (border, zeros but "
        "nearest's)",
    ),
]


def strategy_table() -> str:
    """The table of strategies in docs/lowered-graph.md, from ``STRATEGIES``."""
    lines = ["| plan field | form | when |", "|---|---|---|"]
    lines += [f"| {s.choice} | {s.form} | {s.when} |" for s in STRATEGIES]
    return "\n".join(lines)
