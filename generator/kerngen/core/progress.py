"""Progress of long steps on stderr.

The library tells the `kerngen.progress` logger, which the command line
prints (`cli._report_progress`) and a library user may leave silent. A step
that may run long (validation's searches and proofs) is wrapped in a
`Progress`: from `PROGRESS_AFTER` seconds on it says, every `PROGRESS_AFTER`
seconds, what it is doing and for how long. The report comes from a timer
thread, so a step sitting in one long call (an SMT proof) is reported too;
the state is the object's own, handed to whoever notes what is being done.
"""

from __future__ import annotations

import logging
import threading
import time
from types import TracebackType

PROGRESS_AFTER = 2.0  # seconds a step runs before it is reported, and between reports
progress = logging.getLogger("kerngen.progress")


class Progress:
    """A step's report while it runs (a context manager): `what` the step
    is, and the latest `note` of what it is doing."""

    def __init__(self, what: str, after: float = PROGRESS_AFTER, log: logging.Logger = progress) -> None:
        self.what, self.after, self.log = what, after, log
        self.doing = ""
        self._done = threading.Event()
        self._timer: threading.Thread | None = None
        self._started = 0.0

    def note(self, doing: str) -> None:
        """What the step does now (said in the next report)."""
        self.doing = doing

    def __enter__(self) -> Progress:
        self._started = time.monotonic()
        self._timer = threading.Thread(target=self._report, name=f"progress of {self.what}", daemon=True)
        self._timer.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._done.set()
        if self._timer is not None:
            self._timer.join()

    def _report(self) -> None:
        while not self._done.wait(self.after):
            doing = f": {self.doing}" if self.doing else ""
            self.log.info("%s%s (%.0f s so far)", self.what, doing, time.monotonic() - self._started)
