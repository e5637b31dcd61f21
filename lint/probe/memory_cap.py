"""The probe's memory cap: sizes as a user writes them, and what the probe's processes hold.

The cap is enforced from the parent, on the resident memory of the probe child and its
descendants, sampled while it runs. An rlimit was measured and rejected: RLIMIT_AS counts
the address space torch and vLLM reserve without touching (2 GiB for a CPU torch, far
more with CUDA libraries loaded), and RLIMIT_DATA (1.1 GiB of data segments for a
DeepSeek-V4-Flash probe whose resident peak is 0.7 GiB) makes an allocation fail inside
vLLM, where the probe records the MemoryError as a construction or load error of the
checkpoint: a false finding. Killed from outside, the probe is reported for what it is.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from pathlib import Path

from ..core.errors import BadInput
from ..core.sizes import format_size, parse_bytes

ENV = "MTPLINT_PROBE_MEMORY"
DEFAULT_LIMIT = 8 << 30  # a DeepSeek-V4-Flash probe peaks at ~0.7 GiB resident
MIN_LIMIT = 64 << 20  # below this not even the interpreter and vLLM's imports fit


def parse_size(value: object) -> int:
    """Bytes from a size as core.sizes reads it, at least MIN_LIMIT. ValueError says what is
    accepted."""
    size = parse_bytes(value)
    if size < MIN_LIMIT:
        raise ValueError(f"at least {format_size(MIN_LIMIT)}")
    return size


def resolve_limit(setting: object, environ: Mapping[str, str] | None = None) -> int:
    """The cap from --probe-memory / `probe-memory` in the project's settings file, else
    MTPLINT_PROBE_MEMORY, else the default."""
    env = os.environ if environ is None else environ
    for value, source in ((setting, "--probe-memory"), (env.get(ENV) or None, ENV)):
        if value is None:
            continue
        try:
            return parse_size(value)
        except ValueError as why:
            raise BadInput(f"{source} must be {why}, not {str(value)[:40]!r}") from None
    return DEFAULT_LIMIT


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            out += [int(c) for c in (task / "children").read_text().split()]
    except (OSError, ValueError):
        pass
    return out


def _rss_linux(pid: int) -> int:
    total, todo, seen = 0, [pid], set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        try:
            total += int(Path(f"/proc/{p}/statm").read_text().split()[1]) * _PAGE
        except (OSError, ValueError, IndexError):
            continue
        todo += _children(p)
    return total


def tree_rss(pid: int) -> int | None:
    """Resident bytes of a process and its descendants; None where this system offers no
    way to read them (no /proc and no psutil): the cap is then not enforced."""
    if Path("/proc/self/statm").exists():
        return _rss_linux(pid)
    try:
        import psutil
    except ImportError:
        return None
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return None
    total = 0
    for p in procs:
        with contextlib.suppress(psutil.Error):
            total += p.memory_info().rss
    return total
