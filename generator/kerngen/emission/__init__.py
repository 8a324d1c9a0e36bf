"""The emission back end: allocated kernels to assembly text (the printer
and the file frames), the bundle's files (assembly, header, manifest,
dispatch unit, vendoring text) and the static figures."""
