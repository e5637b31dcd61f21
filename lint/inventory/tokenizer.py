"""What a checkpoint's tokenizer files say a token id means: its vocabulary (token -> id), its
merges and which ids its special tokens (bos/eos/pad/unk) have, read from the files as shipped.

A separate draft proposes token ids that its target verifies: the two agree on what an id means
only when their vocabularies agree id for id. vLLM never loads the draft's tokenizer (the draft
shares the target's), so nothing at start-up compares them; this reads both sides' files.
Formats read: tokenizer.json (the `tokenizers` library's own), vocab.json + merges.txt +
added_tokens.json (slow BPE), tokenizer_config.json / special_tokens_map.json for the special
tokens. A sentencepiece `tokenizer.model` or tiktoken file is compared by its bytes."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.checkpoint_files import tokenizer_files
from ..core.regular_files import UnreadableFile, read_capped

SPECIAL_ROLES = ("bos", "eos", "pad", "unk")
# A published tokenizer.json is tens of MB at most; a file past this is not one.
_MAX_BYTES = 256 << 20


@dataclass(frozen=True)
class Tokenizer:
    files: tuple[str, ...]  # the tokenizer files the checkpoint ships
    vocab: dict[str, int] | None = None  # token -> id, added tokens included; None: not readable
    merges_digest: str | None = None  # sha256 of the BPE merges in order; None: none shipped
    special: dict[str, str] = field(default_factory=dict)  # role -> token text
    # Files compared by their bytes (sentencepiece, tiktoken): name -> sha256.
    opaque: dict[str, str] = field(default_factory=dict)
    unreadable: tuple[str, ...] = ()  # files that could not be parsed (named in evidence)
    # Ids of added tokens (special markers, reserved slots) rather than the model's own vocabulary.
    added: frozenset[int] = frozenset()

    def special_id(self, role: str) -> int | None:
        token = self.special.get(role)
        return None if token is None or self.vocab is None else self.vocab.get(token)

    @property
    def by_id(self) -> dict[int, str]:
        return {i: t for t, i in (self.vocab or {}).items()}


def read_tokenizer(root: Path) -> Tokenizer | None:
    """The tokenizer the checkpoint at `root` ships; None where it ships no tokenizer file."""
    names = tokenizer_files(root)
    if not names:
        return None
    files = _Files(root, names)
    vocab, merges = _vocab_and_merges(files)
    special: dict[str, str] = {}
    added = set(_added_ids(files))
    for name in ("special_tokens_map.json", "tokenizer_config.json"):  # the config's own entries win
        data = files.json(name)
        if isinstance(data, dict):
            for role in SPECIAL_ROLES:
                token = _token_text(data.get(f"{role}_token"))
                if token is not None:
                    special[role] = token
            decoder = data.get("added_tokens_decoder")
            if isinstance(decoder, dict):
                added.update(int(k) for k in decoder if isinstance(k, str) and k.isdigit())
    opaque = {}
    for name in names:
        if name in ("tokenizer.model", "tekken.json") or name.endswith(".tiktoken"):
            raw = files.raw(name)
            if raw is not None:
                opaque[name] = hashlib.sha256(raw).hexdigest()
    digest = hashlib.sha256(json.dumps(merges, ensure_ascii=False).encode()).hexdigest() if merges else None
    return Tokenizer(tuple(names), vocab, digest, special, opaque, tuple(files.unreadable), frozenset(added))


class _Files:
    """The tokenizer files of one checkpoint, each read once; those that fail are remembered."""

    def __init__(self, root: Path, names: list[str]):
        self.root, self.names = root, names
        self.unreadable: list[str] = []
        self._parsed: dict[str, Any] = {}  # a tokenizer.json is megabytes: parsed once

    def raw(self, name: str) -> bytes | None:
        if name not in self.names:
            return None
        try:
            return read_capped(self.root / name, _MAX_BYTES)
        except (UnreadableFile, OSError):
            self.unreadable.append(name)
            return None

    def json(self, name: str) -> Any:
        if name in self._parsed:
            return self._parsed[name]
        raw = self.raw(name)
        try:
            value = None if raw is None else json.loads(raw)
        except ValueError:
            self.unreadable.append(name)
            value = None
        self._parsed[name] = value
        return value

    def lines(self, name: str) -> list[str] | None:
        raw = self.raw(name)
        try:
            return None if raw is None else raw.decode("utf-8").splitlines()
        except UnicodeDecodeError:
            self.unreadable.append(name)
            return None


def _added_ids(files: _Files) -> list[int]:
    fast = files.json("tokenizer.json")
    out = []
    if isinstance(fast, dict):
        out += [t["id"] for t in fast.get("added_tokens") or [] if isinstance(t, dict) and isinstance(t.get("id"), int)]
    slow = files.json("added_tokens.json")
    if isinstance(slow, dict):
        out += [i for i in slow.values() if isinstance(i, int)]
    return out


def _vocab_and_merges(files: _Files) -> tuple[dict[str, int] | None, list[Any] | None]:
    fast = files.json("tokenizer.json")
    if isinstance(fast, dict):
        vocab, merges = _fast_vocab(fast)
        if vocab is not None:
            return vocab, merges
    slow = files.json("vocab.json")
    if not isinstance(slow, dict):
        return None, None
    vocab = {str(t): i for t, i in slow.items() if isinstance(i, int)}
    added = files.json("added_tokens.json")
    if isinstance(added, dict):
        vocab.update({str(t): i for t, i in added.items() if isinstance(i, int)})
    lines = files.lines("merges.txt")
    # The first line of a GPT-2 merges file is a "#version" header, not a merge.
    merges = [ln for ln in lines or [] if ln and not ln.startswith("#version")]
    return vocab, merges or None


def _fast_vocab(data: dict[str, Any]) -> tuple[dict[str, int] | None, list[Any] | None]:
    model = data.get("model")
    if not isinstance(model, dict):
        return None, None
    raw = model.get("vocab")
    vocab: dict[str, int]
    if isinstance(raw, dict):  # BPE, WordPiece, WordLevel
        vocab = {str(t): i for t, i in raw.items() if isinstance(i, int)}
    elif isinstance(raw, list):  # Unigram: [token, score] in id order
        vocab = {str(e[0]): i for i, e in enumerate(raw) if isinstance(e, list) and e}
    else:
        return None, None
    for added in data.get("added_tokens") or []:
        if isinstance(added, dict) and isinstance(added.get("id"), int) and isinstance(added.get("content"), str):
            vocab[added["content"]] = added["id"]
    merges = model.get("merges")
    return vocab, merges if isinstance(merges, list) and merges else None


def _token_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):  # an AddedToken as saved
        return str(value["content"])
    return None
