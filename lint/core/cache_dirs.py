"""Where mtplint keeps what it can recompute (probe reports, inventory memos, probe
environments), and how an entry is sealed so that only this user's mtplint could have written it.

`$MTPLINT_CACHE_DIR`, else `$XDG_CACHE_HOME/mtplint`, else `~/.cache/mtplint`. Every stage
takes its own subdirectory from here, so no stage imports another for a path.

A cache entry decides nothing: it only saves time. Whoever can write the cache directory (a
shared cache, one restored by CI from a key prefix) could otherwise set verdicts by writing a
well-formed entry under another key. So every entry read back (write_entry/read_entry) carries
an HMAC-SHA256 over its file name (which holds the key) and its bytes, keyed by a secret kept
outside the cache directory: `$MTPLINT_CACHE_SECRET`, else a 32-byte random file
`$XDG_CONFIG_HOME/mtplint/cache-secret` (`~/.config/...`), created 0600 on first use. An entry
that does not verify is a miss and is removed; without a secret, nothing is cached.

Whatever sits at an entry's name is read as a file mtplint did not create (core.regular_files):
a FIFO, a device or a link planted there is a miss and is removed, never read. A cache directory
others can write is made private (or, not being ours, left unused) and a secret file others can
read is refused: each is said once on stderr, since every lint would otherwise probe again in
silence.

Each stage's directory is kept under a budget (MTPLINT_CACHE_BUDGET, default 2 GiB per
directory): after a write, the entries read or written least recently are removed until the
directory holds at most 80% of it. A hit refreshes its entry's mtime, so the order is use, not
creation. Without it the cache grew with every checkpoint linted (an inventory memo of a large
layout is 23 MB; 2.2 GB here after a week of tests).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import hmac
import os
import secrets
import stat
import sys
import tempfile
import time
from pathlib import Path
from typing import BinaryIO

from .regular_files import UnreadableFile, open_regular
from .sizes import parse_bytes
from .textsafe import terminal_safe

_MAGIC = b"mtplint-sealed-v1\n"
BUDGET_ENV = "MTPLINT_CACHE_BUDGET"
DEFAULT_BUDGET = 2 << 30
_STALE_TMP_SECONDS = 3600  # a write's temporary file older than this belongs to a killed process
_TAG = 32
# The largest entry read back: a probe report of the largest layouts is a few MB compressed.
MAX_ENTRY_BYTES = 1 << 30
_said: set[str] = set()


def _warn_once(line: str) -> None:
    if line in _said:
        return
    _said.add(line)
    from .progress import settle

    settle()  # a live progress line is erased first, so the warning has its own line
    print(f"mtplint: warning: {terminal_safe(line)}", file=sys.stderr, flush=True)


def cache_root() -> Path:
    root = os.environ.get("MTPLINT_CACHE_DIR")
    if root:
        return Path(root).absolute()  # the probe and its workers run from other directories
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mtplint"


def secret_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "mtplint" / "cache-secret"


def secret() -> bytes | None:
    """The key entries are sealed with; None: none can be read or made (caches are off)."""
    given = os.environ.get("MTPLINT_CACHE_SECRET")
    if given:
        return hashlib.sha256(b"mtplint cache secret\0" + given.encode()).digest()
    return _file_secret(str(secret_path()))


@functools.lru_cache(maxsize=4)
def _file_secret(path_str: str) -> bytes | None:
    path = Path(path_str)
    try:
        return _read_secret(path)
    except FileNotFoundError:
        pass
    except OSError:
        return None
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_hex(32).encode())
    except FileExistsError:
        pass  # another mtplint made it first: read that one
    except OSError:
        return None
    try:
        return _read_secret(path)
    except OSError:
        return None


def _read_secret(path: Path) -> bytes | None:
    f, st = _open_secret(path)
    with f:
        # Only a private file of ours: one others can read or write is no secret.
        if st.st_uid != os.getuid() or st.st_mode & 0o077:
            whose = "not yours" if st.st_uid != os.getuid() else f"mode {stat.S_IMODE(st.st_mode):04o}"
            _warn_once(
                f"the cache secret {path} is open to other users ({whose}), so nothing is cached and every "
                "lint probes again; remove it (a private one is made on the next lint) or set MTPLINT_CACHE_SECRET"
            )
            return None
        data = f.read(4096).strip()
    return hashlib.sha256(b"mtplint cache secret\0" + data).digest() if len(data) >= 32 else None


def _open_secret(path: Path) -> tuple[BinaryIO, os.stat_result]:
    try:
        return open_regular(path, nofollow=True)
    except UnreadableFile as exc:
        _warn_once(f"the cache secret {path} is {exc.strerror}: nothing is cached; remove it")
        raise


def _tag(key: bytes, name: str, body: bytes) -> bytes:
    mac = hmac.new(key, digestmod=hashlib.sha256)
    mac.update(name.encode() + b"\0")
    mac.update(body)
    return mac.digest()


def make_dir(d: Path) -> None:
    """A cache directory only this user can read: entries name checkpoints and their paths."""
    root = cache_root()
    if root in d.parents:
        root.mkdir(parents=True, exist_ok=True, mode=0o700)
    d.mkdir(parents=True, exist_ok=True, mode=0o700)


def usable_dir(d: Path) -> bool:
    """Whether entries may be kept in `d` (and the cache root above it): a directory others can
    write is made private when it is ours, and left unused (said once) when it is not."""
    root = cache_root()
    return all(_private(p) for p in ([root] if root in d.parents else []) + [d])


_judged: dict[Path, bool] = {}  # per directory, once a process: the stat is not repeated per entry


def _private(d: Path) -> bool:
    if d not in _judged:
        try:
            st = os.stat(d)
        except FileNotFoundError:
            return True  # made 0700 by make_dir when an entry is first written; judged once it exists
        except OSError:
            return False
        _judged[d] = _judge(d, st)
    return _judged[d]


def _judge(d: Path, st: os.stat_result) -> bool:
    if not stat.S_ISDIR(st.st_mode) or not st.st_mode & 0o022:
        return stat.S_ISDIR(st.st_mode)
    mode = f"{stat.S_IMODE(st.st_mode):04o}"
    if st.st_uid == os.getuid():
        try:
            os.chmod(d, stat.S_IMODE(st.st_mode) & ~0o077)
        except OSError:
            pass
        else:
            _warn_once(f"the cache directory {d} was writable by other users (mode {mode}); made it private (0700)")
            return True
    _warn_once(
        f"the cache directory {d} is writable by other users (mode {mode}) and cannot be made private; "
        "nothing is cached there: set MTPLINT_CACHE_DIR to a directory of your own"
    )
    return False


def write_entry(path: Path, body: bytes) -> None:
    """Store `body` sealed under `path` (atomic); nothing when there is no secret or no room."""
    key = secret()
    if key is None:
        return
    tmp = None
    try:
        if not usable_dir(path.parent):
            return
        make_dir(path.parent)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(_MAGIC + _tag(key, path.name, body) + body)
        os.replace(tmp, path)
        tmp = None
        prune(path.parent, keep=path)
    except OSError:
        pass  # a cache that cannot be written only costs time
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def read_entry(path: Path) -> bytes | None:
    """The body stored under `path` by write_entry with this user's secret; None otherwise (an
    entry that does not verify is removed: it would only cost a read again)."""
    key = secret()
    if key is None or not usable_dir(path.parent):
        return None
    try:
        f, st = open_regular(path, nofollow=True)
        with f:
            inode = st.st_ino
            blob = f.read(MAX_ENTRY_BYTES + 1) if st.st_size <= MAX_ENTRY_BYTES else b""
    except UnreadableFile:
        # A FIFO, a device or a link at an entry's name: no entry of ours, and in the way of one.
        with contextlib.suppress(OSError):
            path.unlink()
        return None
    except OSError:
        return None
    head = len(_MAGIC)
    if blob[:head] == _MAGIC and len(blob) >= head + _TAG:
        body = blob[head + _TAG :]
        if hmac.compare_digest(blob[head : head + _TAG], _tag(key, path.name, body)):
            with contextlib.suppress(OSError):
                os.utime(path)  # used now: the last to be pruned
            return body
    discard(path, inode)
    return None


def discard(path: Path, inode: int) -> None:
    # Only the file that was read: a concurrent lint may have just replaced it with a good entry.
    with contextlib.suppress(OSError):
        if os.stat(path).st_ino == inode:
            path.unlink()


def budget() -> int:
    """Bytes one cache directory may hold: MTPLINT_CACHE_BUDGET, else DEFAULT_BUDGET (an
    unreadable value is said once and the default kept: a cache setting never fails a lint)."""
    given = os.environ.get(BUDGET_ENV)
    if given:
        try:
            return parse_bytes(given)
        except ValueError as why:
            _warn_once(f"{BUDGET_ENV} must be {why}, not {given[:40]!r}; keeping {DEFAULT_BUDGET >> 30} GiB per cache")
    return DEFAULT_BUDGET


def prune(d: Path, keep: Path | None = None) -> None:
    """Remove `d`'s least recently used entries (and stale temporary files) until it holds at
    most 80% of the budget; `keep`, just written, stays."""
    limit = budget()
    entries: list[tuple[float, int, str]] = []
    total = 0
    now = time.time()
    with contextlib.suppress(OSError), os.scandir(d) as it:
        for e in it:
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            if e.name.endswith(".tmp"):
                if now - st.st_mtime > _STALE_TMP_SECONDS:
                    with contextlib.suppress(OSError):
                        os.unlink(e.path)
                continue
            total += st.st_size
            entries.append((st.st_mtime, st.st_size, e.path))
    if total <= limit:
        return
    target = limit * 4 // 5
    for _mtime, size, entry in sorted(entries):
        if total <= target:
            break
        if keep is not None and entry == str(keep):
            continue
        with contextlib.suppress(OSError):
            os.unlink(entry)
            total -= size
