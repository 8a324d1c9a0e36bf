"""The commands of the `kerngen` command line, one module each."""
