"""The documentation: README.md and the MkDocs site in docs/.

Every code block a reader would copy runs here, as a reader runs it, page by page in a directory of its own
(holding a copy of params/ and the committed generated/): `sh` blocks by bash, `python` blocks by Python,
`toml` blocks are written to the file their first line names (`# params/x.toml`) and checked by `kerngen
check`, `c`/`cpp` blocks are written to the file their first comment names (`/* app.c: ...`) and must be
built by a later `sh` block of the page. A `text` block is output or a diagram, never run; after
`<!-- output -->` it is the output of the `sh` block before it, whose lines must appear in that run's
output in order. The library session (`<!-- library-session:start -->`, docs/library.md) is run by
tests/test_library.py. A block after `<!-- excerpt: PATH -->` quotes the sources: it must be in PATH as
it is (whitespace aside). `<!-- example: make -->` marks a block of `make TARGET` lines: each target must be the
Makefile's, and `.ci/run` must run the README's `make test` (the suite cannot run itself). A block of
another language, or an unmarked block without a language, fails the test.

The site builds with `mkdocs build --strict` (a warning, e.g. a broken link, fails it), and the generated
references change with what they are generated from.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from kerngen.families import keys as keydoc
from kerngen.families import load_schema

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
sys.path.insert(0, str(DOCS))  # the documentation's own modules: references.py, which docs/hooks.py reads
import references  # noqa: E402 (found through the line above)
PAGES = sorted([REPO / "README.md", *DOCS.glob("*.md")])
FENCE = re.compile(r"^```([\w+-]*)\n(.*?)^```\n", re.S | re.M)
DIRECTIVE = re.compile(r"<!-- (output|example: \w+|excerpt: [\w./-]+|library-session:start) -->\s*$")
RUN = ("sh", "python", "toml", "c", "cpp")
SETUP_TIMEOUT = 600


@dataclass
class Block:
    lang: str
    text: str
    directive: str | None
    line: int


def blocks(page: Path) -> list[Block]:
    text = page.read_text()
    found = []
    for m in FENCE.finditer(text):
        before = text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        d = DIRECTIVE.search(before)
        found.append(Block(m.group(1), m.group(2), d.group(1) if d else None, text.count("\n", 0, m.start()) + 1))
    return found


def _named_file(block: Block) -> str | None:
    first = block.text.split("\n", 1)[0]
    m = re.match(r"^(?:/\*|//|#)\s*([\w./-]+\.(?:c|cpp|h|toml|py))\b", first)
    return m.group(1) if m else None


@pytest.fixture(scope="module")
def shim(tmp_path_factory) -> dict:
    """The environment a reader has after set-up: `kerngen` on PATH (this interpreter's)."""
    bin_dir = tmp_path_factory.mktemp("bin")
    (bin_dir / "kerngen").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m kerngen "$@"\n')
    (bin_dir / "kerngen").chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "generator"), env.get("PYTHONPATH")]))
    return env


def _sandbox(tmp_path: Path) -> Path:
    shutil.copytree(REPO / "params", tmp_path / "params")
    (tmp_path / "generated").symlink_to(REPO / "generated")
    return tmp_path


def _check_make(block: Block, page: Path) -> None:
    makefile = (REPO / "Makefile").read_text()
    targets = set(re.findall(r"^([\w-]+):", makefile, re.M))
    for line in filter(None, (ln.split("#")[0].strip() for ln in block.text.splitlines())):
        words = line.split()
        assert words[0] == "make" and len(words) == 2, f"{page.name}:{block.line}: not a `make TARGET` line: {line}"
        assert words[1] in targets, f"{page.name}:{block.line}: the Makefile has no target {words[1]}"
    if page.name == "README.md":
        assert "make test" in block.text
        ci = [ln for ln in (REPO / ".ci/run").read_text().splitlines() if ln and not ln.startswith("#")]
        assert "make test" in ci, ".ci/run must run the README's test command"


def run_page(page: Path, sandbox: Path, env: dict) -> None:
    written: dict[str, int] = {}
    last_output = ""
    for b in blocks(page):
        where = f"{page.relative_to(REPO)}:{b.line}"
        if b.directive == "example: make":
            _check_make(b, page)
            continue
        if b.directive and b.directive.startswith("excerpt: "):  # code quoted from the sources, as it is there
            source = REPO / b.directive.split(": ", 1)[1]
            assert " ".join(b.text.split()) in " ".join(source.read_text().split()), \
                f"{where}: the excerpt is no longer in {source.relative_to(REPO)}"
            continue
        if b.directive == "library-session:start":  # run by tests/test_library.py, from another directory
            assert page.name == "library.md" and b.lang == "python"
            continue
        if b.lang == "text":
            if b.directive == "output":
                got = [ln.rstrip() for ln in last_output.splitlines()]
                at = 0
                for want in filter(None, (ln.rstrip() for ln in b.text.splitlines())):
                    assert want in got[at:], f"{where}: the output block's line {want!r} is not printed:\n{last_output}"
                    at = got.index(want, at) + 1
            continue
        assert b.directive is None, f"{where}: {b.directive} on a {b.lang or 'plain'} block"
        assert b.lang in RUN, f"{where}: a block in {b.lang or 'no language'}: mark output or diagrams `text`"
        name = _named_file(b)
        if b.lang in ("c", "cpp", "toml") or name:
            assert name, f"{where}: a {b.lang} block must name its file in its first line"
            path = sandbox / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(b.text)
            written[name] = b.line
            if b.lang == "toml":
                table = tomllib.loads(b.text)
                if "family" in table:
                    r = subprocess.run(["kerngen", "check", name], cwd=sandbox, env=env, capture_output=True,
                                       text=True)
                    assert r.returncode == 0, f"{where}: {r.stdout}{r.stderr}"
            continue
        cmd = ["bash", "-euo", "pipefail", "-c", b.text] if b.lang == "sh" else [sys.executable, "-c", b.text]
        r = subprocess.run(cmd, cwd=sandbox, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=SETUP_TIMEOUT)
        assert r.returncode == 0, f"{where}: exit code {r.returncode}\n{r.stdout}"
        last_output = r.stdout
        if b.lang == "sh":
            for name in list(written):
                if name.endswith((".c", ".cpp")) and name in b.text:
                    del written[name]
    unbuilt = [f"{n} (line {line})" for n, line in written.items() if n.endswith((".c", ".cpp"))]
    assert not unbuilt, f"{page.name}: no shell block builds {', '.join(unbuilt)}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_block_runs(page, tmp_path, shim):
    run_page(page, _sandbox(tmp_path), shim)


def _hooks():
    """docs/hooks.py, the MkDocs hook that puts the generated references into the pages."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("kerngen_docs_hooks", DOCS / "hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_is_short():
    assert len((REPO / "README.md").read_text().splitlines()) <= 250


def test_the_site_builds_strict(tmp_path):
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "generator"), env.get("PYTHONPATH")]))
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-f", str(REPO / "mkdocs.yml"),
                        "-d", str(tmp_path / "site")], cwd=REPO, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    params = (tmp_path / "site/parameters/index.html").read_text()
    assert "basemul_acc" in params and "order_isa" in params
    assert "kerngen explore" in (tmp_path / "site/cli/index.html").read_text()


def test_the_parameter_reference_names_exactly_the_keys_validation_accepts():
    for family, keys in keydoc.FAMILIES.items():
        described = {k.name for k in keydoc.COMMON if k.name != "isa"} | {k.name for k in keys}
        assert described == set(keydoc.FAMILY_KEYS[family]), family


def test_the_stated_defaults_are_what_a_file_without_the_key_gets(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text('name = "p"\nfamily = "ntt"\nn = 256\nq = 3329\n')
    p = load_schema(path)
    stated = {k.name: k.default for k in (*keydoc.COMMON, *keydoc.NTT)}
    assert stated["width"] == str(p.width)
    assert stated["isa"] == f'"{p.isas[0]}"' and len(p.isas) == 1
    assert stated["reduction"] == f'"{p.policy}"'
    assert stated["reducer"] == f'"{p.reducer}"'
    assert stated["mul"] == f'"{p.mul}"'
    assert stated["order"] == f'"{p.order}"'
    assert stated["ring"] == f'"{p.ring}"'
    assert stated["basemul_acc"] == str(list(p.basemul_acc))
    assert stated["abi"] == f'"{p.abis[0]}"' and len(p.abis) == 1
    assert stated["prefix"].startswith('"kg_myset"') and p.prefix == "kg_p"
    assert stated["coset"].startswith(str(p.coset))
    assert {v for _, v in p.output} == {stated["output"].strip('"')}
    g = tmp_path / "g.toml"
    g.write_text('name = "g"\nfamily = "gf2m"\nm = 163\npoly = [163, 7, 6, 3, 0]\n')
    assert {k.name: k.default for k in keydoc.GF2M}["isa"] == f'"{load_schema(g).isas[0]}"'


def test_the_parameter_page_changes_with_the_schema(monkeypatch):
    key = next(k for k in keydoc.NTT if k.name == "coset")
    changed = keydoc.Key(key.name, key.type, key.default, key.allowed, "a description changed by a test")
    monkeypatch.setattr(keydoc, "NTT", tuple(changed if k is key else k for k in keydoc.NTT))
    monkeypatch.setitem(keydoc.FAMILIES, "ntt", keydoc.NTT)
    assert "a description changed by a test" in references.parameter_reference()
    page = _hooks().on_page_markdown((DOCS / "parameters.md").read_text(), None, None, None)
    assert "| `coset` | integer | 1 (no coset) |" in page and "a description changed by a test" in page


def test_the_cli_page_changes_with_the_parser(monkeypatch):
    from kerngen import cli
    real = cli.parser

    def changed():
        ap = real()
        ap.description = "a description changed by a test"
        return ap
    monkeypatch.setattr(cli, "parser", changed)
    text = references.cli_reference()
    assert "a description changed by a test" in text
    for command in ("emit", "check", "test", "bench", "explore", "selfcheck", "list"):
        assert f"### kerngen {command}\n" in text


def test_the_performance_charts_are_drawn_from_every_results_file(tmp_path):
    r = subprocess.run([sys.executable, str(DOCS / "figures.py"), str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    page = (DOCS / "performance.md").read_text()
    for path in sorted((DOCS / "results").glob("*.toml")):
        data = tomllib.loads(path.read_text())
        assert {"title", "cpu", "commit", "metric", "procedure", "anchors", "rows"} <= set(data), path.name
        assert all(r["anchor"] in data["anchors"] for r in data["rows"]), path.name
        assert (tmp_path / f"{path.stem}.svg").stat().st_size > 0
        assert f"(figures/{path.stem}.svg)" in page, f"performance.md shows no chart of {path.name}"
        assert (DOCS / "figures" / f"{path.stem}.svg").is_file(), f"docs/figures/{path.stem}.svg: run docs/figures.py"
