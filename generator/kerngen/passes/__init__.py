"""Named passes from a builder's instruction list to a verified kernel:
check, legalise, allocate, check, required ISA, verify (see `pipeline`)."""
