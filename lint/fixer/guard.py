"""Keep a fix only when the re-lint shows it adds no error.

Before a plan is written, every file it will replace is saved under a temp name beside it (a
hard link, so the very inode comes back with its bytes, mode and mtime; a copy where links are
refused), and every `.mtplint-orig` it will create is noted. A rollback renames the saved files
back and removes what the write created, newest first (config.json before the index before new
shards, so the checkpoint loads at every instant); keeping the write drops the saved files. The
temp names end in TEMP_SUFFIX: a run killed in between leaves the fixed checkpoint plus files
the next fix removes under its lock.
"""

from __future__ import annotations

import errno
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from ..core.findings import Finding
from .apply import backup_path, copy_into, fsync_dir, temp_in, write_order
from .plan import Change, Rendered
from .workdir import TEMP_SUFFIX, targets


@dataclass
class _Saved:
    path: Path  # the file the write replaces or creates (a symlink's target inside the checkpoint)
    saved: Path | None  # its content before the write; None: the write creates it
    backup: Path | None  # the backup the write creates (apply.backup_path); None: none


class Journal:
    """The state of the files one write changes, to put back (restore) or forget (discard)."""

    def __init__(self, entries: list[_Saved]):
        self._entries = entries

    @classmethod
    def save(cls, root: Path, rendered: Rendered, *, backups: bool = True) -> Journal:
        """Save what `apply(root, rendered)` (backups=True) or a plain write of the rendered JSON
        into `root` (backups=False) is about to change. Raises BadInput as apply does, first."""
        order = write_order(rendered)
        entries: list[_Saved] = []
        try:
            for name, path in targets(root, order).items():
                backup = backup_path(root / name) if backups and name in rendered.json else None
                entries.append(_Saved(path=path, saved=_save(path) if path.exists() else None, backup=backup))
        except BaseException:
            cls(entries).discard()
            raise
        return cls(entries)

    def __add__(self, other: Journal) -> Journal:
        return Journal(self._entries + other._entries)

    def restore(self) -> None:
        for e in reversed(self._entries):
            if e.saved is not None:
                os.replace(e.saved, e.path)
            else:
                e.path.unlink(missing_ok=True)
            if e.backup is not None:
                e.backup.unlink(missing_ok=True)
            fsync_dir(e.path.parent)
        self._entries = []

    def discard(self) -> None:
        for e in self._entries:
            if e.saved is not None:
                e.saved.unlink(missing_ok=True)
        self._entries = []


def _save(path: Path) -> Path:
    while True:
        saved = path.with_name(f".{path.name}.{secrets.token_hex(4)}.rollback{TEMP_SUFFIX}")
        try:
            os.link(path, saved)
            return saved
        except FileExistsError:
            continue
        except OSError as e:
            if e.errno not in (errno.EPERM, errno.EXDEV, errno.ENOTSUP, errno.EMLINK, errno.EACCES):
                raise
            return _copy(path)


def _copy(path: Path) -> Path:
    fd, tmp = temp_in(path.parent, path.name + ".rollback", like=path)
    try:
        copy_into(fd, path)
        os.utime(tmp, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns))
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def identity(f: Finding) -> tuple[str, ...]:
    """What makes two runs' findings the same finding: the rule and what it is about, never the
    message text (counts and wording change with unrelated edits)."""
    if f.key:
        return (f.code, f.key)
    loc = f.location
    return (f.code, "", loc.file, loc.tensor or "", loc.config_key or "")


def new_errors(before: list[Finding], after: list[Finding], changes: list[Change]) -> list[Finding]:
    """Errors the re-lint has that the lint before did not, except those the changes announce
    (Change.expects: depth 0 makes vLLM refuse MTP, on purpose)."""
    had = {identity(f) for f in before if f.severity == "error"}
    expected = {code for c in changes for code in c.expects}
    return [f for f in after if f.severity == "error" and identity(f) not in had and f.code not in expected]
