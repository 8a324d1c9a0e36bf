"""The checks of tagged instruction groups, by tag kind: each reduction
idiom's check is a module registering an `IdiomCheck`; a kind no module
registers is a scalar idiom, proven by its lemma (`lemma`)."""

from __future__ import annotations

from . import karatsuba, lemma, montgomery, montgomery_sum, pair, shoup, shoup52, special64
from .base import IdiomCheck

REGISTERED: tuple[IdiomCheck, ...] = (montgomery.CHECK, montgomery_sum.CHECK, pair.CHECK, shoup.CHECK,
                                      shoup52.CHECK, karatsuba.CHECK, special64.CHECK)
_BY_KIND = {kind: c for c in REGISTERED for kind in c.kinds}


def check_for(kind: str) -> IdiomCheck:
    """The check of groups of tag kind `kind`."""
    return _BY_KIND.get(kind, lemma.CHECK)
