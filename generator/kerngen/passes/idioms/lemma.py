"""The check of a scalar reduction idiom (every tag kind no other check
registers): the group rebuilt in lane form from the values its
instructions read and made, proven congruent to its input by `lemmas.prove`,
its result's lanes taken from the lemma."""

from __future__ import annotations

from ...errors import VerifyError
from ...ir.instr import Imm
from ...machine.ops import generic_name, spec
from ..lemmas import LemmaError, ScalarIdiom, prove
from ..values import Value
from .base import Checked, Group, IdiomCheck, MachineView


def check(mc: MachineView, group: Group) -> Checked:
    """Rebuild the idiom in lane form from the values its instructions read
    and made, prove it, and take its result from the lemma."""
    index, ins, result = group.index, group.instr, group.result
    names: dict[int, str] = {group.input.vid: "x"}
    steps = []
    for k, st in enumerate(group.steps):
        step, reads, sources, made = st.instr, st.reads, st.sources, st.result
        if spec(step.op).cls == "move":  # a copy: the same value under the same name
            continue
        srcs: list[str | int] = []
        values = iter(sources)
        for op in reads:
            if isinstance(op, Imm):
                srcs.append(op.value)
                continue
            v = next(values)
            if v.vid in names:
                srcs.append(names[v.vid])
            elif v.constant is not None and len(set(v.constant)) == 1:
                srcs.append(v.constant[0])
            else:
                mc.fail(index, ins, f"ends a {group.kind} idiom that reads a value from outside itself "
                                    f"(at `{mc.text(step)}`)")
        name = f"v{k}"
        steps.append((generic_name(step.op), name, *srcs))
        names[made.vid] = name
    if names.get(result.vid) != steps[-1][1]:
        mc.fail(index, ins, f"ends a {group.kind} idiom whose result is not its last step's")
    idiom = ScalarIdiom(group.kind, mc.modulus, tuple(steps), mc.bits, mc.signed)
    try:
        lemma = prove(idiom)
    except LemmaError as e:
        raise VerifyError(f"{mc.symbol}: {e}") from None
    n = len(result.lanes)
    lanes = [lemma.range_for(lo, hi) for lo, hi in group.input.lanes[:n]]
    return Checked(Value(result.vid, tuple(lanes), group.input.deps[:n], group.input.form))


CHECK = IdiomCheck((), check, product=False, lanes_at_end=False)
