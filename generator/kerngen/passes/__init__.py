"""Named passes from a builder's instruction list to a verified kernel, in the order `pipeline.PASSES` runs
them: check, legalise, load halves, fold loads, fold broadcasts, fuse bitwise, allocate, promote constants,
check allocated, required ISA, verify, roll, point tables, check encoding, constant time."""
