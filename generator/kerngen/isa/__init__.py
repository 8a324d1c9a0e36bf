"""The instruction layer: operands and instructions as data, the op table,
register allocation, SSE legalisation and the NASM printer."""
