"""Errors that end a run, each carrying its documented exit code.

The CLI turns these into one line on stderr (no traceback unless --debug).
"""

from .textsafe import terminal_safe

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 3


class MtplintError(Exception):
    exit_code = EXIT_INTERNAL

    def __init__(self, message: str, *, path: str | None = None, detail: str | None = None):
        self.path = path
        self.detail = detail
        super().__init__(message)

    def one_line(self) -> str:
        # Paths and messages carry names from the checkpoint: escaped, so they cannot drive the
        # terminal or break the line.
        msg = str(self)
        return terminal_safe(f"{self.path}: {msg}" if self.path else msg)


class BadInput(MtplintError):
    """The artifact or the command line is wrong: exit 2."""

    exit_code = EXIT_BAD_INPUT


class ProbeFailure(MtplintError):
    """The vLLM probe crashed, hung, or could not import vLLM: exit 3."""

    exit_code = EXIT_INTERNAL
