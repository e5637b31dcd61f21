"""Write a rendered plan so that a run killed at any instant leaves a loadable checkpoint.

Every file is replaced atomically (temp file in the same directory, fsync, os.replace,
fsync of the directory), and in dependency order: new shards first (nothing references
them yet), then the index that references them, then the config files. Each existing
file is copied to `<name>.mtplint-orig` before its first change, never over an older copy:
when that name holds other bytes, the current ones go to `<name>.mtplint-orig.N`.

Everything that can be checked before the first write is (workdir.targets: a link out of the
checkpoint, an unwritable directory, an immutable file), so a refused plan changes nothing; a
write that fails anyway (a full disk) is a WriteFailed naming the file and what was written.
"""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

from ..core.errors import BadInput
from .plan import INDEX_NAME, NewTensor, Rendered
from .workdir import TEMP_SUFFIX, reason, targets

BACKUP_SUFFIX = ".mtplint-orig"
CHUNK = 16 * 2**20  # bytes per copy step: a shard is never held in memory


def fsync_dir(d: Path) -> None:
    try:
        fd = os.open(d, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems refuse fsync on directories; the rename is still atomic
    finally:
        os.close(fd)


def temp_in(d: Path, name: str, like: Path | None = None) -> tuple[int, Path]:
    # The temp name ends neither in .json nor .safetensors: a loader globbing the
    # directory after a kill must not pick it up.
    fd, tmp = tempfile.mkstemp(dir=d, prefix=f".{name}.", suffix=TEMP_SUFFIX)
    # mkstemp makes the file 0600; the replacement keeps the mode of the file it replaces
    # (or a new file's usual umask mode), or other users lose read access to the model.
    try:
        mode = (like.stat().st_mode & 0o7777) if like is not None and like.exists() else 0o666 & ~_umask()
        os.fchmod(fd, mode)
    except OSError:
        pass
    return fd, Path(tmp)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = temp_in(path.parent, path.name, like=path)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def copy_into(fd: int, src: Path) -> None:
    """Copy `src` into the open temp file `fd` (closed after) and make it durable."""
    with os.fdopen(fd, "wb") as f, open(src, "rb") as source:
        while chunk := source.read(CHUNK):
            f.write(chunk)
        f.flush()
        os.fsync(f.fileno())


def backup_path(path: Path) -> Path | None:
    """Where keep_original keeps `path`'s current bytes: `<name>.mtplint-orig` while that name
    is free; None when it, or a numbered sibling, already holds exactly these bytes (nothing
    would be lost); else the first free `<name>.mtplint-orig.N`. A backup that is already
    there (an earlier fix's, one shipped with the checkpoint, one planted) is never taken as
    a copy of bytes it does not hold."""
    if not path.exists():
        return None
    first = path.with_name(path.name + BACKUP_SUFFIX)
    candidates = [first, *(path.with_name(f"{first.name}.{n}") for n in range(1, 10_000))]
    current: bytes | None = None
    for candidate in candidates:
        if not os.path.lexists(candidate):
            return candidate
        if candidate.is_symlink() or not candidate.is_file():
            continue  # never read through a link: it only takes its name
        if current is None:
            current = path.read_bytes()
        if _same_bytes(candidate, current):
            return None
    raise OSError(errno.EEXIST, f"{first.name} and 9,999 numbered backups beside it exist")


def _same_bytes(path: Path, data: bytes) -> bool:
    try:
        return path.stat().st_size == len(data) and path.read_bytes() == data
    except OSError:
        return False


def keep_original(path: Path) -> Path | None:
    """Copy `path` to backup_path(path) (None: its bytes are already kept); hard-linking the
    finished copy into place is what makes "never overwrite" atomic."""
    backup = backup_path(path)
    if backup is None:
        return None
    fd, tmp = temp_in(path.parent, backup.name, like=path)
    try:
        copy_into(fd, path)
        while backup is not None:
            try:
                os.link(tmp, backup)
                break
            except FileExistsError:
                backup = backup_path(path)  # another run took that name: kept by it, or the next one
            except OSError as e:
                if e.errno not in (errno.EPERM, errno.EXDEV, errno.ENOTSUP, errno.EMLINK):
                    raise
                if not os.path.lexists(backup):  # no hard links here: fall back to a rename
                    os.replace(tmp, backup)
                    break
                backup = backup_path(path)
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(path.parent)
    return backup


def _header(tensors: list[NewTensor]) -> tuple[bytes, int]:
    import json

    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for t in tensors:
        header[t.name] = {"dtype": t.dtype, "shape": list(t.shape), "data_offsets": [offset, offset + t.nbytes]}
        offset += t.nbytes
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)  # safetensors pads the header to 8 bytes with spaces
    return len(raw).to_bytes(8, "little") + raw, offset


def _copy_range(src: int, begin: int, end: int, dst: int, at: int) -> None:
    """Copy src[begin:end) to dst[at:...). Holes in the source (sparse files) are skipped,
    not read: the destination was sized up front, so skipped bytes read back as zeros."""
    pos = begin
    while pos < end:
        try:
            data = os.lseek(src, pos, os.SEEK_DATA)
        except OSError as e:
            if e.errno == errno.ENXIO:  # only a hole remains
                return
            data = pos  # SEEK_DATA unsupported: treat everything as data
        if data >= end:
            return
        try:
            hole = min(os.lseek(src, data, os.SEEK_HOLE), end)
        except OSError:
            hole = end
        while data < hole:
            n = min(CHUNK, hole - data)
            chunk = os.pread(src, n, data)
            if len(chunk) != n:
                raise OSError(errno.EIO, f"short read: {len(chunk)} of {n} bytes at offset {data}")
            if chunk.count(0) != n:  # an all-zero chunk stays a hole in the copy too
                os.pwrite(dst, chunk, at + data - begin)
            data += n
        pos = hole


def write_shard(root: Path, name: str, tensors: list[NewTensor], path: Path | None = None) -> None:
    path = path or root / name
    head, data_len = _header(tensors)
    fd, tmp = temp_in(path.parent, name)
    try:
        os.ftruncate(fd, len(head) + data_len)
        os.pwrite(fd, head, 0)
        at = len(head)
        for t in tensors:
            src = os.open(root / t.source_file, os.O_RDONLY)
            try:
                _copy_range(src, t.source_begin, t.source_end, fd, at)
            finally:
                os.close(src)
            at += t.nbytes
        os.fsync(fd)
        os.close(fd)
        fd = -1
        os.replace(tmp, path)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def write_order(rendered: Rendered) -> list[str]:
    """Shards, then the index, then everything else (config.json last: it is what a
    loader reads first, so it changes only once what it may refer to is in place)."""
    others = sorted(f for f in rendered.json if f != INDEX_NAME)
    others.sort(key=lambda f: f == "config.json")
    return [*rendered.shards, *([INDEX_NAME] if INDEX_NAME in rendered.json else []), *others]


class WriteFailed(OSError):
    """Writing one file of the plan failed: which file, at which step, and what was written before."""

    def __init__(self, name: str, path: Path, step: str, cause: OSError, written: list[str]):
        super().__init__(cause.errno, cause.strerror or str(cause))
        self.name, self.path, self.step, self.cause, self.written = name, path, step, cause, written

    def __str__(self) -> str:
        return f"{self.path}: {self.step}: {self.cause}"

    def bad_input(self) -> BadInput:
        """The one line for the user: the file, the problem, and the state the checkpoint is in."""
        if self.written:
            state = (
                f"already written: {', '.join(self.written)}; the checkpoint loads as written so far, "
                f"originals are kept as *{BACKUP_SUFFIX}"
            )
        else:
            state = "nothing was changed"
        return BadInput(f"cannot {self.step}: {reason(self.cause)}; {state}", path=str(self.path))


def apply(root: Path, rendered: Rendered) -> list[tuple[str, Path | None]]:
    """Write the plan; returns the files written, in order, each with where its bytes before
    were kept (None: a new file, or its bytes were already kept). Raises BadInput before the
    first write for a plan that cannot be written, and WriteFailed when a write fails."""
    order = write_order(rendered)
    paths = targets(root, order)
    written: list[tuple[str, Path | None]] = []
    for name in order:
        path, step, kept = paths[name], "write the new shard", None
        try:
            if name in rendered.shards:
                write_shard(root, name, rendered.shards[name], path=path)
            else:
                step = f"keep the original as {name}{BACKUP_SUFFIX}"
                kept = keep_original(root / name)
                step = "replace it"
                write_atomic(path, rendered.json[name][1].encode("utf-8"))
        except OSError as e:
            raise WriteFailed(name, path, step, e, [n for n, _ in written]) from e
        written.append((name, kept))
    return written
