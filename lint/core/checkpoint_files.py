"""The small files a checkpoint ships beside config.json that vLLM reads at start-up: named once
for the parent (which stages them into the probe and keys its caches by them) and the probe
child (which looks for them), since the child imports nothing of mtplint but core."""

from __future__ import annotations

from pathlib import Path

# The files `AutoTokenizer.from_pretrained(model_dir)` reads (fast, slow, tiktoken and
# Mistral formats) and the chat template files vLLM reads beside them.
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "tokenizer.model",
    "vocab.json",
    "merges.txt",
    "vocab.txt",
    "tekken.json",
    "chat_template.jinja",
    "chat_template.json",
)


def tokenizer_files(root: Path) -> list[str]:
    """The tokenizer files the checkpoint at `root` ships."""
    return [n for n in TOKENIZER_FILES if (root / n).exists()] + sorted(p.name for p in root.glob("*.tiktoken"))
