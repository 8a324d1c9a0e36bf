"""The NTT family: negacyclic NTTs over Z_q[x]/(x^n+1), base multiplication
and reductions, on vector lanes."""

from __future__ import annotations

from ...core.family import Family
from . import build, checks, explore, params


class NttFamily(Family):
    name = "ntt"
    keys = params.KEYS

    def parse(self, table, common, overrides):
        """The schema, then the bound analysis: a set that validates emits."""
        p = params.parse(table, common, overrides)
        for t in p.targets:
            build.design(p, t)
        return p

    def build(self, p):
        return build.build(p)

    def checks(self, manifest, seed):
        return checks.checks(manifest, seed)

    def chained_checks(self, manifest, calls, seed):
        out = checks.round_trips(manifest, calls.run, seed)
        out.append(("manifest layout", checks.layout_check(manifest)))
        return out + checks.basis_proofs(manifest, calls)

    def bench_items(self, bundle, library, workdir):
        return checks.bench_items(bundle, library, workdir)

    explorer = explore.EXPLORER


NTT = NttFamily()
