"""The table of every instruction the kernels use.

One row per IR opcode: the NASM mnemonic, the operand signature (which slots
are written and read, and which may be memory), the encoding family and a
latency class for the static cost figures. The verifier's lane semantics live
in verify.py, keyed by the same opcode names.
"""

from __future__ import annotations

from dataclasses import dataclass

# Operand slot kinds: "v" vector register, "vm" vector register or memory,
# "m" memory only, "i" immediate, "g" general register, "gm" general or memory.
# Access: "w" written, "r" read, "rw" both.


@dataclass(frozen=True)
class Slot:
    access: str
    kind: str


@dataclass(frozen=True)
class OpSpec:
    name: str
    mnemonic: str
    slots: tuple[Slot, ...]
    family: str  # "vex", "legacy" or "gpr"
    cls: str  # "alu", "mul", "shuffle", "load", "store", "clmul", "move"
    legacy: str | None = None  # two-operand SSE mnemonic for legalisation

    @property
    def written(self) -> tuple[int, ...]:
        return tuple(i for i, s in enumerate(self.slots) if "w" in s.access)

    @property
    def read(self) -> tuple[int, ...]:
        return tuple(i for i, s in enumerate(self.slots) if "r" in s.access)


def _sig(text: str) -> tuple[Slot, ...]:
    out = []
    for part in text.split(","):
        access, kind = part.split(":")
        out.append(Slot(access, kind))
    return tuple(out)


_VEX3 = "w:v,r:v,r:vm"
_VEX3I = "w:v,r:v,r:vm,r:i"
_VEXSHIFT = "w:v,r:v,r:i"

_ROWS: list[tuple[str, str, str, str, str | None]] = [
    # name, mnemonic, signature, class, legacy mnemonic
    ("load", "vmovdqu", "w:v,r:m", "load", "movdqu"),
    ("load_aligned", "vmovdqa", "w:v,r:m", "load", "movdqa"),
    ("store", "vmovdqu", "w:m,r:v", "store", "movdqu"),
    ("store_aligned", "vmovdqa", "w:m,r:v", "store", "movdqa"),
    ("copy", "vmovdqa", "w:v,r:v", "move", "movdqa"),
    ("vpbroadcastw", "vpbroadcastw", "w:v,r:m", "load", None),
    ("vpbroadcastd", "vpbroadcastd", "w:v,r:m", "load", None),
    ("vpbroadcastq", "vpbroadcastq", "w:v,r:m", "load", None),
    ("vpbroadcastq_x", "vpbroadcastq", "w:v,r:v", "shuffle", None),  # ymm <- lane 0 of an xmm
    ("vpaddw", "vpaddw", _VEX3, "alu", "paddw"),
    ("vpsubw", "vpsubw", _VEX3, "alu", "psubw"),
    ("vpaddd", "vpaddd", _VEX3, "alu", "paddd"),
    ("vpsubd", "vpsubd", _VEX3, "alu", "psubd"),
    ("vpaddq", "vpaddq", _VEX3, "alu", "paddq"),
    ("vpsubq", "vpsubq", _VEX3, "alu", "psubq"),
    ("vpmullw", "vpmullw", _VEX3, "mul", "pmullw"),
    ("vpmulhw", "vpmulhw", _VEX3, "mul", "pmulhw"),
    ("vpmulhuw", "vpmulhuw", _VEX3, "mul", "pmulhuw"),
    ("vpmulhrsw", "vpmulhrsw", _VEX3, "mul", "pmulhrsw"),
    ("vpmulld", "vpmulld", _VEX3, "mul", "pmulld"),
    ("vpmuldq", "vpmuldq", _VEX3, "mul", "pmuldq"),
    ("vpmuludq", "vpmuludq", _VEX3, "mul", "pmuludq"),
    ("vpand", "vpand", _VEX3, "alu", "pand"),
    ("vpcmpgtq", "vpcmpgtq", _VEX3, "alu", "pcmpgtq"),
    ("vpandn", "vpandn", _VEX3, "alu", "pandn"),
    ("vpor", "vpor", _VEX3, "alu", "por"),
    ("vpxor", "vpxor", _VEX3, "alu", "pxor"),
    ("vpsraw", "vpsraw", _VEXSHIFT, "alu", "psraw"),
    ("vpsrlw", "vpsrlw", _VEXSHIFT, "alu", "psrlw"),
    ("vpsllw", "vpsllw", _VEXSHIFT, "alu", "psllw"),
    ("vpsrad", "vpsrad", _VEXSHIFT, "alu", "psrad"),
    ("vpsrld", "vpsrld", _VEXSHIFT, "alu", "psrld"),
    ("vpslld", "vpslld", _VEXSHIFT, "alu", "pslld"),
    ("vpsrlq", "vpsrlq", _VEXSHIFT, "alu", "psrlq"),
    ("vpsllq", "vpsllq", _VEXSHIFT, "alu", "psllq"),
    ("vpsrldq", "vpsrldq", _VEXSHIFT, "shuffle", "psrldq"),
    ("vpslldq", "vpslldq", _VEXSHIFT, "shuffle", "pslldq"),
    ("vpblendw", "vpblendw", _VEX3I, "shuffle", "pblendw"),
    ("vpblendd", "vpblendd", _VEX3I, "shuffle", None),
    ("vperm2i128", "vperm2i128", _VEX3I, "shuffle", None),
    ("vpermq", "vpermq", "w:v,r:vm,r:i", "shuffle", None),
    ("vpshufd", "vpshufd", "w:v,r:vm,r:i", "shuffle", "pshufd"),
    ("vpshufb", "vpshufb", _VEX3, "shuffle", "pshufb"),
    ("vpalignr", "vpalignr", _VEX3I, "shuffle", "palignr"),
    ("vpunpcklqdq", "vpunpcklqdq", _VEX3, "shuffle", "punpcklqdq"),
    ("vpunpckhqdq", "vpunpckhqdq", _VEX3, "shuffle", "punpckhqdq"),
    ("vpunpcklwd", "vpunpcklwd", _VEX3, "shuffle", "punpcklwd"),
    ("vpunpckhwd", "vpunpckhwd", _VEX3, "shuffle", "punpckhwd"),
    ("vpunpckldq", "vpunpckldq", _VEX3, "shuffle", "punpckldq"),
    ("vpunpckhdq", "vpunpckhdq", _VEX3, "shuffle", "punpckhdq"),
    ("vextracti128", "vextracti128", "w:v,r:v,r:i", "shuffle", None),
    ("vinserti128", "vinserti128", _VEX3I, "shuffle", None),
    ("vpclmulqdq", "vpclmulqdq", _VEX3I, "clmul", "pclmulqdq"),
    ("load64", "vmovq", "w:v,r:m", "load", "movq"),
    ("store64", "vmovq", "w:m,r:v", "store", "movq"),
    ("load32", "vmovd", "w:v,r:m", "load", "movd"),
    ("store32", "vmovd", "w:m,r:v", "store", "movd"),
    ("store16", "vpextrw", "w:m,r:v,r:i", "store", "pextrw"),  # lane given by the immediate
]

OPS: dict[str, OpSpec] = {
    name: OpSpec(name, mnem, _sig(sig), "vex", cls, legacy)
    for name, mnem, sig, cls, legacy in _ROWS
}

_GPR_ROWS: list[tuple[str, str, str, str]] = [
    ("mov", "mov", "w:g,r:gm", "move"),
    ("mov_store", "mov", "w:m,r:g", "store"),
    ("xor", "xor", "rw:g,r:gm", "alu"),
    ("and", "and", "rw:g,r:gm", "alu"),
    ("or", "or", "rw:g,r:gm", "alu"),
    ("shl", "shl", "rw:g,r:i", "alu"),
    ("shr", "shr", "rw:g,r:i", "alu"),
    ("shld", "shld", "rw:g,r:g,r:i", "alu"),
    ("shrd", "shrd", "rw:g,r:g,r:i", "alu"),
    ("movq_to_gpr", "vmovq", "w:g,r:v", "move"),
    ("movq_from_gpr", "vmovq", "w:v,r:g", "move"),
    ("pextrq", "vpextrq", "w:g,r:v,r:i", "shuffle"),
    ("pinsrq", "vpinsrq", "w:v,r:v,r:g,r:i", "shuffle"),
]

OPS.update(
    {name: OpSpec(name, mnem, _sig(sig), "gpr", cls) for name, mnem, sig, cls in _GPR_ROWS}
)


# Legacy-encoded (non-VEX) forms for isa = "sse" kernels: two-operand, the
# destination is also the first source, so builders copy before they modify.
_LEGACY_ROWS: list[tuple[str, str, str, str]] = [
    ("sse_load", "movdqu", "w:v,r:m", "load"),
    ("sse_load_aligned", "movdqa", "w:v,r:m", "load"),
    ("sse_load64", "movq", "w:v,r:m", "load"),
    ("sse_store", "movdqu", "w:m,r:v", "store"),
    ("sse_store_aligned", "movdqa", "w:m,r:v", "store"),
    ("sse_store64", "movq", "w:m,r:v", "store"),
    ("sse_copy", "movdqa", "w:v,r:v", "move"),
    ("sse_pxor", "pxor", "rw:v,r:vm", "alu"),
    ("sse_pand", "pand", "rw:v,r:vm", "alu"),
    ("sse_psllq", "psllq", "rw:v,r:i", "alu"),
    ("sse_psrlq", "psrlq", "rw:v,r:i", "alu"),
    ("sse_pslldq", "pslldq", "rw:v,r:i", "shuffle"),
    ("sse_psrldq", "psrldq", "rw:v,r:i", "shuffle"),
    ("sse_pshufd", "pshufd", "w:v,r:vm,r:i", "shuffle"),
    ("sse_palignr", "palignr", "rw:v,r:vm,r:i", "shuffle"),
    ("sse_pclmulqdq", "pclmulqdq", "rw:v,r:vm,r:i", "clmul"),
]

OPS.update(
    {name: OpSpec(name, mnem, _sig(sig), "legacy", cls) for name, mnem, sig, cls in _LEGACY_ROWS}
)


def spec(name: str) -> OpSpec:
    try:
        return OPS[name]
    except KeyError:
        raise KeyError(f"unknown IR opcode {name!r}") from None
