"""An emitted bundle loaded into this process: its kernels of one ISA as
Python callables on numpy arrays."""

from __future__ import annotations

import ctypes
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib.resources import as_file, files
from pathlib import Path

import numpy as np

from ..core.manifest import FunctionEntry, Manifest, read_bundle
from ..errors import BundleError, HarnessError
from ..harness.cpu import cpu_flags
from ..machine.formats import ELF64  # the harness links kernels on this (Linux) machine
from ..machine.isa import ISAS
from ..machine.target import PLATFORMS
from .cache import shared_object, trampoline
from .checks import prepare

HOST_ABI = next(p.abi.name for p in PLATFORMS.values() if p.fmt == ELF64)  # the convention of the processes it loads into


@dataclass(frozen=True)
class NttDomain:
    """Where the forward NTT leaves each coefficient: block i is the
    polynomial mod (x^d - zetas[i]) whose coefficients sit at positions[i]."""

    positions: np.ndarray  # (blocks, d) indices into the output array
    zetas: np.ndarray  # (blocks,)


class Kernel:
    """One function of the bundle. Call it as C does, with one array per
    argument in the manifest's order (`args`), or by the argument names of
    the manifest; arrays with leading axes run one call per row in one C
    loop, the GIL released. `check=False` skips the check of the input
    contract (bounds, Shoup's w'); the rest is always checked. A planned
    transform takes `threads=`: each of its stages' tiles split into that
    many ranges run at once (its stage API), a stage wholly before the next."""

    def __init__(self, entry: FunctionEntry, address: int, loop: ctypes._CFuncPtr, stages: tuple | None = None):
        self.entry, self._address, self._loop = entry, address, loop
        self._stages = stages  # a driver's (stage function, tile count function)
        self.__doc__ = (f"{entry.symbol}({', '.join(f'{a.name}: {a.role} {entry.dtype}[{a.count}]' for a in entry.args)})"
                        f" -> None; {entry.kind} on {entry.isa}")

    @property
    def args(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.entry.args)

    def __call__(self, *arrays: np.ndarray, check: bool = True, threads: int = 1, **named: np.ndarray) -> None:
        call = prepare(self.entry, arrays, named, check)
        n = len(call.pointers)
        if threads != 1:
            self._threaded(call, threads)
            return
        status = self._loop(ctypes.c_void_p(self._address), n, (ctypes.c_void_p * n)(*call.pointers),
                            (ctypes.c_ssize_t * n)(*call.strides), call.count)
        if status != 0:
            raise HarnessError(f"{self.entry.symbol}: the batch loop takes at most 6 arguments, got {n}")

    def _threaded(self, call, threads: int) -> None:
        if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
            raise ValueError(f"{self.entry.symbol}: threads must be a positive integer, got {threads!r}")
        if self._stages is None:
            raise ValueError(f"{self.entry.symbol}: threads= is for planned transforms (their stages split into "
                             "tiles), and this is one kernel")
        stage_fn, tiles_fn = self._stages
        with ThreadPoolExecutor(threads) as pool:
            for row in range(call.count):
                pointers = [ctypes.c_void_p(p + row * s) for p, s in zip(call.pointers, call.strides)]
                stage = 0
                while tiles := tiles_fn(stage):
                    cuts = [tiles * k // threads for k in range(threads + 1)]
                    list(pool.map(lambda r: stage_fn(*pointers, stage, r[0], r[1] - r[0]),
                                  [(a, b) for a, b in zip(cuts, cuts[1:]) if b > a]))
                    stage += 1

    def __repr__(self) -> str:
        return f"<kerngen kernel {self.__doc__}>"


class LoadedBundle:
    """A bundle's kernels of one ISA, as attributes named by their symbol
    without the prefix and the ISA suffix (`ntt_forward`, `basemul`, ...)."""

    def __init__(self, directory: Path, manifest: Manifest, isa: str, library: ctypes.CDLL, loop: ctypes._CFuncPtr):
        self.directory, self.manifest, self.isa = directory, manifest, isa
        self.params = manifest.params
        self._library = library  # kept alive while a kernel may be called
        self.kernels: dict[str, Kernel] = {}
        prefix, suffix = f"{manifest.params['prefix']}_", f"_{isa}"
        for entry in manifest.functions:
            if entry.isa == isa:
                name = entry.symbol.removeprefix(prefix).removesuffix(suffix)
                address = ctypes.cast(getattr(library, entry.symbol), ctypes.c_void_p).value
                self.kernels[name] = Kernel(entry, address, loop, _stage_api(library, entry))

    def __getattr__(self, name: str) -> Kernel:
        kernels = self.__dict__.get("kernels", {})
        if name in kernels:
            return kernels[name]
        raise AttributeError(f"bundle {self.manifest.name} ({self.isa}) has no function {name!r}; it has "
                             f"{', '.join(kernels)}")

    def __dir__(self) -> list[str]:
        return [*super().__dir__(), *self.kernels]

    def __repr__(self) -> str:
        return f"<kerngen bundle {self.manifest.name} on {self.isa}: {', '.join(self.kernels)}>"

    @property
    def dtype(self) -> np.dtype:
        """The element type of the bundle's first function (an NTT's coefficients, a GF(2^m) limb)."""
        return np.dtype(self.manifest.functions[0].dtype)

    def domain(self) -> NttDomain:
        """The layout of the NTT domain the forward transform writes (NTT bundles)."""
        entry = self.kernels["ntt_forward"].entry if "ntt_forward" in self.kernels else None
        layout = entry.output.layout if entry is not None else None
        if not isinstance(layout, dict):
            raise ValueError(f"bundle {self.manifest.name}: has no forward NTT whose output layout it describes")
        if "planned" in layout:
            return _planned_domain(layout, self.manifest.params["n"], self.manifest.params["q"])
        blocks = layout["blocks"]
        return NttDomain(np.array([b["positions"] for b in blocks], dtype=np.intp),
                         np.array([b["zeta"] for b in blocks], dtype=np.int64))


def _stage_api(library: ctypes.CDLL, entry: FunctionEntry) -> tuple | None:
    """A driver's stage function and tile count (`NAME_plan.c`), None for a kernel."""
    if "unit" not in entry.facts:
        return None
    stage, tiles = getattr(library, f"{entry.symbol}_stage"), getattr(library, f"{entry.symbol}_tiles")
    stage.restype, tiles.restype, tiles.argtypes = None, ctypes.c_size_t, [ctypes.c_uint]
    stage.argtypes = [ctypes.c_void_p] * len(entry.args) + [ctypes.c_uint, ctypes.c_size_t, ctypes.c_size_t]
    return stage, tiles


def _planned_domain(layout: dict, n: int, q: int) -> NttDomain:
    """A planned transform's domain from its compact layout (of rows, where it transforms columns): position p
    holds the evaluation at zeta_i of the natural index i = p in the natural order, else of the in-place
    Cooley–Tukey index i = (p // leaf) * leaf + leaf_order[p % leaf], zeta_i = g psi^(2 e + 1) (negacyclic)
    or g psi^e (cyclic), e = i in the natural order, brv(i) in the in-place one."""
    planned = layout["planned"]
    leaf, bits = planned["leaf"], n.bit_length() - 1
    p = np.arange(n)
    if layout["order"] == "natural":
        positions, exponents = p, range(n)
    else:
        positions = np.empty(n, dtype=np.intp)
        positions[p // leaf * leaf + np.asarray(planned["leaf_order"])[p % leaf]] = p
        exponents = [int(format(i, f"0{bits}b")[::-1], 2) for i in range(n)]
    psi, g = planned["root"], planned["coset"]
    zetas = [g * pow(psi, 2 * e + 1 if planned["ring"] == "negacyclic" else e, q) % q for e in exponents]
    return NttDomain(positions.reshape(n, 1), np.array(zetas, dtype=object if q >= 1 << 63 else np.int64))


def runnable_isas(manifest: Manifest) -> list[str]:
    """The bundle's ISAs whose every function this CPU runs, in the dispatch order."""
    host = cpu_flags()
    isas = {fn.isa for fn in manifest.functions}
    ok = [isa for isa in isas if all(set(fn.cpu) <= host for fn in manifest.functions if fn.isa == isa)]
    return sorted(ok, key=lambda isa: ISAS[isa].preference)


def shipped_params(given: str | os.PathLike) -> Path | None:
    """The shipped parameter file `given` names (kyber-3329, or kyber-3329.toml), if it names one."""
    name = Path(given)
    if name.parent != Path("."):
        return None
    with as_file(files("kerngen") / "params" / f"{name.name.removesuffix('.toml')}.toml") as shipped:
        return shipped if shipped.is_file() else None


def load_bundle(path: str | os.PathLike, isa: str | None = None) -> LoadedBundle:
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"kerngen.load: takes a bundle directory or its manifest.json (a str or a path), got "
                        f"{type(path).__name__} {path!r}")
    try:
        directory, manifest = read_bundle(Path(path))
    except BundleError as e:
        given = Path(path)
        if given.suffix == ".toml" and given.is_file():
            what = "is a parameter file"
        elif not given.exists() and shipped_params(path) is not None:
            what = "names a shipped parameter set"
        else:
            raise
        raise BundleError(f"{e}; {os.fspath(path)!r} {what}, not a bundle: kerngen.build({os.fspath(path)!r}) "
                          "emits its bundle and loads it") from None
    runs = runnable_isas(manifest)
    has = sorted({fn.isa for fn in manifest.functions})
    if isa is None:
        if not runs:
            raise HarnessError(f"bundle {manifest.name}: this CPU runs none of its ISAs ({', '.join(has)})")
        isa = runs[0]
    elif isa not in has:
        raise ValueError(f"bundle {manifest.name}: has no {isa!r} kernels; it has {', '.join(has)}")
    elif isa not in runs:
        raise HarnessError(f"bundle {manifest.name}: this CPU cannot run its {isa} kernels (they need "
                           f"{', '.join(sorted({c for fn in manifest.functions if fn.isa == isa for c in fn.cpu}))})")
    objects = [o for o in manifest.objects if o.abi == HOST_ABI]
    if not objects:
        raise HarnessError(f"bundle {manifest.name}: has no object for the {HOST_ABI} calling convention "
                           f"(it has {', '.join(o.abi for o in manifest.objects)}); emit it with --abi {HOST_ABI}")
    library = ctypes.CDLL(str(shared_object(directory / objects[0].file,
                                            tuple(directory / u for u in manifest.units))))
    loop = ctypes.CDLL(str(trampoline())).kg_call_batch
    loop.restype = ctypes.c_int
    loop.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
    return LoadedBundle(directory, manifest, isa, library, loop)
