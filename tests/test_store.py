"""The content-addressed store of built bundles (kerngen.store): a build is
read back for the same parameters and generator, built again for any other,
and never read half-written or damaged; concurrent builders of one entry
build it once and leave one whole entry."""

from __future__ import annotations

import dataclasses
import hashlib
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kerngen import store
from kerngen.core.params import Overrides
from kerngen.emission.render import render
from kerngen.families import build_all, load
from kerngen.store import Store, canonical, generator_digest

from conftest import REPO

TINY = REPO / "params" / "tiny-257.toml"


@pytest.fixture(scope="module")
def tiny():
    """tiny-257's parameters and its bundle, built without the store."""
    p = load(TINY)
    [bundle] = build_all(p)
    return p, bundle


class Counting:
    """A builder handing out `bundle` (as built for the parameters asked), counting its calls."""

    def __init__(self, bundle):
        self.bundle, self.calls = bundle, 0

    def __call__(self, params):
        self.calls += 1
        return dataclasses.replace(self.bundle, params=params)


def entries(root: Path) -> list[Path]:
    return sorted(root.rglob("*.pickle"))


def test_the_same_parameters_are_built_once_and_read_back_whole(tmp_path, tiny):
    p, bundle = tiny
    build = Counting(bundle)
    first = Store(tmp_path, "g", build)
    assert render(first.bundles(p), "c") == render((bundle,), "c")
    again = Store(tmp_path, "g", build)  # another process: only the directory is shared
    read = again.bundles(p)
    assert build.calls == 1 and len(entries(tmp_path)) == 1
    assert render(read, "c") == render((bundle,), "c")
    assert read[0].functions[0].kernel == bundle.functions[0].kernel  # the objects, not only the files
    # the file a set was read from only names it in messages: the same entry, the caller's name kept
    elsewhere = dataclasses.replace(p, source="elsewhere/tiny-257.toml")
    assert again.bundle(elsewhere).params.source == "elsewhere/tiny-257.toml" and build.calls == 1


def test_another_parameter_or_generator_is_another_entry(tmp_path, tiny):
    p, bundle = tiny
    build = Counting(bundle)
    s = Store(tmp_path, "g", build)
    s.bundle(p)
    s.bundle(load(TINY, Overrides.of(policy="eager")))
    assert build.calls == 2
    s.bundle(dataclasses.replace(p, prefix="kg_other"))
    assert build.calls == 3
    Store(tmp_path, "changed sources", build).bundle(p)
    assert build.calls == 4 and len(entries(tmp_path)) == 4
    s.bundle(p)
    assert build.calls == 4


def test_each_abi_is_an_entry_of_its_own(tmp_path, tiny):
    p, bundle = tiny
    build = Counting(bundle)
    s = Store(tmp_path, "g", build)
    both = load(TINY, Overrides(abi="sysv,win64"))
    assert [b.params.targets[0].platform.name for b in s.bundles(both)] == ["sysv", "win64"]
    assert build.calls == 2
    s.bundles(both)
    assert build.calls == 2


@pytest.mark.parametrize("name", ["tiny-257", "gf2m-163"])
def test_platforms_of_one_convention_share_an_entry_and_render_as_built(tmp_path, name):
    """A Mach-O or hidden/default build is its System V twin's kernels on its
    own targets: one entry, and the files a direct build renders."""
    s = Store(tmp_path, "g")
    for overrides in (Overrides(abi="sysv,macho"), Overrides(abi="macho", visibility="default")):
        p = load(REPO / "params" / f"{name}.toml", overrides)
        assert render(s.bundles(p), "c") == render(build_all(p), "c")
    assert len(entries(tmp_path)) == 1


def test_a_half_written_or_damaged_entry_is_never_read(tmp_path, tiny):
    p, bundle = tiny
    build = Counting(bundle)
    s = Store(tmp_path, "g", build)
    s.bundle(p)
    [entry] = entries(tmp_path)
    whole = entry.read_bytes()
    damaged = [whole[: len(whole) // 2],  # a writer stopped half way (no digest matches it)
               whole[:-1] + bytes([whole[-1] ^ 1]),  # one bit flipped
               b"",
               whole.split(b"\n", 1)[1],  # the pickle without its digest
               ]
    for calls, data in enumerate(damaged, start=2):
        entry.write_bytes(data)
        assert render((s.bundle(p),), "c") == render((bundle,), "c")
        assert build.calls == calls and store._read(entry) is not None  # built again and stored whole
    # a writer killed before its rename leaves a temporary file: never an entry
    entry.unlink()
    (entry.parent / f".{entry.stem[:16]}.abandoned").write_bytes(whole[:100])
    s.bundle(p)
    assert build.calls == len(damaged) + 2


def test_an_entry_that_no_longer_loads_is_built_again(tmp_path, tiny):
    """A whole entry whose classes changed shape (read by another version) is as good as missing."""
    p, bundle = tiny
    build = Counting(bundle)
    s = Store(tmp_path, "g", build)
    entry = s.path(p)
    entry.parent.mkdir(parents=True)
    body = b"not a pickle"
    entry.write_bytes(hashlib.sha256(body).hexdigest().encode() + b"\n" + body)
    s.bundle(p)
    assert build.calls == 1 and store._read(entry) is not None


def slow_build(params):
    """A builder taking a second, noting each call in the file $COUNT names."""
    with open(os.environ["COUNT"], "a") as f:
        f.write(f"{os.getpid()}\n")
    time.sleep(1)
    return SHARED_BUNDLE


SHARED_BUNDLE = None


def _build_in_process(root: str, params, queue) -> None:
    bundle = Store(Path(root), "g", slow_build).bundle(params)
    queue.put(render((bundle,), "c")["tiny-257.asm"])


def test_concurrent_builders_build_once_and_leave_one_whole_entry(tmp_path, tiny, monkeypatch):
    p, bundle = tiny
    monkeypatch.setattr(sys.modules[__name__], "SHARED_BUNDLE", bundle)
    monkeypatch.setenv("COUNT", str(tmp_path / "count"))
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    workers = [ctx.Process(target=_build_in_process, args=(str(tmp_path / "store"), p, queue)) for _ in range(2)]
    for w in workers:
        w.start()
    asm = [queue.get(timeout=120) for _ in workers]
    for w in workers:
        w.join(timeout=60)
        assert w.exitcode == 0
    assert asm == [render((bundle,), "c")["tiny-257.asm"]] * 2
    assert len((tmp_path / "count").read_text().split()) == 1  # the second waited for the first's entry
    [entry] = entries(tmp_path / "store")
    assert [p.name for p in entry.parent.iterdir() if p.name.startswith(".")] == []
    assert store._read(entry) is not None


def test_concurrent_writes_of_one_entry_leave_a_whole_one(tmp_path, tiny):
    """Without the lock (a file system without flock), writers replace each
    other's whole entries: whatever a reader finds is whole."""
    p, bundle = tiny
    path = Store(tmp_path, "g").path(p)
    ctx = multiprocessing.get_context("fork")
    writers = [ctx.Process(target=lambda: [store._write(path, bundle) for _ in range(5)]) for _ in range(3)]
    for w in writers:
        w.start()
    while any(w.is_alive() for w in writers):
        found = store._read(path)
        assert found is None or found.name == bundle.name
    for w in writers:
        w.join()
        assert w.exitcode == 0
    assert store._read(path) is not None and len(entries(tmp_path)) == 1
    assert [f.name for f in path.parent.iterdir() if f.name.startswith(".")] == []


def test_the_generator_digest_follows_every_source_file(tmp_path):
    package = tmp_path / "kerngen"
    (package / "templates").mkdir(parents=True)
    (package / "a.py").write_text("A = 1\n")
    (package / "templates" / "t.j2").write_text("{{ x }}\n")
    before = generator_digest(package)
    assert generator_digest(package) == before
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0")
    (package / "params").mkdir()
    (package / "params" / "p.toml").write_text("n = 1\n")  # parameters are keyed by value
    assert generator_digest(package) == before
    (package / "templates" / "t.j2").write_text("{{ y }}\n")
    changed = generator_digest(package)
    assert changed != before
    (package / "b.py").write_text("")
    assert generator_digest(package) != changed


def test_keys_are_the_same_in_every_process(tiny):
    """Sets' order changes with the hash seed; a key does not."""
    assert canonical(frozenset({"SSE2", "AVX2", "BMI2"})) == canonical(frozenset({"BMI2", "SSE2", "AVX2"}))
    script = ("from kerngen.families import load; from kerngen.store import Store; "
              f"print(Store(None, 'g').key(load({str(TINY)!r})))")
    keys = {subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2")}
    assert keys == {Store(None, "g").key(tiny[0]) + "\n"}


def test_the_default_store_is_the_users_cache_unless_told(monkeypatch, tmp_path):
    monkeypatch.delenv(store.ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert store.default_root() == tmp_path / "cache" / "kerngen" / "bundles"
    monkeypatch.setenv(store.ENV, str(tmp_path / "mine"))
    assert Store.default().root == tmp_path / "mine"
