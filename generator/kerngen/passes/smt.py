"""The SMT solver's checks, interruptible: Ctrl-C during a proof is the
user's KeyboardInterrupt, never a verdict.

While z3 searches it takes SIGINT for itself and answers `unknown` (a
Solver "interrupted from keyboard", an Optimize "canceled", as it says of
a timeout), which a caller reports as a proof not found in its time limit,
or reads as "not unsat" and goes on with the interrupt lost. So each check
runs with z3's handler off, on a thread of its own, while the calling thread
waits where Python's KeyboardInterrupt reaches it; then the search is
stopped and the interrupt raised.
"""

from __future__ import annotations

import threading
from typing import Any


def check(solver: Any) -> Any:
    """`solver.check()` of a z3 Solver or Optimize: sat, unsat, or unknown
    (not settled within the solver's time limit)."""
    solver.set("ctrl_c", False)
    outcome: list[Any] = []
    settled = threading.Event()

    def search() -> None:
        try:
            outcome.append(solver.check())
        except BaseException as e:  # raised on the caller's thread below, as if the check had run there
            outcome.append(e)
        finally:
            settled.set()

    threading.Thread(target=search, name="z3 check", daemon=True).start()
    try:
        settled.wait()
    except KeyboardInterrupt:
        solver.ctx.interrupt()
        settled.wait()  # z3 returns at once; its context is then free for whatever the interrupt unwinds
        raise
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    return outcome[0]
