"""The registry of kernel families: how to build a bundle and how to test and
time it, by the `family` key of a parameter file."""

from __future__ import annotations

from . import gf2m, gf2m_checks, ntt, ntt_checks
from .family import Bundle
from .params import Params


def build(p: Params) -> Bundle:
    """Policy and reducer overrides reach here inside `p` (params.load applies them)."""
    if p.family == "ntt":
        return ntt.build(p)
    return gf2m.build(p)


def checks_module(family: str):
    return ntt_checks if family == "ntt" else gf2m_checks
