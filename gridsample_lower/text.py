"""Text for people: a plain table, an error's message on one line, a list of names."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["listed", "one_line", "table"]


def table(rows: list[dict[str, str]]) -> str:
    """Columns padded to their widest cell, headed by the first row's keys."""
    columns = list(rows[0])
    lines = [columns] + [[str(row[c]) for c in columns] for row in rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(columns))]
    return "\n".join(
        "  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip() for line in lines
    )


def one_line(error: BaseException, limit: int = 240, *, tail: bool = False) -> str:
    """An error's message on one line (the checker's runs over several), shortened if long.

    ``tail``: the first line only, and if long its end, where runtimes put the reason.
    """
    lines = [part.strip() for part in str(error).splitlines() if part.strip()]
    line = (lines[0] if tail else " ".join(lines)) if lines else type(error).__name__
    if len(line) <= limit:
        return line
    return "..." + line[-limit:] if tail else line[: limit - 3] + "..."


def listed(values: Iterable, limit: int = 10) -> str:
    """``values`` sorted and quoted, the first ``limit`` of them, for a message."""
    values = sorted(values)
    more = f", ... ({len(values)} in all)" if len(values) > limit else ""
    return ", ".join(repr(v) for v in values[:limit]) + more if values else "none"
