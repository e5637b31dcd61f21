"""Every cache directory stays under MTPLINT_CACHE_BUDGET: after a write, the least recently
used entries go (a hit counts as a use), the entry just written stays, a killed write's
temporary file goes once stale. Real sealed entries through core.cache_dirs, as every stage
writes them; an end-to-end lint keeps its inventory memo under a tiny budget."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mtplint.core import cache_dirs

from fixtures.build import cached_build


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MTPLINT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("MTPLINT_CACHE_SECRET", "budget-test-secret-0123456789abcdef")
    monkeypatch.setenv(cache_dirs.BUDGET_ENV, "10KiB")
    return tmp_path / "cache" / "stage"


def _write(d: Path, name: str, age: float) -> Path:
    path = d / name
    cache_dirs.write_entry(path, os.urandom(3000))
    stamp = time.time() - age
    os.utime(path, (stamp, stamp))
    return path


def test_least_recently_used_entries_go_first_and_a_hit_is_a_use(cache):
    a, b, c = (_write(cache, f"{n}.bin", age) for n, age in (("a", 300), ("b", 200), ("c", 100)))
    assert cache_dirs.read_entry(a) is not None  # a is now the most recently used
    d = _write(cache, "d.bin", 0)  # 4 x ~3 KB > 10 KiB: down to 8 KiB
    left = sorted(p.name for p in cache.iterdir())
    assert left == ["a.bin", "d.bin"], left
    assert cache_dirs.read_entry(d) is not None and not b.exists() and not c.exists()


def test_the_entry_just_written_stays_even_alone_over_budget(cache, monkeypatch):
    monkeypatch.setenv(cache_dirs.BUDGET_ENV, "1KiB")
    old = _write(cache, "old.bin", 50)
    new = _write(cache, "new.bin", 0)
    assert new.exists() and not old.exists()


def test_stale_temporary_files_of_killed_writes_are_removed(cache):
    _write(cache, "a.bin", 10)
    stale, fresh = cache / "x1.tmp", cache / "x2.tmp"
    for p, age in ((stale, 7200), (fresh, 10)):
        p.write_bytes(b"partial")
        os.utime(p, (time.time() - age, time.time() - age))
    _write(cache, "b.bin", 0)
    assert not stale.exists() and fresh.exists()


def test_an_unreadable_budget_is_said_once_and_the_default_kept(cache, monkeypatch, capsys):
    monkeypatch.setenv(cache_dirs.BUDGET_ENV, "lots")
    assert cache_dirs.budget() == cache_dirs.DEFAULT_BUDGET
    assert "MTPLINT_CACHE_BUDGET must be a size" in capsys.readouterr().err


def test_inventory_memos_stay_under_the_budget(tmp_path):
    """Checkpoints read in turn, each in its own process as lints are: with a budget the two
    memos written first fill, the third read prunes the least recently used one (the first),
    and the directory ends under the budget."""
    env = {
        **os.environ,
        "MTPLINT_CACHE_DIR": str(tmp_path / "cache"),
        "MTPLINT_CACHE_SECRET": "budget-test-secret-0123456789abcdef",
    }
    read = "import sys; from mtplint.inventory.checkpoint import load_inventory; load_inventory(sys.argv[1])"
    memos = tmp_path / "cache" / "inventory"
    names: list[set[str]] = []
    for recipe in ("dsv4-flash-official", "glm45-air-bf16-official"):
        subprocess.run([sys.executable, "-c", read, str(cached_build(recipe))], env=env, check=True)
        names.append({p.name for p in memos.glob("*.marshal")} - set().union(*names))
    first, second = (next(iter(n)) for n in names)
    both = sum(p.stat().st_size for p in memos.glob("*.marshal"))
    env[cache_dirs.BUDGET_ENV] = str(both)
    subprocess.run([sys.executable, "-c", read, str(cached_build("mimo-bf16"))], env=env, check=True)
    left = {p.name: p.stat().st_size for p in memos.glob("*.marshal")}
    assert first not in left and second in left and len(left) == 2, left
    assert sum(left.values()) <= both
