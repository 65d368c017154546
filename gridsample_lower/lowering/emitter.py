"""A node builder that names every node after the GridSample it replaces.

Wraps the ``op`` builder onnxscript's rewriter hands to a rule, so a decomposition reads like
math (``em.Add(a, b)``), and so a reader of the lowered graph (and the verifier) can tell which
region came from which GridSample: every node, and its output, is called
``<gridsample name>/<OpType>_<k>``, which also keeps names unique across subgraphs.
It also knows the static shapes of X and grid, and turns shape-dependent scalars into constants
when they are known and into Shape-based subgraphs when they are symbolic.
"""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import onnx_ir as ir

from gridsample_lower.lowering.targets import TARGETS, Target

__all__ = ["ALL_AXES", "Emitter", "NodeRecorder"]

# ``axis_size``'s axis for every spatial axis at once: a (r,) vector in the grid's component
# order (the last spatial axis first), to broadcast over the grid's last axis.
ALL_AXES = -1
TILED_CONSTANT_MAX = 2**16  # values of a per-axis constant tiled over the grid's last axis


def _of_x(key: tuple) -> bool:
    """Whether an ``Emitter.once`` key names a size of X alone (not of the grid, nor a layout)."""
    return key[0] in ("x_size", "size", "count", "dim tensor", "sizes") or key[1:2] == ("x",)


class Emitter:
    """Emit named nodes through an onnxscript builder."""

    def __init__(
        self,
        op: Any,
        prefix: str,
        x: ir.Value,
        grid: ir.Value,
        rank: int,
        target: Target = TARGETS["generic"],
        flat_points: bool = False,
        merged: bool = False,
        components_first: bool = False,
    ) -> None:
        self.target = target
        # per-point tensors' point axes: O1..Or, or one (``Plan.flat_points``)
        self.point_axes = 1 if flat_points else rank
        # unit axes between the batch and the tap axes of per-axis tensors (Target.lone_axis_1)
        self.lead = 1 if target.lone_axis_1 else 0
        self._op = op
        self.name = prefix  # the GridSample's: every node it emits is named "<name>/<Op>_<k>"
        self._counter = itertools.count(1)  # shared with ``with_x`` views: names stay unique
        self._x = x
        self._grid = grid
        self._x_shape = self._shape_of(x)
        self.rank = rank  # X's spatial axes
        # interleaved values hold the grid's last ``merged_axes`` axes and its components on
        # one axis (``Plan.merged``), ``(N, O1.., Ok*..*Or*r)``, as ``grid_vector``s do
        self.merged_axes = self._axes_to_merge() if merged else 0
        # or the components first, ``(r, N, O1..Or)`` (``Plan.components_first``)
        self.components_first = components_first
        self._consts: dict[tuple, ir.Value] = {}
        self._scalars: dict[int, tuple[np.ndarray, ir.DataType]] = {}  # id of a 0-D const
        self._once: dict[tuple, ir.Value] = {}

    def __getattr__(self, op_type: str) -> Callable[..., Any]:
        if not op_type[:1].isupper():
            raise AttributeError(op_type)
        return lambda *args, **attrs: self.op(op_type, *args, **attrs)

    def op(self, op_type: str, *args: ir.Value | None, **attrs: Any) -> Any:
        name = f"{self.name}/{op_type}_{next(self._counter)}"
        attrs = {key: _attr(key, value) for key, value in attrs.items()}
        return self._op.op(op_type, *args, _name=name, _outputs=[name], **attrs)

    def Where(self, condition: ir.Value, x: ir.Value, y: ir.Value) -> ir.Value:  # noqa: N802
        """Where; a constant scalar branch as one element on one axis where the target says so."""
        if not self.target.where_scalars:
            x, y = self._one_axis(x), self._one_axis(y)
        return self.op("Where", condition, x, y)

    def _one_axis(self, value: ir.Value) -> ir.Value:
        """``value`` as a (1,) constant if ``const`` made it a scalar, else ``value``."""
        scalar = self._scalars.get(id(value))
        return value if scalar is None else self.const(scalar[0].reshape(1), scalar[1])

    def sibling(self, x: ir.Value, grid: ir.Value) -> Emitter:
        """A plain emitter of another X and grid, naming its nodes as this one does.

        A level of a deformable attention lowered as one unit: one region, one counter.
        """
        view = Emitter(self._op, self.name, x, grid, self.rank, self.target)
        view._counter = self._counter
        return view

    def merging(self, merged: bool, components_first: bool = False) -> Emitter:
        """This emitter, its interleaved values laid out as a plan says (an If's branch's)."""
        view = copy.copy(self)
        view.merged_axes = self._axes_to_merge() if merged else 0
        view.components_first = components_first
        return view

    @property
    def grid(self) -> ir.Value:
        """The grid the node is lowered on (reshaped where ``with_points_on_one_axis``)."""
        return self._grid

    @property
    def merged(self) -> bool:
        """Whether interleaved values are merged (``merged_axes``)."""
        return self.merged_axes > 0

    def _axes_to_merge(self) -> int:
        """How many of the grid's last axes merge with the components (``merged``).

        The last, and the ones before it while those merged are static and hold fewer values
        with the components than the target's kernels need (``Target.short_innermost``): a
        grid of one column, (N, P, 1, r), merges to (N, P*r).
        """
        dims = self._shape_of(self._grid)
        axes = 1
        while axes < self.rank and dims is not None:
            merged = dims[1 + self.rank - axes : 1 + self.rank]
            if None in merged or math.prod(merged) * self.rank >= self.target.short_innermost:
                break
            axes += 1
        return axes

    def with_x(self, x: ir.Value) -> Emitter:
        """This node's emitter, reading X's shape from ``x`` (X padded, say) from here on."""
        view = copy.copy(self)
        view._x, view._x_shape, view._once = x, self._shape_of(x), {}
        return view

    def with_points_on_one_axis(self) -> Emitter:
        """This node's emitter, its grid reshaped to ``(N, 1.., P, r)`` (``Plan.flat_grid``).

        The reshaped grid carries its static sizes, which the layout of interleaved values
        (``merged_axes``) and the output's sizes are read from.
        """
        dims = self._shape_of(self._grid)
        points = self.points
        flat = self.reshape(self._grid, [self.batch, *[1] * (self.rank - 1), points, self.rank])
        flat.dtype = self._grid.dtype
        if dims is not None:
            sizes = [dims[0], *[1] * (self.rank - 1), points, self.rank]
            flat.shape = ir.Shape([d if isinstance(d, int) else None for d in sizes])
        return self.with_grid(flat)

    def with_grid(self, grid: ir.Value) -> Emitter:
        """This node's emitter, lowering ``grid`` (the grid reshaped, or a tile of its points).

        ``grid`` carries its static sizes; what was made of X's sizes is kept.
        """
        view = copy.copy(self)
        view._grid, view._once = grid, {k: v for k, v in self._once.items() if _of_x(k)}
        view.merged_axes = view._axes_to_merge() if self.merged else 0
        return view

    # Operations whose form depends on what the target allows.

    def clip(self, x: ir.Value, low: ir.Value, high: ir.Value, vector: bool = False) -> ir.Value:
        """Clip; Max and Min where the target lacks it or a bound is a vector (``ALL_AXES``)."""
        if self.target.allows("Clip") and not vector:
            return self.Clip(x, low, high)
        return self.Max(self.Min(x, high), low)

    def logical_and(self, a: ir.Value, b: ir.Value) -> ir.Value:
        if self.target.allows("And"):
            return self.And(a, b)
        float32 = ir.DataType.FLOAT  # (onnxruntime's Where takes no bool, so count instead)
        both = self.Add(self.Cast(a, to=float32), self.Cast(b, to=float32))
        return self.Equal(both, self.const(2.0, float32))

    def round_half_to_even(self, x: ir.Value, dtype: ir.DataType) -> ir.Value:
        """ONNX Round; or, where it is missing, the same from Floor: exact, ties to even.

        ``dtype`` is x's (float) type: the builder's values carry none.
        """
        if self.target.allows("Round"):
            return self.Round(x)
        floor = self.Floor(x)
        fraction = self.Sub(x, floor)  # exact
        half, one = self.const(0.5, dtype), self.const(1.0, dtype)
        odd = self.Sub(floor, self.Mul(self.Floor(self.Mul(floor, half)), self.const(2.0, dtype)))
        up_at_tie = self.Where(self.Equal(fraction, half), odd, self.const(0.0, dtype))
        up = self.Where(self.Greater(fraction, half), one, up_at_tie)
        return self.Add(floor, up)

    def if_else(
        self,
        condition: ir.Value,
        then: Callable[[Emitter], ir.Value],
        otherwise: Callable[[Emitter], ir.Value],
    ) -> ir.Value:
        """If: ``then`` or ``otherwise`` emits its branch through an emitter of its own.

        A branch's nodes are named ``<If node>/then/<Op>_<k>`` (``else``), so the region of
        the GridSample holds the If alone; they read this graph's values as outer scope.
        """
        name = f"{self.name}/If_{next(self._counter)}"
        branches = {}
        for label, build in (("then_branch", then), ("else_branch", otherwise)):
            recorder = NodeRecorder()
            view = self.branch(recorder, f"{name}/{label.split('_')[0]}")
            output = build(view)
            nodes = recorder.live([output])
            branches[label] = ir.Graph([], [output], nodes=nodes, name=view.name)
        return self._op.op("If", condition, _name=name, _outputs=[name], **branches)

    def fenced(self, build: Callable[[Emitter], ir.Value]) -> ir.Value:
        """``build``'s value, emitted in the body of a Loop run once (``plan.fenced``).

        Its trip count, ``X's size >= 0`` as an integer, is 1, which a runtime that cannot tell
        so reads at run time: the body stays a graph of its own (OpenVINO keeps a graph's tail
        in float32). The value leaves as the Loop's one scan output, ``(1, ..)``, squeezed.
        An If whose other branch is never taken kept its branch apart too, and OpenVINO folds
        it away once sizes are static, where it keeps the Loop (Deformable DETR 1.29 -> 1.45x
        the original reshaped, 1.28 with the If); but OpenVINO 2026.4 reads an If's output of
        symbolic size wrongly: into a Conv as garbage (If(Size(X) >= 0){2X}else{X} -> Conv:
        NaN), through an elementwise op into a Concat on the first run, however guarded.
        """
        int64 = ir.DataType.INT64
        always = self.GreaterOrEqual(self.Size(self._x), self.const(0, int64))
        name = f"{self.name}/Loop_{next(self._counter)}"
        recorder = NodeRecorder()
        body = self.branch(recorder, f"{name}/body")
        scalar = ir.Shape([])
        count = ir.Value(name=f"{name}/body/i", type=ir.TensorType(int64), shape=scalar)
        go = ir.Value(name=f"{name}/body/go", type=ir.TensorType(ir.DataType.BOOL), shape=scalar)
        outputs = [body.Identity(go), build(body)]
        graph = ir.Graph([count, go], outputs, nodes=recorder.live(outputs), name=body.name)
        once = self.Cast(always, to=int64)
        # Its condition given, true, as OpenVINO reads an empty one: onnx_ir's unused-node
        # removal (run by onnxscript's rewriter) drops a trailing empty input, and a Loop of
        # one input is invalid.
        go_on = self.const(True, ir.DataType.BOOL)
        stacked = self._op.op("Loop", once, go_on, _name=name, _outputs=[name], body=graph)
        return self.Squeeze(stacked, self.const([0], int64))

    def branch(self, recorder: NodeRecorder, name: str) -> Emitter:
        """A view of this emitter that records a subgraph's nodes into ``recorder``.

        They are named ``name/<Op>_<k>`` and read this graph's values as outer scope.
        """
        view = copy.copy(self)
        view._op, view.name = recorder, name
        view._counter, view._consts, view._scalars, view._once = itertools.count(1), {}, {}, {}
        return view

    def index(self, value: Any) -> ir.Value:
        """A constant gather index, in the target's index type (int64 by default)."""
        return self.const(value, self.target.index_dtype or ir.DataType.INT64)

    def reshape(self, value: ir.Value, parts: list[int | ir.Value]) -> ir.Value:
        """Reshape to exactly ``parts`` (``allowzero``: a 0 means an empty axis, not "copy")."""
        return self.Reshape(value, self.shape(parts), allowzero=1)

    def const(self, value: Any, dtype: ir.DataType) -> ir.Value:
        """A Constant holding ``value`` (a number or nested list) as ``dtype``, one per value."""
        array = np.asarray(value, dtype=dtype.numpy())
        key = (dtype, array.shape, array.tobytes())
        if key not in self._consts:
            self._consts[key] = self.Constant(value=ir.Tensor(array, dtype=dtype))
            if array.ndim == 0:  # (its (1,) twin is made if a Where needs it)
                self._scalars[id(self._consts[key])] = (array, dtype)
        return self._consts[key]

    # Shapes of X: constants when static, Shape-based when symbolic.

    def x_dim(self, axis: int) -> int | None:
        """The static size of X's ``axis``, or None when it is symbolic."""
        dim = self._x_shape[axis] if self._x_shape is not None else None
        return dim if isinstance(dim, int) else None

    def static_size(self, axes: range) -> int | None:
        """prod(X.shape[axes]) where each of them is static, else None; emits nothing."""
        dims = [self.x_dim(a) for a in axes]
        return None if None in dims else math.prod(dims)

    def x_size(self, axes: range, dtype: ir.DataType, fn: Callable[[float], float] = float) -> Any:
        """``fn(prod(X.shape[axes]))`` as a scalar of ``dtype`` (``fn`` must be affine)."""
        dims = [self.x_dim(a) for a in axes]
        if all(d is not None for d in dims):
            return self.const(fn(math.prod(dims)), dtype)
        offset, slope = fn(0), fn(1) - fn(0)
        return self.once(
            ("x_size", axes.start, axes.stop, dtype, offset, slope),
            lambda: self._affine(self._dynamic_size(axes, dtype), dtype, offset, slope),
        )

    def axis_size(self, axis: int, dtype: ir.DataType, fn: Callable[[float], float] = float) -> Any:
        """``fn(L)``, L the size of spatial ``axis`` (X's axis 2 + axis), as ``x_size`` makes it.

        ``ALL_AXES``: every axis' ``fn(L)`` as a (r,) vector in the grid's component order.
        """
        if axis == ALL_AXES:
            return self._interleaved_size(dtype, fn)
        return self.x_size(range(2 + axis, 3 + axis), dtype, fn)

    def _interleaved_size(self, dtype: ir.DataType, fn: Callable[[float], float]) -> Any:
        axes = [self.rank - 1 - j for j in range(self.rank)]
        dims = [self.x_dim(2 + a) for a in axes]
        if all(d is not None for d in dims):
            return self.grid_vector([fn(d) for d in dims], dtype)
        layout, offset, slope = (self.merged_axes, self.components_first), fn(0), fn(1) - fn(0)
        vector = self.once(("sizes", dtype), lambda: self._component_sizes(dtype, axes))
        return self.once(
            ("interleaved", layout, dtype, offset, slope),
            lambda: self._over_width(self._affine(vector, dtype, offset, slope)),
        )

    def _component_sizes(self, dtype: ir.DataType, axes: list[int]) -> ir.Value:
        """X's spatial sizes as one ``(r,)`` vector of ``dtype``, in the grid's order (x first).

        One Shape, Gather and Cast (OpenVINO runs symbolic sizes op by op); each axis' size
        apart where the target takes a shape only from Shape and single dimensions (tract, TVM).
        """
        int64 = ir.DataType.INT64
        if not self.target.allows("ReduceProd"):
            sizes = [self.Unsqueeze(self.axis_size(a, dtype), self.const([0], int64)) for a in axes]
            return self.Concat(*sizes, axis=0)
        shape = self.Shape(self._x, start=2, end=2 + self.rank)
        if self.rank > 1:
            shape = self.Gather(shape, self.const(axes, int64))  # (spatial axis a: item a)
        return self.Cast(shape, to=dtype)

    def grid_vector(self, vector: list[float], dtype: ir.DataType) -> ir.Value:
        """A constant per grid component, ``(r,)``, to broadcast over the grid as it is.

        Tiled over the grid's last spatial axis: a (r,) constant broadcast along the innermost
        axis keeps OpenVINO's fused kernels from vectorizing over the points (a region of 12
        ops on a 480x640 grid: 0.74 ms, tiled 0.10). A constant where that axis is static and
        small, else expanded at run time (``_over_width``), as the sizes of an X of symbolic
        size are. ``(W, r)``, or over the merged axes, ``(Ok*..*Or*r,)``, where ``merged``;
        ``(r, 1, ..)`` where the components come first, the points innermost.
        """
        if self.components_first:
            return self.const(np.reshape(vector, [self.rank] + [1] * (1 + self.rank)), dtype)
        grid = self._shape_of(self._grid)
        axes = self._tiled_axes()
        tiled = [grid[a] for a in axes] if grid is not None else [None]
        count = math.prod(tiled) if None not in tiled else None
        if count is not None and 1 < count * self.rank <= TILED_CONSTANT_MAX:
            values = np.array([vector] * count)
            return self.const(values.reshape(-1) if self.merged else values, dtype)
        if count == 1:
            return self.const(vector, dtype)
        key = ("over width", self.merged_axes, dtype, tuple(vector))
        return self.once(key, lambda: self._over_width(self.const(vector, dtype)))

    def _tiled_axes(self) -> range:
        """The grid's axes a per-component constant is tiled over: the last, or the merged."""
        return range(1 + self.rank - max(self.merged_axes, 1), 1 + self.rank)

    def _over_width(self, vector: ir.Value) -> ir.Value:
        """A ``(r,)`` vector expanded at run time over the grid's last spatial axis: ``(W, r)``.

        Merged: over the merged axes, ``(Ok*..*Or*r,)``. Components first: ``(r, 1, ..)``.
        """
        if self.components_first:
            return self.reshape(vector, [self.rank] + [1] * (1 + self.rank))
        count = self._extent("grid", self._tiled_axes())
        if count == 1:
            return vector
        expanded = self.Expand(vector, self.shape([count, self.rank]))
        return self.reshape(expanded, [self.merged_length()]) if self.merged else expanded

    def merged_length(self) -> int | ir.Value:
        """Ok x .. x Or x r: the merged axes and the components, on one axis (``merged``)."""
        return self._extent("grid", self._tiled_axes(), self.rank)

    def arrange(self, grid: ir.Value) -> ir.Value:
        """The grid ``(N, O1..Or, r)`` laid out as interleaved values are.

        As it is; merged, ``(N, O1.., Ok*..*Or*r)`` (N as X's, as elsewhere); or components
        first, ``(r, N, O..)``.
        """
        if self.components_first:
            return self.Transpose(grid, perm=[self.rank + 1, *range(self.rank + 1)])
        if not self.merged:
            return grid
        kept = self.output_dims()[: self.rank - self.merged_axes]
        return self.reshape(grid, [self.batch, *kept, self.merged_length()])

    def split_components(self, value: ir.Value, tapped: bool) -> ir.Value:
        """A merged interleaved value, ``([T,] N, O1.., Ok*..*Or*r)``, as ``(.., Ok..Or, r)``.

        Untapped values share one target shape; a tapped one reads its T (1 or the kernel's).
        """
        untapped = self.once(
            ("split", self.merged_axes),
            lambda: self.shape([self.batch, *self.output_dims(), self.rank]),
        )
        if not tapped:
            return self.Reshape(value, untapped, allowzero=1)
        taps = self.Shape(value, start=0, end=1)
        return self.Reshape(value, self.Concat(taps, untapped, axis=0), allowzero=1)

    def once(self, key: tuple, build: Callable[[], ir.Value]) -> ir.Value:
        """The value ``build`` makes, emitted once per lowered node for the same ``key``."""
        if key not in self._once:
            self._once[key] = build()
        return self._once[key]

    def _affine(self, size: ir.Value, dtype: ir.DataType, offset: float, slope: float) -> ir.Value:
        if slope != 1:
            size = self.Mul(size, self.const(slope, dtype))
        if offset != 0:
            size = self.Add(size, self.const(offset, dtype))
        return size

    # Sizes to build shapes from: ints where static, else 1-D int64 values of one element.

    @property
    def batch(self) -> int | ir.Value:
        """N."""
        return self._extent("x", range(0, 1))

    @property
    def channels(self) -> int | ir.Value:
        """C."""
        return self._extent("x", range(1, 2))

    @property
    def planes(self) -> int | ir.Value:
        """N x C: X's planes."""
        return self._extent("x", range(0, 2))

    @property
    def values(self) -> int | ir.Value:
        """N x C x S: every value of X."""
        return self._extent("x", range(0, 2 + self.rank))

    @property
    def sample_size(self) -> int | ir.Value:
        """S: the values of one plane (the product of X's spatial sizes)."""
        return self._extent("x", range(2, 2 + self.rank))

    @property
    def pixels(self) -> int | ir.Value:
        """N x S: the rows of X's channels-last copy."""
        return self._extent("x", (0, *range(2, 2 + self.rank)))

    def stride(self, axis: int) -> int | ir.Value:
        """The flat-index stride of spatial ``axis`` within a plane."""
        return self._extent("x", range(3 + axis, 2 + self.rank))

    @property
    def points(self) -> int | ir.Value:
        """P: the output points per sample (the product of the grid's axes 1..rank)."""
        return self._extent("grid", range(1, 1 + self.rank))

    def output_dims(self) -> list[int | ir.Value]:
        """The output's spatial sizes (the grid's axes 1..rank)."""
        return [self._extent("grid", range(1 + a, 2 + a)) for a in range(self.rank)]

    def points_times(self, factor: int) -> int | ir.Value:
        """P x ``factor``, as ``points`` makes it."""
        return self._extent("grid", range(1, 1 + self.rank), factor)

    def _extent(self, of: str, axes: range | tuple[int, ...], factor: int = 1) -> int | ir.Value:
        """prod(shape[axes]) x factor of ``of`` ("x" or "grid"): an int, or a 1-D int64."""
        value = self._x if of == "x" else self._grid
        dims = self._shape_of(value)
        static = [dims[a] if dims is not None else None for a in axes]
        if all(d is not None for d in static):
            return math.prod(static) * factor
        if not self.target.allows("ReduceProd") or not isinstance(axes, range):
            return self.once(
                ("dims", of, tuple(axes), factor), lambda: self._shape_product(of, axes, factor)
            )
        size = self.once(
            ("dims", of, axes.start, axes.stop),
            lambda: self.ReduceProd(self.Shape(value, start=axes.start, end=axes.stop), keepdims=1),
        )
        return size if factor == 1 else self.Mul(size, self.const([factor], ir.DataType.INT64))

    # Sizes without ReduceProd: tract cannot read a shape computed by one ("shape input is
    # variable"), nor TVM's importer reduce a shape. TVM takes a shape only from Shape, Gathers
    # of single dimensions (scalars it keeps symbolic), their products and Unsqueeze or Concat;
    # and arithmetic on tensors only from a Shape cast to a tensor. tract takes both.

    def _shape_product(self, of: str, axes, factor: int = 1) -> ir.Value:
        """``_extent`` as a 1-D int64 of one element for a shape: Gathers of each dimension."""
        value = self._x if of == "x" else self._grid
        dims = self._shape_of(value)
        symbolic = [a for a in axes if dims is None or dims[a] is None]
        static = math.prod(dims[a] for a in axes if a not in symbolic)
        if len(symbolic) == 1 and factor * static == 1:
            return self.Shape(value, start=symbolic[0], end=symbolic[0] + 1)
        product = self._gathered_product(of, axes, factor)
        return self.Unsqueeze(product, self.const([0], ir.DataType.INT64))

    def _gathered_product(self, of: str, axes, factor: int = 1) -> ir.Value:
        """prod(shape[axes]) x factor as an int64 scalar from Gathers of single dimensions."""
        value = self._x if of == "x" else self._grid
        dims, int64 = self._shape_of(value), ir.DataType.INT64
        whole = self.once(("shape", of), lambda: self.Shape(value))
        product = None
        for a in axes:
            if dims is not None and dims[a] is not None:
                factor *= dims[a]
                continue
            dim = self.once(("dim", of, a), lambda a=a: self.Gather(whole, self.const(a, int64)))
            product = dim if product is None else self.Mul(product, dim)
        if product is None:
            return self.const(factor, int64)
        return product if factor == 1 else self.Mul(product, self.const(factor, int64))

    def count(self, axes: range) -> ir.Value:
        """prod(X.shape[axes]) as an int64 scalar for Range (gathered without ReduceProd)."""
        if self.target.allows("ReduceProd"):
            return self.x_size(axes, ir.DataType.INT64)
        return self.once(
            ("count", axes.start, axes.stop), lambda: self._gathered_product("x", axes)
        )

    def _scalar_product(self, axes: range) -> ir.Value:
        """prod(X.shape[axes]) as an int64 scalar tensor for arithmetic, without ReduceProd."""
        dims, int64 = self._shape_of(self._x), ir.DataType.INT64
        product, factor = None, 1
        for a in axes:
            if dims is not None and dims[a] is not None:
                factor *= dims[a]
                continue
            dim = self.once(
                ("dim tensor", a),
                lambda a=a: self.Cast(self.Shape(self._x, start=a, end=a + 1), to=int64),
            )
            product = dim if product is None else self.Mul(product, dim)
        if factor != 1:
            product = self.Mul(product, self.const([factor], int64))
        return self.Reshape(product, self.const([], int64))

    def flatten(
        self, value: ir.Value, axis: int, sizes: Callable[[], list[int | ir.Value]]
    ) -> ir.Value:
        """``value`` as 2-D, split before ``axis``; ``sizes()`` gives the two sizes.

        Flatten where the target has it; else a Reshape to the sizes (tract cannot infer
        Flatten's shape where it multiplies symbols). ``sizes`` is called only then, so
        that no size is emitted for nothing.
        """
        if self.target.allows("Flatten"):
            return self.Flatten(value, axis=axis)
        return self.reshape(value, sizes())

    def shape(self, parts: list[int | ir.Value]) -> ir.Value:
        """A 1-D int64 shape from ints and 1-D int64 values (one Constant when all are ints).

        Made once per lowered node for the same parts: OpenVINO runs symbolic sizes op by op.
        """
        if all(isinstance(p, int) for p in parts):
            return self.const(parts, ir.DataType.INT64)
        return self.once(("shape of", tuple(parts)), lambda: self._concat_shape(parts))

    def _concat_shape(self, parts: list[int | ir.Value]) -> ir.Value:
        pieces, ints = [], []
        for part in parts:
            if isinstance(part, int):
                ints.append(part)
                continue
            if ints:
                pieces.append(self.const(ints, ir.DataType.INT64))
                ints = []
            pieces.append(part)
        if ints:
            pieces.append(self.const(ints, ir.DataType.INT64))
        return self.Concat(*pieces, axis=0)

    def _dynamic_size(self, axes: range, dtype: ir.DataType) -> ir.Value:
        if dtype == ir.DataType.INT64 and not self.target.allows("ReduceProd"):
            return self.once(("size", axes.start, axes.stop), lambda: self._scalar_product(axes))
        if dtype == ir.DataType.INT64:
            return self.once(
                ("size", axes.start, axes.stop),
                lambda: self.ReduceProd(
                    self.Shape(self._x, start=axes.start, end=axes.stop), keepdims=0
                ),
            )
        return self.once(
            ("size", axes.start, axes.stop, dtype),
            lambda: self.Cast(self._dynamic_size(axes, ir.DataType.INT64), to=dtype),
        )

    @staticmethod
    def _shape_of(value: ir.Value) -> tuple | None:
        if value.shape is None:
            return None
        return tuple(d if isinstance(d, int) else None for d in value.shape)


class NodeRecorder:
    """A builder for the Emitter that makes onnx_ir nodes directly and keeps them in order.

    onnxscript's rewriter hands a rule a builder that tests its feature flags and converts
    attributes on every op: half the time of lowering 500 GridSamples (36,000 nodes) went
    there. The pass, which knows its nodes and inserts the recorded ones itself, uses this.
    """

    def __init__(self) -> None:
        self.nodes: list[ir.Node] = []

    def op(self, op_type: str, *inputs: ir.Value | None, _name: str, _outputs: list[str], **attrs):
        attributes = [
            value if isinstance(value, ir.Attr) else ir.convenience.convert_attribute(key, value)
            for key, value in attrs.items()
        ]
        outputs = [ir.Value(name=name) for name in _outputs]
        node = ir.Node("", op_type, inputs, attributes, outputs=outputs, name=_name)
        self.nodes.append(node)
        return outputs[0] if len(outputs) == 1 else outputs

    def live(self, outputs: list[ir.Value]) -> list[ir.Node]:
        """The recorded nodes ``outputs`` need, in order; the others are left out.

        What was made and then not used: a scalar constant a Where took as its (1,) twin
        (``Target.where_scalars``), a size a form asked for and then decided against.
        """
        needed = {id(value) for value in outputs}
        kept = []
        for node in reversed(self.nodes):
            if any(id(value) in needed for value in node.outputs):
                kept.append(node)
                needed.update(id(value) for value in _reads(node))
        return kept[::-1]


def _reads(node: ir.Node) -> list[ir.Value]:
    """``node``'s inputs, and the values its subgraphs read from outer scopes."""
    values = [value for value in node.inputs if value is not None]
    for attribute in node.attributes.values():
        if isinstance(attribute.value, ir.Graph):
            for inner in ir.traversal.RecursiveGraphIterator(attribute.value):
                values.extend(value for value in inner.inputs if value is not None)
    return values


def _attr(name: str, value: Any) -> Any:
    """Build the attributes the decompositions use directly.

    The builder's generic conversion checks runtime protocols: a third of the conversion time.
    """
    if isinstance(value, int):  # int, bool, ir.DataType
        return ir.AttrInt64(name, int(value))
    if isinstance(value, ir.Tensor):
        return ir.AttrTensor(name, value)
    if isinstance(value, list) and all(isinstance(v, int) for v in value):
        return ir.AttrInt64s(name, value)
    return value
