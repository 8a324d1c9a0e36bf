"""The exception hierarchy; every class maps to one exit code of the CLI;
and how a message quotes a value a user wrote in a parameter file."""

import datetime
import json
import math
import re

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def toml_value(value) -> str:
    """`value` as a TOML file spells it (true, "text", [1, 2], { k = "v" }), so
    that a message quotes what the user wrote rather than Python's repr of it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a JSON string is a valid TOML basic string
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        return repr(value) if math.isfinite(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        if not value:
            return "{}"
        keys = (k if _BARE_KEY.match(k) else json.dumps(k, ensure_ascii=False) for k in map(str, value))
        return "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in zip(keys, value.values())) + " }"
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    return str(value)


class KerngenError(Exception):
    """Base of every error kerngen reports to the user (exit code 2)."""

    exit_code = 2


class ParamError(KerngenError):
    """A parameter file breaks a rule; the message names the key and the rule."""

    def __init__(self, source: str, key: str, rule: str):
        self.source, self.key, self.rule = source, key, rule
        super().__init__(f"{source}: {key}: {rule}")


class UsageError(KerngenError):
    """A command-line option or argument breaks a rule; the message names it."""


class VerifyError(KerngenError):
    """The verifier found an input in the contract for which a lane can overflow."""


class AllocationError(KerngenError):
    """Register allocation failed (a generator bug, never a user error)."""


class CheckError(KerngenError):
    """An instruction list breaks a structural rule: an operand that does not
    fit its slot, an access outside its buffer, an instruction the target
    cannot encode (a generator bug, never a user error)."""


class HarnessError(KerngenError):
    """Assembling, compiling or running the C harness failed."""


class BundleError(KerngenError):
    """An emitted bundle cannot be read back: no manifest, or files that do not match it."""
