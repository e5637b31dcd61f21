"""The one digest of source files every cache keys by: a renamed, added or edited file changes it,
and only files below the folders named count."""

from __future__ import annotations

from mtplint.core.source_digest import tree_digest


def _digest(root, *args):
    tree_digest.cache_clear()  # the digest is remembered per process: these edits happen inside one
    return tree_digest(root, *args)


def test_an_edit_an_addition_or_a_rename_changes_the_digest(tmp_path):
    (tmp_path / "probe").mkdir()
    (tmp_path / "probe" / "a.py").write_text("A = 1\n")
    before = _digest(tmp_path, ("probe",))
    (tmp_path / "probe" / "a.py").write_text("A = 2\n")
    edited = _digest(tmp_path, ("probe",))
    (tmp_path / "probe" / "b.py").write_text("")
    added = _digest(tmp_path, ("probe",))
    (tmp_path / "probe" / "b.py").rename(tmp_path / "probe" / "c.py")
    renamed = _digest(tmp_path, ("probe",))
    assert len({before, edited, added, renamed}) == 4


def test_only_the_named_folders_and_pattern_count(tmp_path):
    (tmp_path / "probe").mkdir()
    (tmp_path / "probe" / "a.py").write_text("A = 1\n")
    before = _digest(tmp_path, ("probe",))
    (tmp_path / "other.py").write_text("B = 1\n")
    (tmp_path / "probe" / "notes.txt").write_text("x")
    assert _digest(tmp_path, ("probe",)) == before
    assert _digest(tmp_path) != before  # the whole tree sees other.py
    assert _digest(tmp_path, ("probe",), "*.txt") != before
