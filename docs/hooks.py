"""MkDocs hook: puts the generated references into the pages as the site is built.

A line `<!-- generated: parameters -->` becomes the parameter file's key reference and
`<!-- generated: cli -->` the command line's (both from `references.py` beside this file, which reads the
validation's schema and the argparse parser); `<!-- bundle-readme: NAME: Heading, Heading -->` becomes
those sections of the committed bundle `generated/NAME/README.md` (whose examples the suite compiles and
runs: tests/test_examples.py, tests/test_vendoring.py)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "generator"))
sys.path.insert(0, str(ROOT / "docs"))
import references  # noqa: E402 (found through the line above, at load: the build resets sys.path later)

GENERATED = re.compile(r"^<!-- generated: (\w+) -->$", re.M)
BUNDLE = re.compile(r"^<!-- bundle-readme: ([\w-]+): (.+?) -->$", re.M)


def generated(name: str) -> str:
    makers = {"parameters": references.parameter_reference, "cli": references.cli_reference}
    if name not in makers:
        raise ValueError(f"no generated reference {name!r}: one of {', '.join(makers)}")
    return makers[name]()


def bundle_sections(name: str, headings: list[str]) -> str:
    """The sections of a bundle README under the given `## ` headings, one level deeper."""
    text = (ROOT / "generated" / name / "README.md").read_text()
    parts = re.split(r"^(?=## )", text, flags=re.M)
    out = []
    for heading in headings:
        found = [p for p in parts if p.startswith(f"## {heading}\n")]
        if not found:
            raise ValueError(f"generated/{name}/README.md has no section '## {heading}'")
        out.append(_deeper(found[0]))
    return "\n".join(out)


def _deeper(section: str) -> str:
    """Each heading one level deeper (a `# comment` line in a code block stays)."""
    lines, fence = [], False
    for line in section.split("\n"):
        if line.startswith("```"):
            fence = not fence
        elif not fence and line.startswith("#"):
            line = "#" + line
        lines.append(line)
    return "\n".join(lines)


def expand(markdown: str) -> str:
    markdown = GENERATED.sub(lambda m: generated(m.group(1)), markdown)
    return BUNDLE.sub(lambda m: bundle_sections(m.group(1), [h.strip() for h in m.group(2).split(",")]), markdown)


def on_page_markdown(markdown, page, config, files):  # noqa: ARG001 (MkDocs' hook signature)
    return expand(markdown)
