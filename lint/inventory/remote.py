"""A checkpoint on the model hub, read without downloading its weights: `hf://ORG/NAME[@REVISION]`.

One request resolves the revision to a commit and lists the repository's files (model_info);
the small JSON files (and configuration code auto_map names) come through huggingface_hub's own
download into its cache, keyed by that commit, so a second lint of the same commit makes no
request for them; each shard's header costs at most two range requests (a speculative first
range, the rest only if the header is longer). Auth, mirrors and the cache are huggingface_hub's:
HF_TOKEN or the stored login, HF_ENDPOINT, HF_HOME / HF_HUB_CACHE. The token goes only into
request headers; no message here is built from anything that could hold it.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.checkpoint_files import TOKENIZER_FILES
from ..core.errors import BadInput
from .fix_files import is_fix_leftover
from .model import TensorInfo
from .safetensors_header import header_length, parse_shard_header
from .shard_source import _is_other_index
from .strict_json import MAX_JSON_BYTES

SCHEME = "hf://"
# What the probe copies into its config directory (lint/probe/runner.py) and what the inventory reads.
SMALL_FILES = ("config.json", "hf_quant_config.json", "generation_config.json", "model.safetensors.index.json")
FIRST_RANGE = 256 * 1024  # covers a ~1,500-tensor shard's header (DeepSeek-V4's are ~200 KB) in one request
WORKERS = 8
TIMEOUT_S = 30.0
_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
_MODULE = re.compile(r"^[A-Za-z_]\w*$")


@dataclass(frozen=True)
class HubSpec:
    repo_id: str
    revision: str | None  # as given; None: the default branch

    def label(self, commit: str) -> str:
        return f"{SCHEME}{self.repo_id}@{commit}"


def hub_spec(path: str | os.PathLike) -> HubSpec | None:
    """The repository a PATH argument names, or None for a local path. click.Path hands the
    argument over as a Path, which folds `hf://` to `hf:/`: both spellings are accepted, and a local
    directory that happens to be so named wins."""
    text = os.fspath(path)
    if text.startswith(SCHEME):
        rest = text[len(SCHEME) :]
    elif text.startswith("hf:/") and not Path(text).exists():
        rest = text[len("hf:/") :]
    else:
        return None
    repo_id, at, revision = rest.partition("@")
    repo_id = repo_id.strip("/")
    if not _REPO_ID.match(repo_id) or ".." in repo_id or (at and not revision):
        raise BadInput(f"not a hub repository: {SCHEME + rest!r} (want hf://ORG/NAME or hf://ORG/NAME@REVISION)")
    return HubSpec(repo_id, revision or None)


@dataclass
class HubRepo:
    """A resolved revision: its commit, its files, the local snapshot directory holding its small files."""

    spec: HubSpec
    commit: str
    files: dict[str, int | None]  # top-level and nested repository files -> size when listed
    endpoint: str
    snapshot: Path | None = None
    requests: int = 0  # made by this module (huggingface_hub's own downloads not counted)
    bytes_read: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def count(self, nbytes: int) -> None:
        with self._lock:
            self.requests += 1
            self.bytes_read += nbytes

    @property
    def label(self) -> str:
        return self.spec.label(self.commit)

    def where(self, name: str) -> str:
        return f"{self.label}/{name}"


def resolve(spec: HubSpec) -> HubRepo:
    """One model_info request: the commit the revision points to and the repository's files."""
    from huggingface_hub import HfApi, constants

    endpoint = constants.ENDPOINT
    try:
        info = HfApi(endpoint=endpoint).model_info(
            spec.repo_id, revision=spec.revision, files_metadata=True, timeout=TIMEOUT_S
        )
    except Exception as e:
        raise _bad_input(e, spec, endpoint) from e
    commit = getattr(info, "sha", None)
    if not isinstance(commit, str) or not re.fullmatch(r"[0-9a-f]{40}", commit):
        raise BadInput(f"{endpoint} gave no commit for {spec.repo_id}@{spec.revision or 'main'}")
    files = {s.rfilename: s.size for s in (info.siblings or [])}
    return HubRepo(spec, commit, files, endpoint)


def fetch_small_files(repo: HubRepo, config: dict[str, Any] | None = None) -> Path:
    """Download the small files the inventory and the probe read into huggingface_hub's cache
    (a commit's files are served from there without a request) and return the snapshot directory."""
    from huggingface_hub import hf_hub_download

    if "config.json" not in repo.files:
        raise BadInput("no config.json in the repository", path=repo.label)
    wanted = [n for n in SMALL_FILES if n in repo.files]
    wanted += [n for n in auto_map_code(config) if n in repo.files and n not in wanted]
    # The tokenizer: vLLM builds a --reasoning-parser over it while it creates the engine
    # config, so the probe reads it as the local checkpoint's (without it: MTP025, not checked).
    wanted += [n for n in sorted(repo.files) if _tokenizer_file(n) and n not in wanted]
    snapshot: Path | None = None
    for name in wanted:
        size = repo.files.get(name)
        if size is not None and size > MAX_JSON_BYTES:
            raise BadInput(f"{size} bytes, over the {MAX_JSON_BYTES}-byte limit for a JSON file", path=repo.where(name))
        try:
            local = Path(
                hf_hub_download(
                    repo.spec.repo_id, name, revision=repo.commit, endpoint=repo.endpoint, etag_timeout=TIMEOUT_S
                )
            )
        except Exception as e:
            raise _bad_input(e, repo.spec, repo.endpoint, repo.where(name)) from e
        snapshot = local.parent
    assert snapshot is not None  # config.json is always wanted
    repo.snapshot = snapshot
    return snapshot


def _tokenizer_file(name: str) -> bool:
    return name in TOKENIZER_FILES or ("/" not in name and name.endswith(".tiktoken"))


def auto_map_code(config: dict[str, Any] | None) -> list[str]:
    """configuration_*.py files config.json's auto_map names ("configuration_mimo.MiMoConfig")."""
    auto_map = (config or {}).get("auto_map")
    if not isinstance(auto_map, dict):
        return []
    out = []
    for ref in auto_map.values():
        for r in ref if isinstance(ref, list) else [ref]:
            module = r.rpartition("--")[2].split(".")[0] if isinstance(r, str) else ""
            if _MODULE.match(module):
                out.append(f"{module}.py")
    return sorted(set(out))


class HubShards:
    """Shard headers of a resolved hub revision, read with range requests."""

    def __init__(self, repo: HubRepo):
        self.repo = repo

    def listing(self) -> set[str]:
        """The names vLLM's glob would find after downloading: top-level, *.safetensors, not hidden."""
        return {n for n in self.repo.files if "/" not in n and n.endswith(".safetensors") and not n.startswith(".")}

    def other_indexes(self) -> list[str]:
        return sorted(n for n in self.repo.files if "/" not in n and _is_other_index(n))

    def fix_leftovers(self) -> list[str]:
        return sorted(n for n in self.repo.files if "/" not in n and is_fix_leftover(n))

    def where(self, name: str) -> str:
        return self.repo.where(name)

    def check_fetched(self, names: list[str]) -> None:
        """The hub serves content, never LFS pointers."""

    def headers(self, names: list[str], strict: bool = True) -> Iterator[tuple[str, dict[str, TensorInfo] | None]]:
        """(name, tensors) in `names` order, fetched WORKERS at a time. strict: the first bad
        header (in order) raises; else it is None."""
        from huggingface_hub.utils import build_hf_headers, get_session

        session = get_session()
        base = build_hf_headers()
        base["Accept-Encoding"] = "identity"
        # Threads only fetch; parsing is CPU work that threads would serialize on the GIL anyway.
        with ThreadPoolExecutor(max_workers=WORKERS) as pool:
            futures = [pool.submit(self._fetch_one, session, base, n) for n in names]
            try:
                for name, fut in zip(names, futures, strict=True):
                    try:
                        size, n, raw = fut.result()
                        yield name, parse_shard_header(size, n, raw, self.where(name), name).tensors
                    except BadInput:
                        if strict:
                            raise
                        yield name, None
            finally:
                for fut in futures:
                    fut.cancel()

    def _fetch_one(self, session: Any, base: dict[str, str], name: str) -> tuple[int, int, bytes]:
        """(file size, header length, header bytes) in one range request, or two for a long header."""
        where = self.where(name)
        first, size = self._range(session, base, name, 0, FIRST_RANGE - 1)
        n = header_length(first[:8], size, where)
        raw = first[8 : 8 + n]
        if len(raw) < n:
            more, _ = self._range(session, base, name, len(first), 8 + n - 1)
            raw += more
            if len(raw) != n:
                raise BadInput(f"truncated: header says {n} bytes but only {len(raw)} could be read", path=where)
        return size, n, raw

    def _range(self, session: Any, base: dict[str, str], name: str, begin: int, end: int) -> tuple[bytes, int]:
        """Bytes [begin, end] of `name` (fewer at its end) and the file's size. Streamed and cut
        off at the range's length, so a server that ignores Range still sends no more than asked."""
        from huggingface_hub import hf_hub_url
        from huggingface_hub.utils import hf_raise_for_status

        url = hf_hub_url(self.repo.spec.repo_id, name, revision=self.repo.commit, endpoint=self.repo.endpoint)
        want = end - begin + 1
        headers = {**base, "Range": f"bytes={begin}-{end}"}
        try:
            with session.stream("GET", url, headers=headers, timeout=TIMEOUT_S, follow_redirects=True) as r:
                if r.status_code == 416:  # an empty file: no byte to give
                    return b"", _total(r.headers.get("Content-Range"), 0) or 0
                hf_raise_for_status(r)
                # 200: the server ignored Range and the whole file follows: read up to the end of
                # the range (a header's bytes, never the tensor data) and hang up.
                skip = 0
                if r.status_code == 206:
                    size = _total(r.headers.get("Content-Range"), None)
                else:
                    size, skip = int(r.headers.get("Content-Length") or -1), begin
                if size is None or size < 0:
                    raise BadInput("the server gave no file size with a range request", path=self.where(name))
                body = bytearray()
                for chunk in r.iter_bytes():
                    body += chunk
                    if len(body) >= skip + want:
                        break
                self.repo.count(len(body))
                return bytes(body[skip : skip + want]), size
        except BadInput:
            raise
        except Exception as e:
            raise _bad_input(e, self.repo.spec, self.repo.endpoint, self.where(name)) from e


def _total(content_range: str | None, default: int | None) -> int | None:
    m = re.fullmatch(r"bytes (?:\d+-\d+|\*)/(\d+)", (content_range or "").strip())
    return int(m.group(1)) if m else default


def _bad_input(e: Exception, spec: HubSpec, endpoint: str, where: str | None = None) -> BadInput:
    """One line for a failed hub request. Built from the exception's type and the repository
    name only: the token never reaches a message."""
    import httpx2
    from huggingface_hub import errors as hf

    repo = spec.repo_id
    login = "log in with `hf auth login` (or `huggingface-cli login`) or set HF_TOKEN"
    has_token = _has_token()
    status = getattr(getattr(e, "response", None), "status_code", None)
    if isinstance(e, hf.GatedRepoError):
        why = f"{repo} is a gated repository: accept its terms on its hub page and " + (
            "use a token of an account that did (the token in use cannot read it)" if has_token else login
        )
    elif isinstance(e, hf.RevisionNotFoundError):
        why = f"revision {spec.revision!r} not found in {repo}"
    elif isinstance(e, hf.RepositoryNotFoundError):
        why = f"repository {repo} not found on {endpoint}" + (
            " (or the token in use cannot read it)" if has_token else f" (if it is private or gated, {login})"
        )
    elif isinstance(e, hf.RemoteEntryNotFoundError):
        why = "listed by the hub but not served (HTTP 404)"
    elif isinstance(e, (hf.OfflineModeIsEnabled, hf.LocalEntryNotFoundError)):
        why = f"cannot reach {endpoint} (HF_HUB_OFFLINE is set, or the network is unreachable), and it is not cached"
    elif isinstance(e, (httpx2.TransportError, ConnectionError, TimeoutError)):
        why = f"cannot reach {endpoint}: {_transport_reason(e)} (network unreachable? HF_ENDPOINT points at a mirror?)"
    elif status is not None:
        why = f"{endpoint} answered HTTP {status}"
    else:
        why = f"hub request failed: {type(e).__name__}"
    return BadInput(why, path=where)


def _transport_reason(e: Exception) -> str:
    import httpx2

    if isinstance(e, httpx2.TimeoutException | TimeoutError):
        return "timed out"
    if isinstance(e, httpx2.ConnectError | ConnectionError):
        return "connection failed"
    return type(e).__name__


def _has_token() -> bool:
    try:
        from huggingface_hub import get_token

        return bool(get_token())
    except Exception:
        return False
