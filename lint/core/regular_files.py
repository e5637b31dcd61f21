"""Reading a file mtplint did not create: a regular file, within a size, without blocking.

A path from outside (a flag, a settings file, a checkpoint's file, a cache entry others could
have written) may name a device (`/dev/zero` reads without end), a FIFO (open() waits forever
for a writer, read() for data), a directory, or a link to any of those. Every such read goes
through here: the file is opened with O_NONBLOCK (a FIFO's open returns at once), checked with
fstat on the opened descriptor (no window between the check and the read), refused unless it is
a regular file, and read no further than the cap. `nofollow` refuses a link at the last
component too (O_NOFOLLOW), for names mtplint itself made (cache entries, its secret).

Problems are `UnreadableFile`, an OSError whose strerror says what is wrong in a few words, so
callers that already turn an OSError into a one-line message (or a cache miss) need no new case.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO


class UnreadableFile(OSError):
    """Not a regular file, a link where none may be, or over its size cap."""


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def size_text(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} bytes"


def open_regular(path: str | os.PathLike[str], *, nofollow: bool = False) -> tuple[BinaryIO, os.stat_result]:
    """The opened file and its stat; UnreadableFile (or the OSError open gave) otherwise."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if nofollow:
        flags |= os.O_NOFOLLOW
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if nofollow and exc.errno == errno.ELOOP:
            raise UnreadableFile(errno.ELOOP, "a symbolic link, where only a file is taken", str(path)) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            what = _kind(st.st_mode)
            raise UnreadableFile(errno.EINVAL, f"{what}, not a regular file" if what[0] == "a" else what, str(path))
        return os.fdopen(fd, "rb"), st
    except BaseException:
        os.close(fd)
        raise


def read_capped(path: str | os.PathLike[str], cap: int, *, nofollow: bool = False) -> bytes:
    """The bytes of the regular file at `path`, at most `cap` of them (UnreadableFile beyond)."""
    f, st = open_regular(path, nofollow=nofollow)
    with f:
        if st.st_size > cap:
            raise UnreadableFile(errno.EFBIG, f"larger than {size_text(cap)}", str(path))
        data = f.read(cap + 1)  # one byte over: a file that grew since fstat is refused too
    if len(data) > cap:
        raise UnreadableFile(errno.EFBIG, f"larger than {size_text(cap)}", str(path))
    return data


def read_capped_text(path: str | os.PathLike[str], cap: int, *, nofollow: bool = False) -> str:
    """read_capped, decoded as UTF-8 (UnicodeDecodeError, a ValueError, where it is not)."""
    return read_capped(Path(path), cap, nofollow=nofollow).decode("utf-8")
