"""The lowering's options as one value: ``lower()``'s keywords, the CLI's flags, the pass's setup.

``lower()`` spells them out for its signature and builds this; the command line builds it from
the flags of the same names (``take``); it makes the ``Selection`` and the pass.
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Iterable

import onnx_ir as ir

from gridsample_lower.lowering.passes import LowerGridSamplePass
from gridsample_lower.lowering.selection import Selection
from gridsample_lower.lowering.targets import Target, get_target
from gridsample_lower.spec import MODE_NAMES

__all__ = ["LoweringOptions"]


@dataclasses.dataclass(frozen=True)
class LoweringOptions:
    """What to lower, for which target, and how (``lower()`` documents each field)."""

    target: Target | str = "generic"
    lower_all: bool = False
    only: Iterable[str] = ()
    skip: Iterable[str] = ()
    modes: Iterable[str] = ()
    ranks: Iterable[int] = ()
    index_dtype: ir.DataType | str | None = None
    as_functions: bool = False
    strict: bool = True

    @classmethod
    def take(cls, flags: dict, **given) -> LoweringOptions:
        """The options among ``flags`` (removed from it), with ``given`` on top."""
        names = [field.name for field in dataclasses.fields(cls) if field.name in flags]
        return cls(**{name: flags.pop(name) for name in names}, **given)

    def selection(self) -> Selection:
        """The Selection these options make; raises TypeError or ValueError for bad values."""
        chosen = get_target(self.target)
        if self.index_dtype is not None:
            chosen = dataclasses.replace(chosen, index_dtype=_index_dtype(self.index_dtype))
        modes = _items(self.modes, "modes", str)
        ranks = _items(self.ranks, "ranks", numbers.Integral)
        unknown = [mode for mode in modes if mode not in MODE_NAMES]
        if unknown:
            known = ", ".join(MODE_NAMES)
            raise ValueError(f"unknown mode {unknown[0]!r}; expected one of {known}")
        if any(rank < 1 for rank in ranks):
            raise ValueError(f"ranks must be at least 1, not {min(ranks)}")
        return Selection(
            chosen,
            self.lower_all,
            frozenset(_items(self.only, "only", str)),
            frozenset(_items(self.skip, "skip", str)),
            frozenset(MODE_NAMES[mode] for mode in modes),
            frozenset(int(rank) for rank in ranks),
        )

    def lowering_pass(self) -> LowerGridSamplePass:
        selection = self.selection()
        return LowerGridSamplePass(
            strict=self.strict,
            select=selection,
            target=selection.target,
            as_functions=self.as_functions,
        )


def _items(values, what: str, kind: type) -> tuple:
    """``values`` as a tuple of ``kind``; a bare one is one item (a str, not its characters)."""
    try:
        values = (values,) if isinstance(values, str) else tuple(values)
    except TypeError:
        values = (values,)
    wrong = [v for v in values if isinstance(v, bool) or not isinstance(v, kind)]
    if wrong:
        name = "int" if kind is numbers.Integral else kind.__name__
        raise TypeError(f"{what}: expected {name} values, got {type(wrong[0]).__name__}")
    return values


def _index_dtype(value: ir.DataType | str | int) -> ir.DataType:
    """int32 or int64 as a name, an ``ir.DataType`` or an ``onnx.TensorProto`` number."""
    if isinstance(value, str):
        dtype = ir.DataType.__members__.get(value.upper())
    elif isinstance(value, int) and not isinstance(value, bool):
        dtype = value  # onnx.TensorProto.INT32 == ir.DataType.INT32
    else:
        raise TypeError(f"index_dtype must be a str or a data type, not {type(value).__name__}")
    if dtype not in (ir.DataType.INT32, ir.DataType.INT64):
        raise ValueError(f"index_dtype must be int32 or int64, not {value!r}")
    return ir.DataType(dtype)
