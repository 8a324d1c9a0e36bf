"""The content-addressed store of built bundles, on disk.

Building a bundle (compiling and verifying every kernel) is the slow part of
kerngen; rendering it into files is quick. A build depends on its parameters
and on the generator, nothing else, so a built `Bundle` is kept under a key
made of exactly those: the parameters (the file name they were read from
aside: it only names them in messages) and a digest of the generator (the
package's sources, templates and C sources, kerngen's version, the versions of
Python and of the libraries the passes use). A later build of the same key,
in this process or another, is read back instead; any change of a source file
or a parameter is another key.

Entries are written whole or not at all (written to a temporary file, then
renamed into place), so a reader never sees half an entry; each carries the
digest of its contents, and one that does not match (truncated, damaged) or
no longer loads is built again and replaced. Builders of one key wait for
each other (a lock file per key), so parallel workers and processes sharing
the store build each bundle once. Entries are pickles: the store is the
user's own cache directory, trusted as the package's files are.
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import os
import pickle
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from . import __version__
from .core.bundle import Bundle
from .families import family_of, for_abi
from .machine.target import PLATFORMS, VISIBILITIES

ENV = "KERNGEN_STORE"  # a directory to keep the store in, instead of the user's cache directory
PACKAGE = Path(__file__).resolve().parent
NOT_SOURCES = {"params", "__pycache__"}  # parameters are keyed by their values, not by the shipped files
LIBRARIES = ("jinja2", "sympy", "z3-solver", "numpy")
KEEP_GENERATIONS = 4  # the digests of the generator whose entries are kept (the most recently written)


def default_root() -> Path:
    """$KERNGEN_STORE, else kerngen/bundles in $XDG_CACHE_HOME (~/.cache)."""
    if os.environ.get(ENV):
        return Path(os.environ[ENV])
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "kerngen" / "bundles"


def generator_digest(package: Path = PACKAGE) -> str:
    """Everything a build reads besides its parameters: every file of the
    package (its linked templates and C sources too), by path and content,
    and the versions of kerngen, Python and the libraries."""
    h = hashlib.sha256()
    versions = [__version__, sys.version.split()[0]]
    for lib in LIBRARIES:
        try:
            versions.append(f"{lib} {metadata.version(lib)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{lib} absent")
    h.update("\n".join(versions).encode())
    for directory, subdirs, files in os.walk(package, followlinks=True):
        subdirs[:] = sorted(d for d in subdirs if d not in NOT_SOURCES)
        for name in sorted(files):
            path = Path(directory, name)
            h.update(b"\0" + path.relative_to(package).as_posix().encode() + b"\0")
            h.update(path.read_bytes())
    return h.hexdigest()


def canonical(value: Any) -> str:
    """A text of `value` that is the same in every process for equal values
    (a frozenset's order is not): dataclasses field by field, sets sorted."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = ", ".join(f"{f.name}={canonical(getattr(value, f.name))}" for f in dataclasses.fields(value))
        return f"{type(value).__qualname__}({fields})"
    if isinstance(value, (tuple, list)):
        return "(" + ", ".join(map(canonical, value)) + ")"
    if isinstance(value, (set, frozenset)):
        return "{" + ", ".join(sorted(map(canonical, value))) + "}"
    if isinstance(value, dict):
        return "{" + ", ".join(sorted(f"{canonical(k)}: {canonical(v)}" for k, v in value.items())) + "}"
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return repr(value)
    raise TypeError(f"no canonical text for a {type(value).__qualname__}")


def build_bundle(params: Any) -> Bundle:
    return family_of(params).build(params)


@dataclass(frozen=True)
class Store:
    root: Path
    generator: str  # generator_digest()
    build: Callable[[Any], Bundle] = build_bundle  # what a missing entry is made by

    @classmethod
    def default(cls) -> Store:
        return cls(default_root(), generator_digest())

    def key(self, params: Any) -> str:
        """The entry of `params` (for one ABI, as `families.for_abi` gives)."""
        text = canonical(dataclasses.replace(params, source=""))
        return hashlib.sha256(f"{self.generator}\n{text}".encode()).hexdigest()

    def path(self, params: Any) -> Path:
        return self.root / self.generator[:24] / f"{self.key(params)}.pickle"

    def bundle(self, params: Any) -> Bundle:
        """The family's bundle of `params`, from the store or built into it:
        stored once for the platforms of one calling convention and either
        visibility (`compiled_alike`), given on the caller's targets."""
        asked, params = params, compiled_alike(params)
        path = self.path(params)
        found = _read(path)
        if found is None:
            with _locked(path):
                found = _read(path)  # built by whoever held the lock before
                if found is None:
                    found = self.build(params)
                    if _write(path, found):
                        self._forget_old_generations()
        return retargeted(found, asked)  # the caller's targets, file name and all

    def bundles(self, params: Any) -> tuple[Bundle, ...]:
        """`families.build_all` through the store: one bundle per ABI."""
        return tuple(self.bundle(for_abi(params, abi)) for abi in params.abis)

    def _forget_old_generations(self) -> None:
        """Entries of generators other than the KEEP_GENERATIONS last written go."""
        try:
            generations = sorted((d for d in self.root.iterdir() if d.is_dir()), key=lambda d: d.stat().st_mtime)
        except OSError:  # another process removed one meanwhile: next time
            return
        for old in generations[:-KEEP_GENERATIONS]:
            shutil.rmtree(old, ignore_errors=True)


def compiled_alike(params: Any) -> Any:
    """The parameters whose build `params`' build equals but for its targets'
    object format and visibility, which the passes never read
    (`passes.pipeline.compile_kernel` keys kernels without them): each target
    on the first platform of its calling convention, with the default
    visibility (and that convention's platform its only ABI: a build makes
    the kernels of its targets' convention alone). A Mach-O bundle is then
    its System V twin's kernels."""
    first = {}
    for platform in PLATFORMS.values():
        first.setdefault(platform.abi, platform)
    own = first[params.target.platform.abi]
    return dataclasses.replace(params, abis=(own.name,), targets=tuple(
        dataclasses.replace(t, platform=own, visibility=VISIBILITIES[0]) for t in params.targets))


def retargeted(bundle: Bundle, params: Any) -> Bundle:
    """`bundle`, built from `compiled_alike(params)`, on `params`' own targets."""
    on = {t.isa.name: t for t in params.targets}
    functions = tuple(dataclasses.replace(f, kernel=dataclasses.replace(f.kernel, target=on[f.isa]))
                      for f in bundle.functions)
    return dataclasses.replace(bundle, params=params, target=params.target, functions=functions)


def _read(path: Path) -> Bundle | None:
    """The entry at `path`, or None if it is missing or does not load whole."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    digest, _, body = data.partition(b"\n")
    if digest != hashlib.sha256(body).hexdigest().encode():
        return None
    try:
        found = pickle.loads(body)
    except Exception:  # written by another version of a class: as good as missing
        return None
    return found if isinstance(found, Bundle) else None


def _write(path: Path, bundle: Bundle) -> bool:
    """Whether the entry was stored (a store that cannot be written to only
    makes every build a build)."""
    body = pickle.dumps(bundle, protocol=pickle.HIGHEST_PROTOCOL)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(prefix=f".{path.stem[:16]}.", dir=path.parent)
    except OSError:
        return False
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(hashlib.sha256(body).hexdigest().encode() + b"\n" + body)
        os.replace(temporary, path)  # readers see the whole entry or none
        return True
    except OSError:
        return False
    finally:
        Path(temporary).unlink(missing_ok=True)


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Held by one builder of `path` at a time, across processes (by none
    where the store cannot be written to: each builds then)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        f = open(path.with_suffix(".lock"), "a")
    except OSError:
        yield
        return
    with f:
        fcntl.flock(f, fcntl.LOCK_EX)  # released when f is closed
        yield
