"""Writing output: a bundle directory replaced whole or not at all, one
writer at a time, and the checks that refuse a bad output path before any
work is done."""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from ..errors import UsageError
from ..core.manifest import is_bundle


def _existing_ancestor(path: Path) -> Path:
    p = path
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def _probe(where: Path, option: str, path: Path) -> None:
    """Try to create something in `where`, the deepest part of `path` that exists."""
    if not where.is_dir():
        raise UsageError(f"{option}: {path}: {where} is not a directory")
    try:
        shutil.rmtree(tempfile.mkdtemp(prefix=".kerngen-probe-", dir=where))
    except OSError as e:
        raise UsageError(f"{option}: {path}: cannot create files in {where}: {e.strerror}") from None


def check_bundle_dir(out: Path, force: bool = False, option: str = "--out") -> None:
    """Refuse, before any work, an output directory `write` could not replace:
    a path that is not a directory, under a file, not writable, or a non-empty
    directory that holds no kerngen bundle (unless `force`)."""
    out = Path(out)
    if out.exists():
        if not out.is_dir():
            raise UsageError(f"{option}: {out} exists and is not a directory")
        if any(out.iterdir()) and not is_bundle(out) and not force:
            raise UsageError(f"{option}: {out} is not empty and holds no kerngen bundle; choose another directory, "
                             "or pass --force to replace it and everything in it")
        _probe(out.parent if out.parent.exists() else out, option, out)
    else:
        _probe(_existing_ancestor(out), option, out)


def check_new_file(path: Path, option: str) -> None:
    """Refuse, before any work, a path a file cannot be written to."""
    path = Path(path)
    if path.is_dir():
        raise UsageError(f"{option}: {path} is a directory")
    _probe(_existing_ancestor(path.parent), option, path)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextmanager
def exclusive(outs: Iterable[Path], option: str = "--out") -> Iterator[None]:
    """Held by one process at a time for the bundle directories `outs`: a
    writer holds it from its last check of what they hold to its last
    `write`, so two writers never both check one directory empty and both
    write it; the second waits, and checks again what the first wrote. The
    lock is on the directory that holds each of `outs` (created if need be),
    not on a lock file that would be left beside the bundles."""
    with ExitStack() as held:
        for parent in sorted({Path(out).absolute().parent for out in outs}):  # one order: no two wait on each other
            try:
                parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY)
            except OSError as e:
                raise UsageError(f"{option}: cannot open {parent}: {e.strerror}") from None
            held.callback(os.close, fd)  # the lock goes with the descriptor
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield


def write(files: dict[str, str], out: Path, force: bool = False) -> list[Path]:
    """Write a bundle: the files go into a sibling temporary directory, which
    then takes the place of `out` (an earlier bundle there is replaced whole,
    never mixed with the new one). Directories follow the umask, like files."""
    out = Path(out)
    check_bundle_dir(out, force)
    out.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    old = None
    try:
        os.chmod(stage, 0o777 & ~_umask())
        for name, text in files.items():
            (stage / name).write_text(text)
        if out.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old.", dir=out.parent))
            os.replace(out, old / out.name)
        try:
            os.replace(stage, out)
        except OSError:
            if old is not None:  # put the earlier bundle back
                os.replace(old / out.name, out)
                old = None
            raise
        return [out / name for name in files]
    finally:
        shutil.rmtree(stage, ignore_errors=True)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
