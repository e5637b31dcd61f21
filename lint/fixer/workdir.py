"""The checkpoint directory as the place `mtplint fix` writes to: one fix at a time, no leftovers,
and every file the plan writes checked before the first write.

An exclusive lock (`.mtplint-fix.lock`, flock) is held from the first lint to the end of the
re-lint, so a second run waits and then plans from what the first one wrote, instead of both
planning from the same state and writing over each other. Temp files of a run that was killed
are removed under that lock, where no other fix can be writing them.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from ..core.errors import BadInput
from ..inventory import fix_files
from ..inventory.fix_files import LOCK_NAME, TEMP_SUFFIX

__all__ = ["LOCK_NAME", "TEMP_SUFFIX", "fix_lock", "reason", "remove_leftovers", "targets"]

_REASONS = {
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted (an immutable or append-only file or directory? see lsattr)",
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EISDIR: "it is a directory",
    errno.ENAMETOOLONG: "the file name is too long",
    errno.ELOOP: "it is a symbolic link",
}


def reason(e: OSError) -> str:
    """The problem in words, with the errno name for searching: 'no space left on the device (ENOSPC)'."""
    name = errno.errorcode.get(e.errno or 0)
    text = _REASONS.get(e.errno or 0) or (e.strerror or str(e) or type(e).__name__)
    return f"{text} ({name})" if name else text


@contextmanager
def fix_lock(root: Path, waiting: Callable[[str], None]) -> Iterator[None]:
    """Hold the checkpoint's fix lock; `waiting` is told once when another run holds it.

    The lock file is removed on release. A waiter that then locks the removed file sees that
    the path no longer names it and locks the new one, so two runs never both hold "the" lock.
    """
    path = root / LOCK_NAME
    told = False
    while True:
        fd = _open_lock(root, path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not told:
                waiting(f"{root}: another mtplint fix (pid {_holder(fd)}) is changing this checkpoint; waiting for it")
                told = True
            fcntl.flock(fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(fd)
            raise
        if _names(path, fd):
            break
        os.close(fd)
    try:
        with suppress(OSError):  # the pid only informs a waiter; a full disk is reported where it matters
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
        fix_files.hold(root)
        yield
    finally:
        fix_files.release(root)
        with suppress(OSError):
            os.unlink(path)  # still locked: nobody can take it between the unlink and the close
        os.close(fd)


def _open_lock(root: Path, path: Path) -> int:
    # O_NOFOLLOW: a checkpoint may ship a `.mtplint-fix.lock` symlink; the pid must not be written
    # through it into some other file.
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as e:
        raise BadInput(
            f"cannot create {LOCK_NAME} in the checkpoint directory: {reason(e)}; mtplint fix writes its "
            "changes beside the files it changes, so the directory must be writable",
            path=str(root),
        ) from e
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
        os.close(fd)
        raise BadInput(f"{LOCK_NAME} is not a plain file of its own; remove it and run again", path=str(path))
    return fd


def _names(path: Path, fd: int) -> bool:
    try:
        return os.stat(path, follow_symlinks=False).st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
        return False


def _holder(fd: int) -> str:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return "unknown"
    return text if text.isdigit() else "unknown"


def remove_leftovers(d: Path) -> list[str]:
    """Delete the temp files a killed fix left in `d` (call only under the lock); returns their names."""
    removed: list[str] = []
    try:
        entries = list(os.scandir(d))
    except OSError:
        return removed
    for entry in entries:
        if not (entry.name.startswith(".") and entry.name.endswith(TEMP_SUFFIX)):
            continue
        try:
            if not entry.is_file(follow_symlinks=False):
                continue
            os.unlink(entry.path)
        except FileNotFoundError:
            continue
        except OSError as e:
            raise BadInput(f"cannot remove a leftover temp file: {reason(e)}", path=entry.path) from e
        removed.append(entry.name)
    return sorted(removed)


def targets(root: Path, names: list[str]) -> dict[str, Path]:
    """The path each planned file is written to, checked before anything is written.

    A name that is a symlink to a file inside the checkpoint is written through: the target
    is replaced and the link stays a link. A link that leads outside the checkpoint, or
    nowhere, is refused: a checkpoint must not make mtplint write elsewhere.
    """
    real_root = root.resolve()
    out = {}
    for name in names:
        path = root / name
        if path.is_symlink():
            try:
                real = path.resolve(strict=True)
            except (OSError, RuntimeError) as e:
                raise BadInput(
                    "is a symlink that leads nowhere; mtplint fix does not write through it", path=str(path)
                ) from e
            if not real.is_relative_to(real_root) or not real.is_file():
                raise BadInput(
                    f"is a symlink to {real}, which is not a file inside the checkpoint directory; mtplint fix "
                    "writes only inside it: replace the link with a copy of the file and run again",
                    path=str(path),
                )
            path = real
        elif path.exists() and not path.is_file():
            raise BadInput("is not a regular file; mtplint fix cannot replace it", path=str(path))
        _check_writable(path)
        out[name] = path
    return out


_FS_IOC_GETFLAGS = 0x80086601
_IMMUTABLE_OR_APPEND = 0x10 | 0x20  # FS_IMMUTABLE_FL | FS_APPEND_FL


def _check_writable(path: Path) -> None:
    # os.access is honest about read-only file systems and immutable inodes even for root;
    # a plain mode of 0444 on the file itself does not stop a rename over it, so only the flag is checked there.
    if not os.access(path.parent, os.W_OK | os.X_OK):
        code = errno.EACCES
        if _read_only_fs(path.parent):
            code = errno.EROFS
        elif _flags(path.parent) & _IMMUTABLE_OR_APPEND:
            code = errno.EPERM
        raise BadInput(f"cannot write in this directory: {reason(OSError(code, ''))}", path=str(path.parent))
    if path.exists() and _flags(path) & _IMMUTABLE_OR_APPEND:
        raise BadInput(
            "cannot replace: the file is immutable or append-only (chattr -i / -a to allow the change)", path=str(path)
        )


def _read_only_fs(d: Path) -> bool:
    try:
        return bool(os.statvfs(d).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _flags(path: Path) -> int:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return 0
    try:
        return int.from_bytes(fcntl.ioctl(fd, _FS_IOC_GETFLAGS, bytes(8))[:4], "little")
    except OSError:  # a file system without inode flags
        return 0
    finally:
        os.close(fd)
