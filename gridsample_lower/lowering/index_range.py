"""Whether int32 gather indices can hold every index a lowering computes, decided before emitting.

A target with int32 indices (webnn, int32, or ``index_dtype="int32"``) cannot gather past
2**31 - 1. The largest index a lowering computes is the zero slot past the data it gathers from
(``gathers.gather_and_combine``): S, the elements of one sample's spatial axes, for
GatherElements; N * S for the channels-last rows, which span every sample. S counts the ring
of zeros that zeros padding lays around X for linear and cubic (``sampling._zero_ring``): as
many zeros either side of every axis as the kernel has taps per axis (2, 4) for GatherElements,
one for the rows. The plan (``plan.plan_of``) leaves rows for GatherElements where only the
rows would overflow, and refuses a node whose chosen gather would: the rule's check builds the
plan, so ``strict=False`` can still leave that node in place.

Symbolic sizes are never refused: int32 there is the caller's promise. A symbolic batch counts
as one sample, whose static size alone may already be too large.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import onnx_ir as ir

from gridsample_lower.lowering.targets import Target
from gridsample_lower.spec import GridSampleSpec

__all__ = [
    "INT32_LIMIT",
    "RING_TYPES",
    "int32_overflow",
    "largest_index",
    "ring_width",
]

INT32_LIMIT = 2**31  # int32 indices hold up to INT32_LIMIT - 1
# X types whose infinities a zero weight would turn into NaN: zeros padding (linear, cubic)
# reads a ring of zeros around X instead of masking weights (``sampling._zero_ring``; integers
# have no infinities; onnxruntime has no bfloat16 Pad).
RING_TYPES = frozenset({ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.FLOAT16})
TAPS_PER_AXIS = {"nearest": 1, "linear": 2, "cubic": 4}

Shape = Sequence[object] | None  # X's dims: ints where static (an ``ir.Shape`` too)


def ring_width(spec: GridSampleSpec, rows: bool) -> int:
    """The zeros the lowering pads X with on either side of every spatial axis (0: none).

    Zeros padding of linear and cubic on a float X: as many as the kernel has taps per axis
    where GatherElements gathers (each point's taps then need no clamp), one for the rows.
    """
    if spec.mode == "nearest" or spec.padding_mode != "zeros" or spec.x_dtype not in RING_TYPES:
        return 0
    return 1 if rows else TAPS_PER_AXIS[spec.mode]


def largest_index(
    spec: GridSampleSpec,
    x_shape: Shape,
    *,
    rows: bool,
    ring: int | None = None,
    whole: bool = False,
) -> int | None:
    """The largest index the gather computes, where X's spatial sizes are static, else None.

    The zero slot one past the (padded) data: S for GatherElements, N * S for the rows (S where
    the batch is symbolic: at least one sample). 0 where X is empty, which nothing gathers.
    ``ring``: the zeros X is padded with, where known (else the path's ``ring_width``).
    ``whole``: the rows read from every value of X flattened (several samples' planes), C times
    as far (None where C is symbolic).
    """
    dims = _static(x_shape)
    if dims is None or len(dims) != 2 + spec.rank:
        return None
    if 0 in (dims[0], dims[1]):  # an empty Y (the rule emits a Reshape, no gather)
        return 0
    spatial = dims[2:]
    if any(d is None for d in spatial):
        return None
    width = ring_width(spec, rows) if ring is None else ring
    sample = math.prod(d + 2 * width for d in spatial)
    if whole:
        if dims[1] is None:
            return None
        sample *= dims[1]
    if rows and dims[0] is not None:
        return dims[0] * sample
    return sample


def int32_overflow(
    spec: GridSampleSpec,
    x_shape: Shape,
    target: Target,
    *,
    rows: bool,
    ring: int | None = None,
    whole: bool = False,
) -> str:
    """Why the target's int32 indices cannot hold the largest index of this path, or "".

    ``rows``: the channels-last rows' path, else GatherElements'; ``ring`` and ``whole`` as
    ``largest_index``.
    """
    if target.index_dtype != ir.DataType.INT32:
        return ""
    largest = largest_index(spec, x_shape, rows=rows, ring=ring, whole=whole)
    if largest is None or largest < INT32_LIMIT:
        return ""
    return f"indices reach {largest}: too many for int32"


def _static(shape: Shape) -> list[int | None] | None:
    if shape is None:
        return None
    return [d if isinstance(d, int) else None for d in shape]
