import fcntl
import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kerngen.cli import main as kerngen_main
from kerngen.harness import protocol as harness_protocol
from kerngen.ir.instr import ArgBase, Builder, Mem
from kerngen.store import Store

REPO = Path(__file__).resolve().parents[1]


def kerngen(*args, cwd=REPO, env=None) -> subprocess.CompletedProcess:
    """The command line, run as a user runs it (arguments may be paths), in a
    process of its own: for what only a process shows (the entry point, exit
    codes of the interpreter, progress logged as it goes)."""
    return subprocess.run([sys.executable, "-m", "kerngen", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, env=env)


def error_lines(stderr: str) -> list[str]:
    """stderr without the progress reports a step running past 2 s writes
    (`core.progress`: "... (N s so far)"), which a loaded machine may add."""
    return [line for line in stderr.splitlines() if not re.search(r"\(\d+ s so far\)$", line)]


@pytest.fixture
def kerngen_cli(capsys, monkeypatch):
    """The command line called in this process (kerngen.cli.main), from
    `cwd` (the repository unless told): what `kerngen` returns, without
    starting Python and importing kerngen again for each call."""
    def run(*args, cwd=REPO) -> subprocess.CompletedProcess:
        argv = [str(a) for a in args]
        monkeypatch.chdir(cwd)
        capsys.readouterr()
        log = logging.getLogger("kerngen")
        handlers, log.handlers = log.handlers, []  # main adds one writing progress to this test's stderr
        try:
            code = kerngen_main(argv)
        except SystemExit as e:  # argparse's usage errors and --help
            code = e.code if isinstance(e.code, int) else 2 if e.code else 0
        finally:
            log.handlers = handlers
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(["kerngen", *argv], code, out, err)
    return run


@pytest.fixture(scope="session")
def once_per_run(tmp_path_factory):
    """`get(name, make)`: make()'s result (JSON), made by the first of this
    run's workers to ask and read by the others, for what several tests check
    and a worker would otherwise make again for the tests it was given."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # the workers' common directory

    def get(name: str, make):
        path = shared / f"once-{name}.json"
        with open(shared / f"once-{name}.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when closed: the others wait for the result
            if not path.exists():
                written = path.with_suffix(f".{os.getpid()}")
                written.write_text(json.dumps(make()))
                written.replace(path)
            return json.loads(path.read_text())
    return get


# Built bundles, shared by the suite's workers and later runs (kerngen.store): each shipped set is built once
# for each of its settings, whichever worker asks first (the others wait for it and read it).
STORE = Store.default()


@pytest.fixture
def write_params(tmp_path):
    """Write a parameter file from a dict (TOML by hand: flat keys only)."""
    def make(table: dict, name: str = "p.toml") -> Path:
        lines = []
        for k, v in table.items():
            if isinstance(v, str):
                lines.append(f'{k} = "{v}"')
            elif isinstance(v, bool):
                lines.append(f"{k} = {'true' if v else 'false'}")
            else:
                lines.append(f"{k} = {v}")
        path = tmp_path / name
        path.write_text("\n".join(lines) + "\n")
        return path
    return make


# Property tests draw the same examples on every run: CI must not depend on luck.
from hypothesis import settings as _settings

_settings.register_profile("kerngen", derandomize=True, deadline=None)
_settings.load_profile("kerngen")


def register_pressure(count: int, bits: int = 256, add: str = "vpaddw") -> Builder:
    """A body with `count` vectors of `bits` bits live at once (and a running
    sum beside them), for the allocator's tests: out = the sum, then each
    vector of the input."""
    b = Builder(bits)
    size = bits // 8
    vs = [b.op("load", Mem(ArgBase(0), size * i, size)) for i in range(count)]
    acc = vs[0]
    for v in vs[1:]:
        acc = b.op(add, acc, v)
    b.emit("store", Mem(ArgBase(1), 0, size), acc)
    for i, v in enumerate(vs):  # keep every value alive to the end
        b.emit("store", Mem(ArgBase(1), size * (i + 1), size), v)
    return b


def under_valgrind(monkeypatch) -> list[str]:
    """Runs the harness's programs under valgrind (its tool none: no checks, only its decoder), which stops at
    any AVX-512 instruction (it decodes none):
    a program that executed one would fail. Returns the programs run, as they are run."""
    ran = []
    real = subprocess.run

    def run(argv, *args, **kwargs):
        name = Path(str(argv[0])).name
        if name in ("kg_runner", "kg_bench", "kg_batch"):
            ran.append(name)
            argv = ["valgrind", "--tool=none", "-q", *map(str, argv)]
            kwargs["timeout"] = None
        return real(argv, *args, **kwargs)
    monkeypatch.setattr(harness_protocol.subprocess, "run", run)
    return ran
