"""`kerngen selfcheck`: the instruction table's semantics against this CPU.

Prints each failing form with a witness, the forms this CPU cannot run and
the rows the table gives no lane semantics, a table of counts per
encoding, and ends with 'N passed, N failed, N skipped'."""

from __future__ import annotations

from pathlib import Path

from ..harness.cpu import cpu_flags
from ..harness.selfcheck import Report, selfcheck
from ..machine.ops import TABLE
from .columns import Column, table

COUNT_COLUMNS = [Column("encoding"), Column("passed", numeric=True), Column("failed", numeric=True),
                 Column("skipped", numeric=True)]


def report_lines(report: Report) -> list[str]:
    lines = [f"FAIL {entry}" for entry in report.failed]
    lines += [f"skipped {entry}" for entry in report.skipped]
    lines += [f"not modelled {entry}" for entry in report.not_modelled]
    lines += table(COUNT_COLUMNS, [[name, *map(str, counts)] for name, counts in report.per_encoding.items()])
    return lines + [report.summary()]


def run_selfcheck(workdir: Path, kernels: Path | None, seed: int) -> int:
    """Runs the selfcheck of the instruction table, prints its report; the exit code: 1 on any failure."""
    report = selfcheck(workdir, cpu_flags(), TABLE, kernels, seed)
    print("\n".join(report_lines(report)))
    return 1 if report.failed else 0
