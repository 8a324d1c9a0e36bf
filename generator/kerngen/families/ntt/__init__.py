"""The NTT family: negacyclic NTTs over Z_q[x]/(x^n+1) and cyclic ones over
Z_q[x]/(x^n-1), on a coset or not, base multiplication and reductions, on
vector lanes."""

from __future__ import annotations

import dataclasses

from ...errors import ParamError
from ...core.family import Constants, Family
from ...core.progress import Progress
from ...passes.lemmas import LemmaError
from . import bench, build, checks, exhaustive, explore, params, plan_model, planned_checks, tables, vendoring
from .design import design, prove_lemmas
from .planned import leaf_design
from .reducers import barrett_reducer


class NttFamily(Family):
    name = "ntt"
    keys = params.KEYS
    kinds = params.KINDS
    options = params.OPTIONS

    def parse(self, table, common, overrides):
        """The schema, then the bound analysis and the lemmas the kernels rest
        on: a set that validates emits. Each search is bounded by the
        parameters; past PROGRESS_AFTER seconds (SMT proofs of 32-bit lanes)
        progress is reported."""
        p = self.schema(table, common, overrides)
        with Progress(f"{p.name}: validating") as progress:
            try:
                progress.note("the Barrett reduction that bounds outputs asked as numbers")
                for kernel, bound in p.output:  # a number needs mul = "montgomery", so signed lanes with Barrett
                    error = isinstance(bound, int) and params.output_bound_error(
                        p, kernel, bound, barrett_reducer(p.q, p.width).out_abs)
                    if error:
                        raise error
                for t in p.targets:
                    progress.note(f"the reductions, schedules and lemmas on {t.isa.name}")
                    prove_lemmas(p, leaf_design(p, t) if p.planned else design(p, t))
            except LemmaError as e:
                raise ParamError(p.source, "q", f"{e}: the SMT solver does not settle the {p.width}-bit reductions "
                                                "of this q within its time limit (q just above 2^20 are the "
                                                "slowest); choose another q") from None
        return p

    def schema(self, table, common, overrides):
        return params.parse(table, common, overrides)

    def summary(self, p):
        chosen = {}
        for t in p.targets:
            ar = leaf_design(p, t) if p.planned else design(p, t)
            chosen.setdefault(f"{ar.mul.name} multiplication, {ar.reducer.kind} reduction", []).append(t.isa.name)
        return (f"n = {p.n}, q = {p.q}, {p.width}-bit lanes, {p.layers} layers (blocks of degree {p.d}), "
                f"{p.policy} policy; " + "; ".join(f"{', '.join(isas)}: {what}" for what, isas in chosen.items()))

    def build(self, p, cache=None):
        return dataclasses.replace(build.build(p, cache), family=self)

    def vendoring(self, bundle):
        return vendoring.context(bundle)

    def checks(self, manifest, seed):
        return checks.checks(manifest.json, seed)

    def chained_checks(self, manifest, calls, seed):
        if checks.planned(manifest.json):
            return checks.round_trips(manifest.json, calls.run, seed, 1, planned_checks.product_judge(manifest.json)) \
                + [("manifest layout", planned_checks.layout_check(manifest.json))]
        out = checks.round_trips(manifest.json, calls.run, seed)
        out.append(("manifest layout", checks.layout_check(manifest.json)))
        out += [exhaustive.every_input(fn, calls.batch) for fn in exhaustive.one_element_maps(manifest.json)]
        return out + checks.basis_proofs(manifest.json, calls)

    def drive(self, manifest, symbol, run, inputs):
        fn = next(f for f in manifest.json["functions"] if f["symbol"] == symbol)
        return plan_model.drive(manifest.json, fn, run, inputs)

    def bench_items(self, bundle, library, workdir):
        return bench.bench_items(bundle, library, workdir)

    constants = Constants(tables.kernel_tables, tables.broadcast_table, tables.header_lines)
    explorer = explore.EXPLORER


NTT = NttFamily()
