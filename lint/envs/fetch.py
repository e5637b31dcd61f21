"""`--vllm-commit <sha | short sha | branch@date>` of any vLLM commit, fetched on demand from
vLLM's git repository ($MTPLINT_VLLM_GIT, default GitHub's) and provisioned as
`--vllm-source` provisions a checkout's commit (source.from_git).

Two bare repositories in the environment store's cache (hidden from `mtplint env list`):
  .vllm-git/history  commits only (a partial clone, filter tree:0): finds a short id or a
                     branch's commit at a date, and answers `git describe` for the version
                     setuptools-scm would write (a few MB for vLLM's whole history)
  .vllm-git/trees    shallow fetches (depth 1) of the commits probed: their trees, archived

The remote is reached first with `git ls-remote`: when that fails it is a network failure
(ProbeFailure, exit 3, saying what was tried); when it answers and the commit is not there,
the commit does not exist (BadInput, exit 2, naming it).
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import BadInput, ProbeFailure
from . import source, store
from .provision import Say

DEFAULT_REMOTE = "https://github.com/vllm-project/vllm.git"
TIMEOUT_S = 900  # one git command (vLLM's history over a slow link)

_FULL = re.compile(r"^g?([0-9a-f]{40})$")
_SHORT = re.compile(r"^g?([0-9a-f]{7,39})$")
_BRANCH_AT = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._/-]*)@(\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?)$")


def remote() -> str:
    return os.environ.get("MTPLINT_VLLM_GIT", "").strip() or DEFAULT_REMOTE


@dataclass(frozen=True)
class Wanted:
    text: str  # as the user gave it
    sha: str | None = None  # a full id
    prefix: str | None = None  # a short id
    branch: str | None = None
    date: str | None = None


def parse(x: str) -> Wanted | None:
    """A commit id (full or 7+ hex digits) or BRANCH@YYYY-MM-DD[THH:MM]; None when X is neither."""
    text = x.strip()
    if m := _FULL.match(text.lower()):
        return Wanted(text, sha=m.group(1))
    if m := _SHORT.match(text.lower()):
        return Wanted(text, prefix=m.group(1))
    if m := _BRANCH_AT.match(text):
        return Wanted(text, branch=m.group(1), date=m.group(2))
    return None


def cache() -> Path:
    return store.root() / ".vllm-git"


def _git(repo: Path | None, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    # Never a credential prompt: a remote that asks for one is one we cannot reach.
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "true"}
    cmd = ["git", *(["-C", str(repo)] if repo else []), *args]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise ProbeFailure(f"`git {' '.join(args)}` ran past {TIMEOUT_S} s") from None
    if check and proc.returncode != 0:
        raise ProbeFailure(f"`git {' '.join(args)}` failed: {_last_line(proc.stderr)}")
    return proc


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else "(no message)"


def _init(path: Path, url: str, partial: bool) -> Path:
    if not (path / "HEAD").is_file():
        path.mkdir(parents=True, exist_ok=True)
        _git(path, "init", "-q", "--bare")
        _git(path, "remote", "add", "origin", url)
        if partial:
            # A partial clone: later fetches bring commits, never trees or blobs.
            _git(path, "config", "core.repositoryformatversion", "1")
            _git(path, "config", "extensions.partialClone", "origin")
            _git(path, "config", "remote.origin.promisor", "true")
            _git(path, "config", "remote.origin.partialclonefilter", "tree:0")
    _git(path, "remote", "set-url", "origin", url)
    return path


def _reach(url: str, x: str) -> dict[str, str]:
    """The remote's refs (name -> id); a remote that does not answer is exit 3."""
    # Branches and release tags only (GitHub's refs/pull/* are tens of thousands).
    proc = _git(None, "ls-remote", url, "HEAD", "refs/heads/*", "refs/tags/v*", check=False)
    if proc.returncode != 0:
        raise ProbeFailure(
            f"--vllm-commit {x}: could not reach vLLM's git repository: tried `git ls-remote {url}`: "
            f"{_last_line(proc.stderr)}. Set MTPLINT_VLLM_GIT to a reachable mirror, or pass --vllm-source "
            "PATH to a checkout that has the commit"
        )
    refs = {}
    for line in proc.stdout.splitlines():
        oid, _, name = line.partition("\t")
        refs[name.strip()] = oid.strip()
    return refs


def _default_branch(refs: dict[str, str]) -> str:
    head = refs.get("HEAD")
    for name, oid in refs.items():
        if name.startswith("refs/heads/") and oid == head:
            return name.removeprefix("refs/heads/")
    return "main"


def _fetch_history(history: Path, x: str, url: str, refspec: str, what: str) -> None:
    proc = _git(history, "fetch", "-q", "--no-tags", "--filter=tree:0", "origin", refspec, check=False)
    if proc.returncode != 0:
        said = _last_line(proc.stderr)
        if re.search(r"not our ref|couldn't find remote ref|no such remote ref|not a valid|unadvertised", said, re.I):
            raise BadInput(f"--vllm-commit {x}: {what} is not in vLLM's git repository {url} ({said})")
        raise ProbeFailure(f"--vllm-commit {x}: tried `git fetch --filter=tree:0 {url} {refspec}`: {said}")


def _find(wanted: Wanted, refs: dict[str, str], history: Path, url: str) -> str:
    """Fetch the history that holds WANTED and name its commit."""
    x = wanted.text
    if wanted.sha:
        _fetch_history(history, x, url, wanted.sha, f"commit {wanted.sha}")
        sha = wanted.sha
    elif wanted.prefix:
        tips = {oid for name, oid in refs.items() if oid.startswith(wanted.prefix)}
        branch = _default_branch(refs)
        if len(tips) == 1:
            sha = tips.pop()
            _fetch_history(history, x, url, sha, f"commit {sha}")
        else:
            _fetch_history(history, x, url, f"+refs/heads/{branch}:refs/remotes/origin/{branch}", f"branch {branch}")
            found = _git(history, "rev-parse", "--verify", "--quiet", f"{wanted.prefix}^{{commit}}", check=False)
            if found.returncode != 0:
                raise BadInput(
                    f"--vllm-commit {x}: no commit {wanted.prefix} on {branch} of vLLM's git repository {url}"
                    " (for a commit on another branch give its full 40-digit id)"
                )
            sha = found.stdout.strip()
    else:
        assert wanted.branch and wanted.date
        if f"refs/heads/{wanted.branch}" not in refs:
            raise BadInput(f"--vllm-commit {x}: vLLM's git repository {url} has no branch {wanted.branch}")
        ref = f"refs/remotes/origin/{wanted.branch}"
        _fetch_history(history, x, url, f"+refs/heads/{wanted.branch}:{ref}", f"branch {wanted.branch}")
        # The commit the branch pointed at then: its first-parent line, as merges land on it.
        # A bare date means to the end of that day (git would read the current time of day).
        until = wanted.date if len(wanted.date) > 10 else f"{wanted.date} 23:59:59"
        at = _git(history, "rev-list", "-1", "--first-parent", f"--before={until}", ref).stdout.strip()
        if not at:
            raise BadInput(
                f"--vllm-commit {x}: branch {wanted.branch} of {url} has no commit at or before {wanted.date}"
            )
        sha = at
    return sha


def resolve(x: str, say: Say | None = None) -> tuple[str, Path]:
    """The full id of X in the remote, and the history repository that knows it."""
    wanted = parse(x)
    if wanted is None:
        raise BadInput(f"--vllm-commit {x}: neither a commit id nor BRANCH@DATE")
    url = remote()
    history = _init(cache() / "history", url, partial=True)
    if say:
        say(f"fetching vLLM commit {x} from {url} (commit history only)")
    started = time.perf_counter()
    refs = _reach(url, x)
    sha = _find(wanted, refs, history, url)
    tags = [name for name in refs if re.match(r"^refs/tags/v\d[^^]*$", name)]
    if tags:
        # Tags' commits too (commits only), so `git describe` names the version as a build would.
        _git(history, "fetch", "-q", "--no-tags", "--filter=tree:0", "origin", *(f"+{t}:{t}" for t in tags))
    if say:
        say(f"vLLM commit {sha[:12]}: history fetched in {time.perf_counter() - started:.1f} s")
    return sha, history


def provisioned(commit: str | None) -> store.Env | None:
    """The environment already made for the commit whose id starts COMMIT (one only)."""
    if not commit:
        return None
    hits = [e for e in store.all_envs() if str(e.record.get("commit", "")).startswith(commit) and e.complete]
    return hits[0] if len(hits) == 1 else None


def fetched(x: str, say: Say | None = None) -> store.Env:
    """The environment of vLLM commit X, fetched and provisioned on first use."""
    wanted = parse(x)
    done = provisioned(wanted.sha or wanted.prefix) if wanted else None
    if done is not None:
        return done  # no network: a commit id names the same commit forever
    sha, history = resolve(x, say)
    env = store.find(sha[:12])
    if env is not None:
        return env
    url = remote()
    trees = _init(cache() / "trees", url, partial=False)
    if _git(trees, "cat-file", "-e", f"{sha}^{{tree}}", check=False).returncode != 0:
        if say:
            say(f"fetching the tree of vLLM commit {sha[:12]} from {url} (git fetch --depth 1)")
        started = time.perf_counter()
        proc = _git(trees, "fetch", "-q", "--no-tags", "--depth=1", "origin", sha, check=False)
        if proc.returncode != 0:
            raise ProbeFailure(f"--vllm-commit {x}: tried `git fetch --depth 1 {url} {sha}`: {_last_line(proc.stderr)}")
        if say:
            say(f"tree fetched in {time.perf_counter() - started:.1f} s")
    return source.from_git(
        history,
        sha,
        say=say,
        record={"kind": "commit", "remote": url, "asked": x},
        origin=url,
        tree_repo=trees,
    )
