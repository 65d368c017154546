"""What one GridSample node asks for: rank, mode, padding, align_corners and dtypes.

Attributes are read with the spelling and defaults of the node's opset (16-19: bilinear/bicubic,
20+: linear/cubic). Everything a lowering needs to decide which ops to emit lives here, so the
decompositions never look at a node.
"""

from __future__ import annotations

import dataclasses

import onnx_ir as ir

__all__ = [
    "ALIGN_CORNERS",
    "MODES",
    "MODE_NAMES",
    "OPSET16_SPELLING",
    "PADDING_MODES",
    "GridSampleSpec",
    "UnsupportedGridSample",
    "compute_dtype",
]

MODES = ("linear", "nearest", "cubic")
PADDING_MODES = ("zeros", "border", "reflection")
ALIGN_CORNERS = (0, 1)

# Opset 20 renamed the modes; both spellings mean the same thing. The one table of them:
OPSET16_SPELLING = {"linear": "bilinear", "nearest": "nearest", "cubic": "bicubic"}
# Every spelling of a mode, opset 16's and 20's, to opset 20's: the same at any opset.
MODE_NAMES = {**{mode: mode for mode in MODES}, **{v: k for k, v in OPSET16_SPELLING.items()}}

FLOAT_TYPES = frozenset(
    {ir.DataType.FLOAT16, ir.DataType.BFLOAT16, ir.DataType.FLOAT, ir.DataType.DOUBLE}
)
INTEGER_TYPES = frozenset(
    {
        ir.DataType.INT8,
        ir.DataType.INT16,
        ir.DataType.INT32,
        ir.DataType.INT64,
        ir.DataType.UINT8,
        ir.DataType.UINT16,
        ir.DataType.UINT32,
        ir.DataType.UINT64,
    }
)
# Nearest only moves values, so it also takes types nobody can do arithmetic on.
GATHER_ONLY_TYPES = frozenset({ir.DataType.BOOL, ir.DataType.STRING})


class UnsupportedGridSample(ValueError):
    """A GridSample node that cannot be lowered, with the node's name and the reason."""

    def __init__(self, node_name: str, reason: str) -> None:
        super().__init__(f"GridSample {node_name!r}: {reason}")
        self.node_name = node_name
        self.reason = reason


@dataclasses.dataclass(frozen=True)
class GridSampleSpec:
    """The configuration of one GridSample node, in opset-20 vocabulary."""

    rank: int
    mode: str
    padding_mode: str
    align_corners: int
    x_dtype: ir.DataType = ir.DataType.FLOAT
    grid_dtype: ir.DataType = ir.DataType.FLOAT

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"unknown mode {self.mode!r}; expected one of {MODES}")
        if self.padding_mode not in PADDING_MODES:
            raise ValueError(f"unknown padding_mode {self.padding_mode!r}")
        if self.align_corners not in ALIGN_CORNERS:
            raise ValueError(f"align_corners must be 0 or 1, not {self.align_corners}")
        if self.rank < 1:
            raise ValueError(f"spatial rank must be >= 1, not {self.rank}")

    @property
    def label(self) -> str:
        """The summary key, e.g. ``r2 linear zeros align_corners=0``."""
        return f"r{self.rank} {self.mode} {self.padding_mode} align_corners={self.align_corners}"

    @classmethod
    def from_node(cls, node: ir.Node) -> GridSampleSpec:
        """Read a node's attributes and input types; raise UnsupportedGridSample if it can't be.

        Both spellings of a mode are accepted at any opset: they mean the same thing, and the
        default (bilinear at 16-19, linear at 20+) is the same mode too.
        """
        name = node.name or "<unnamed>"
        attrs = {}
        for key in ("mode", "padding_mode", "align_corners"):
            attr = node.attributes.get(key)
            if attr is not None and attr.is_ref():
                raise UnsupportedGridSample(
                    name, f"attribute {key} refers to function attribute @{attr.ref_attr_name}"
                )
            attrs[key] = None if attr is None else attr.value
        spelled = attrs["mode"] or "linear"
        mode = MODE_NAMES.get(spelled)
        if mode is None:
            raise UnsupportedGridSample(name, f"unknown mode {spelled!r}")
        padding = attrs["padding_mode"] or "zeros"
        if padding not in PADDING_MODES:
            raise UnsupportedGridSample(name, f"unknown padding_mode {padding!r}")
        align = attrs["align_corners"] or 0
        if align not in ALIGN_CORNERS:
            raise UnsupportedGridSample(name, f"align_corners must be 0 or 1, not {align}")
        x, grid = node.inputs[0], node.inputs[1]
        rank = _spatial_rank(name, x, grid)
        if padding != "zeros" and x.shape is not None and 0 in list(x.shape)[2:]:
            raise UnsupportedGridSample(
                name,
                f"X {_shape_text(x)} has an empty spatial axis: "
                f"{padding} padding has no pixel to read",
            )
        x_dtype = _dtype(name, "X", x)
        grid_dtype = _dtype(name, "grid", grid)
        if grid_dtype not in FLOAT_TYPES:
            raise UnsupportedGridSample(name, f"grid must be a float tensor, not {grid_dtype.name}")
        if x_dtype in GATHER_ONLY_TYPES and mode != "nearest":
            raise UnsupportedGridSample(name, f"X of type {x_dtype.name} needs mode nearest")
        if x_dtype not in FLOAT_TYPES | INTEGER_TYPES | GATHER_ONLY_TYPES:
            raise UnsupportedGridSample(name, f"X of type {x_dtype.name} is not supported")
        return cls(rank, mode, padding, align, x_dtype, grid_dtype)


def spelling_matches_opset(node: ir.Node, opset: int) -> bool:
    """False when a mode is spelled for the other side of opset 20 (``linear`` at opset 16)."""
    attr = node.attributes.get("mode")
    if attr is None or attr.is_ref():
        return True
    return attr.value in (OPSET16_SPELLING.values() if opset < 20 else MODES)


def compute_dtype(spec: GridSampleSpec) -> ir.DataType:
    """The float type coordinates and weights are computed in.

    float32 at least; float64 when either input is double, and for linear/cubic on 32/64-bit
    integers, whose values float32 cannot hold exactly.
    """
    if ir.DataType.DOUBLE in (spec.x_dtype, spec.grid_dtype):
        return ir.DataType.DOUBLE
    if spec.mode != "nearest" and spec.x_dtype in INTEGER_TYPES and spec.x_dtype.itemsize >= 4:
        return ir.DataType.DOUBLE
    return ir.DataType.FLOAT


def _spatial_rank(name: str, x: ir.Value | None, grid: ir.Value | None) -> int:
    if x is not None and x.shape is not None and len(x.shape) < 3:
        raise UnsupportedGridSample(
            name, f"X must have rank >= 3 (N, C, spatial axes), got {_shape_text(x)}"
        )
    ranks = set()
    for value in (x, grid):
        if value is not None and value.shape is not None:
            ranks.add(len(value.shape) - 2)
    if grid is not None and grid.shape is not None and isinstance(grid.shape[-1], int):
        ranks.add(grid.shape[-1])
    if not ranks:
        raise UnsupportedGridSample(
            name, "the rank of X and grid is unknown (no shape information)"
        )
    if len(ranks) > 1:
        raise UnsupportedGridSample(
            name, f"X {_shape_text(x)} and grid {_shape_text(grid)} disagree on the spatial rank"
        )
    (rank,) = ranks
    if rank < 1:
        raise UnsupportedGridSample(name, f"X must have rank >= 3, got {_shape_text(x)}")
    return rank


def _dtype(name: str, role: str, value: ir.Value | None) -> ir.DataType:
    if value is None or value.dtype is None:
        raise UnsupportedGridSample(name, f"the element type of {role} is unknown")
    return value.dtype


def _shape_text(value: ir.Value | None) -> str:
    return "of unknown shape" if value is None or value.shape is None else str(value.shape)
