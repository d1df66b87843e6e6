"""The exceptions and warnings of the liger package.

The bottom of the package's import graph: every other module raises these,
and this one imports nothing of liger. `LigerError` is what a liger tool,
the compiler or the cache reports; `LigerValueError` and `LigerTypeError`
are bad arguments of a `liger.ops` call (also a ValueError or TypeError,
as Python code expects); `LigerFallbackWarning` says, once per reason, that
a patched model runs its original code; `LigerCacheWarning` that the
compile cache could not be written where it should be;
`LigerRecompileWarning` that one op keeps loading kernels for new
configurations.
"""


class LigerError(RuntimeError):
    """A liger tool rejected its input or could not be run."""

    def __init__(self, message: str, diagnostics: str = ""):
        super().__init__(message + ("\n" + diagnostics if diagnostics else ""))
        self.diagnostics = diagnostics


class LigerValueError(LigerError, ValueError):
    """An argument of a liger.ops call has a value liger does not take."""


class LigerTypeError(LigerError, TypeError):
    """An argument of a liger.ops call has a type liger does not take."""


class LigerFallbackWarning(UserWarning):
    """A patched module ran its original forward (the message says why)."""


class LigerCacheWarning(UserWarning):
    """The compile cache is not writable: a temporary one is used instead."""


class LigerRecompileWarning(UserWarning):
    """One op has loaded kernels for many configurations in this process
    (each new attribute value or size compiles and keeps another bundle)."""
