"""The Python side of the C test and bench harness: builds, runs, parses (no maths)."""
