"""Multi-scale deformable attention, found as exporters emit it and lowered as one unit.

Deformable DETR, RT-DETR and Mask2Former sample each feature level of one value tensor with a
GridSample, stack the samples (``Unsqueeze`` + ``Concat`` on axis -2, a ``Reshape`` merging
levels and points), weight them by the attention weights (``Mul``) and sum (``ReduceSum`` over
the last axis). Lowered node by node, every level's taps are gathered, weighted and summed into
a sample that is then stacked, weighted again and summed again. As one unit, every point of
every level becomes taps into one buffer of rows holding all levels (the value tensor they
were split from, where the exporter shows it), whose bilinear weights are multiplied by the
attention weights once; one Gather reads every tap and one MatMul sums them.

The coordinates, taps and weights are the node-by-node lowering's (``coords``, the kernels),
computed once for the points of all levels: each point's axis sizes are its level's
(``_Levels``). What does not match the pattern exactly is lowered node by node.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Collection, Sequence

import numpy as np
import onnx_ir as ir

from gridsample_lower.lowering import costs
from gridsample_lower.lowering.coords import ring_base, source_coordinate, tap_indices
from gridsample_lower.lowering.decompositions.cubic import CUBIC
from gridsample_lower.lowering.decompositions.linear import LINEAR
from gridsample_lower.lowering.emitter import ALL_AXES, Emitter
from gridsample_lower.lowering.flat_index import where_inside
from gridsample_lower.lowering.inventory import Site
from gridsample_lower.lowering.plan import choose_fenced, choose_merged, grid_origin
from gridsample_lower.lowering.point_tiles import tile_bounds, typed_slice, where_enough
from gridsample_lower.lowering.sampling import (
    BF16_EXACT,
    InterleavedTaps,
    TapConstants,
    grid_coordinates,
    interleaved_grid,
)
from gridsample_lower.lowering.selection import Selection
from gridsample_lower.lowering.targets import Target
from gridsample_lower.spec import GridSampleSpec, compute_dtype

__all__ = ["DeformableAttention", "find_attentions", "lower_attention"]

INT32, INT64 = ir.DataType.INT32, ir.DataType.INT64
QUERIES_FIRST = [0, 3, 1, 2, 4]  # (N, T, T, Q, M) -> (N, Q, T, T, M)
KERNELS = {"linear": LINEAR, "cubic": CUBIC}


@dataclasses.dataclass(frozen=True)
class DeformableAttention:
    """One deformable attention's sampling and weighted sum, as the exporter wrote it.

    ``samplers`` are its GridSample nodes in stacking order (one per level); ``nodes`` every
    node the fused lowering replaces; ``weights`` the attention weights ``(N, 1, Q, L*P)``;
    ``output`` the weighted sum ``(N, C, Q)`` (``(N, C, Q, 1)`` with ``keepdims``); ``shapes``
    the values of ``Shape`` nodes reading the stack (TorchScript's), ``(N, C, Q, L, P)``.
    """

    name: str
    samplers: tuple[ir.Node, ...]
    nodes: tuple[ir.Node, ...]
    weights: ir.Value
    output: ir.Value
    shapes: tuple[ir.Value, ...]
    keepdims: bool
    source: Source | None = None

    @property
    def spec(self) -> GridSampleSpec:
        return GridSampleSpec.from_node(self.samplers[0])


@dataclasses.dataclass(frozen=True)
class Source:
    """The ``(B, S, H, C)`` values every level was split from: channels-last rows already.

    Deformable DETR's ``value.split(...)``, each part reshaped, transposed and reshaped to
    ``(B*H, C, h, w)`` (X of sample ``b*H + h``, channel c, pixel p is ``value[b, start + p, h,
    c]``), with static shapes: the rows are read from ``value`` itself, not from a copy.
    ``starts``: each level's first position along S.
    """

    value: ir.Value
    dims: tuple[int, int, int, int]  # B, S, H, C
    starts: tuple[int, ...]


def attentions_to_fuse(
    sites: Sequence[Site],
    target: Target,
    lowered: Collection[ir.Node],
    kept: Collection[ir.Node] = (),
) -> list[DeformableAttention]:
    """The attentions to lower as one unit, in site order.

    Every one whose GridSamples are all ``lowered``; and where some are ``kept`` (the target
    runs them natively, its filters would lower them), those that run faster as one unit
    (``costs.attention_pays``). From planes (``Target.attention_planes``), only attentions
    whose levels' padded axes are static and exact in bfloat16.
    """
    candidates = [site for site in sites if site.node in lowered or site.node in kept]
    return [
        attention
        for attention in find_attentions(candidates)
        if (not target.attention_planes or _planes_fit(attention))
        and (
            all(node in lowered for node in attention.samplers)
            or costs.attention_pays(_dim(attention.samplers[0].inputs[0], 1), target)
        )
    ]


def _planes_fit(attention: DeformableAttention) -> bool:
    """Whether planes fit: static levels exact in bfloat16, taps enough to pay for them.

    Each level's padded axes static and within bfloat16's exact integers (any batch), and the
    queries' taps many enough for planes of every value to pay (``costs``). A symbolic number
    of queries is an encoder's, one a pixel: they pay.
    """
    ring = _ring(attention.spec, planes=True)
    sizes = [_dim(s.inputs[0], a) for s in attention.samplers for a in (2, 3)]
    points = [_dim(s.inputs[1], 2) for s in attention.samplers]
    if None in sizes + points or any(size + 2 * ring > BF16_EXACT for size in sizes):
        return False
    queries = _dim(attention.samplers[0].inputs[1], 1)
    if queries is None:
        return True
    values = sum(h * w for h, w in zip(sizes[::2], sizes[1::2], strict=True))
    taps = queries * sum(points) * len(KERNELS[attention.spec.mode].offsets) ** 2
    return costs.attention_planes_pay(taps, values)


def _ring(spec: GridSampleSpec, planes: bool) -> int:
    """Zeros on either side of each level's axes: the kernel's taps (planes, zeros padding)."""
    return len(KERNELS[spec.mode].offsets) if planes and spec.padding_mode == "zeros" else 0


def selected_attentions(
    sites: Sequence[Site],
    selection: Selection,
    refused: Callable[[Site], bool] = lambda site: False,
) -> list[DeformableAttention]:
    """The attentions a lowering with ``selection`` makes one unit (``attentions_to_fuse``).

    The pass, ``inspect`` and the command line's summary judge them here alike; the pass
    also leaves out the nodes its plan ``refused``.
    """
    if not selection.target.fuses_attention:
        return []
    usable = [site for site in sites if site.spec is not None and not refused(site)]
    lowered = {site.node for site in usable if selection(site.node.name, site.spec, site.node)}
    kept = {
        site.node
        for site in usable
        if selection.kept_by_target(site.node.name, site.spec, site.node)
    }
    return attentions_to_fuse(sites, selection.target, lowered, kept)


def find_attentions(sites: Sequence[Site]) -> list[DeformableAttention]:
    """Every deformable attention whose GridSamples are all among ``sites``, in site order."""
    by_node = {site.node: site for site in sites}
    found, seen = [], set()
    for site in sites:
        if site.node in seen:
            continue
        attention = _match(site.node, by_node)
        if attention is not None:
            seen.update(attention.samplers)
            found.append(attention)
    return found


def _match(sampler: ir.Node, sites: dict) -> DeformableAttention | None:
    """The attention ``sampler`` is one level of, or None where anything departs from it."""
    spec = sites[sampler].spec
    if spec is None or spec.rank != 2 or spec.mode not in KERNELS:
        return None
    unsqueeze = _only_user(sampler.outputs[0], "Unsqueeze")
    stack = unsqueeze and _only_user(unsqueeze.outputs[0], "Concat")
    if stack is None or _axis(stack.attributes.get_int("axis", 0), 5) != 3:
        return None
    samplers, unsqueezes = [], []
    for value in stack.inputs:
        node = value.producer() if value is not None else None
        if node is None or node.op_type != "Unsqueeze" or len(value.uses()) != 1:
            return None
        if _constant_ints(node.inputs[1] if len(node.inputs) > 1 else None) not in (
            [3],
            [-2],
        ):
            return None
        source = node.inputs[0].producer() if node.inputs[0] is not None else None
        if source not in sites or sites[source].spec != spec or len(source.outputs[0].uses()) != 1:
            return None
        samplers.append(source)
        unsqueezes.append(node)
    users = [use.node for use in stack.outputs[0].uses()]
    shapes = [n for n in users if n.op_type == "Shape" and not n.attributes]
    merges = [n for n in users if n.op_type == "Reshape"]
    if len(merges) != 1 or len(shapes) + 1 != len(users) or stack.outputs[0].is_graph_output():
        return None
    merge = merges[0]
    if not _merges_last_two(merge, stack.outputs[0], _stack_dims(samplers)):
        return None
    mul = _only_user(merge.outputs[0], "Mul")
    if mul is None:
        return None
    weights = mul.inputs[1] if mul.inputs[0] is merge.outputs[0] else mul.inputs[0]
    if weights is merge.outputs[0] or not _one_channel(weights):
        return None
    total = _only_user(mul.outputs[0], "ReduceSum")
    if total is None or total.attributes.get_int("noop_with_empty_axes", 0):
        return None
    if _constant_ints(total.inputs[1] if len(total.inputs) > 1 else None) not in (
        [3],
        [-1],
    ):
        return None
    nodes = (*samplers, *unsqueezes, stack, *shapes, merge, mul, total)
    return DeformableAttention(
        name=total.name or f"{samplers[0].name}+",
        samplers=tuple(samplers),
        nodes=nodes,
        weights=weights,
        output=total.outputs[0],
        shapes=tuple(n.outputs[0] for n in shapes),
        keepdims=bool(total.attributes.get_int("keepdims", 1)),
        source=_source([s.inputs[0] for s in samplers]),
    )


def _source(levels: list[ir.Value]) -> Source | None:
    """The values the levels' X were split from, where every step is known (static), else None.

    Each X must be ``Reshape(Transpose(Reshape(part), [0, 2, 1]))`` of one output of one Split
    on axis 1 of a ``(B, S, H, C)`` tensor: ``part (B, S_l, H, C) -> (B, S_l, H*C) -> (B,
    H*C, S_l) -> (B*H, C, h, w)``, ``h*w = S_l``.
    """
    split, starts = None, []
    for x in levels:
        chain = [x]
        for op in ("Reshape", "Transpose", "Reshape"):
            node = chain[-1].producer()
            if node is None or node.op_type != op or node.domain not in ("", "ai.onnx"):
                return None
            if op == "Transpose" and list(node.attributes.get_ints("perm", [])) != [0, 2, 1]:
                return None
            chain.append(node.inputs[0])
        part = chain[-1]
        node = part.producer()
        if node is None or node.op_type != "Split" or node.attributes.get_int("axis", 0) != 1:
            return None
        if split not in (None, node):
            return None
        split = node
        dims = [_dims(v) for v in (split.inputs[0], part, chain[2], chain[1], x)]
        if [len(d) if d is not None else None for d in dims] != [4, 4, 3, 3, 4]:
            return None
        (b, total, heads, c), (b1, size, h1, c1), folded, moved, (n, c2, *plane) = dims
        if (b1, h1, c1, c2, n) != (b, heads, c, c, b * heads):
            return None
        if (
            folded != [b, size, heads * c]
            or moved != [b, heads * c, size]
            or math.prod(plane) != size
        ):
            return None
        index = list(split.outputs).index(part)
        before = [_dims(v) for v in split.outputs[:index]]
        if any(d is None for d in before):
            return None
        starts.append(sum(d[1] for d in before))
    return Source(split.inputs[0], (b, total, heads, c), tuple(starts))


def _dims(value: ir.Value | None) -> list[int] | None:
    """``value``'s static shape, or None."""
    if value is None or value.shape is None or not all(isinstance(d, int) for d in value.shape):
        return None
    return list(value.shape)


def _only_user(value: ir.Value, op_type: str) -> ir.Node | None:
    uses = value.uses()
    if len(uses) != 1 or value.is_graph_output():
        return None
    node = uses[0].node
    return node if node.op_type == op_type and node.domain in ("", "ai.onnx") else None


def _axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


def _constant_ints(value: ir.Value | None) -> list[int] | None:
    """A constant 1-D (or scalar) integer input as a list, or None."""
    if value is None:
        return None
    tensor = ir.convenience.get_const_tensor(value)
    if tensor is None:
        return None
    return [int(v) for v in np.asarray(tensor.numpy()).reshape(-1)]


def _stack_dims(samplers: list[ir.Node]) -> list[int | None]:
    """The stack's ``(N, C, Q, L, P)``, from the first level's X and grid (None: unknown)."""
    x, grid = samplers[0].inputs[:2]
    return [_dim(x, 0), _dim(x, 1), _dim(grid, 1), len(samplers), _dim(grid, 2)]


def _merges_last_two(merge: ir.Node, stack: ir.Value, dims: list[int | None]) -> bool:
    """Whether Reshape ``merge`` turns the ``(N, C, Q, L, P)`` stack into ``(N, C, Q, L*P)``.

    A constant shape is judged against the stack's static ``dims``; TorchScript's
    ``Concat(Slice(Shape(stack), 0, -2), [-1])`` merges the last two axes whatever they are.
    """
    shape = merge.inputs[1]
    target = _constant_ints(shape)
    if target is not None:
        if len(target) != 4 or None in dims:
            return False
        allowzero = merge.attributes.get_int("allowzero", 0)
        known = [
            d if (t == 0 and not allowzero) else t for t, d in zip(target, dims[:4], strict=False)
        ]
        try:
            return list(np.empty(dims, dtype=np.int8).reshape(known).shape) == [
                *dims[:3],
                dims[3] * dims[4],
            ]
        except ValueError:
            return False
    concat = shape.producer() if shape is not None else None
    if concat is None or concat.op_type != "Concat" or len(concat.inputs) != 2:
        return False
    head, tail = concat.inputs
    if _constant_ints(tail) != [-1]:
        return False
    cut = head.producer() if head is not None else None
    if cut is None or cut.op_type != "Slice":
        return False
    source = cut.inputs[0].producer() if cut.inputs[0] is not None else None
    if source is None or source.op_type != "Shape" or source.inputs[0] is not stack:
        return False
    starts, ends = (_constant_ints(cut.inputs[k]) for k in (1, 2))
    rest = [_constant_ints(v) for v in cut.inputs[3:]]
    plain = all(r in (None, [0], [1]) for r in rest) and (len(rest) < 2 or rest[1] in (None, [1]))
    return starts == [0] and ends in ([-2], [3]) and plain


def _one_channel(weights: ir.Value | None) -> bool:
    """Whether the attention weights are ``(N, 1, Q, L*P)``: axis 1 surely of size 1.

    From the static shape, or from the Reshape that made them (a constant shape, or a Concat
    of one-element pieces whose second is the constant 1, as TorchScript writes it).
    """
    if weights is None:
        return False
    if weights.shape is not None and len(weights.shape) == 4 and weights.shape[1] == 1:
        return True
    node = weights.producer()
    if node is None or node.op_type != "Reshape":
        return False
    target = _constant_ints(node.inputs[1])
    if target is not None:
        return len(target) == 4 and target[1] == 1
    concat = node.inputs[1].producer() if node.inputs[1] is not None else None
    if concat is None or concat.op_type != "Concat" or len(concat.inputs) != 4:
        return False
    return _constant_ints(concat.inputs[1]) == [1]


class _Levels(Emitter):
    """The emitter of one attention: each point's spatial sizes are those of its level.

    The points of every level lie side by side on the grid's last point axis (``M = L*P``), so
    an axis' size is a ``(M,)`` vector that broadcasts along it, where the node-by-node
    lowering has a scalar: the coordinate and tap arithmetic is the same, op for op.
    """

    def __init__(self, op, prefix: str, attention: DeformableAttention, target: Target) -> None:
        levels = [s.inputs[0] for s in attention.samplers]
        grids = [s.inputs[1] for s in attention.samplers]
        super().__init__(op, prefix, levels[0], grids[0], 2, target)
        self.levels, self.grids = levels, grids
        self.level_points = _dim(grids[0], 2)  # P, the points per level, where static
        self.lead = 0  # its layout its own: queries first where OpenVINO would block taps

    def x_dim(self, axis: int) -> int | None:
        return super().x_dim(axis) if axis < 2 else None  # (no one spatial size)

    def clip(self, x, low, high, vector: bool = False):
        return self.Max(self.Min(x, high), low)  # (the bounds are vectors)

    def axis_size(self, axis: int, dtype: ir.DataType, fn=float):
        """``fn(L)`` of each point's level, ``(M,)``: a constant where every size is static."""
        return self.per_point(fn, [2 + axis], dtype)

    def per_point(self, fn, axes: list[int], dtype: ir.DataType) -> ir.Value:
        """``(M,)``: ``fn`` (affine) of each level's size (the product of X's ``axes``).

        With symbolic sizes the levels' sizes are gathered into one ``(M,)`` vector per axis
        and type, once, and ``fn`` is applied to it: a node or two per use.
        """
        sizes = self.level_sizes(axes)
        if None not in sizes and self.level_points is not None:
            return self.const(np.repeat([fn(s) for s in sizes], self.level_points), dtype)
        offset, slope = fn(0), fn(1) - fn(0)

        def sizes_per_point():
            pieces = [
                self.Expand(self.level_size(level, axes, dtype), self.points_of(grid))
                for level, grid in zip(self.levels, self.grids, strict=True)
            ]
            return self.Concat(*pieces, axis=0)

        base = self.once(("per point", tuple(axes), dtype), sizes_per_point)
        return self.once(
            ("per point", tuple(axes), dtype, offset, slope),
            lambda: self._affine(base, dtype, offset, slope),
        )

    def points_of(self, grid: ir.Value) -> ir.Value:
        """A level's P, ``(1,)`` int64, from its grid's shape (once)."""
        return self.once(("points", grid), lambda: self.Shape(grid, start=2, end=3))

    def level_dims(self) -> list[tuple[int, int]]:
        """Each level's static (H, W)."""
        return [(_dim(x, 2), _dim(x, 3)) for x in self.levels]

    def level_sizes(self, axes: list[int]) -> list[int | None]:
        """Each level's static product of X's ``axes``, or None where one is symbolic."""
        dims = [[_dim(x, a) for a in axes] for x in self.levels]
        return [None if None in d else math.prod(d) for d in dims]

    def level_size(self, level: ir.Value, axes: list[int], dtype: ir.DataType) -> ir.Value:
        """The product of ``level``'s sizes of ``axes``, ``(1,)`` of ``dtype`` (once)."""

        def build():
            size = None
            for a in axes:
                dim = self.once(
                    ("dim", level, a), lambda a=a: self.Shape(level, start=a, end=a + 1)
                )
                size = dim if size is None else self.Mul(size, dim)
            return size if dtype == INT64 else self.Cast(size, to=dtype)

        return self.once(("level size", level, tuple(axes), dtype), build)

    def extent(self, value: ir.Value, axis: int) -> int | ir.Value:
        """``value``'s size of ``axis``: an int, or a 1-D int64 of one element."""
        dim = _dim(value, axis)
        return dim if dim is not None else self.Shape(value, start=axis, end=axis + 1)


def _dim(value: ir.Value, axis: int) -> int | None:
    if value.shape is None or len(value.shape) <= axis:
        return None
    dim = value.shape[axis]
    return dim if isinstance(dim, int) else None


def lower_attention(
    builder, attention: DeformableAttention, target: Target
) -> dict[ir.Value, ir.Value]:
    """Emit ``attention`` as one unit through ``builder``: the values replacing its outputs.

    Per point and tap, the flat index into one buffer of every level's channels-last rows,
    ``(N*S, C)`` plus a row of zeros that outside taps read, and the tap's weight times the
    point's attention weight; one Gather of every tap ``(N, Q, K, C)``, one MatMul with the
    ``(N, Q, 1, K)`` weights. On targets that gather from planes (``_gather_planes``), the
    index is into every level's planes, zeros padding reading a ring around each level.
    """
    em = _Levels(builder, attention.name, attention, target)
    taps = len(KERNELS[attention.spec.mode].offsets) ** 2
    per_query = em.level_points and len(em.levels) * em.level_points * taps
    tiles, tiles_from = costs.attention_tiles(
        _dim(em.grids[0], 0), _dim(em.grids[0], 1), per_query, target
    )
    if _fenced(em):  # symbolic sizes: in a branch kept in float32
        y = em.fenced(lambda body: _attention_samples(body, attention, kept=True))
    elif tiles > 1:  # the queries in tiles, each tile's taps cached between ops
        y = where_enough(
            em,
            em.extent(em.grids[0], 1),
            tiles,
            tiles_from,
            lambda view: _in_query_tiles(view, attention, tiles),
            lambda view: _attention_samples(view, attention),
        )
    else:
        y = _attention_samples(em, attention)
    if attention.keepdims:
        y = em.Unsqueeze(y, em.const([3], INT64))
    replaced = {attention.output: y}
    if attention.shapes:
        n, c, queries = em.batch, em.channels, em.extent(em.grids[0], 1)
        levels, points = len(em.levels), em.extent(em.grids[0], 2)
        stack_shape = em.shape([n, c, queries, levels, points])
        replaced.update({value: stack_shape for value in attention.shapes})
    return replaced


def _in_query_tiles(em: _Levels, attention: DeformableAttention, tiles: int) -> ir.Value:
    """``(N, C, Q)`` from ``tiles`` slices of the queries, each lowered as one unit.

    Each tile reads every level's grid and the attention weights of its queries alone; the
    values (and a channels-last copy of them, which onnxruntime computes once) are shared.
    """
    outputs = []
    for bounds in tile_bounds(em, em.extent(em.grids[0], 1), tiles):
        grids = [typed_slice(em, grid, 1, *bounds) for grid in em.grids]
        weights = typed_slice(em, attention.weights, 2, *bounds)
        tile = em.with_grid(grids[0])
        tile.grids = grids
        outputs.append(_attention_samples(tile, dataclasses.replace(attention, weights=weights)))
    return em.Concat(*outputs, axis=2)


def _attention_samples(em: _Levels, attention: DeformableAttention, kept: bool = False) -> ir.Value:
    """``(N, C, Q)``: the attention's weighted samples summed, in X's type.

    ``kept``: the runtime keeps these ops in float32 (a fenced Loop's body).
    """
    spec, target = attention.spec, em.target
    ct, kernel = compute_dtype(spec), KERNELS[spec.mode]
    planes, ring = target.attention_planes, _ring(spec, target.attention_planes)
    source = attention.source if em.level_points is not None and not planes else None
    index_type = _index_type(em, target, source)
    # Each tap's row within its sample: int32 where a sample's rows fit it, though the batch's
    # rows may not (a symbolic batch); the samples' starts are added last, in index_type.
    sample_type = index_type if planes or source is not None else _sample_type(em, index_type)
    flat, weights, inside = None, None, None
    if planes:  # each level's floors and fractions, (2, N, Q, 1, 1, M), x first
        levels = _level_coordinates(em, spec, kept)
    else:  # (N, Q, L*P, 2): level l's point p at l*P + p; then an axis' (N, 1, 1, Q, M)
        axes = grid_coordinates(em, em.Concat(*em.grids, axis=2), spec)
    # (N, T, T, Q, M): points innermost, as node by node, where onnxruntime broadcasts fast;
    # planes (OpenVINO) queries first, (N, Q, T, T, M): it lays a static 5-D tensor whose
    # axis 1 holds 2 taps out blocked by 16 (8x the work), its float -> int Convert then in a
    # reference kernel (Deformable DETR at 640x640: 3.2 ms, and 2.2 in reorders)
    layout = {"lead": 1, "points": 1} if planes else {}  # (queries first: Q as a lead axis)
    for axis in range(2):
        taps = TapConstants(em, axis, 2, ct, **layout)
        if planes:  # (N, Q, 1, 1, M) each: the floor exact, the coordinate floor + fraction
            floor, fraction = (em.Gather(v, em.index(1 - axis), axis=0) for v in levels)
            coord = em.Add(floor, fraction)
        else:
            g = axes[axis]
            coord = source_coordinate(em, g, axis, spec, ct)
            floor = em.Floor(coord)
            coord = em.Add(coord, em.Sub(g, g))  # g - g: 0 or NaN
        w = kernel.weights(em, coord, floor, taps)
        within = None
        if ring:  # zeros: every tap on the level padded by a ring, the floor clamped onto it
            base = ring_base(em, floor, axis, kernel.offsets, ct)
            positions = em.Add(base, taps([o + ring for o in kernel.offsets]))
        else:
            positions = em.Add(floor, taps(kernel.offsets))
        if not ring and spec.padding_mode != "border":  # zeros: clamped, masked; reflection
            positions, within = tap_indices(em, positions, axis, spec, ct)
        # Positions are within 2**23 + 4 of the axis (``source_coordinate`` bounds or folds
        # the coordinate): int32, whose arithmetic onnxruntime runs 3-5x faster than int64's.
        index = em.Cast(positions, to=INT32)
        if ring:  # (a NaN coordinate's index, any integer: into the padded axis)
            last = em.axis_size(axis, INT32, lambda n: n + 2 * ring - 1)
            index = em.Max(em.Min(index, last), em.const(0, INT32))
        elif within is not None:  # (zeros) outside taps weigh 0 and read the row of zeros
            w = em.Mul(w, em.Cast(within, to=ct))
            within = em.Cast(within, to=sample_type)
            inside = within if inside is None else em.Mul(inside, within)
        else:  # border (and a NaN coordinate's index, any integer): clamped into the axis
            last = em.axis_size(axis, INT32, lambda n: n - 1)
            index = em.Max(em.Min(index, last), em.const(0, INT32))
        if sample_type != INT32:
            index = em.Cast(index, to=sample_type)
        if axis == 0:  # rows of the level: times its width
            index = em.Mul(index, em.axis_size(1, sample_type, lambda n: n + 2 * ring))
            if planes:  # where the sample's level starts: added to the rows (half the taps)
                index = em.Add(index, _plane_starts(em, sample_type, ring))
        flat = index if flat is None else em.Add(flat, index)
        weights = w if weights is None else em.Mul(weights, w)
    queries = em.extent(em.grids[0], 1)
    per_query = _per_query(em, len(kernel.offsets) ** 2)
    attention_weights = em.Unsqueeze(attention.weights, em.const([1], INT64))  # (N, 1, 1, Q, M)
    if planes:
        attention_weights = em.Transpose(attention_weights, perm=QUERIES_FIRST)
    if spec.x_dtype != ct:
        attention_weights = em.Cast(attention_weights, to=ct)
    weights = em.Mul(weights, attention_weights)
    if planes:
        y = _gather_planes(em, spec, flat, weights, queries, per_query, ring)
    else:
        args = (index_type, sample_type, flat, inside, weights, queries, per_query, source)
        y = _gather_rows(em, spec, *args)
    if spec.x_dtype != ct:
        y = em.Cast(y, to=spec.x_dtype)
    return y


def _gather_rows(
    em, spec, index_type, sample_type, flat, inside, weights, queries, per_query, source
) -> ir.Value:
    """``(N, C, Q)``: every tap a row of every level's values channels-last, one MatMul.

    ``flat`` holds each tap's pixel within its level, of ``sample_type``. The rows are the
    ``source`` values themselves where known, else a channels-last copy of every level with
    each sample's row of zeros after them; outside taps read a row of zeros.
    """
    n, c, ct = em.batch, em.channels, compute_dtype(spec)
    starts = None  # the samples' first rows, added last where they need a wider type
    if source is not None:
        rows, flat, past_end = _source_rows(em, spec, source, flat, inside is not None, index_type)
    else:
        rows, flat, past_end, starts = _level_rows(
            em, spec, flat, inside is not None, index_type, sample_type
        )
    if inside is not None:
        flat = where_inside(em, inside, flat, past_end)
    # A query's taps side by side: the small index and weight tensors move, not the values.
    flat = em.reshape(em.Transpose(flat, perm=QUERIES_FIRST), [n, queries, per_query])
    if starts is not None:
        flat = em.Add(em.Cast(flat, to=index_type), starts)
    weights = em.Transpose(weights, perm=QUERIES_FIRST)
    weights = em.reshape(weights, [n, queries, 1, per_query])
    if spec.x_dtype != ct:
        rows = em.Cast(rows, to=ct)
    values = em.Gather(rows, flat, axis=0)  # (N, Q, K, C)
    return em.Transpose(em.reshape(em.MatMul(weights, values), [n, queries, c]), perm=[0, 2, 1])


def _merged(em: _Levels) -> bool:
    """Whether the levels' coordinates take the grids' last axes and components as one.

    As node by node (``plan.choose_merged``), every level's grid alike.
    """
    return _every_level(em, lambda symbolic, origin: choose_merged(True, symbolic, *origin))


def _fenced(em: _Levels) -> bool:
    """Whether the attention runs in a Loop's body, kept in float32.

    As node by node (``plan.choose_fenced``): where any level's or grid's size is symbolic.
    """
    return _every_level(em, lambda symbolic, _: choose_fenced(symbolic, em.target, tail=False))


def _every_level(em: _Levels, choose) -> bool:
    """Whether ``choose(symbolic, (target, tail, grid_from))`` takes its form for every level.

    Symbolic where any level's or grid's size is; never the float32 tail (the attention's
    output projection is a MatMul).
    """
    values = [*em.levels, *em.grids]
    symbolic = any(v.shape is None or not all(isinstance(d, int) for d in v.shape) for v in values)
    return all(choose(symbolic, (em.target, False, grid_origin(g)))[0] for g in em.grids)


def _level_coordinates(
    em: _Levels, spec: GridSampleSpec, kept: bool = False
) -> tuple[ir.Value, ir.Value]:
    """Every point's coordinates as floor and fraction, ``(2, N, Q, 1, 1, M)`` each (x first).

    OpenVINO stores its kernels' float outputs in bfloat16 by default, a coordinate to 2**-9
    of its size: so each level's coordinates are computed on its grid as it is, which a fused
    kernel reads in float32, in two regions that each end in one output (the node-by-node
    form's, ``sampling._interleaved_taps``): the floors, integers exact in bfloat16 up to 256,
    and the fractions, stored to 2**-9 (a weight's error, as the native kernel's output has).
    ``kept`` in float32, one coordinate gives both, which so agree (``sampling``'s reason).
    """
    ct = compute_dtype(spec)
    floors, fractions = [], []
    merged = _merged(em)
    for x, grid in zip(em.levels, em.grids, strict=True):
        level = em.sibling(x, grid).merging(merged)
        taps = InterleavedTaps(level, 2, ct)
        g = interleaved_grid(level, grid, spec)  # (N, Q, P, 2), or merged (N, Q*P*2)
        coord = source_coordinate(level, g, ALL_AXES, spec, ct)
        floor = level.Floor(coord)
        floors.append(level.split_components(floor, tapped=False) if merged else floor)
        if kept:  # (g - g: 0, or NaN where the grid is)
            fraction = level.Sub(level.Add(coord, level.Sub(g, g)), floor)
            fractions.append(level.split_components(fraction, tapped=False) if merged else fraction)
            continue
        g_w = level.Add(g, taps([0.0]))  # (1, N, Q, P, 2): the fractions' own start
        coord = source_coordinate(level, g_w, ALL_AXES, spec, ct)
        fraction = level.Sub(level.Add(coord, level.Sub(g_w, g_w)), level.Floor(coord))
        fraction = level.split_components(fraction, tapped=True) if merged else fraction
        fractions.append(level.Squeeze(fraction, em.const([0], INT64)))
    # (N, Q, M, 2) -> (2, N, Q, 1, 1, M): lossless moves of values already stored
    moved = [em.Transpose(em.Concat(*v, axis=2), perm=[3, 0, 1, 2]) for v in (floors, fractions)]
    return tuple(em.Unsqueeze(v, em.const([3, 4], INT64)) for v in moved)


def _gather_planes(em, spec, flat, weights, queries, per_query, ring: int) -> ir.Value:
    """``(N, C, Q)``: every tap gathered from every level's planes ``(C, N*S)``, summed.

    For runtimes whose Gather of short rows is slow and whose integer ops are (OpenVINO: a
    row of 16 floats 6 ns, a value of a plane 0.5): C values a tap. Zeros padding pads each
    level by a ring (``ring``), which the taps' positions were clamped onto: no masks. The
    taps' weights multiply the values gathered, and a ReduceSum adds them, in tiles of the
    queries where the values gathered would not stay cached (``costs.plane_tiles``).
    """
    n, c, ct = em.batch, em.channels, compute_dtype(spec)
    pads = em.const([0, 0, ring, ring, 0, 0, ring, ring], INT64)
    levels = [em.Pad(x, pads) if ring else x for x in em.levels]
    planes = em.Concat(*[em.reshape(x, [n, c, -1]) for x in levels], axis=2)
    planes = em.reshape(em.Transpose(planes, perm=[1, 0, 2]), [c, -1])  # (C, N*S)
    flat = em.reshape(flat, [n, queries, per_query])  # (from (N, Q, T, T, M))
    weights = em.reshape(weights, [n, queries, per_query])
    if spec.x_dtype != ct:
        planes = em.Cast(planes, to=ct)
    tiles = costs.plane_tiles(c, n, queries, per_query)
    parts = [(flat, weights)]
    if tiles > 1:  # (C, N, Q_t, K) gathered and summed, one tile of the queries at a time
        axis = em.const([1], INT64)
        bounds = [b for *b, _ in tile_bounds(em, queries, tiles)]
        parts = [tuple(em.Slice(v, *b, axis) for v in (flat, weights)) for b in bounds]
    pieces = [
        em.ReduceSum(em.Mul(em.Gather(planes, f, axis=1), w), em.const([-1], INT64), keepdims=0)
        for f, w in parts
    ]
    y = em.Concat(*pieces, axis=2) if tiles > 1 else pieces[0]
    return em.Transpose(y, perm=[1, 0, 2])


def _plane_starts(em: _Levels, dtype: ir.DataType, ring: int) -> ir.Value:
    """``(N, 1, 1, 1, M)``: where each point's level starts in the planes ``(C, N*S)``.

    Static levels (``_planes_fit``), each padded by ``ring`` on either side of each axis; a
    batch of any size.
    """
    sizes = [(h + 2 * ring) * (w + 2 * ring) for h, w in em.level_dims()]
    starts = np.repeat(np.cumsum([0, *sizes[:-1]]), em.level_points)
    batch = em.x_dim(0)
    if batch is not None:
        return em.const(np.arange(batch).reshape(batch, 1, 1, 1, 1) * sum(sizes) + starts, dtype)
    return em.Add(em.Mul(_samples(em, dtype), em.const(sum(sizes), dtype)), em.const(starts, dtype))


def _level_rows(em, spec, flat, zeros: bool, index_type, sample_type):
    """Rows ``(N*(S + 1), C)`` copied from every level, each sample's row of zeros last.

    And ``flat`` and its row of zeros (``past_end``) with the sample's start added, or, where
    ``sample_type`` is narrower than ``index_type``, within the sample, and the ``(N, 1, 1)``
    starts to add once ``flat`` is widened and queries-first.
    """
    n, c = em.batch, em.channels
    later = None
    if sample_type != index_type:
        later = _sample_starts(em, index_type, int(zeros), units=2)
        flat = em.Add(flat, _level_starts(em, sample_type))  # (1, .., M): small
    else:
        starts = _sample_starts(em, index_type, int(zeros))
        flat = em.Add(flat, em.Add(_level_starts(em, index_type), starts))  # (N, .., M): small
    rows = [em.Transpose(em.reshape(x, [n, c, -1]), perm=[0, 2, 1]) for x in em.levels]
    past_end = None
    if zeros:  # the sample's row of zeros: its start + S
        rows.append(em.Expand(em.const(np.zeros((1, 1, 1)), spec.x_dtype), em.shape([n, 1, c])))
        if later is not None:  # (static sizes: ``_sample_type``)
            past_end = em.const(_sample_size(em, sample_type, 0), sample_type)
        else:
            size = _sample_size(em, index_type, 0)
            size = em.const(size, index_type) if isinstance(size, int) else size
            past_end = em.Add(starts, size)
    return em.reshape(em.Concat(*rows, axis=1), [-1, c]), flat, past_end, later  # one copy


def _source_rows(em, spec, source: Source, flat, zeros: bool, index_type):
    """Rows ``(B*S*H (+ 1), C)``: the source values as they are, a row of zeros after them.

    Sample ``n = b*H + h``'s pixel p of the level starting at ``start`` is row
    ``(b*S + start + p)*H + h``. Without zeros padding nothing reads the row of zeros, and the
    values are not copied at all.
    """
    b, total, heads, c = source.dims
    starts = np.repeat(np.asarray(source.starts) * heads, em.level_points)  # (M,)
    n = np.arange(b * heads).reshape(-1, 1, 1, 1, 1)
    offsets = n // heads * total * heads + n % heads + starts  # (N, 1, 1, 1, M)
    flat = em.Add(em.Mul(flat, em.const(heads, index_type)), em.const(offsets, index_type))
    rows = em.reshape(source.value, [b * total * heads, c])
    if not zeros:
        return rows, flat, None
    zero = em.const(np.zeros((1, c)), spec.x_dtype)
    return em.Concat(rows, zero, axis=0), flat, em.const(b * total * heads, index_type)


def _index_type(em: _Levels, target: Target, source: Source | None) -> ir.DataType:
    """int32 where every index surely fits (static sizes), else int64; or the target's.

    The rows, and the row of zeros after them: every level's per sample, or ``source``'s.
    """
    if target.index_dtype is not None:
        return target.index_dtype
    sizes, batch = em.level_sizes([2, 3]), em.x_dim(0)
    if None in sizes or batch is None:
        return INT64
    rows = math.prod(source.dims[:3]) if source is not None else batch * (sum(sizes) + 1)
    return INT32 if rows < 2**31 - 1 else INT64


def _sample_type(em: _Levels, index_type: ir.DataType) -> ir.DataType:
    """The type of a tap's row within its sample: int32 where a sample's rows surely fit.

    onnxruntime runs int32 arithmetic 3-5x faster than int64's. A symbolic batch makes the
    rows of every sample int64 (``_index_type``); the taps' index math within a sample then
    stays int32, widened once before the samples' starts are added (TorchScript's exports at
    640x640, their batch symbolic: Deformable DETR 0.85-0.94x the time, Mask2Former's pixel
    decoder 0.84-0.99x, paired).
    """
    sizes = em.level_sizes([2, 3])
    if None in sizes or sum(sizes) + 1 >= 2**31 - 1:
        return index_type
    return INT32


def _level_starts(em: _Levels, dtype: ir.DataType) -> ir.Value:
    """``(M,)``: where each point's level starts in a sample's rows (the sizes before it)."""
    sizes = em.level_sizes([2, 3])
    if None not in sizes and em.level_points is not None:
        starts = np.cumsum([0, *sizes[:-1]])
        return em.const(np.repeat(starts, em.level_points), dtype)
    start, pieces = em.const([0], dtype), []
    for level, grid in zip(em.levels, em.grids, strict=True):
        pieces.append(em.Expand(start, em.points_of(grid)))
        start = em.Add(start, em.level_size(level, [2, 3], dtype))
    return em.Concat(*pieces, axis=0)


def _sample_size(em: _Levels, dtype: ir.DataType, extra: int) -> int | ir.Value:
    """A sample's rows, every level's, and ``extra`` rows of zeros after them."""
    sizes = em.level_sizes([2, 3])
    if None not in sizes:
        return sum(sizes) + extra

    def build():
        total = em.const([extra], dtype) if extra else None
        for level in em.levels:
            size = em.level_size(level, [2, 3], dtype)
            total = size if total is None else em.Add(total, size)
        return total

    return em.once(("sample size", dtype, extra), build)


def _sample_starts(em: _Levels, dtype: ir.DataType, extra: int, units: int = 4) -> ir.Value:
    """``(N, 1..1)``: where sample n's rows start, its ``extra`` rows of zeros included.

    ``units``: the unit axes after N (4: the taps' ``(N, .., M)``; 2: queries-first rows).
    """
    size, batch = _sample_size(em, dtype, extra), em.x_dim(0)
    if isinstance(size, int) and batch is not None:
        return em.const(np.arange(batch).reshape(batch, *[1] * units) * size, dtype)
    samples = _samples(em, dtype, units)
    return em.Mul(samples, em.const(size, dtype) if isinstance(size, int) else size)


def _samples(em: _Levels, dtype: ir.DataType, units: int = 4) -> ir.Value:
    """``(N, 1..1)``: each sample's number, 0 to N - 1, for a batch of any size.

    ``units``: the unit axes after N.
    """
    n = em.Range(em.const(0, INT64), em.count(range(0, 1)), em.const(1, INT64))
    n = em.Unsqueeze(n, em.const(list(range(1, 1 + units)), INT64))
    return n if dtype == INT64 else em.Cast(n, to=dtype)


def _per_query(em: _Levels, taps: int) -> int | ir.Value:
    """K = L x P x taps: what one query reads."""
    if em.level_points is not None:
        return len(em.levels) * em.level_points * taps
    points = em.points_of(em.grids[0])
    return em.Mul(points, em.const([len(em.levels) * taps], INT64))
