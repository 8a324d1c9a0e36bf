"""What code is emitted for: instruction sets, calling conventions, object
formats (combined in a `Target`), and the printers and file frames that
turn allocated kernels into assembly text."""
