"""The exception hierarchy; every class maps to one exit code of the CLI."""


class KerngenError(Exception):
    """Base of every error kerngen reports to the user (exit code 2)."""

    exit_code = 2


class ParamError(KerngenError):
    """A parameter file breaks a rule; the message names the key and the rule."""

    def __init__(self, source: str, key: str, rule: str):
        self.source, self.key, self.rule = source, key, rule
        super().__init__(f"{source}: {key}: {rule}")


class UsageError(KerngenError):
    """A command-line option or argument breaks a rule; the message names it."""


class VerifyError(KerngenError):
    """The verifier found an input in the contract for which a lane can overflow."""


class AllocationError(KerngenError):
    """Register allocation failed (a generator bug, never a user error)."""


class CheckError(KerngenError):
    """An instruction list breaks a structural rule: an operand that does not
    fit its slot, an access outside its buffer, an instruction the target
    cannot encode (a generator bug, never a user error)."""


class HarnessError(KerngenError):
    """Assembling, compiling or running the C harness failed."""


class BundleError(KerngenError):
    """An emitted bundle cannot be read back: no manifest, or files that do not match it."""
