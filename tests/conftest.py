import subprocess
import sys
from pathlib import Path

import pytest

from kerngen.core.compile_cache import CompileCache

REPO = Path(__file__).resolve().parents[1]


def on_the_set_worker(path: Path, *values, id: str | None = None):
    """A parametrize case building the shipped set `path` with its own settings
    (any platform sharing System V's convention), run on the same worker as the
    suite's other such builds of that set (`make test` distributes by these
    groups): there the kernels are compiled once and taken from the worker's
    `compile_cache` after."""
    return pytest.param(path, *values, marks=pytest.mark.xdist_group(path.stem), id=id or path.stem)


@pytest.fixture(scope="session")
def compile_cache() -> CompileCache:
    """The kernels this worker compiled, for the builds of a shipped set that
    several tests make (`on_the_set_worker`)."""
    return CompileCache()


def kerngen(*args, cwd=REPO, env=None) -> subprocess.CompletedProcess:
    """The command line, run as a user runs it (arguments may be paths)."""
    return subprocess.run([sys.executable, "-m", "kerngen", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, env=env)


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
