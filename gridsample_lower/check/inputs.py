"""Inputs for a verification run: given by the user, or invented where lowerings break.

Inputs that feed a GridSample grid are drawn from [-1.25, 1.25] with lattice points and
half-way ties mixed in: the exact sampling positions of X's axes (and the midpoints between
them) when the input *is* the grid, multiples of 1/8 when it only feeds one. Other float inputs
are standard normal; integer inputs stay small (-8..8 when they feed X, else 0..3); bool and
string inputs are random too. Symbolic dimensions take the size given for them or for their
symbols in ``dims``, else the size a given array shows, else one real models accept
(``dims.Dims``: 128 along image axes, 3 elsewhere). What cannot be invented (a shape tensor, an
input of unknown rank, a sequence) is recorded in ``InputPlan.missing``: the whole model cannot
run, and each GridSample is checked alone (``synthetic``) instead.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

import numpy as np
import onnx_ir as ir

from gridsample_lower.check.dims import Dims
from gridsample_lower.check.given import VerificationSetupError, checked_given
from gridsample_lower.lowering.inventory import Site

__all__ = ["InputPlan", "synthetic"]

_MAX_VALUES = 2**28  # invented values per sample: 2 GiB in the float64 they are drawn in
_GRID_RANGE = 1.25
# Operands that hold shapes, sizes or axes: random values would make no sense there.
_SHAPE_OPERANDS = {
    "AffineGrid": {1},
    "ConstantOfShape": {0},
    "Expand": {1},
    "Pad": {1, 3},
    "Range": {0, 1, 2},
    "Reshape": {1},
    "Resize": {3},
    "Slice": {1, 2, 3, 4},
    "Split": {1},
    "Squeeze": {1},
    "Tile": {1},
    "TopK": {1},
    "Unsqueeze": {1},
}


class _CannotInvent(VerificationSetupError):
    """An input that no random value can stand for: it must be given to run the whole model."""


@dataclasses.dataclass(frozen=True)
class _Slot:
    """One graph input to invent: its type, its concrete shape, what it feeds."""

    name: str
    dtype: np.dtype
    shape: tuple[int, ...]
    role: str = ""  # "grid", "x" or ""
    lattice: tuple[tuple[int, int], ...] = ()  # (axis size, align_corners) per grid component


class InputPlan:
    """How to fill every graph input of a model, one sample at a time.

    Args:
        model: The reference model, with GridSample inputs typed (``inventory.inferred_types``).
        sites: Its GridSample nodes.
        given: Values for some or all inputs; they are used in every sample.
        dims: Sizes of symbolic dimensions, or of the symbols they are written with.

    Raises:
        VerificationSetupError: A given value does not fit, or a name is unknown.
    """

    def __init__(
        self,
        model: ir.Model,
        sites: list[Site],
        given: Mapping[str, np.ndarray] | None = None,
        dims: Mapping[str, int] | None = None,
    ) -> None:
        inputs = list(model.graph.inputs)
        self.given = checked_given(inputs, dict(given or {}))
        roles, grid_sites = _roles(model, sites)
        todo = [v for v in inputs if v.name not in self.given and not v.is_initializer()]
        self.dims = _dims(inputs, todo, roles, grid_sites, self.given, dict(dims or {}))
        self.missing = ""  # why the whole model cannot run on invented inputs, if it cannot
        slots = []
        for value in todo:
            try:
                slots.append(_slot(value, self.dims, roles, grid_sites.get(value.name)))
            except _CannotInvent as error:
                self.missing = self.missing or str(error)
        self._slots = slots
        _check_size(self._slots)
        self._grids = [name for name in self.given if roles.get(name) not in (None, "x", "shape")]
        sizes = [size for site in sites for size, _ in _lattice_of(site, self.dims) or ()]
        self._far = 2.0**24 / max([1, *sizes])  # a coordinate is about g * L / 2

    @property
    def complete(self) -> bool:
        """Whether every input is given, so that one sample says all there is to say."""
        return not self._slots and not self.missing

    def far_grid(self) -> bool:
        """Whether a given grid value lands 2**23 pixels or more away on X's longest axis.

        onnxruntime's float-to-integer conversion of such coordinates overflows (docs/safety.md).
        """
        magnitudes = (np.abs(self.given[name].astype(np.float64)) for name in self._grids)
        return any(m.max(initial=0) >= self._far for m in magnitudes)

    def draw(self, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """One set of feeds: the given values and fresh random ones for the rest."""
        return {**self.given, **{slot.name: _random(slot, rng) for slot in self._slots}}


def synthetic(probe, dims: Dims, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """X and grid for a GridSample alone, of its inferred shapes (``dims`` sizes the symbols).

    ``probe`` carries the node's spec, dtypes and shapes (``nodes.NodeProbe``). A
    dimension no symbol sizes takes 3 (batch, channels) or 16 (spatial axes, output points);
    a batch only one input knows is shared by the other.
    """
    rank = probe.spec.rank
    x_shape = _shape_for(probe.shapes[0], rank + 2, dims, lambda k: 16 if k >= 2 else 3)
    grid_shape = _shape_for(probe.shapes[1], rank + 2, dims, lambda k: 16 if k > 0 else 3)
    batch = [s[0] for s, known in zip((x_shape, grid_shape), probe.shapes, strict=True) if known]
    x_shape[0] = grid_shape[0] = batch[0] if batch else x_shape[0]
    grid_shape[-1] = rank
    lattice = tuple((size, probe.spec.align_corners) for size in reversed(x_shape[2:]))
    x_type, grid_type = (np.dtype(ir.DataType(t).numpy()) for t in probe.elem_types)
    x = _random(_Slot("X", x_type, tuple(x_shape), "x"), rng)
    grid = _random(_Slot("grid", grid_type, tuple(grid_shape), "grid", lattice), rng)
    return x, grid


def _shape_for(shape, rank: int, dims: Dims, default) -> list[int]:
    """Sizes for a shape given as ints, dimension names and None (unknown), or None."""
    if shape is None or len(shape) != rank:
        return [default(k) for k in range(rank)]
    return [
        d if isinstance(d, int) else (dims.size(d) if d else default(k))
        for k, d in enumerate(shape)
    ]


def _dims(
    inputs: list[ir.Value],
    todo: list[ir.Value],
    roles: dict[str, str],
    grid_sites: dict[str, Site],
    given: dict,
    dims: dict[str, int],
) -> Dims:
    """Sizes for every symbolic dimension: given, shown by given arrays, else chosen.

    ``todo``: the inputs to invent, whose size the chosen sizes must keep within budget.
    """
    names, image, shown = [], [], {}
    for v in inputs:
        for k, d in enumerate(v.shape or ()):
            if isinstance(d, int) or not d.value:
                continue
            names.append(d.value)
            if _image_axis(k, len(v.shape), v.name in grid_sites, roles.get(v.name)):
                image.append(d.value)
            if v.name in given:
                size = given[v.name].shape[k]
                if shown.setdefault(d.value, size) != size:
                    raise VerificationSetupError(
                        f"dimension {d.value!r} is {shown[d.value]} in one given input, {size} "
                        f"in {v.name!r}; set it with dims/--dim"
                    )
    try:
        bound = Dims(names, image, dims, shown)
    except KeyError as error:
        listed = ", ".join(Dims(names).sizable()) or "none"
        raise VerificationSetupError(
            f"no symbolic dimension or symbol {error.args[0]!r} (dimensions: {listed})"
        ) from None
    except ValueError as error:
        raise VerificationSetupError(str(error)) from None

    def invented() -> int:
        shapes = [
            [d if isinstance(d, int) else bound.size(d.value or "") for d in v.shape]
            for v in todo
            if v.shape is not None
        ]
        return sum(math.prod(shape) for shape in shapes)

    bound.choose(invented)
    return bound


def _image_axis(axis: int, rank: int, is_grid: bool, role: str | None) -> bool:
    """Whether ``axis`` of an input of ``rank`` holds pixels: a grid's 1..r, else NC's 2..r+1."""
    if is_grid:
        return 1 <= axis < rank - 1
    return rank >= 3 and axis >= 2 and role != "shape"


def _size(dim: int | ir.SymbolicDim, dims: Dims) -> int:
    return dim if isinstance(dim, int) else dims.size(dim.value or "")


def _slot(value: ir.Value, dims: Dims, roles: dict[str, str], site: Site | None) -> _Slot:
    """How to invent ``value``; ``site`` is the GridSample whose grid it is, if it is one."""
    ask = f"give it with --inputs {value.name}:FILE.npy (inputs= in Python)"
    if not isinstance(value.type, ir.TensorType) or value.dtype is None:
        raise _CannotInvent(f"input {value.name!r} is a {value.type or 'untyped'} value: {ask}")
    if value.shape is None:
        raise _CannotInvent(f"input {value.name!r} has an unknown rank: {ask}")
    role = roles.get(value.name, "")
    if role == "shape":
        raise _CannotInvent(f"input {value.name!r} holds a shape, sizes or axes: {ask}")
    shape = tuple(_size(d, dims) for d in value.shape)
    dtype = np.dtype(value.dtype.numpy())
    if site is None:
        return _Slot(value.name, dtype, shape, str(role))
    lattice = _lattice_of(site, dims) or ()
    fits = len(shape) == len(lattice) + 2 and shape[-1] == len(lattice)
    return _Slot(value.name, dtype, shape, "grid", lattice if fits else ())


def _check_size(slots: list[_Slot]) -> None:
    """Refuse sizes (a typo in dims: N=99999999999) whose inputs no memory could hold."""
    values = sum(math.prod(slot.shape) for slot in slots)
    if values > _MAX_VALUES:
        big = max(slots, key=lambda slot: math.prod(slot.shape))
        raise VerificationSetupError(
            f"inputs too large to invent: {values:.3g} values per sample (at most 2**28), "
            f"{big.name!r} is {list(big.shape)}; give smaller sizes with dims (--dim)"
        )


def _roles(model: ir.Model, sites: list[Site]) -> tuple[dict[str, str], dict[str, Site]]:
    """The role of each graph input, and the GridSample of each input that is a grid itself.

    Roles: "shape" (sizes or axes), "grid" (is or feeds a grid) or "x".
    """
    inputs = {v.name for v in model.graph.inputs}
    roles: dict[str, str] = {}
    grid_sites: dict[str, Site] = {}
    for site in sites:
        for name in _sources(site.node.inputs[0], inputs):
            roles.setdefault(name, "x")
    for site in sites:
        for name in _sources(site.node.inputs[1], inputs):
            roles[name] = "grid"
        grid = site.node.inputs[1]
        if grid is not None and grid.producer() is None and grid.name in inputs:
            grid_sites[grid.name] = site
    for node in ir.traversal.RecursiveGraphIterator(model.graph):
        for k in _SHAPE_OPERANDS.get(node.op_type, ()):
            value = node.inputs[k] if k < len(node.inputs) else None
            if value is not None and value.producer() is None and value.name in inputs:
                roles[value.name] = "shape"
    return roles, grid_sites


def _sources(value: ir.Value | None, inputs: set[str]) -> set[str]:
    """Names of the graph inputs ``value`` is computed from (through subgraphs too)."""
    stack, seen, found = [value], set(), set()
    while stack:
        v = stack.pop()
        if v is None or id(v) in seen:
            continue
        seen.add(id(v))
        node = v.producer()
        if node is None:
            found.update({v.name} & inputs)
            continue
        stack.extend(node.inputs)
        for attr in node.attributes.values():
            if attr.type in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS):
                graphs = attr.value if attr.type == ir.AttributeType.GRAPHS else [attr.value]
                for graph in graphs:
                    inner = ir.traversal.RecursiveGraphIterator(graph)
                    stack.extend(v for n in inner for v in n.inputs)
    return found


def _lattice_of(site: Site, dims: Dims) -> tuple[tuple[int, int], ...] | None:
    """(size, align_corners) of X's spatial axis per grid component, innermost axis first."""
    x_shape = site.node.inputs[0].shape if site.node.inputs[0] is not None else None
    if site.spec is None or x_shape is None or len(x_shape) != site.spec.rank + 2:
        return None
    sizes = [_size(d, dims) for d in x_shape[2:]]
    return tuple((size, site.spec.align_corners) for size in reversed(sizes))


def _random(slot: _Slot, rng: np.random.Generator) -> np.ndarray:
    return np.asarray(_draw(slot, rng), dtype=slot.dtype)


def _draw(slot: _Slot, rng: np.random.Generator):
    dtype, shape = slot.dtype, slot.shape
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind == "O":
        return rng.choice(np.array(list("abcdefgh"), dtype=object), size=shape)
    if dtype.kind in "iu":
        low, high = (-8 if dtype.kind == "i" else 0, 9) if slot.role == "x" else (0, 4)
        return rng.integers(low, high, size=shape).astype(dtype)
    if slot.role != "grid":  # float32 drawn as such: twice as fast on a large X
        wide = np.float32 if dtype == np.float32 else np.float64
        return rng.standard_normal(shape, dtype=wide).astype(dtype)
    values = rng.uniform(-_GRID_RANGE, _GRID_RANGE, size=shape)
    eighths = np.arange(-10, 11) / 8.0
    if not slot.lattice:
        pick = rng.random(shape) < 0.25
        return np.where(pick, rng.choice(eighths, size=shape), values).astype(dtype)
    for c, (size, align_corners) in enumerate(slot.lattice):
        points = _lattice_points(size, align_corners)
        pick = rng.random(shape[:-1]) < 0.3
        chosen = rng.choice(eighths if points is None else points, size=shape[:-1])
        values[..., c] = np.where(pick, chosen, values[..., c])
    return values.astype(dtype)


def _lattice_points(size: int, align_corners: int) -> np.ndarray | None:
    """Grid values that land on X's samples and half-way between them, one step beyond.

    None where there are none to divide by: an empty axis, one pixel with align_corners.
    """
    pixels = np.arange(-2, 2 * size + 1) / 2.0  # -1, -0.5, ..., size
    if size < 1 + align_corners:
        return None
    if align_corners:
        return 2 * pixels / (size - 1) - 1
    return (2 * pixels + 1) / size - 1
