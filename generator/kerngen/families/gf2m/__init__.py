"""The GF(2^m) family: binary-field arithmetic for binary elliptic curves,
with PCLMULQDQ products and reductions specialised to the field polynomial."""

from __future__ import annotations

import dataclasses

from ...core.family import Family
from . import build, checks, ladder, params, vendoring
from .gf2x import poly_text


class Gf2mFamily(Family):
    name = "gf2m"
    keys = params.KEYS
    kinds = params.KINDS

    def parse(self, table, common, overrides):
        return params.parse(table, common, overrides)

    def summary(self, p):
        return f"GF(2^{p.m}) mod {poly_text(p.poly)}, {p.limbs} limbs; {', '.join(p.isas)}"

    def build(self, p, cache=None):
        return dataclasses.replace(build.build(p, cache=cache), family=self)

    def vendoring(self, bundle):
        return vendoring.context(bundle)

    def checks(self, manifest, seed):
        return checks.checks(manifest.json, seed)

    def chained_checks(self, manifest, calls, seed):
        return checks.basis_proofs(manifest.json, calls)

    def bench_items(self, bundle, library, workdir):
        return checks.bench_items(bundle, workdir)

    def extra_bench_rows(self, bundle, library, workdir, batches):
        """The López–Dahab ladders on this field's NIST curves beside OpenSSL's EC_POINT_mul."""
        return ladder.bench_rows(bundle, library, workdir, batches=max(11, batches // 5))


GF2M = Gf2mFamily()
