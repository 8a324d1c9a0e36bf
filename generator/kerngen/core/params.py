"""What every family's parameters share: reading the file, the common keys
(name, family, isa, abi, visibility, prefix, description), the command-line
overrides, and the helpers the families' schemas validate with.

Every rule is reported as one `ParamError` naming the key and the rule;
nothing downstream sees an invalid parameter set. Which schema applies is
the registry's business (`kerngen.families.load`).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from ..machine.target import PLATFORMS, VISIBILITIES, Target, make_target
from ..errors import ParamError, toml_value

_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")
# a bundle's files are named after the set (NAME_dispatch.c, and while written .NAME.old.XXXXXXXX beside the
# directory): 100 characters leave room below the 255 bytes a file name may have on common file systems
MAX_NAME = 100
_PREFIX = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
COMMON_KEYS = frozenset({"name", "family", "isa", "abi", "visibility", "prefix", "description"})
ABIS = tuple(PLATFORMS)


@dataclass(frozen=True)
class Option:
    """A family's command-line option: `--NAME VALUE` replaces the key `key` of
    its parameter files (--policy replaces `reduction`)."""

    name: str
    key: str
    choices: tuple[str, ...]
    default: str  # when neither the command line nor the file sets the key
    help: str


@dataclass(frozen=True)
class Overrides:
    """Command-line settings that replace the file's: the common keys', and
    the families' options (option name -> value) in the order given."""

    isa: str | None = None
    prefix: str | None = None
    abi: str | None = None  # names separated by commas, as --isa
    visibility: str | None = None
    options: tuple[tuple[str, str], ...] = ()

    @staticmethod
    def of(**given: str | None) -> Overrides:
        """Overrides from option names (isa=..., policy=...): the common ones
        by name, the rest family options; None means not given."""
        common = {f.name: given.pop(f.name) for f in fields(Overrides) if f.name in given and f.name != "options"}
        return Overrides(**common, options=tuple((k, v) for k, v in given.items() if v is not None))

    def option(self, name: str) -> str | None:
        """The value given for the family option `name`, or None."""
        return dict(self.options).get(name)


def option_value(src: str, table: dict, overrides: Overrides, option: Option) -> str:
    """The value of a family option's key: the command line's, else the
    file's, else its default; one of its choices."""
    given = overrides.option(option.name)
    value = given if given is not None else table.get(option.key, option.default)
    if value not in option.choices:
        raise ParamError(src, option.key, f"must be one of {', '.join(option.choices)}, got {toml_value(value)}"
                                          + (f" from --{option.name}" if given is not None else ""))
    return value


def check_overrides(src: str, overrides: Overrides, family: str, options_of: dict[str, tuple[Option, ...]]) -> None:
    """Refuse a family option the family of the file does not have (--order
    for a GF(2^m) set): it would be ignored. `options_of`: each family's options."""
    for name, _ in overrides.options:
        if any(o.name == name for o in options_of[family]):
            continue
        owners = {f: o.key for f, options in options_of.items() for o in options if o.name == name}
        if not owners:
            raise ParamError(src, f"--{name}", "is an option of no family")
        key = next(iter(owners.values()))
        raise ParamError(src, f"--{name}", f"is an option of {' and '.join(f'the {f} family' for f in owners)} "
                                           f"(it sets {key}); family {family!r} has no {key}: leave it out")


@dataclass(frozen=True)
class Common:
    """The validated keys every parameter set has."""

    name: str
    family: str
    prefix: str
    source: str  # the file (or text) these came from, for messages
    abis: tuple[str, ...]  # one object file for each calling convention, the first the kernels' own
    visibility: str  # of the exported symbols in the object formats that have visibility

    def targets(self, isas: tuple[str, ...], lane_bits: int) -> tuple[Target, ...]:
        """One target per ISA, for the first ABI (`families.for_abi` gives the others)."""
        return tuple(make_target(isa, lane_bits, self.abis[0], self.visibility) for isa in isas)


def require(src: str, table: dict, key: str, typ: type, what: str) -> Any:
    if key not in table:
        raise ParamError(src, key, f"missing; it must be {what}")
    value = table[key]
    # the type before any rule of the value: q = 3329.0 is refused for being a float, not for being no prime
    if typ is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise ParamError(src, key, f"must be an integer, got {toml_value(value)}")
    if typ is not int and not isinstance(value, typ):
        raise ParamError(src, key, f"must be {what}, got {toml_value(value)}")
    return value


def check_keys(src: str, table: dict, allowed: frozenset[str], family: str) -> None:
    for key in table:
        if key not in allowed:
            raise ParamError(src, key, f"unknown key for family {toml_value(family)}; "
                                       f"allowed keys: {', '.join(sorted(allowed))}")


def choose_isas(src: str, table: dict, overrides: Overrides, allowed: tuple[str, ...], family: str) -> tuple[str, ...]:
    """The file's isa (a name or a list of names, default the first allowed),
    or the command line's (names separated by commas): every kernel is built
    for each, in this order (the first is preferred where several can run)."""
    return choose_names(src, table, "isa", overrides.isa, allowed, f"for the {family} family")


def choose_names(src: str, table: dict, key: str, override: str | None, allowed: tuple[str, ...],
                 where_allowed: str = "") -> tuple[str, ...]:
    """A key holding a name or a list of distinct names (default the first
    allowed), or its command-line override (names separated by commas)."""
    rule = f"must be {_choice(allowed)} (or a list of them){' ' + where_allowed if where_allowed else ''}"
    if override is not None:
        given, where = [x.strip() for x in override.split(",")], f" from --{key}"
    else:
        given, where = table.get(key, allowed[0]), ""
        if isinstance(given, str):
            given = [given]
        if not isinstance(given, list) or not given or not all(isinstance(x, str) for x in given):
            raise ParamError(src, key, f"{rule}, got {toml_value(given)}")
    for name in given:
        if name not in allowed:
            raise ParamError(src, key, f"{rule}, got {toml_value(name)}{where}")
    if len(set(given)) != len(given):
        twice = sorted({x for x in given if given.count(x) > 1})
        raise ParamError(src, key, f"names {', '.join(twice)} twice: {toml_value(given)}{where}; each may appear once")
    return tuple(given)


def names_manifest(names: tuple[str, ...]):
    """How the manifest and banner state a list key (isa, abi): a name, or a list of names."""
    return names[0] if len(names) == 1 else list(names)


def _choice(allowed: tuple[str, ...]) -> str:
    quoted = [f'"{a}"' for a in allowed]
    return quoted[0] if len(quoted) == 1 else " or ".join([", ".join(quoted[:-1]), quoted[-1]])


def default_prefix(name: str) -> str:
    return "kg_" + re.sub(r"[^a-z0-9]", "", name)


def common(table: dict, source: str, families: tuple[str, ...], overrides: Overrides) -> Common:
    src = source
    rule = f"1 to {MAX_NAME} lower-case letters, digits and dashes, the first a letter or digit"
    name = require(src, table, "name", str, rule)
    if not _NAME.match(name) or len(name) > MAX_NAME:
        shown = name if len(name) <= 2 * MAX_NAME else name[:MAX_NAME] + "..."
        raise ParamError(src, "name", f"must be {rule} (it names the bundle's files), got {toml_value(shown)}"
                                      + (f" ({len(name)} characters)" if len(name) > MAX_NAME else ""))
    family = require(src, table, "family", str, _choice(families))
    if family not in families:
        raise ParamError(src, "family", f"must be {_choice(families)}, got {toml_value(family)}")
    if "description" in table and not isinstance(table["description"], str):
        raise ParamError(src, "description", "must be a string")
    pre = overrides.prefix if overrides.prefix is not None else table.get("prefix", default_prefix(name))
    if not isinstance(pre, str) or not _PREFIX.match(pre):
        raise ParamError(src, "prefix", f"must be a C identifier, got {toml_value(pre)}")
    abis = choose_names(src, table, "abi", overrides.abi, ABIS)
    vis = overrides.visibility if overrides.visibility is not None else table.get("visibility", VISIBILITIES[0])
    if vis not in VISIBILITIES:
        raise ParamError(src, "visibility", f"must be {_choice(VISIBILITIES)}, got {toml_value(vis)}"
                                            + (" from --visibility" if overrides.visibility is not None else ""))
    return Common(name, family, pre, src, abis, vis)


def read_table(path: str | Path) -> tuple[dict, str]:
    """The parsed TOML table of a parameter file, and its name for messages.
    The file must be UTF-8 (a byte-order mark, as some editors write, is allowed)."""
    path = Path(path)
    src = str(path)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise ParamError(src, "file", f"cannot be read: {e.strerror}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ParamError(src, "file", f"is not UTF-8 text (byte 0x{raw[e.start]:02x} at offset {e.start}); "
                                      "save it as UTF-8") from None
    try:
        return tomllib.loads(text), src
    except tomllib.TOMLDecodeError as e:
        raise ParamError(src, "file", f"is not valid TOML: {e}") from None
