"""The parameter sets shipped with kerngen (`params/`, in the package as
`kerngen/params`), and how a command-line argument names one."""

from __future__ import annotations

from importlib.resources import as_file, files
from pathlib import Path


def shipped_dir() -> Path:
    with as_file(files("kerngen") / "params") as path:
        return Path(path)


def shipped() -> list[Path]:
    return sorted(shipped_dir().glob("*.toml"))


def resolve(arg: str) -> tuple[Path, str]:
    """The file a PARAMS argument names, and how the reproduce-command spells it.

    An existing file is itself; otherwise `NAME` or `params/NAME.toml` names a
    shipped set, spelled `params/NAME.toml` (which reproduces anywhere)."""
    path = Path(arg)
    if path.is_file():
        return path, _display(path)
    name = path.name.removesuffix(".toml")
    found = shipped_dir() / f"{name}.toml"
    if path.parent in (Path("."), Path("params")) and found.is_file():
        return found, f"params/{name}.toml"
    return path, _display(path)


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
