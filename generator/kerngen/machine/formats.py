"""Object formats: how NASM is told to lay out sections and symbols.

One row per format. Templates read these fields and nothing else about the
object file.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ObjectFormat:
    name: str  # NASM's -f value
    symbol_prefix: str  # prepended to every exported symbol (Mach-O: "_")
    rodata: str  # section directive for constant tables, `{align}` their alignment
    text: str  # section directive for code
    typed_symbols: bool  # ELF: `global f:function (size)`, so tools see sizes
    gnu_stack_note: bool  # ELF: mark the stack non-executable
    unwind_tables: bool = False  # COFF64: .pdata/.xdata unwind data for every function with a frame
    # ELF: `endbr64` at every exported entry and a .note.gnu.property marking IBT
    # and SHSTK, so a program built with -fcf-protection keeps CET when it links them
    cet: bool = False
    # how `global` marks a symbol hidden: ELF's `:function hidden` (the macro
    # KERNGEN_VISIBILITY, so an assembly with -DKERNGEN_VISIBILITY=default
    # exports them), Mach-O's `:private_extern`; None where the format has no
    # visibility (COFF: a DLL exports only what its .def file or dllexport names)
    hidden: str | None = None
    # a section of each function and table of its own, named from `{name}` (ELF: .text.NAME, .rodata.NAME), so
    # that a linker collecting unreferenced sections (ld --gc-sections) drops the kernels a program never calls;
    # None: one section for all (Mach-O drops them by `directives`' subsections_via_symbols, ld -dead_strip;
    # COFF's linker removes only COMDAT sections, which NASM does not make)
    function_section: str | None = None
    table_section: str | None = None
    directives: tuple[str, ...] = ()  # lines before the sections


ELF64 = ObjectFormat("elf64", "", "section .rodata align={align}", "section .text", True, True, cet=True,
                     hidden="hidden", function_section="section .text.{name} progbits alloc exec nowrite align=32",
                     table_section="section .rodata.{name} progbits alloc noexec nowrite align={align}")
COFF64 = ObjectFormat("win64", "", "section .rdata rdata align={align}", "section .text", False, False, True)
# NASM puts .rodata in __TEXT,__const (read-only data that needs no relocation) and .text in __TEXT,__text
MACHO64 = ObjectFormat("macho64", "_", "section .rodata align={align}", "section .text", False, False,
                       hidden="private_extern", directives=("subsections_via_symbols",))

