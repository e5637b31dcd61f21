"""Git LFS pointer files where a clone's shards should be: a clone made without `git lfs pull` (or
with GIT_LFS_SKIP_SMUDGE=1) holds ~130-byte text stubs under the shard names. Read as safetensors
they declare a header of ~2.3e18 bytes; this names them instead, all of them at once."""

from __future__ import annotations

import configparser
import re
from pathlib import Path
from urllib.parse import urlsplit

from ..core.errors import BadInput
from ..core.regular_files import open_regular
from .safetensors_header import LFS_POINTER_PREFIX

POINTER_MAX_BYTES = 1024  # the spec's upper bound on a pointer file
_SHOWN = 3
_REPO_ID = re.compile(r"^[\w.-]+/[\w.-]+$")
_HUB_HOSTS = ("huggingface.co", "hf.co")


def is_pointer(path: Path) -> bool:
    """A regular file under 1024 bytes starting with the LFS spec line. Anything unreadable is not
    one: the header reader reports it."""
    try:
        f, st = open_regular(path)  # a FIFO swapped in after a stat must not hang the read
        with f:
            return st.st_size < POINTER_MAX_BYTES and f.read(len(LFS_POINTER_PREFIX)) == LFS_POINTER_PREFIX
    except (OSError, ValueError):
        return False


def raise_for_pointers(root: Path, shards: list[str]) -> None:
    """BadInput naming the shards that are LFS pointers (count and the first few), if any."""
    pointers = [s for s in shards if is_pointer(root / s)]
    if not pointers:
        return
    repo = hub_repo_of_clone(root)
    lint_remote = f"mtplint hf://{repo}" if repo else "mtplint hf://ORG/NAME"
    how = f"run `git lfs pull` in the clone, or lint the repository without downloading it: {lint_remote}"
    if len(pointers) == 1 and len(shards) == 1:
        what = f"a Git LFS pointer file, not the shard: the content was not fetched ({how})"
        raise BadInput(what, path=str(root / pointers[0]))
    shown = ", ".join(pointers[:_SHOWN]) + (f" and {len(pointers) - _SHOWN} more" if len(pointers) > _SHOWN else "")
    which = "all" if len(pointers) == len(shards) else f"{len(pointers)} of"
    are = "is a Git LFS pointer file, not its" if len(pointers) == 1 else "are Git LFS pointer files, not their"
    raise BadInput(
        f"{which} {len(shards)} shards {are} content ({shown}): the content was not fetched ({how})",
        path=str(root),
    )


def hub_repo_of_clone(root: Path) -> str | None:
    """ORG/NAME when `root` is a clone of a hub repository (its .git/config's origin URL)."""
    try:
        parser = configparser.ConfigParser(strict=False, interpolation=None)
        if not parser.read(root / ".git" / "config", encoding="utf-8"):
            return None
        url = parser.get('remote "origin"', "url", fallback="")
    except (configparser.Error, OSError, UnicodeDecodeError):
        return None
    url = url.strip()
    if url.startswith("git@"):
        host, _, path = url[4:].partition(":")
    else:
        try:
            parts = urlsplit(url)  # never echoed: the URL may carry credentials
            host, path = parts.hostname or "", parts.path
        except ValueError:
            return None
    path = path.strip("/").removesuffix(".git").removeprefix("models/")
    return path if host in _HUB_HOSTS and _REPO_ID.match(path) else None
