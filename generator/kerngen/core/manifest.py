"""An emitted bundle read back from disk: its manifest, typed and checked
against its files.

A bundle copied into another project is tested from this alone (`kerngen
test BUNDLE_DIR`): the manifest says what every function requires and
ensures, and its sha256 lines say whether the files are the ones it
describes. `Manifest.parse` is the one reader of manifest.json: every field
the generic readers use (`kerngen test`, the vendoring, the checks) is typed
here, and a malformed file is refused naming the field. What only a family
reads (an NTT's layout, a function's facts) stays a mapping the family owns.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import BundleError

MANIFEST = "manifest.json"
ROLES = ("in", "out", "inout")


class _Fields:
    """Typed reads of a JSON object, each failure naming the field's path."""

    def __init__(self, source: str, data: Any, path: str):
        self.source, self.path = source, path
        if not isinstance(data, dict):
            self.fail(path, f"must be an object, got {json.dumps(data)[:60]}")
        self.data = data

    def fail(self, path: str, rule: str):
        raise BundleError(f"{self.source}: {path}: {rule}; the manifest was written by another kerngen version or "
                          "edited: emit the bundle again")

    def at(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def get(self, key: str, typ: type | tuple[type, ...], what: str, optional: bool = False) -> Any:
        if key not in self.data:
            if optional:
                return None
            self.fail(self.at(key), f"missing; it must be {what}")
        value = self.data[key]
        if not isinstance(value, typ) or (isinstance(value, bool) and typ is int):
            self.fail(self.at(key), f"must be {what}, got {json.dumps(value)[:60]}")
        return value

    def sub(self, key: str, optional: bool = False) -> _Fields | None:
        if optional and key not in self.data:
            return None
        return _Fields(self.source, self.get(key, dict, "an object"), self.at(key))

    def items(self, key: str, what: str) -> list[_Fields]:
        return [_Fields(self.source, x, f"{self.at(key)}[{i}]") for i, x in enumerate(self.get(key, list, what))]

    def strings(self, key: str) -> tuple[str, ...]:
        values = self.get(key, list, "a list of strings")
        if not all(isinstance(v, str) for v in values):
            self.fail(self.at(key), f"must be a list of strings, got {json.dumps(values)[:60]}")
        return tuple(values)


_COMPANION = re.compile(r"floor\((\w+)\*2\^(\d+)/q\)")


@dataclass(frozen=True)
class Companion:
    """An argument whose every element the contract derives from the element
    of another at its index: Shoup's w' = floor(w*2^bits/q), the
    `representation` the manifest gives w'."""

    of: str  # the argument it is derived from
    bits: int

    def spelled(self) -> str:
        return f"floor({self.of}*2^{self.bits}/q)"

    def value(self, w: int, q: int) -> int:
        return (w << self.bits) // q

    @staticmethod
    def read(representation: str | None) -> Companion | None:
        found = _COMPANION.fullmatch(representation or "")
        return Companion(found[1], int(found[2])) if found else None


@dataclass(frozen=True)
class Values:
    """What a function requires of its inputs or ensures of its outputs."""

    bound: tuple[int, int]  # every value lies in [lo, hi]
    representation: str | None = None  # "signed", "canonical", "lazy", "unreduced", ...
    scale: int | None = None  # outputs: the factor mod q the values carry
    bits: int | None = None
    limbs: int | None = None
    layout: Mapping[str, Any] | str | None = None  # the family's: an NTT domain's blocks, or another's name

    @staticmethod
    def parse(f: _Fields) -> Values:
        bound = f.get("bound", list, "[lo, hi]")
        if len(bound) != 2 or not all(isinstance(b, int) and not isinstance(b, bool) for b in bound):
            f.fail(f.at("bound"), f"must be [lo, hi], two integers, got {json.dumps(bound)[:60]}")
        return Values(tuple(bound), f.get("representation", str, "a string", True), f.get("scale", int, "an integer", True),
                      f.get("bits", int, "an integer", True), f.get("limbs", int, "an integer", True),
                      f.get("layout", (dict, str), "an object or a name", True))

    @property
    def companion(self) -> Companion | None:
        return Companion.read(self.representation)


@dataclass(frozen=True)
class ArgumentEntry:
    """One pointer argument of a function."""

    name: str
    role: str  # "in", "out" or "inout"
    count: int  # elements
    align: int  # bytes the pointer must be aligned to
    preferred_align: int | None = None  # bytes at which the function is fastest
    requires: Values | None = None  # this argument's own input contract (inputs; read back: also the function's)
    may_alias: tuple[str, ...] = ()  # (written) the arguments it may be the same array as

    @staticmethod
    def parse(f: _Fields) -> ArgumentEntry:
        role = f.get("role", str, f"one of {', '.join(ROLES)}")
        if role not in ROLES:
            f.fail(f.at("role"), f"must be one of {', '.join(ROLES)}, got {json.dumps(role)}")
        requires = f.sub("requires", optional=True)
        return ArgumentEntry(f.get("name", str, "a string"), role, f.get("count", int, "an integer"),
                             f.get("align", int, "an integer"), f.get("preferred_align", int, "an integer", True),
                             None if requires is None else Values.parse(requires),
                             f.strings("may_alias") if "may_alias" in f.data else ())


# the fields of a function entry every family has; the others are the family's facts
_FUNCTION_FIELDS = frozenset({"symbol", "symbols", "kind", "isa", "dtype", "args", "input", "output", "cpu", "proof",
                             "constant_time"})


@dataclass(frozen=True)
class FunctionEntry:
    """One function of the bundle, as `kerngen test` and the checks see it."""

    symbol: str
    symbols: Mapping[str, str]  # per ABI, as its object file spells it
    kind: str  # the family's name for what it computes
    isa: str
    dtype: str  # element type: the C type without _t
    args: tuple[ArgumentEntry, ...]
    input: Values | None  # shared by every input argument; None: each argument's `requires`
    output: Values
    cpu: tuple[str, ...]  # CPU features it needs, as /proc/cpuinfo names them
    proof: Mapping[str, Any] | None  # what the verifier proved about the map
    # proven at emission: no branch, memory address or instruction time depends on the data
    # (`passes.constant_time`); false in a manifest written before the proof existed
    constant_time: bool
    facts: Mapping[str, Any]  # the family's fields (n, q; m, poly; k, reduction, ...)

    @staticmethod
    def parse(f: _Fields) -> FunctionEntry:
        symbols = f.get("symbols", dict, "an object of symbols by ABI")
        if not all(isinstance(s, str) for s in symbols.values()):
            f.fail(f.at("symbols"), "must map each ABI to a symbol (a string)")
        inputs = f.sub("input", optional=True)
        return FunctionEntry(f.get("symbol", str, "a string"), symbols, f.get("kind", str, "a string"),
                             f.get("isa", str, "a string"), f.get("dtype", str, "a C type without _t"),
                             tuple(ArgumentEntry.parse(a) for a in f.items("args", "a list of arguments")),
                             None if inputs is None else Values.parse(inputs), Values.parse(f.sub("output")),
                             f.strings("cpu"), f.get("proof", dict, "an object", True),
                             bool(f.get("constant_time", bool, "true or false", True)),
                             {k: v for k, v in f.data.items() if k not in _FUNCTION_FIELDS})

    def fact(self, key: str, default: Any = None) -> Any:
        return self.facts.get(key, default)


@dataclass(frozen=True)
class ObjectEntry:
    """The bundle's .asm file for one calling convention."""

    file: str
    abi: str
    format: str  # object format: elf64, win64, macho64
    visibility: str | None  # of the exported symbols, in the formats that have visibility


@dataclass(frozen=True)
class Manifest:
    version: str  # of the kerngen that wrote it
    command: str  # what regenerates the bundle
    params: Mapping[str, Any]  # the parameters as loaded (the family's keys among them)
    objects: tuple[ObjectEntry, ...]
    files: Mapping[str, str]  # file name -> sha256
    functions: tuple[FunctionEntry, ...]
    json: Mapping[str, Any]  # the file as read, for the readers of its JSON form (the families' checks, the harness)
    units: tuple[str, ...] = ()  # C sources some functions are implemented in (planned transforms' drivers)

    @property
    def name(self) -> str:
        return self.params["name"]

    @property
    def family(self) -> str:
        return self.params["family"]

    @staticmethod
    def parse(data: Any, source: str) -> Manifest:
        """The manifest of the JSON value `data` (read from `source`, for messages)."""
        if not isinstance(data, dict) or not isinstance(data.get("generator"), dict) \
                or data["generator"].get("name") != "kerngen":
            raise BundleError(f"{source}: is not a kerngen manifest (no generator kerngen)")
        f = _Fields(source, data, "")
        params = f.sub("params")
        for key in ("name", "family"):
            params.get(key, str, "a string")
        objects = f.items("objects", "a list of objects (file, abi, format)") if "objects" in data else []
        if not objects:
            raise BundleError(f"{source}: the manifest lists no objects (file, abi, format): it was written by "
                              "another kerngen version; emit the bundle again")
        files = f.get("files", dict, "an object of sha256 by file name")
        if not all(isinstance(d, str) for d in files.values()):
            f.fail("files", "must map each file name to its sha256 (a string)")
        return Manifest(
            f.sub("generator").get("version", str, "a string"), f.get("command", str, "a string"), params.data,
            tuple(ObjectEntry(o.get("file", str, "a file name"), o.get("abi", str, "an ABI name"),
                              o.get("format", str, "an object format"), o.get("visibility", str, "a string", True))
                  for o in objects),
            files, tuple(FunctionEntry.parse(fn) for fn in f.items("functions", "a list of functions")), data,
            tuple(f.get("units", list, "a list of C file names", True) or ()))

    def only(self, functions: tuple[FunctionEntry, ...]) -> Manifest:
        """The same manifest with these functions alone (those this CPU runs)."""
        kept = {fn.symbol for fn in functions}
        return Manifest(self.version, self.command, self.params, self.objects, self.files, functions,
                        {**self.json, "functions": [fn for fn in self.json["functions"] if fn["symbol"] in kept]},
                        self.units)


def is_bundle(path: Path) -> bool:
    """Whether `path` names a bundle: its directory, or its manifest."""
    path = Path(path)
    return (path.is_dir() and (path / MANIFEST).is_file()) or (path.name == MANIFEST and path.is_file())


def read_manifest(file: Path) -> Manifest:
    """The manifest in `file`, typed (BundleError when it cannot be read or is malformed)."""
    try:
        data = json.loads(Path(file).read_text(encoding="utf-8"))
    except OSError as e:
        raise BundleError(f"{file}: cannot be read: {e.strerror}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise BundleError(f"{file}: is not a kerngen manifest: {e}") from None
    return Manifest.parse(data, str(file))


def read_bundle(path: Path) -> tuple[Path, Manifest]:
    """(bundle directory, manifest) for a bundle directory or its manifest.json,
    every file the manifest lists checked against its sha256."""
    path = Path(path)
    directory = path.parent if path.name == MANIFEST else path
    manifest = read_manifest(directory / MANIFEST)
    for name, digest in manifest.files.items():
        try:
            actual = hashlib.sha256((directory / name).read_bytes()).hexdigest()
        except OSError as e:
            raise BundleError(f"{directory / name}: listed in the manifest but cannot be read: {e.strerror}") from None
        if actual != digest:
            raise BundleError(f"{directory / name}: does not match its manifest (sha256 {actual[:12]}..., manifest "
                              f"{digest[:12]}...): the file was changed after kerngen wrote it")
    return directory, manifest
