"""The documentation's generated references, as Markdown: the parameter file's keys (from
`kerngen.families.keys`, which reads the validation's constants) and the command line (from the argparse
parser `kerngen.cli.parser` builds). `docs/hooks.py` puts them into the pages when the site is built; the
package itself never reads them, so they live with the documentation, above every layer of it."""

from __future__ import annotations

import argparse

from kerngen import cli
from kerngen.families.keys import COMMON, FAMILIES, Key


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _table(keys: tuple[Key, ...]) -> list[str]:
    rows = ["| key | type | default | allowed values | what it changes |", "|---|---|---|---|---|"]
    for k in keys:
        default = "**required**" if k.required else _cell(k.default)
        rows.append(f"| `{k.name}` | {k.type} | {default} | {_cell(k.allowed)} | {_cell(k.changes)} |")
    return rows


def parameter_reference() -> str:
    """Every key a parameter file may hold: the common keys, then each family's."""
    out = ["### Keys of every family", "", *_table(tuple(k for k in COMMON if k.name != "isa")), ""]
    titles = {"ntt": "NTT family (`family = \"ntt\"`)", "gf2m": "GF(2^m) family (`family = \"gf2m\"`)"}
    for family, keys in FAMILIES.items():
        out += [f"### {titles[family]}", "", *_table(keys), ""]
    return "\n".join(out)


def _usage(p: argparse.ArgumentParser) -> str:
    return " ".join(p.format_usage().split())[len("usage: "):]


def _options(p: argparse.ArgumentParser) -> list[str]:
    rows = ["| argument | what it does |", "|---|---|"]
    for a in p._actions:  # argparse keeps its arguments here; it has no public accessor
        if isinstance(a, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        name = ", ".join(a.option_strings) if a.option_strings else (a.metavar or a.dest)
        if a.option_strings and a.nargs != 0:
            name += " " + (a.metavar or (("{" + ",".join(map(str, a.choices)) + "}") if a.choices else a.dest.upper()))
        text = a.help or ""
        if a.choices and not a.option_strings:
            text += f" (one of {', '.join(map(str, a.choices))})"
        rows.append(f"| `{_cell(name)}` | {_cell(text)} |")
    return rows


def cli_reference() -> str:
    """Every command of `kerngen` with its usage, description and arguments, as the parser has them."""
    top = cli.parser()
    out = ["```text", _usage(top), "```", "", top.description or "", "", *_options(top), ""]
    sub = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    helps = {c.dest: c.help for c in sub._choices_actions}
    for name, p in sub.choices.items():
        out += [f"### kerngen {name}", "", helps.get(name, "") + ".", ""]
        out += ["```text", _usage(p), "```", ""]
        if p.description:
            out += [p.description, ""]
        out += [*_options(p), ""]
    return "\n".join(out)
