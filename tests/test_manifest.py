"""The typed manifest: every shipped bundle's manifest.json reads into it,
and a malformed one is refused naming the field."""

from __future__ import annotations

import copy
import json

import pytest

from conftest import REPO
from kerngen.core.manifest import Manifest, read_bundle
from kerngen.errors import BundleError

GENERIC = {"symbol", "symbols", "kind", "isa", "dtype", "args", "input", "output", "cpu", "proof", "constant_time"}
SHIPPED = sorted(p.parent.name for p in (REPO / "generated").glob("*/manifest.json"))


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_manifest_reads_typed(name):
    directory, m = read_bundle(REPO / "generated" / name)
    data = json.loads((directory / "manifest.json").read_text())
    assert (m.name, m.family, m.command) == (name, data["params"]["family"], data["command"])
    assert [o.file for o in m.objects] == [o["file"] for o in data["objects"]]
    for fn, raw in zip(m.functions, data["functions"], strict=True):
        assert set(fn.symbols) == {o.abi for o in m.objects}
        assert [(a.name, a.role, a.count, a.align) for a in fn.args] == [
            (a["name"], a["role"], a["count"], a["align"]) for a in raw["args"]]
        assert fn.output.bound == tuple(raw["output"]["bound"])
        assert (fn.input is None) == ("input" not in raw)
        assert all((a.requires is None) == ("requires" not in r) for a, r in zip(fn.args, raw["args"]))
        assert fn.facts == {k: v for k, v in raw.items() if k not in GENERIC}  # the family's, as written
        assert fn.constant_time == raw.get("constant_time", False)


def _tiny() -> dict:
    return json.loads((REPO / "generated" / "tiny-257" / "manifest.json").read_text())


def _set(path: list, value):
    def change(data: dict) -> dict:
        data = copy.deepcopy(data)
        at = data
        for key in path[:-1]:
            at = at[key]
        if value is KeyError:
            del at[path[-1]]
        else:
            at[path[-1]] = value
        return data
    return change


@pytest.mark.parametrize("change, field, rule", [
    (_set(["functions", 0, "args", 0, "count"], "64"), "functions[0].args[0].count", "must be an integer"),
    (_set(["functions", 0, "args", 0, "role"], "both"), "functions[0].args[0].role", "one of in, out, inout"),
    (_set(["functions", 1, "output", "bound"], [1]), "functions[1].output.bound", "two integers"),
    (_set(["functions", 2, "symbol"], KeyError), "functions[2].symbol", "missing"),
    (_set(["functions", 0, "cpu"], "avx2"), "functions[0].cpu", "a list of strings"),
    (_set(["functions", 0, "constant_time"], "yes"), "functions[0].constant_time", "true or false"),
    (_set(["objects", 0, "format"], KeyError), "objects[0].format", "missing"),
    (_set(["params", "family"], 3), "params.family", "must be a string"),
    (_set(["command"], None), "command", "must be a string"),
    (_set(["functions"], {}), "functions", "a list of functions"),
])
def test_a_malformed_manifest_is_refused_naming_the_field(change, field, rule):
    with pytest.raises(BundleError) as e:
        Manifest.parse(change(_tiny()), "m.json")
    assert str(e.value).startswith(f"m.json: {field}: ") and rule in str(e.value), str(e.value)


def test_what_is_no_kerngen_manifest_is_refused():
    with pytest.raises(BundleError, match="is not a kerngen manifest"):
        Manifest.parse({**_tiny(), "generator": {"name": "other"}}, "m.json")
    with pytest.raises(BundleError, match="lists no objects"):
        Manifest.parse(_set(["objects"], [])(_tiny()), "m.json")
