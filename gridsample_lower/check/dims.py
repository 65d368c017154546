"""Sizes for symbolic dimensions: what the check invents inputs at when nobody says.

Exporters name symbolic dimensions with a symbol (``batch``, ``s0``) or with an expression of
symbols (dynamo's ``32*h32``, ``floor(s0/2)``, ``s1 + 1``). A size can be given for a dimension
as written or for a symbol (``--dim h32=5`` makes ``32*h32`` 160); given arrays bind the
symbols their shapes show. Symbols nobody sized get sizes real models accept: image axes (the
spatial axes of X-like inputs, and of grids) come out at ``IMAGE_SIZE`` pixels, a multiple of
every stride a CNN or a feature pyramid divides by, halved while the invented inputs would hold
more than ``BUDGET`` values (down to 8); other axes (batch, channels, sequence) at
``OTHER_SIZE``.
Expressions are read with Python's ``ast`` and evaluated on whole numbers only: a dimension
name from a model file is never run as code.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Iterable, Mapping

__all__ = ["IMAGE_SIZE", "OTHER_SIZE", "Dims", "symbols_of"]

# Pixels along an image axis: 128 = 2**7 divides by every stride of a feature pyramid, and
# real models need it (RAFT's 1/64 level divides by its width - 1; a Deformable DETR exported
# by dynamo at 128 fails at 64).
IMAGE_SIZE = 128
OTHER_SIZE = 3  # batch, channels, sequence: small, and not a power of two
BUDGET = 2**22  # invented values per sample before image axes are halved (down to 8)
_LARGEST = 2**40
_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
}
_CALLS = {
    "floor": math.floor,
    "FloorToInt": math.floor,
    "ceil": math.ceil,
    "CeilToInt": math.ceil,
    "Max": max,
    "max": max,
    "Min": min,
    "min": min,
    "Mod": operator.mod,
    "FloorDiv": operator.floordiv,
    "CleanDiv": operator.floordiv,
}


def _parse(text: str) -> ast.expr | None:
    """The expression a dimension name writes, or None when it is not one we evaluate."""
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        allowed = (
            isinstance(node, ast.Name | ast.Load | ast.operator | ast.unaryop)
            or (isinstance(node, ast.Constant) and type(node.value) is int)
            or (isinstance(node, ast.BinOp) and type(node.op) in _BINARY)
            or (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd))
            or (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in _CALLS
                and not node.keywords
            )
        )
        if not allowed:
            return None
    return tree


def symbols_of(text: str) -> list[str]:
    """The symbols a dimension name uses, in order: itself when it is not an expression."""
    tree = _parse(text)
    if tree is None:
        return [text]
    calls = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    names = [n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in calls]
    return list(dict.fromkeys(names))


def _evaluate(tree: ast.expr, values: Mapping[str, int]) -> float | None:
    """The value of ``tree`` with ``values`` for its symbols; None if undefined or too large."""

    def value(node: ast.expr) -> float:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return values[node.id]
        if isinstance(node, ast.UnaryOp):
            inner = value(node.operand)
            return -inner if isinstance(node.op, ast.USub) else inner
        if isinstance(node, ast.BinOp):
            left, right = value(node.left), value(node.right)
            if isinstance(node.op, ast.Pow) and abs(right) > 64:
                raise OverflowError
            result = _BINARY[type(node.op)](left, right)
        else:  # a Call: checked by _parse
            result = _CALLS[node.func.id](*(value(a) for a in node.args))
        if abs(result) > _LARGEST:
            raise OverflowError
        return result

    try:
        return value(tree)
    except (KeyError, ZeroDivisionError, OverflowError, TypeError, ValueError):
        return None


class Dims:
    """The size of every symbolic dimension of a model's inputs.

    Args:
        names: Every symbolic dimension name of the inputs (as written: ``32*h32``).
        image: The names that stand on an image axis (a spatial axis of X or of a grid).
        given: Sizes given for names as written or for symbols.
        shown: Sizes the given arrays show, by name as written.

    Raises:
        KeyError: A given size names neither a dimension nor a symbol (the message lists them).
        ValueError: Given arrays disagree on a symbol.
    """

    def __init__(
        self,
        names: Iterable[str],
        image: Iterable[str] = (),
        given: Mapping[str, int] | None = None,
        shown: Mapping[str, int] | None = None,
    ) -> None:
        self.names = list(dict.fromkeys(names))
        self._trees = {name: _parse(name) for name in self.names}
        self.symbols = list(dict.fromkeys(s for name in self.names for s in symbols_of(name)))
        given = dict(given or {})
        unknown = sorted(set(given) - set(self.names) - set(self.symbols))
        if unknown:
            raise KeyError(unknown[0])
        self._literal = {k: v for k, v in given.items() if k in self.names}
        self.values = {k: v for k, v in given.items() if k in self.symbols}
        self._bind_shown(dict(shown or {}))
        self._image = [n for n in dict.fromkeys(image) if n in self.names]
        self.chosen: dict[str, int] = {}  # symbol -> size chosen here (no one gave it)

    def sizable(self) -> list[str]:
        """What a size may be given for: the names as written, then the symbols in them."""
        return sorted(self.names) + sorted(set(self.symbols) - set(self.names))

    def _bind_shown(self, shown: dict[str, int]) -> None:
        """Bind each symbol a given array's size determines (``32*h32`` of size 160: h32=5)."""
        for name, size in shown.items():
            if name in self._literal:
                if self._literal[name] != size:
                    raise ValueError(
                        f"dimension {name!r} is {self._literal[name]} by dims/--dim, {size} in a "
                        "given input"
                    )
                continue
            free = [s for s in symbols_of(name) if s not in self.values]
            tree = self._trees.get(name)
            if len(free) != 1:
                if not free and tree is not None and _evaluate(tree, self.values) != size:
                    raise ValueError(
                        f"dimension {name!r} is {size} in a given input, "
                        f"{_evaluate(tree, self.values)} by the sizes of its symbols"
                    )
                self._literal.setdefault(name, size)
                continue
            solved = _solve(tree, free[0], self.values, size) if tree is not None else size
            if solved is None:
                self._literal.setdefault(name, size)
            else:
                self.values[free[0]] = solved

    def choose(self, count_values) -> None:
        """Size every unbound symbol; ``count_values()`` says how many values inputs would hold.

        Image symbols are sized so that their axes come out at ``IMAGE_SIZE`` (then halved, down
        to 8, while ``count_values()`` exceeds ``BUDGET``); the others at ``OTHER_SIZE``.
        """
        image_symbols = {s for n in self._image for s in symbols_of(n)} - set(self.values)
        others = [s for s in self.symbols if s not in self.values and s not in image_symbols]
        for symbol in others:
            self.chosen[symbol] = self.values[symbol] = OTHER_SIZE
        target = IMAGE_SIZE
        while True:
            for symbol in self.symbols:
                if symbol in image_symbols:
                    self.chosen[symbol] = self.values[symbol] = self._reach(symbol, target)
            if target <= 8 or count_values() <= BUDGET:
                return
            target //= 2

    def _reach(self, symbol: str, target: int) -> int:
        """The least size of ``symbol`` that makes an image axis using it ``target`` or more.

        ``32*h`` gets h = 4 for 128 pixels (the grid's ``h`` axis then has 4 points).
        """
        trees = [self._trees[n] for n in self._image if symbol in symbols_of(n)]
        trees = [t for t in trees if t is not None]
        for size in range(1, target + 1):
            values = {**{s: OTHER_SIZE for s in self.symbols}, **self.values, symbol: size}
            results = [_evaluate(t, values) for t in trees]
            if all(r is not None for r in results) and max(results, default=target) >= target:
                return size
        return target

    def size(self, name: str) -> int:
        """The size of dimension ``name`` (as written); ``OTHER_SIZE`` where it has none."""
        if name in self._literal:
            return self._literal[name]
        tree = self._trees.get(name) or _parse(name)
        if tree is None:
            return self.values.get(name, OTHER_SIZE)
        result = _evaluate(tree, self.values)
        if result is None or result != int(result) or result < 0:
            return OTHER_SIZE
        return int(result)

    def describe(self, chosen_only: bool = True) -> str:
        """Sizes as ``h=64, w=64``: those chosen here (no one gave them), or every symbol's."""
        values = self.chosen if chosen_only else self.values
        return ", ".join(f"{s}={values[s]}" for s in self.symbols if s in values)


def _solve(tree: ast.expr, symbol: str, values: Mapping[str, int], size: int) -> int | None:
    """The whole number that gives ``tree`` the value ``size``, for a non-decreasing tree."""
    low, high = 0, max(size, 1)
    while low < high:
        middle = (low + high) // 2
        result = _evaluate(tree, {**values, symbol: middle})
        if result is None:
            return None
        if result < size:
            low = middle + 1
        else:
            high = middle
    return low if _evaluate(tree, {**values, symbol: low}) == size else None
