"""Aligned text tables for the commands' output: each column as wide as its
widest cell, numbers right-aligned, so that a table reads down its columns."""

from __future__ import annotations

from dataclasses import dataclass

GAP = "  "


@dataclass(frozen=True)
class Column:
    header: str
    numeric: bool = False  # right-aligned, so that digits of one weight line up


def table(columns: list[Column], rows: list[list[str]]) -> list[str]:
    """The header line and one line per row (trailing blanks dropped)."""
    widths = [max([len(c.header)] + [len(r[k]) for r in rows]) for k, c in enumerate(columns)]

    def line(cells: list[str]) -> str:
        return GAP.join(cell.rjust(w) if c.numeric else cell.ljust(w)
                        for c, w, cell in zip(columns, widths, cells)).rstrip()
    return [line([c.header for c in columns])] + [line(r) for r in rows]


def number(value, decimals: int = 2) -> str:
    """A figure as the tables print it: '-' where there is none."""
    if value is None:
        return "-"
    return f"{value:.{decimals}f}" if isinstance(value, float) else str(value)
