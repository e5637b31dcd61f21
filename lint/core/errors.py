"""Errors that end a run, each carrying its documented exit code.

The CLI turns these into one line on stderr (no traceback unless --debug).
"""

from .textsafe import terminal_safe

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 3
EXIT_INTERRUPTED = 130  # Ctrl-C (SIGINT); a SIGTERM or SIGHUP exits 128 + the signal number


class Terminated(BaseException):
    """SIGTERM or SIGHUP arrived: raised from the signal handler so that every cleanup on the
    way out runs (the probe's process group is killed, its temp directory removed). A
    BaseException, like KeyboardInterrupt, so that no `except Exception` swallows it."""

    def __init__(self, signum: int):
        self.signum = signum
        self.exit_code = 128 + signum
        super().__init__(signum)


class MtplintError(Exception):
    exit_code = EXIT_INTERNAL

    def __init__(self, message: str, *, path: str | None = None, detail: str | None = None):
        self.path = path
        self.detail = detail
        super().__init__(message)

    def one_line(self) -> str:
        # Paths and messages carry names from the checkpoint: escaped, so they cannot drive the
        # terminal or break the line; and clipped, so a 1,000-element value or a long key quoted
        # by a validator cannot turn one line into kilobytes.
        msg = clip(str(self), MAX_MESSAGE)
        return terminal_safe(f"{clip(self.path, MAX_PATH)}: {msg}" if self.path else msg)


MAX_MESSAGE, MAX_PATH = 480, 240


def clip(text: str, limit: int) -> str:
    """`text` within `limit` characters: its start and its end, with how much was left out."""
    if len(text) <= limit:
        return text
    tail = limit // 4
    cut = len(text) - (limit - tail - 40)
    return f"{text[: limit - tail - 40]} [... {cut - tail} characters ...] {text[-tail:]}"


class BadInput(MtplintError):
    """The artifact or the command line is wrong: exit 2."""

    exit_code = EXIT_BAD_INPUT


class ProbeFailure(MtplintError):
    """The vLLM probe crashed, hung, or could not import vLLM: exit 3."""

    exit_code = EXIT_INTERNAL
