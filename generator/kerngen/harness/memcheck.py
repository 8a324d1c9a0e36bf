"""Kernels run under valgrind's memcheck with their inputs undefined: a
second opinion on the constant-time proof (`passes.constant_time`).

``kg_memcheck`` (csrc/memcheck.c) marks every in and inout buffer undefined
and calls each case once; memcheck reports each branch, conditional move
and address computed from undefined bytes. A case whose kernel holds an
instruction valgrind cannot decode (AVX-512; 256-bit VPCLMULQDQ in valgrind
3.19) stops at it: that case is reported as not checked, never as clean.
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import HarnessError
from .protocol import Case, check_libs, describe_exit, write_vectors
from .toolchain import build_memcheck, tool

# memcheck's reports of a value computed from undefined bytes deciding control flow or an address
DATA_DEPENDENT = ("Conditional jump or move depends on uninitialised value", "Use of uninitialised value of size")
_MARK = "kg_memcheck: "


@dataclass(frozen=True)
class MemcheckResult:
    """One case's verdict: `checked` False where valgrind could not run the kernel through."""

    case_id: str
    checked: bool
    reports: tuple[str, ...]  # memcheck's data-dependence reports in the call, each its first line

    @property
    def clean(self) -> bool:
        return self.checked and not self.reports


def run_memcheck(lib: Path | Sequence[Path], cases: Sequence[Case], workdir: Path,
                 timeout: float = 300.0) -> list[MemcheckResult]:
    """Every case once under one memcheck process; verdicts in order."""
    libs = check_libs(lib)
    program = build_memcheck(Path(workdir))
    with tempfile.TemporaryDirectory(prefix="kg-memcheck-") as tmp:
        vectors = Path(tmp) / "vectors.txt"
        write_vectors(vectors, cases)
        argv = [tool("valgrind"), "--tool=memcheck", "--error-limit=no", "--track-origins=no",
                str(program), *map(str, libs), str(vectors)]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired as exc:
            raise HarnessError(f"valgrind timed out after {timeout} s") from exc
    if proc.returncode != 0:
        raise HarnessError(f"kg_memcheck under valgrind {describe_exit(proc.returncode)}: {proc.stderr[-2000:]}")
    return _verdicts(proc.stderr, cases)


def _verdicts(log: str, cases: Sequence[Case]) -> list[MemcheckResult]:
    """Each case's reports: those between its `case` line and its `ran` or `unhandled` line."""
    found: dict[str, MemcheckResult] = {}
    current, reports = None, []
    for line in log.splitlines():
        if line.startswith(_MARK):
            word, case_id = line[len(_MARK):].split(maxsplit=1)
            if word == "case":
                current, reports = case_id, []
            else:
                found[case_id] = MemcheckResult(case_id, word == "ran", tuple(reports))
                current = None
        elif current is not None and any(kind in line for kind in DATA_DEPENDENT):
            reports.append(line.split("== ", 1)[-1])
    missing = [c.case_id for c in cases if c.case_id not in found]
    if missing:
        raise HarnessError(f"kg_memcheck gave no verdict for {', '.join(missing)}")
    return [found[c.case_id] for c in cases]
