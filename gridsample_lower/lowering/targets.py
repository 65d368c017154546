"""Deployment targets: which ops a lowered graph may use, its index type, what stays native.

A target is data, not code paths: the decompositions ask the emitter for an operation
(``clip``, ``round_half_to_even``, ``logical_and``, the gather) and the emitter picks the form
the target allows. ``keeps`` names the configurations the target runs natively, which
``lower`` leaves alone unless asked to lower everything; given the node too, it may judge by its
shapes and constant inputs.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
from collections.abc import Callable

import onnx_ir as ir

from gridsample_lower.spec import GridSampleSpec

__all__ = ["TARGETS", "Target", "get_target"]


@dataclasses.dataclass(frozen=True)
class Target:
    """What a runtime or accelerator can run."""

    name: str
    description: str
    # Ops the lowered graph must not use; the emitter substitutes equivalents.
    avoids: frozenset[str] = frozenset()
    # Gather index type; None: int32 when the sizes are static and fit, else int64.
    index_dtype: ir.DataType | None = None
    # GridSample configurations the target runs natively (kept by default); the node, when
    # known, lets it judge by shapes and constant inputs.
    keeps: Callable[[GridSampleSpec, ir.Node | None], bool] = lambda spec, node=None: False
    # The runtime may store float tensors between its kernels in reduced precision (OpenVINO's
    # CPU plugin: bfloat16 by default where the CPU has it), while computing fused elementwise
    # kernels in float32: the coordinates are computed from the grid as it is, in regions that
    # end in integers and weights (``plan.interleaved``). Not for generic: that form costs
    # onnxruntime 1.38x (geomean of bench/run.py's shapes, up to 4.5x for 3-D linear).
    reduced_storage: bool = False
    # Ops through which the runtime's float32 graph tail runs: where a path leads from a
    # GridSample's output to a model output through these alone, the runtime keeps the node's
    # ancestors in float32 even at its reduced default precision (OpenVINO:
    # ``Graph::EnforceInferencePrecision`` walks up from each output and stops only at
    # Convolution, MatMul, FullyConnected, Interpolate, RNN and ROIPooling nodes), and the
    # bfloat16-safe forms buy nothing there (``costs.planar_tail_pays``). Empty: no such tail.
    float32_tail: frozenset[str] = frozenset()
    # Elementwise kernels on tensors of symbolic size loop over the innermost axis alone, near
    # scalar where it holds fewer values than this (OpenVINO's CPU plugin runs such a model op
    # by op: 6 ops on a 2x480x640x2 grid took 18 ms with its 2 components innermost, 1.6 ms on
    # (2, 480, 1280)): interleaved coordinates merge the grid's last axes with its components
    # (``plan.merged``), planar ones put the points on one axis past a short last axis
    # (``plan.flat_points``). 0: no such cost.
    short_innermost: int = 0
    # Every index is combined and bounded as an integer (``plan.integer_indices``): no float
    # flat index, and every axis' integer positions clamped into the axis once cast. The
    # runtime may store float tensors between its kernels in bfloat16 (OpenVINO's CPU default
    # where the CPU has it), which rounds an integer past 256: such an index then stays in range
    # (an axis of up to 256 pixels, exact) instead of failing the gather or reading another row.
    integer_indices: bool = False
    # Ranks whose taps the target's own nearest GridSample reads, at pixel centres, on X viewed
    # as 2-D (``native_taps``: for kernels right only there).
    centre_reader_ranks: frozenset[int] = frozenset()
    # Ranks whose own linear GridSample (zeros, border) reads cubic's and reflection's linear
    # samples (``native_taps``).
    sample_reader_ranks: frozenset[int] = frozenset()
    # The target has no other data-dependent read (ncnn): nodes the readers cannot take are
    # refused.
    reads_only: bool = False
    # A compiler that fuses chains of elementwise ops into one loop (TVM): the rows are chosen
    # by ``costs.rows_pay``'s rule for fused targets, not onnxruntime's thresholds.
    fuses: bool = False
    # Multi-scale deformable attention (a GridSample per level, stacked, weighted, summed) is
    # lowered as one unit (``attention``): one Gather and one MatMul for every level's taps;
    # also where the target keeps the levels alone, if one unit runs faster
    # (``costs.attention_pays``).
    fuses_attention: bool = False
    # One attention's taps gathered from every level's planes ``(C, N*S)``, each level padded
    # by a ring of zeros: no masks, no integer select (OpenVINO: a Gather of short rows, and
    # its integer ops, run slowly). Only static levels whose padded axes stay exact in
    # bfloat16 (up to 256 pixels), which OpenVINO stores between its kernels by default.
    attention_planes: bool = False
    # Index arithmetic in float (exact: static sizes below 2**24), each flat index cast once:
    # for runtimes whose integer elementwise ops are slow (LiteRT runs float Min/Max/Mul/Add
    # in XNNPACK, int32 ones with a broadcast scalar 10-40x slower in its reference kernels).
    float_index_math: bool = False
    # Where runs far slower than arithmetic (LiteRT's SELECT_V2: 20-30 ns an element, a float
    # Mul 1): nearest's outside points read a zero slot appended to X, never a masking Where.
    slow_where: bool = False
    # The channels-last copy may be made in tiles where one Transpose thrashes onnxruntime's
    # caches (costs.tiled_pays); LiteRT's TRANSPOSE does not thrash, and copies each tile twice.
    tiled_copy: bool = True
    # Each grid component gathered from the grid's last axis rather than after a Transpose of
    # the grid: onnx2tf rewrites a Transpose's perm when sizes coincide (batch 2, 2-D grid).
    grid_by_gather: bool = False
    # A Mul broadcasting a per-point weight (P, 1) over few channels (P, C) runs far slower
    # than one over a leading axis (LiteRT: outside XNNPACK's fast path below 16 channels):
    # one sample of few channels is gathered from X's planes instead (``costs.planes_pay``).
    slow_inner_broadcast: bool = False
    # Transposes cost about what gathering each value apart does (OpenVINO's CPU plugin: its
    # permutes copy 0.5-0.75 ns a value, the channels-last copy of X, and the transposed
    # output, while its Gather of single values runs a JIT kernel at about 0.5 ns): one sample
    # is gathered from X's planes where that copy and the output's outweigh the taps
    # (``costs.planes_pay``), with any sum and any number of channels. tract 0.23 too: where
    # this rule picks the planes at bench/run.py's shapes they ran 0.47-0.97x the rows' time
    # (nearest 0.47-0.76, 3 channels at 224x224 0.81-0.97), and the rows stay elsewhere.
    slow_transpose: bool = False
    # Only a 4-D Transpose of perm (0, 3, 1, 2) between planar layouts runs fast (OpenVINO's
    # CPU plugin: a oneDNN reorder, where its permute kernel takes every other perm; X's
    # channels-last copy at 1x64x64x64, AVX2: 0.37-0.42 ms against 1.0 as (0, 2, 3, 1), 0.7 in
    # tiles): X is viewed as (N, C, 1, S) and its S moved before C so, the output likewise.
    reorder_transposes: bool = False
    # The rows take one flat index per point, X padded by a ring as wide as the kernel, and
    # add each tap's offset where it is gathered: no ``(N, T.., O..)`` integer tensor.
    # OpenVINO's CPU plugin lays such 5-D integer ops out blocked by 16 along a tap axis of 2
    # where a Conv is near (8x the work, then a reorder): 4.7 of an STN's 22 ms at 480x640.
    offsets_at_gather: bool = False
    # Tensors of more than this many axes run slowly (LiteRT: its broadcasting kernels take up
    # to 5-D, past it BROADCAST_TO and reference kernels): 3-D sampling's per-tap tensors,
    # (N, T1, T2, T3, O1, O2, O3), keep the output points on one axis instead (0: no limit).
    max_fast_rank: int = 0
    # Where's constant branches hold one element on one axis, never a 0-D scalar: mlprodict's
    # python runtime (0.9.1883) broadcasts a (1,) branch but refuses a scalar ("x and y should
    # share the same shape"); against the rank >= 1 operands beside them both broadcast to
    # the same shape, at the same cost (bench/mlprodict_check.py).
    where_scalars: bool = True
    # What an X of unknown size takes where its linear or cubic taps (nearest: its values)
    # could be masked once gathered rather than read from X padded by a ring or a zero slot:
    # "padded" (a copy of X); "if": an If picks by X's size at run time, masked where X proves
    # large, else padded, which an X with an empty axis also takes (``Plan.small_x``): the
    # runtime runs an If for about a microsecond (onnxruntime 1.32: 34.3 vs 33.4 us for a
    # GatherElements of 12,288 values, 5.6 vs 4.4 at 256); "masked": always, where an If
    # copies every value its branches read (OpenVINO 2026.4 with symbolic sizes: 0.86 ms a run
    # for a 3x480x640 X, which it reads unpadded in 0.2), and an X with an empty axis fails at
    # run time, as onnxruntime's own GridSample does.
    unknown_x: str = "padded"
    # The runtime keeps the tail of each subgraph in float32, as of its main graph, at its
    # reduced default precision (OpenVINO: ``EnforceInferencePrecision`` walks up from each
    # graph's outputs, and a Loop's body is a graph of its own), while it runs symbolic sizes
    # op by op, each value stored in bfloat16: a lowering of symbolic sizes then runs in the
    # body of a Loop run once (``plan.fenced``).
    float32_bodies: bool = False
    # The runtime lays a 4-D or 5-D tensor out blocked along its axis 1 where that axis holds
    # a few values and sizes are static (OpenVINO's CPU plugin: nChw8c for the cubic taps'
    # (N, 4, 1, P) beside a per-tap constant), padding it to the block and reordering it back:
    # per-axis tensors keep a unit axis after the batch, ``(N, 1, T.., O..)``. Kornia's cubic
    # warp_affine as exported, reshaped to 2x3x40x56: an integer Clip 280 -> 38 us, the model
    # 1.94-2.03 -> 1.48-1.50x the original's time.
    lone_axis_1: bool = False
    # GatherElements for linear and cubic taps where X has at most this many channels, read
    # unpadded (zeros padding's outside taps masked once gathered), row Gathers elsewhere,
    # whatever the costs say of onnxruntime (0: by the costs). tinygrad 0.14, against its
    # rows: 0.07-0.15x at 1x3x224x224 and 1x8x224x224, 0.52-0.70 at 2x4x96x96, 1.09-1.38 at
    # 1x8x64x64, and 0.85-1.97 with 16 to 64 channels; after a Pad or a zero slot, 30-140x
    # slower. Masked, an infinite pixel beside a dropped tap adds 0, where the rows' weights
    # of 0 gave NaN.
    elements_max_channels: int = 0
    # The runtime runs each op over its whole tensor before the next (onnxruntime): a large
    # grid's per-point tensors stream through memory between ops, so its points are lowered
    # in tiles of a few thousand, each tile's tensors cached from op to op
    # (``costs.point_tiles``; a 1x3x480x640 linear warp 1.56 -> 1.03x its kernel's time).
    point_tiles: bool = False

    def __post_init__(self) -> None:
        if _takes_spec_only(self.keeps):  # written before targets could see the node
            judge = self.keeps
            object.__setattr__(self, "keeps", lambda spec, node=None: judge(spec))

    def allows(self, op_type: str) -> bool:
        return op_type not in self.avoids


def _takes_spec_only(function: Callable) -> bool:
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):  # no signature to read: call it with both
        return False
    if any(p.kind is p.VAR_POSITIONAL for p in parameters):
        return False
    return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in parameters) == 1


# Runtimes run MatMul in reduced precision by default: OpenVINO's CPU plugin in bfloat16 where
# the CPU has it (a lowered 3-D linear then erred by 8e-2, cubic by 0.5), TensorRT in TF32 on
# Ampere and later GPUs. So only the onnxruntime target (float32 MatMul on the CPU) sums taps
# with one; the others take the per-tap Mul and Add chain, which every runtime keeps exact.
REDUCED_PRECISION = frozenset({"MatMul"})
# BatchNormalization scales the gathered rows of many channels by their weights (a per-row
# multiply, faster than a broadcast Mul in onnxruntime), so its scale is a tensor computed at run
# time; TensorRT's ONNX parser and most NPU compilers take only constant parameters.
CONSTANT_PARAMETERS = frozenset({"BatchNormalization"})
# Elementwise ops: a runtime fusing such chains (OpenVINO's CPU plugin) runs a GridSample's
# lowered coordinates in one kernel with the op that made its grid, when it is one of these.
ELEMENTWISE = frozenset(
    "Abs Acos Add And Asin Atan Cast CastLike Ceil Celu Clip Cos Div Elu Equal Erf Exp Floor "
    "Gelu Greater GreaterOrEqual HardSigmoid HardSwish IsInf IsNaN LeakyRelu Less LessOrEqual "
    "Log Max Mean Min Mish Mod Mul Neg Not Or Pow PRelu Reciprocal Relu Round Selu Sigmoid Sign "
    "Sin Softplus Softsign Sqrt Sub Sum Tan Tanh ThresholdedRelu Where Xor".split()
)
# Ops that neither convolve nor multiply matrices: elementwise, comparisons, reductions and
# data movement (the float32 graph tail runs through them; any other op ends it).
ELEMENTWISE_AND_MOVES = ELEMENTWISE | frozenset(
    "Concat DepthToSpace Expand Flatten Gather GatherElements GatherND GridSample Identity "
    "LogSoftmax Pad ReduceL1 ReduceL2 ReduceLogSumExp ReduceMax ReduceMean ReduceMin ReduceProd "
    "ReduceSum ReduceSumSquare Reshape Slice Softmax SpaceToDepth Split Squeeze Tile Transpose "
    "Trilu Unsqueeze".split()
)

ONNXRUNTIME_ONLY = REDUCED_PRECISION | CONSTANT_PARAMETERS
# Symbolic sizes multiplied by ReduceProd or Flatten: tract 0.23.9 cannot read a shape a
# ReduceProd computed ("shape input is variable") nor infer Flatten's over two symbols ("square
# of symbols"), and TVM 0.27's relax importer cannot reduce a shape. Without them the emitter
# gathers each dimension from Shape as a scalar, multiplies scalars and Unsqueezes or Concats
# them into shapes, and reshapes where it would flatten (static graphs change by Flatten ->
# Reshape only).
SHAPE_PRODUCTS = frozenset({"ReduceProd", "Flatten"})

# bench/target_choices.py checks these bounds.
FOLDED_GRID_MAX_CHANNELS = 4  # with a constant grid, the lowering beats the fast kernel up to here
# Lowered in tiles of points (costs.point_tiles), the lowering beats the fast kernel from these
# points a sample with up to these channels (bench: random and smooth grids, 1 thread, lowered /
# native; 1 channel 0.40-0.84 from 320x320; up to 4 at 720x1280 0.46-0.76, where 8 took
# 0.78-1.11 and 2-4 at 480x640 0.90-1.21).
TILED_FAST_PATH = ((2**16, 1), (2**19, 4))


def native_cubic_channels(points: int | None, dtype: ir.DataType, padding: str) -> float:
    """Up to how many channels onnxruntime's 2-D cubic kernel beats the lowering (inf: any).

    The lowering spends about 100 ops on each point's 16 taps, then streams 16 values per point
    and channel through memory; the kernel pays its per-point work again for every channel.
    Measured with random and smooth grids (1 thread), lowered / native, by points per sample:
    - float32, zeros or border: the kernel wins with one channel (64x64: 1.07-1.13; 320x320:
      1.09-1.10; from 2**13 to 2**16 points 0.86-0.96 in a quiet hour but 1.03-1.21 in a busy
      one, when other machines share the memory); past 2**17 points the lowering's taps leave
      the cache and the kernel wins with two (384x384 to 600x800: 0.97-1.37), past 2**18 on
      smooth grids with three (480x640 to 720x1280: 1.04-1.25; random grids 0.82-0.96).
      Reflection: never (its kernel is slow: 0.58-1.0).
    - float64, whose Mul and MatMul onnxruntime runs slowly: past 2**15 points the kernel wins
      (224x224: 1.0-1.5 with 2-12 channels, though 0.83-0.93 with 6-12 in a quieter hour;
      480x640: 1.35-2.8); up to 2**15 the lowering wins from 3 channels (0.60-0.89). With
      reflection it wins from 2 channels at any size (up to 2**16 points 0.64-0.77; 480x640
      with 2, 3 and 6 channels 0.82, 0.69 and 0.56-0.73), and the kernel with one (1.14-1.22).
    Unknown sizes keep one float32 channel and every float64 one. Near these bounds the
    ratios move by 10-20% with the machine's load (bench/results/target_choices*.md).
    """
    if dtype == ir.DataType.DOUBLE:
        if points is None:
            return math.inf
        if padding == "reflection":
            return 1
        return math.inf if points > 2**15 else 2
    if padding == "reflection":
        return 0
    if points is None:
        return 1
    return min(3, max(1, (points - 1).bit_length() - 16))


def _float_4d(spec: GridSampleSpec, node: ir.Node | None = None) -> bool:
    floats = (ir.DataType.FLOAT, ir.DataType.FLOAT16)
    return spec.rank == 2 and spec.x_dtype in floats and spec.grid_dtype in floats


def _openvino_keeps(spec: GridSampleSpec, node: ir.Node | None = None) -> bool:
    """4-D GridSample on float or float16 X, whatever the grid's float type.

    OpenVINO 2026.4 runs a double grid too (TorchScript exports of Deformable DETR and
    Mask2Former give float X a double grid: lowering their 8 nodes took a model from 16.8 to
    40.7 ms). It computes double X in float32, so that is lowered.
    """
    grids = (ir.DataType.FLOAT, ir.DataType.FLOAT16, ir.DataType.DOUBLE)
    x_types = (ir.DataType.FLOAT, ir.DataType.FLOAT16)
    return spec.rank == 2 and spec.x_dtype in x_types and spec.grid_dtype in grids


def _onnxruntime_keeps(spec: GridSampleSpec, node: ir.Node | None = None) -> bool:
    """What onnxruntime's own kernel runs faster than the lowering (1 thread).

    - 2-D linear + zeros + align_corners=0, whose kernel precomputes a plan per point (the
      lowering takes 0.9-2.4x its time); unless the grid is a constant and X has at most 4
      float32 channels: onnxruntime then folds the lowered coordinate math at session start
      and the rest takes 0.25-0.95 of the kernel's time (8 channels: 1.0-1.4); or the points
      are many and the float32 channels few (``TILED_FAST_PATH``), lowered in tiles;
    - 2-D cubic with up to ``native_cubic_channels`` channels: by the points per sample, one
      to three float32 ones with zeros or border padding, any float64 ones past 2**15 points;
      unless the grid folds (0.35-0.8).
    """
    kernel_types = (ir.DataType.FLOAT, ir.DataType.DOUBLE)  # where the thresholds were measured
    if spec.rank != 2 or spec.x_dtype != spec.grid_dtype or spec.x_dtype not in kernel_types:
        return False
    channels = _static_channels(node)
    folds = _grid_folds(spec, node)
    if (spec.mode, spec.padding_mode, spec.align_corners) == ("linear", "zeros", 0):
        if channels is not None and spec.x_dtype == ir.DataType.FLOAT:
            points = _static_points(node) or 0
            if any(points >= least and channels <= most for least, most in TILED_FAST_PATH):
                return False
        return not (folds and channels is not None and channels <= FOLDED_GRID_MAX_CHANNELS)
    if spec.mode != "cubic" or folds:
        return False
    kept = native_cubic_channels(_static_points(node), spec.x_dtype, spec.padding_mode)
    return (math.inf if channels is None else channels) <= kept  # unknown: many


def _static_channels(node: ir.Node | None) -> int | None:
    x = node.inputs[0] if node is not None else None
    if x is None or x.shape is None or len(x.shape) < 2 or not isinstance(x.shape[1], int):
        return None
    return x.shape[1]


def _static_points(node: ir.Node | None) -> int | None:
    """The output points per sample, where the grid's spatial sizes are static."""
    grid = node.inputs[1] if node is not None else None
    if grid is None or grid.shape is None or len(grid.shape) < 3:
        return None
    sizes = list(grid.shape)[1:-1]
    return math.prod(sizes) if all(isinstance(d, int) for d in sizes) else None


def _grid_folds(spec: GridSampleSpec, node: ir.Node | None) -> bool:
    """Whether onnxruntime folds a float32 lowering's coordinates at session start.

    It does when the grid is a constant and X's spatial sizes are static (symbolic ones leave
    the Shape arithmetic to run). An initializer that is also a graph input is not constant:
    a caller may override it.
    """
    if node is None or spec.x_dtype != ir.DataType.FLOAT:
        return False
    x, grid = node.inputs[0], node.inputs[1]
    if x is None or x.shape is None or not all(isinstance(d, int) for d in x.shape[2:]):
        return False
    if grid is None or grid.is_graph_input():
        return False
    try:
        return ir.convenience.get_const_tensor(grid) is not None
    except ValueError:  # a malformed Constant: no value to fold
        return False


def _float32_linear_zeros_border(spec: GridSampleSpec, ranks: tuple[int, ...]) -> bool:
    """Float32 X and grid, linear, zeros or border padding, at one of ``ranks``."""
    return (
        spec.rank in ranks
        and spec.x_dtype == ir.DataType.FLOAT
        and spec.grid_dtype == ir.DataType.FLOAT
        and spec.mode == "linear"
        and spec.padding_mode in ("zeros", "border")
    )


def _linear_zeros_border(spec: GridSampleSpec, node: ir.Node | None = None) -> bool:
    """What MNN 3.6.1's and ncnn's own GridSample compute right: 2-D, 3-D linear, zeros, border.

    Float32 X and grid (bench/mnn_ncnn.py, against onnxruntime). Both compute cubic as bilinear
    (pnnx maps ONNX's ``cubic`` to ncnn's default), round nearest's ties away from zero and
    fold reflection once (MNN: right only for grids in [-1, 1]; ncnn was right for grids in
    [-3, 3], but is lowered too); MNN's 1-D crashes and pnnx cannot convert 1-D.
    """
    return _float32_linear_zeros_border(spec, (2, 3))


def _litert_keeps(spec: GridSampleSpec, node: ir.Node | None = None) -> bool:
    """What onnx2tf 1.29.24's emulation computes right and faster than the litert lowering.

    Linear with zeros or border padding, float32, ranks 1-3: right in every configuration of
    bench/litert.py's correct set (batch 1 and 2, grids to +-2.5; symbolic sizes too), and
    faster at every bench shape but sparse points (the lowering / it: 1.04-1.77; 4096 points
    of a 32x128x128 X with zeros padding 0.89-1.28). onnx2tf puts a negative-index guard of
    four ops before every Gather of computed indices, which costs the lowering more than its
    gathers do. Its nearest is wrong on half-way coordinates and its cubic with border or
    reflection padding; the lowering's reflection runs as fast or faster (0.85-1.31, 1.31
    where C = H = W makes the emulation wrong).
    """
    return _float32_linear_zeros_border(spec, (1, 2, 3))


# What pnnx (20261020) cannot map to an ncnn layer, or maps wrongly (bench/mnn_ncnn.py):
# data-dependent gathers (ncnn has none), comparisons, Where, logical ops and Cast (no bool or
# integer values), Round, Mod and Sign (no kernel, or a crash), Pad with tensor pads, Range and
# Shape (fixed shapes); and Slice and Concat on the last axis, ReduceSum over one axis, which
# it converts to the wrong axes.
NCNN_UNMAPPED = frozenset(
    {
        "Gather", "GatherElements", "GatherND", "Where", "Equal", "Greater", "GreaterOrEqual",
        "Less", "LessOrEqual", "And", "Or", "Not", "Cast", "Round", "Mod", "Sign", "Pad",
        "Range", "Shape", "ReduceProd", "Slice", "Concat", "ReduceSum", "Expand", "Flatten",
        "Unsqueeze", "Transpose",
    }
)  # fmt: skip


def _tvm_keeps(spec: GridSampleSpec, node: ir.Node | None = None) -> bool:
    """What TVM 0.27's own GridSample runs right and faster than the tvm lowering.

    Relax, llvm, fused, 1 thread (bench/results/runtimes.md, lowered / native): float32 4-D,
    and 5-D but cubic (no 5-D cubic, nor 1-D), with zeros or border padding: 1.35-6.4. Its
    reflection is 2-22x slower than its border, and is lowered where the tvm lowering gathers
    rows (one sample, 2 S <= taps x P: 0.26-0.95, 3-D 0.35), not where it takes GatherElements
    (8x32x64x64: 2.3; 4096 points of a 32x128x128 X: 1.4), nor for nearest (one tap: 1.6-3.2
    with zeros padding).
    """
    if spec.x_dtype != ir.DataType.FLOAT or spec.grid_dtype != ir.DataType.FLOAT:
        return False
    if not (spec.rank == 2 or (spec.rank == 3 and spec.mode != "cubic")):
        return False
    if spec.padding_mode != "reflection":
        return True
    from gridsample_lower.lowering import costs  # (costs reads this module)
    from gridsample_lower.lowering.index_range import TAPS_PER_AXIS

    shapes = [v.shape if v is not None else None for v in node.inputs[:2]] if node else [None] * 2
    sizes = costs.Sizes.of(spec.rank, *shapes)
    return not costs.rows_pay(sizes, TAPS_PER_AXIS[spec.mode] ** spec.rank, TARGETS["tvm"])


TARGETS: dict[str, Target] = {
    t.name: t
    for t in [
        Target(
            "generic",
            "lower every GridSample with standard ops that runtimes keep in full precision "
            "(the default)",
            avoids=ONNXRUNTIME_ONLY,
            integer_indices=True,
            grid_by_gather=True,  # (onnxruntime: the same time as a Transpose's slices)
        ),
        Target(
            "onnxruntime",
            "lower what onnxruntime cannot run, and what runs faster lowered (MatMul, "
            "BatchNormalization, a large grid's points in tiles, deformable attention as one "
            "unit)",
            keeps=_onnxruntime_keeps,
            fuses_attention=True,
            unknown_x="if",
            point_tiles=True,
        ),
        Target(
            "openvino",
            "keep 4-D float GridSample, any grid type (OpenVINO runs it), lower the rest "
            "with row Gathers (--lower-all: deformable attention as one unit)",
            # It runs 3-D and 1-D GridSample only lowered, and its GatherElements was slower
            # than row Gathers in 9 of 11 cases (bench/openvino_gathers.py: 5-D linear with 16
            # channels 8.66 vs 6.24 ms; at worst 15% faster).
            avoids=ONNXRUNTIME_ONLY | {"GatherElements"},
            keeps=_openvino_keeps,
            reduced_storage=True,
            float32_tail=ELEMENTWISE_AND_MOVES,
            short_innermost=64,
            unknown_x="masked",
            float32_bodies=True,
            slow_transpose=True,
            reorder_transposes=True,
            offsets_at_gather=True,
            fuses_attention=True,
            attention_planes=True,
            lone_axis_1=True,
        ),
        Target(
            "tensorrt",
            "keep 4-D float GridSample (TensorRT runs it), lower the rest",
            avoids=ONNXRUNTIME_ONLY,
            keeps=_float_4d,
        ),
        Target(
            "webnn",
            "WebNN: plain Gather, Where, Min/Max and Floor-based rounding; "
            "no GatherND, GatherElements, And, Mod, Round, Clip or MatMul",
            avoids=ONNXRUNTIME_ONLY
            | frozenset({"GatherND", "GatherElements", "And", "Mod", "Round", "Clip"}),
            index_dtype=ir.DataType.INT32,
            where_scalars=False,  # (so its graphs run on mlprodict too)
        ),
        Target(
            "tract",
            "tract: lower everything (its GridSample is 30-75x slower), row Gathers (from X's "
            "planes where few channels or one tap make its copy cost more), int32 indices, no "
            "BatchNormalization (tract takes only constant parameters), symbolic sizes without "
            "ReduceProd or Flatten",
            avoids=ONNXRUNTIME_ONLY | SHAPE_PRODUCTS | {"GatherElements"},
            index_dtype=ir.DataType.INT32,
            slow_transpose=True,
        ),
        Target(
            "iree",
            "IREE llvm-cpu: lower everything (its GridSample is wrong outside [-1, 1]), row "
            "Gathers (GatherElements 1.5-3x slower), no MatMul (it fails with symbolic sizes)",
            avoids=ONNXRUNTIME_ONLY | {"GatherElements"},
        ),
        Target(
            "tvm",
            "TVM relax (llvm): keep float32 4-D and 5-D GridSample but cubic 5-D (TVM's runs "
            "faster), lower reflection where rows pay (one sample); symbolic sizes without "
            "ReduceProd (its importer cannot reduce a shape) or Range",
            # Range: a Range up to the symbolic batch gets a length of its own, which then
            # cannot broadcast against the batch; the rows' batch offsets need it, so a
            # symbolic batch is gathered with GatherElements.
            avoids=ONNXRUNTIME_ONLY | {"ReduceProd", "Range"},
            keeps=_tvm_keeps,
            fuses=True,
        ),
        Target(
            "tinygrad",
            "tinygrad (no GridSample): row Gathers of X unpadded (a Pad before a gather "
            "makes it a one-hot sum over every pixel there, 500x slower); GatherElements for "
            "linear and cubic taps of up to 8 channels (zeros padding masks them once gathered)",
            avoids=ONNXRUNTIME_ONLY | {"Pad"},
            elements_max_channels=8,
        ),
        Target(
            "litert",
            "LiteRT via onnx2tf: keep float32 linear with zeros or border padding (onnx2tf's "
            "emulation is right and faster there), lower the rest (its nearest and cubic are "
            "wrong) with row Gathers, int32 indices computed in float32, no Where for "
            "nearest's mask; no GatherND, GatherElements, And, Mod, Clip or MatMul",
            # onnx2tf turns GatherElements into GATHER_ND over a built coordinate table (13-20x
            # slower), int32 Max(x, 0) into RELU, which TFLite lacks for int32 (a Flex op);
            # int32 Min/Max/Mul with a scalar run outside XNNPACK, 10-40x slower than float;
            # MatMul sums 1.1-5.9x slower than the chain (bench/results/litert/REPORT.md).
            # Round stays: TFLite's ROUND is ties-to-even, Floor-based rounding 2 SELECT_V2.
            avoids=ONNXRUNTIME_ONLY
            | frozenset({"GatherND", "GatherElements", "And", "Mod", "Clip"}),
            index_dtype=ir.DataType.INT32,
            float_index_math=True,
            slow_where=True,
            tiled_copy=False,
            grid_by_gather=True,
            slow_inner_broadcast=True,
            max_fast_rank=5,
            keeps=_litert_keeps,
        ),
        Target(
            "int32",
            "NNAPI and NPUs that want int32 gather indices everywhere",
            avoids=ONNXRUNTIME_ONLY,
            index_dtype=ir.DataType.INT32,
        ),
        Target(
            "mnn",
            "MNN: keep 2-D and 3-D linear with zeros or border padding (what it computes "
            "right); cubic, reflection and nearest read by its own GridSample where it is right",
            # Its Gather and GatherElements run as a loop over the indices (GatherElements 40x
            # its kernel); its Round is half away from zero and returns -0, which its Equal
            # tells from 0; BatchNormalization with a computed scale fails to convert; its
            # readers copy by Slice, Expand and Concat (its MatMuls there are loops).
            avoids=ONNXRUNTIME_ONLY | {"GatherElements", "Round"},
            index_dtype=ir.DataType.INT32,
            keeps=_linear_zeros_border,
            centre_reader_ranks=frozenset({1, 2, 3}),
            sample_reader_ranks=frozenset({1, 2, 3}),
        ),
        Target(
            "ncnn",
            "ncnn (converted by pnnx): keep 2-D and 3-D linear with zeros or border padding; "
            "the rest read by ncnn's own GridSample (no Gather, comparison, Where or Cast), "
            "float32 and static sizes, ranks 1-3",
            avoids=CONSTANT_PARAMETERS | NCNN_UNMAPPED,
            keeps=_linear_zeros_border,
            centre_reader_ranks=frozenset({1, 2, 3}),
            sample_reader_ranks=frozenset({1, 2}),  # (3-D: 5-D values; it reads centres)
            reads_only=True,
        ),
    ]
}


def get_target(name: str | Target) -> Target:
    """The target called ``name``; raises ValueError listing the known ones."""
    if isinstance(name, Target):
        return name
    if name not in TARGETS:
        raise ValueError(f"unknown target {name!r}; known: {', '.join(TARGETS)}")
    return TARGETS[name]
