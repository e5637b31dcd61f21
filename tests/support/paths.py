"""Where the tests' data lives: every test resolves paths from here, not from its own file."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
ROOT = TESTS.parent  # the repository
DATA = TESTS / "data"
CASES = TESTS / "cases"
RECORDED = TESTS / "recorded"
SERVE_CORPUS = TESTS / "serve_corpus"
ENGINE_OUTCOMES = TESTS / "engine_outcomes.json"
SCRIPTS = ROOT / "scripts"
SHARED = ROOT.parent / "shared"  # ../shared beside the checkout (seeds, real checkpoints)
