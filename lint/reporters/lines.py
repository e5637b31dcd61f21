"""Where a finding points, in the terms of the files a person edits: the line of the exact
entry in config.json / hf_quant_config.json, and paths the way the reader's tools want them
(relative to the working directory for a terminal, to the repository root for code scanning).

Shards are binary: a finding located at a tensor has a file and no line.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

from ..core.errors import BadInput
from ..core.findings import Finding
from ..core.regular_files import read_capped_text

_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()
scanstring = json.decoder.scanstring  # type: ignore[attr-defined]  # (not in the stubs)
# A config.json without a quantization_config leaves the declaration to this file (vLLM's
# ModelOpt fallback); its keys are located there.
_HF_QUANT = "hf_quant_config.json"
MAX_JSON_BYTES = 256 << 20  # the inventory's own limit on a checkpoint's JSON file


def _skip(text: str, i: int) -> int:
    return _WS.match(text, i).end()  # type: ignore[union-attr]


def _member(text: str, i: int, key: str) -> int | None:
    """Offset of the value of `key` in the object starting at text[i] ('{'); the last one when
    the key repeats, as json.load keeps."""
    found = None
    i = _skip(text, i + 1)
    if text.startswith("}", i):
        return None
    while text.startswith('"', i):
        name, i = scanstring(text, i + 1)
        i = _skip(text, i)
        if not text.startswith(":", i):
            return found
        i = _skip(text, i + 1)
        if name == key:
            found = i
        _value, i = _DECODER.raw_decode(text, i)
        i = _skip(text, i)
        if not text.startswith(",", i):
            return found
        i = _skip(text, i + 1)
    return found


def _element(text: str, i: int, wanted: set[str]) -> int | None:
    """Offset of the first string element (in a list) or member name (in an object) of the
    value at text[i] that is one of `wanted`."""
    if text.startswith("{", i):
        j = _skip(text, i + 1)
        while text.startswith('"', j):
            start = j
            name, j = scanstring(text, j + 1)
            if name in wanted:
                return start
            j = _skip(text, j)
            j = _skip(text, j + 1)  # ':'
            _value, j = _DECODER.raw_decode(text, j)
            j = _skip(text, j)
            if not text.startswith(",", j):
                return None
            j = _skip(text, j + 1)
        return None
    if not text.startswith("[", i):
        return None
    j = _skip(text, i + 1)
    while j < len(text) and not text.startswith("]", j):
        value, end = _DECODER.raw_decode(text, j)
        if isinstance(value, str) and value in wanted:
            return j
        j = _skip(text, end)
        if not text.startswith(",", j):
            return None
        j = _skip(text, j + 1)
    return None


def json_line(text: str, key_path: list[str], entries: list[str] | None = None) -> int | None:
    """1-based line of the value at `key_path` in the JSON document `text`, or of the first of
    `entries` inside it (a list element or an object's member name); None when the key path
    is not there. Malformed JSON answers None, never raises."""
    try:
        i = _skip(text, 0)
        for part in key_path:
            if not text.startswith("{", i):
                return None
            found = _member(text, i, part)
            if found is None:
                return None
            i = found
        if entries:
            hit = _element(text, i, {e for e in entries if isinstance(e, str)})
            if hit is not None:
                i = hit
    except (ValueError, IndexError):
        return None
    return text.count("\n", 0, i) + 1


def _entries(f: Finding) -> list[str]:
    # The entry a finding is about: exclusion findings key on it (MTP001) and repeat it as
    # evidence; other config-key findings have none, and point at their key.
    out = [f.evidence.get("matched_as"), f.evidence.get("entry"), f.key]
    return [e for e in out if isinstance(e, str) and e]


class SourceLines:
    """Lines of findings in a checkpoint's JSON files (read once each): a local directory's,
    or a hub revision's as the lint downloaded them into huggingface_hub's cache (read from
    there only: a report never makes a request)."""

    def __init__(self, root: str | os.PathLike | None):
        root = str(root) if root is not None else None
        self.root = Path(root) if root and "://" not in root else None
        self.hub = _hub_revision(root) if root and self.root is None else None
        self._texts: dict[str, str | None] = {}

    def _path(self, file: str) -> Path | None:
        if self.root is not None:
            return self.root / file
        if self.hub is not None:
            from huggingface_hub import try_to_load_from_cache

            if Path(file).is_absolute() or ".." in Path(file).parts:
                return None  # a name from the repository's listing: never a way out of its snapshot

            cached = try_to_load_from_cache(self.hub[0], file, revision=self.hub[1])
            return Path(cached) if isinstance(cached, str) else None
        return None

    def _text(self, file: str) -> str | None:
        if file not in self._texts:
            text = None
            path = self._path(file)
            if path is not None:
                try:
                    text = read_capped_text(path, MAX_JSON_BYTES)
                except (OSError, UnicodeDecodeError, ValueError):
                    text = None
            self._texts[file] = text
        return self._texts[file]

    def locate(self, f: Finding) -> tuple[str, int | None]:
        """(file relative to the checkpoint root, line or None)."""
        loc = f.location
        if not loc.file.endswith(".json"):
            return loc.file, None
        if not loc.config_key:
            text = self._text(loc.file) if loc.tensor else None
            if text is None:
                return loc.file, None
            # A tensor named in a JSON file (the index's weight_map): the line of its name, or
            # of the first name under that module prefix.
            at = text.find(json.dumps(loc.tensor)[:-1])
            return loc.file, (text.count("\n", 0, at) + 1 if at >= 0 else None)
        parts = loc.config_key.split(".")
        candidates = [loc.file] + ([_HF_QUANT] if loc.file == "config.json" else [])
        for file in candidates:
            text = self._text(file)
            if text is None:
                continue
            line = json_line(text, parts, _entries(f))
            if line is not None:
                return file, line
        return loc.file, None


def _hub_revision(root: str) -> tuple[str, str | None] | None:
    """(repository, revision) of an `hf://` root, None for anything else."""
    from ..inventory.remote import hub_spec

    try:
        spec = hub_spec(root)
    except BadInput:
        return None
    return (spec.repo_id, spec.revision) if spec is not None else None


def display_path(root: str, file: str, cwd: str | None = None) -> str:
    """`root/file` relative to the working directory, or absolute when it lies outside it."""
    root = str(root)
    if "://" in root:
        return f"{root.rstrip('/')}/{file}"
    cwd = cwd or os.getcwd()
    full = os.path.normpath(os.path.join(cwd, root, file))
    try:
        rel = os.path.relpath(full, cwd)
    except ValueError:  # another drive (Windows)
        return full
    return full if rel == os.pardir or rel.startswith(os.pardir + os.sep) else rel


def git_toplevel(path: str | os.PathLike) -> str | None:
    directory = Path(path)
    if not directory.is_dir():
        directory = directory.parent
    try:
        out = subprocess.run(
            ["git", "-C", str(directory), "rev-parse", "--show-toplevel"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    top = out.stdout.strip()
    return top if out.returncode == 0 and top else None


def repo_prefix(checkpoint: str | os.PathLike, repo_root: str | os.PathLike | None = None) -> str:
    """The checkpoint directory relative to the repository root, for SARIF and annotations
    ('' when it is the root). The root is `repo_root` when given (the checkpoint must lie
    inside it), else the git top level of the checkpoint, else the working directory when
    the checkpoint lies inside it; otherwise paths stay relative to the checkpoint."""
    ckpt = str(checkpoint)
    if "://" in ckpt:
        return ""
    real = os.path.realpath(ckpt)
    if repo_root is not None:
        rel = _inside(real, os.path.realpath(repo_root))
        if rel is None:
            raise BadInput(f"--repo-root {repo_root}: the checkpoint {ckpt} is not inside it")
        return rel
    for root in (git_toplevel(real), os.getcwd()):
        if root:
            rel = _inside(real, os.path.realpath(root))
            if rel is not None:
                return rel
    return ""


def _inside(path: str, root: str) -> str | None:
    try:
        rel = os.path.relpath(path, root)
    except ValueError:
        return None
    if rel == os.pardir or rel.startswith(os.pardir + os.sep):
        return None
    return "" if rel == os.curdir else rel.replace(os.sep, "/")
