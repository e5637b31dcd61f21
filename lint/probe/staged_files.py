"""The checkpoint's small files that travel into the probe beside config.json, and their digests.

vLLM reads them while it builds the engine configuration: generation_config.json (sampling
defaults), hf_quant_config.json (ModelOpt), the tokenizer where a start-up step needs one (a
reasoning parser), and with --trust-remote-code the configuration code auto_map names
(configuration_*.py, and whatever it imports from the same directory). One list
decides both what is staged and what keys the probe cache and the verdict cache, so a file
added to the staging is never left out of a key: an edit to any of them (a same-size edit with
its mtime restored included) must be a miss. Shard headers are keyed by the inventory.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from ..core.checkpoint_files import tokenizer_files
from ..core.errors import BadInput
from ..core.regular_files import UnreadableFile, read_capped

EXTRAS = ("hf_quant_config.json", "generation_config.json")
# Configuration code and generation configs are kilobytes; a file past this is no config.
MAX_STAGED_BYTES = 64 << 20


def names(root: Path, trust_remote_code: bool) -> list[str]:
    """The files of `root` staged for the probe (besides config.json and shard headers)."""
    out = [n for n in EXTRAS if (root / n).exists()] + tokenizer_files(root)
    if trust_remote_code:
        out += sorted(p.name for p in root.glob("*.py"))
    return out


def read(root: Path, name: str) -> bytes:
    """A staged file's bytes: a regular file within MAX_STAGED_BYTES, else bad input (one line)."""
    try:
        return read_capped(root / name, MAX_STAGED_BYTES)
    except UnreadableFile as exc:
        raise BadInput(f"{exc.strerror}; vLLM reads this file while it starts", path=str(root / name)) from None
    except OSError as exc:
        raise BadInput(f"cannot read: {exc.strerror or exc}", path=str(root / name)) from None


def digests(root: Path, trust_remote_code: bool) -> dict[str, str]:
    """name -> sha256 of the bytes of each file names() stages."""
    return {n: hashlib.sha256(read(root, n)).hexdigest() for n in names(root, trust_remote_code)}
