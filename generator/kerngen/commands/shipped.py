"""The parameter sets shipped with kerngen (`params/`, in the package as
`kerngen/params`), and how a command-line argument names one."""

from __future__ import annotations

import difflib
from importlib.resources import as_file, files
from pathlib import Path

from ..errors import UsageError
from ..core.manifest import MANIFEST
from ..families import load_schema
from .columns import Column, table

LIST_HINT = "(`kerngen list` shows the shipped sets)"
# a suggestion is a shipped name at least this similar (difflib's ratio) and nearly as similar as the best one
SIMILAR, NEARLY = 0.6, 0.1


def shipped_dir() -> Path:
    with as_file(files("kerngen") / "params") as path:
        return Path(path)


def shipped() -> list[Path]:
    return sorted(shipped_dir().glob("*.toml"))


def resolve(arg: str, bundles: bool = False) -> tuple[Path, str]:
    """The file a PARAMS argument names, and how the reproduce-command spells it.

    An existing file is itself; otherwise `NAME` or `params/NAME.toml` names a
    shipped set, spelled `params/NAME.toml` (which reproduces anywhere).
    Anything else is refused in one line saying what to pass instead (a bundle
    directory too when the command takes `bundles`)."""
    path = Path(arg)
    if path.is_file():
        return path, _display(path)
    name = path.name.removesuffix(".toml")
    found = shipped_dir() / f"{name}.toml"
    by_name = path.parent in (Path("."), Path("params"))
    if by_name and found.is_file():
        return found, f"params/{name}.toml"
    if path.is_dir():
        raise UsageError(_not_a_file(arg, path, bundles))
    if not path.exists():
        if not by_name:
            raise UsageError(f"{arg}: no such file")
        guesses = suggestions(name)
        guess = f"; did you mean {_either(guesses)}?" if guesses else ""
        raise UsageError(f"no such file or shipped set {name!r}{guess} {LIST_HINT}")
    return path, _display(path)  # something else (a device, a pipe): reading it says what is wrong


def _not_a_file(arg: str, path: Path, bundles: bool) -> str:
    instead = f"a parameter file (.toml) or a shipped set's name {LIST_HINT}"
    if bundles:
        return (f"{arg}: not a bundle: a bundle directory holds {MANIFEST} (`kerngen emit` writes it); pass a "
                f"bundle directory or its {MANIFEST}, {instead}")
    if (path / MANIFEST).is_file():
        return f"{arg}: an emitted bundle (`kerngen test {arg}` tests it); pass {instead}"
    return f"{arg}: a directory; pass {instead}"


def suggestions(name: str) -> list[str]:
    """Shipped set names close to `name`: those it begins (a family's sets:
    `kyber` names kyber-3329 and the other kyber-*), else the most similar ones."""
    names = [p.stem for p in shipped()]
    starting = sorted((n for n in names if n.startswith(f"{name}-")), key=lambda n: (len(n), n))
    if starting:
        return starting
    ratios = {n: difflib.SequenceMatcher(None, name, n).ratio() for n in names}
    best = max(ratios.values(), default=0.0)
    return sorted((n for n, r in ratios.items() if r >= SIMILAR and r >= best - NEARLY),
                  key=lambda n: (-ratios[n], n))


def _either(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def _display(p: Path) -> str:
    """Relative paths as given; absolute ones relative to the working
    directory when inside it, else as given (the command must reproduce)."""
    if not p.is_absolute():
        return p.as_posix()
    try:
        return p.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return p.as_posix()


def listed(path: Path) -> str:
    """How `kerngen list` shows a shipped set's file: a path valid from the
    working directory (relative inside it), else the name, which works anywhere."""
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return path.stem


# --- `kerngen list` --------------------------------------------------------------
# Two tables, each readable in 100 columns with every value spelled as the files spell it (one table
# holding both is wider than 100 even with one blank between columns and the values abbreviated):
# what each set is, then the choices of the sets that have them (the NTT's), by name.

SET_COLUMNS = [Column("name"), Column("family"), Column("n/m", numeric=True), Column("q / poly", numeric=True),
               Column("width", numeric=True), Column("L/d", numeric=True), Column("isa")]
CHOICE_COLUMNS = [Column("name"), Column("mul"), Column("order"), Column("output"),
                  Column("reduction"), Column("reducer")]
NOTES = ("n/m: the NTT's degree n (as 2^k above 9999), or m of GF(2^m) and the exponents of its polynomial;",
         "L/d: the NTT's layers and the degree of its base blocks (n / 2^L); output: one for every kernel, or",
         "forward/basemul/inverse; |x|<=B: every output proven within [-B, B]; auto: the cost model chooses",
         "when emitting")


def set_row(p) -> list[str]:
    """What a parameter set is, under SET_COLUMNS ('-' where its family has no such key)."""
    ntt = hasattr(p, "q")
    size = (f"2^{p.n.bit_length() - 1}" if p.n > 9999 else str(p.n)) if ntt else str(p.m)  # the column's width
    return [p.name, p.family, size, str(p.q) if ntt else ",".join(map(str, p.poly)),
            str(getattr(p, "width", "-")), f"{p.layers}/{p.d}" if ntt else "-", ",".join(p.isas)]


def choice_row(p) -> list[str] | None:
    """The set's choices under CHOICE_COLUMNS; None for a family with none."""
    if not hasattr(p, "output"):
        return None
    outputs = [v if isinstance(v, str) else f"|x|<={v}" for _, v in p.output]  # a number: a bound on |value|
    return [p.name, p.mul, p.order, outputs[0] if len(set(outputs)) == 1 else "/".join(outputs), p.policy, p.reducer]


def list_lines() -> list[str]:
    """`kerngen list`: the shipped sets, their choices, where the files are, what the columns mean."""
    paths = shipped()
    sets = [load_schema(path) for path in paths]  # shipped sets validate; their searches take seconds
    lines = table(SET_COLUMNS, [set_row(p) for p in sets]) + [""]
    lines += table(CHOICE_COLUMNS, [row for row in map(choice_row, sets) if row is not None]) + [""]
    shown = listed(paths[0])
    files = f"files: {shown.rsplit('/', 1)[0]}/NAME.toml; " if "/" in shown else ""
    lines.append(f"{files}every command also takes a NAME, from any directory")
    return lines + list(NOTES)
