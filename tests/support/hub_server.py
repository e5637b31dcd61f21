"""A model hub on 127.0.0.1 that speaks the protocol as huggingface_hub uses it, serving local
checkpoint directories (sparse fixture builds) and counting every request and byte.

    with HubServer() as hub:
        hub.add("org/name", fixtures.build.cached_build("dsv4-flash-official"))
        env = hub.env(tmp_path)          # HF_ENDPOINT, HF_HOME, ... for a child process
        ...
        hub.stats()                      # {"requests": n, "bytes": b, "ranges": [...]}

Served: GET /api/models/{repo}[/revision/{rev}] (model info, `siblings` with sizes), HEAD and
(ranged) GET /{repo}/resolve/{rev}/{file} with ETag, X-Repo-Commit, Content-Length,
Content-Range; errors as the hub sends them: 404 with X-Error-Code RepoNotFound /
RevisionNotFound / EntryNotFound, 401 RepoNotFound for a private repo without the token
(the hub does not admit the repo exists), 401 GatedRepo for a gated one's files.
Used by tests/inventory/test_remote.py, tests/matrix/test_matrix_remote.py, tests/reporters/test_action.py and
scripts/bench_remote.py; run_cli() and shard_requests() are the tests' shared helpers.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

MTPLINT = [sys.executable, "-m", "mtplint"]
_SKIP = {".fixture.json"}
_CHUNK = 1 << 20


@dataclass
class Repo:
    root: Path
    commit: str
    branches: dict[str, str]
    private: bool = False
    gated: bool = False
    files: list[str] = field(default_factory=list)


@dataclass
class Hit:
    method: str
    path: str
    status: int
    range: str | None
    sent: int
    authorized: bool


class HubServer:
    def __init__(self, token: str = "hf_test_token_0123456789"):
        self.token = token
        self.repos: dict[str, Repo] = {}
        self.log: list[Hit] = []
        self._lock = threading.Lock()
        self.ignore_ranges = False  # answer ranged GETs with the whole file (200), as some servers do
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.daemon_threads = True
        self._httpd.hub = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> HubServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def add(self, repo_id: str, root: Path, *, private: bool = False, gated: bool = False, branch: str = "main") -> str:
        """Serve `root` as repo_id at a commit derived from its file names and sizes; returns the commit."""
        root = Path(root)
        files = sorted(
            str(p.relative_to(root))
            for p in root.rglob("*")
            if p.is_file() and p.name not in _SKIP and ".git" not in p.parts
        )
        h = hashlib.sha1(repo_id.encode())
        for f in files:
            h.update(f"{f}\0{(root / f).stat().st_size}\0".encode())
        commit = h.hexdigest()
        self.repos[repo_id] = Repo(root, commit, {branch: commit}, private, gated, files)
        return commit

    def env(self, home: Path) -> dict[str, str]:
        """The environment a child mtplint needs to use this hub and nothing else."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("HF_") and k != "HUGGING_FACE_HUB_TOKEN"}
        env.update(
            HF_ENDPOINT=self.endpoint,
            HF_HOME=str(home),
            HF_HUB_OFFLINE="0",
            HF_HUB_DISABLE_TELEMETRY="1",
            HF_HUB_DISABLE_PROGRESS_BARS="1",
            HF_HUB_DISABLE_XET="1",
            NO_PROXY="127.0.0.1,localhost",
        )
        return env

    def reset(self) -> None:
        with self._lock:
            self.log.clear()

    def stats(self) -> dict:
        with self._lock:
            log = list(self.log)
        return {
            "requests": len(log),
            "bytes": sum(h.sent for h in log),
            "by_kind": {
                k: sum(1 for h in log if _kind(h) == k)
                for k in ("info", "head", "range", "get", "other")
                if any(_kind(h) == k for h in log)
            },
            "log": log,
        }

    def record(self, hit: Hit) -> None:
        with self._lock:
            self.log.append(hit)


def run_cli(
    hub: HubServer, home: Path, *args: str, token: str | None = None, **env: str
) -> subprocess.CompletedProcess:
    """`mtplint ARGS` in a child process that sees this hub and nothing else (env: more variables)."""
    full = {**hub.env(home), **env}
    if token is not None:
        full["HF_TOKEN"] = token
    return subprocess.run([*MTPLINT, *args], capture_output=True, text=True, env=full, timeout=600)


def shard_requests(stats: dict) -> dict[str, list[Hit]]:
    """stats()'s requests for *.safetensors files, by file name."""
    out: dict[str, list[Hit]] = {}
    for h in stats["log"]:
        if h.path.endswith(".safetensors"):
            out.setdefault(h.path.rsplit("/", 1)[1], []).append(h)
    return out


def _kind(h: Hit) -> str:
    if h.path.startswith("/api/models/"):
        return "info"
    if h.path.startswith("/api/"):
        return "other"  # huggingface_hub's own housekeeping (its agent-harness registry, daily)
    if h.method == "HEAD":
        return "head"
    return "range" if h.range else "get"


_INFO = re.compile(r"^/api/models/(?P<repo>.+?)(?:/revision/(?P<rev>[^/]+))?$")
_RESOLVE = re.compile(r"^/(?P<repo>[^/]+(?:/[^/]+)?)/resolve/(?P<rev>[^/]+)/(?P<file>.+)$")
_RANGE = re.compile(r"^bytes=(\d+)-(\d*)$")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Any  # the ThreadingHTTPServer, with .hub set by HubServer

    def log_message(self, *args: object) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        self._serve(body=True)

    def do_HEAD(self) -> None:
        self._serve(body=False)

    @property
    def hub(self) -> HubServer:
        return self.server.hub

    def _authorized(self) -> bool:
        return self.headers.get("Authorization") == f"Bearer {self.hub.token}"

    def _record(self, path: str, status: int, sent: int) -> None:
        self.hub.record(Hit(self.command, path, status, self.headers.get("Range"), sent, self._authorized()))

    def _error(self, status: int, code: str | None, body: bool, path: str) -> None:
        payload = json.dumps({"error": code or "error"}).encode()
        self.send_response(status)
        if code:
            self.send_header("X-Error-Code", code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if body:
            self.wfile.write(payload)
        self._record(path, status, 0)

    def _serve(self, body: bool) -> None:
        path = urlsplit(self.path).path
        m = _INFO.match(path)
        if m and self.command == "GET":
            return self._info(unquote(m["repo"]), unquote(m["rev"]) if m["rev"] else "main", path)
        m = _RESOLVE.match(path)
        if m:
            return self._resolve(unquote(m["repo"]), unquote(m["rev"]), unquote(m["file"]), body, path)
        self._error(404, None, body, path)

    def _repo(self, repo_id: str, rev: str, body: bool, path: str) -> Repo | None:
        repo = self.hub.repos.get(repo_id)
        if repo is None or (repo.private and not self._authorized()):
            # The hub answers 401 for a private repo without a token, as for no repo at all.
            self._error(401 if not self._authorized() else 404, "RepoNotFound", body, path)
            return None
        if rev != repo.commit and rev not in repo.branches:
            self._error(404, "RevisionNotFound", body, path)
            return None
        return repo

    def _info(self, repo_id: str, rev: str, path: str) -> None:
        repo = self._repo(repo_id, rev, True, path)
        if repo is None:
            return
        siblings = [{"rfilename": f, "size": (repo.root / f).stat().st_size} for f in repo.files]
        payload = json.dumps(
            {
                "id": repo_id,
                "modelId": repo_id,
                "sha": repo.commit,
                "private": repo.private,
                "gated": "auto" if repo.gated else False,
                "siblings": siblings,
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)
        self._record(path, 200, len(payload))

    def _resolve(self, repo_id: str, rev: str, file: str, body: bool, path: str) -> None:
        repo = self._repo(repo_id, rev, body, path)
        if repo is None:
            return
        if repo.gated and not self._authorized():
            self._error(401, "GatedRepo", body, path)
        elif file not in repo.files:
            self._error(404, "EntryNotFound", body, path)
        else:
            self._send_file(repo, file, body, path)

    def _send_file(self, repo: Repo, file: str, body: bool, path: str) -> None:
        target = repo.root / file
        size = target.stat().st_size
        begin, end, status = 0, size - 1, 200
        rng = self.headers.get("Range") if body and not self.hub.ignore_ranges else None
        if rng:
            m = _RANGE.match(rng.strip())
            if m is None:
                return self._error(400, None, body, path)
            begin, end, status = int(m[1]), min(int(m[2]) if m[2] else size - 1, size - 1), 206
            if begin >= size:
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{size}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return self._record(path, 416, 0)
        length = max(0, end - begin + 1)
        self.send_response(status)
        self.send_header("ETag", f'"{hashlib.sha256(f"{repo.commit}/{file}".encode()).hexdigest()}"')
        self.send_header("X-Repo-Commit", repo.commit)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(length if body else size))
        if status == 206:
            self.send_header("Content-Range", f"bytes {begin}-{end}/{size}")
        self.end_headers()
        self._record(path, status, self._copy(target, begin, length) if body else 0)

    def _copy(self, target: Path, begin: int, length: int) -> int:
        sent = 0
        try:
            with open(target, "rb") as f:
                f.seek(begin)
                while sent < length:
                    chunk = f.read(min(_CHUNK, length - sent))
                    if not chunk:
                        break
                    self.wfile.write(chunk)
                    sent += len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        return sent


def serve_forever(dirs: dict[str, Path]) -> None:  # pragma: no cover - manual use
    with HubServer() as hub:
        for repo_id, root in dirs.items():
            hub.add(repo_id, root)
        print(f"HF_ENDPOINT={hub.endpoint}", flush=True)
        threading.Event().wait()


def point_client_at(hub: HubServer, monkeypatch: Any, tmp_path: Path) -> None:
    """huggingface_hub in this process pointed at the local hub, with a cache and no token of its own."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "ENDPOINT", hub.endpoint)
    monkeypatch.setattr(
        constants, "HUGGINGFACE_CO_URL_TEMPLATE", hub.endpoint + "/{repo_id}/resolve/{revision}/{filename}"
    )
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub-cache"))
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "no-token"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
