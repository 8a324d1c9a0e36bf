"""`kerngen check`: validation alone, what `emit` runs before it builds a
kernel (the schema, the bound analysis, the reductions and their lemmas):
one line per parameter file, what the set was designed to or why it is
refused; no kernel is built."""

from __future__ import annotations

from collections.abc import Callable

from ..core.params import Overrides
from ..errors import KerngenError, ParamError
from ..families import family_of, load
from . import shipped


def check_line(arg: str, overrides: Overrides) -> tuple[bool, str]:
    """(valid, the line saying so) for one PARAMS argument."""
    shown = arg
    try:
        path, shown = shipped.resolve(arg)
        p = load(path, overrides)
    except ParamError as e:  # its source is the file, which the line names first
        return False, f"{shown}: error: {e.key}: {e.rule}"
    except KerngenError as e:  # the argument itself (no such file): said once
        return False, f"{shown}: error: {str(e).removeprefix(f'{arg}: ')}"
    return True, f"{shown}: ok: {p.name}: {family_of(p).summary(p)}"


def check(args: list[str], overrides: Overrides, say: Callable[[str], None]) -> int:
    """Says a line for each argument; the exit code: 1 if any was refused."""
    valid = True
    for arg in args:
        ok, line = check_line(arg, overrides)
        say(line)
        valid &= ok
    return 0 if valid else 1
