"""`mtplint fix` never loses a byte (issue #25 items 2-3): a backup that is already there never
stands in for the bytes a write replaces, and metadata.total_size is settled once over the
final weight_map, so two fixes naming the same tensors (the repair of a killed fix) count them
once. Plain files and the fixer's own functions: no probe."""

from __future__ import annotations

import json
from pathlib import Path

from mtplint.fixer import alias_head_embed, index_shards
from mtplint.fixer.apply import BACKUP_SUFFIX, apply, backup_path
from mtplint.fixer.guard import Journal
from mtplint.fixer.plan import INDEX_NAME, Change, NewTensor, Rendered, render, settle_total_size

from fixtures.sparse import write_sparse


def _rendered(**files: str) -> Rendered:
    return Rendered(json={n: (None, text) for n, text in files.items()}, shards={})


def _names(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir())


def test_a_backup_with_other_bytes_never_stands_in_for_the_current_file(tmp_path):
    (tmp_path / "config.json").write_text('{"current": 1}\n')
    planted = tmp_path / f"config.json{BACKUP_SUFFIX}"
    planted.write_text('{"shipped": "by someone else"}\n')
    written = apply(tmp_path, _rendered(**{"config.json": '{"fixed": 1}\n'}))
    kept = tmp_path / f"config.json{BACKUP_SUFFIX}.1"
    assert written == [("config.json", kept)]
    assert kept.read_text() == '{"current": 1}\n'  # the bytes the write replaced
    assert planted.read_text() == '{"shipped": "by someone else"}\n'  # untouched
    assert (tmp_path / "config.json").read_text() == '{"fixed": 1}\n'


def test_a_backup_holding_the_same_bytes_is_enough(tmp_path):
    (tmp_path / "config.json").write_text('{"current": 1}\n')
    (tmp_path / f"config.json{BACKUP_SUFFIX}").write_text('{"current": 1}\n')
    assert apply(tmp_path, _rendered(**{"config.json": '{"fixed": 1}\n'})) == [("config.json", None)]
    assert _names(tmp_path) == ["config.json", f"config.json{BACKUP_SUFFIX}"]


def test_every_state_a_series_of_fixes_replaced_is_kept(tmp_path):
    (tmp_path / "config.json").write_text("0\n")
    for step in ("1\n", "2\n", "3\n"):
        apply(tmp_path, _rendered(**{"config.json": step}))
    kept = sorted(p.read_text() for p in tmp_path.glob(f"config.json{BACKUP_SUFFIX}*"))
    assert kept == ["0\n", "1\n", "2\n"]


def test_a_planted_backup_symlink_is_neither_read_nor_written_through(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    d = tmp_path / "ckpt"
    d.mkdir()
    (d / "config.json").write_text("{}\n")
    (d / f"config.json{BACKUP_SUFFIX}").symlink_to(victim)
    assert backup_path(d / "config.json") == d / f"config.json{BACKUP_SUFFIX}.1"
    apply(d, _rendered(**{"config.json": '{"a": 1}\n'}))
    assert victim.read_text() == "precious"
    assert (d / f"config.json{BACKUP_SUFFIX}.1").read_text() == "{}\n"


def test_a_rollback_removes_the_numbered_backup_it_made(tmp_path):
    (tmp_path / "config.json").write_text('{"current": 1}\n')
    (tmp_path / f"config.json{BACKUP_SUFFIX}").write_text("older\n")
    rendered = _rendered(**{"config.json": '{"fixed": 1}\n'})
    journal = Journal.save(tmp_path, rendered)
    apply(tmp_path, rendered)
    assert (tmp_path / f"config.json{BACKUP_SUFFIX}.1").exists()
    journal.restore()
    assert _names(tmp_path) == ["config.json", f"config.json{BACKUP_SUFFIX}"]
    assert (tmp_path / "config.json").read_text() == '{"current": 1}\n'


# ---- metadata.total_size ------------------------------------------------------------------------


def _killed_alias_fix(tmp_path: Path) -> Path:
    """A DeepSeek-V4 checkpoint as a killed alias-mtp-head-embed run leaves it: the alias shard
    written, the index not yet (MTP015 then reports the shard as unindexed)."""
    d = tmp_path / "ckpt"
    d.mkdir()
    write_sparse(
        d / "model-00001-of-00001.safetensors", [("head.weight", "BF16", (64, 8)), ("mtp.0.norm", "BF16", (8,))]
    )
    write_sparse(d / alias_head_embed.SHARD, [("mtp.0.head.weight", "BF16", (64, 8))])
    index = {
        "metadata": {"total_size": 64 * 8 * 2 + 8 * 2},
        "weight_map": {
            "head.weight": "model-00001-of-00001.safetensors",
            "mtp.0.norm": "model-00001-of-00001.safetensors",
        },
    }
    (d / INDEX_NAME).write_text(json.dumps(index, indent=2) + "\n")
    return d


def test_two_fixes_adding_the_same_shard_count_its_bytes_once(tmp_path):
    d = _killed_alias_fix(tmp_path)
    alias = NewTensor("mtp.0.head.weight", "BF16", (64, 8), "model-00001-of-00001.safetensors", 0, 1024)
    # What each fix plans for the index in that state: the unindexed-shard fix names the shard's
    # tensor, the alias fix maps the alias it (re)writes; both to the same shard.

    def maps_the_alias(fix: str) -> Change:
        return Change(
            fix=fix,
            file=INDEX_NAME,
            summary="",
            edit=lambda doc: doc["weight_map"].__setitem__(alias.name, alias_head_embed.SHARD),
            tensor_bytes={alias.name: alias.nbytes},
        )

    unindexed, aliased = maps_the_alias(index_shards.ID), maps_the_alias(alias_head_embed.ID)
    rendered = render(d, [unindexed, aliased])
    index = json.loads(rendered.json[INDEX_NAME][1])
    assert index["metadata"]["total_size"] == 64 * 8 * 2 + 8 * 2 + 1024  # was + 2 x 1024


def test_total_size_follows_the_final_map_and_keeps_the_publishers_own_base():
    before = {"metadata": {"total_size": 1000}, "weight_map": {"a": "s1", "b": "s1"}}
    after = {"metadata": {"total_size": 1000}, "weight_map": {"a": "s1", "c": "s2"}}
    settle_total_size(before, after, {"b": 10, "c": 30})
    assert after["metadata"]["total_size"] == 1020  # 1000 - b + c, whatever a's size


def test_total_size_is_left_alone_when_a_size_is_unknown_or_there_was_none():
    before = {"metadata": {"total_size": 1000}, "weight_map": {"a": "s1"}}
    after = {"metadata": {"total_size": 1000}, "weight_map": {"a": "s1", "c": "s2"}}
    settle_total_size(before, after, {})
    assert after["metadata"]["total_size"] == 1000
    before, after = {"metadata": {}, "weight_map": {}}, {"metadata": {}, "weight_map": {"c": "s2"}}
    settle_total_size(before, after, {"c": 30})
    assert after["metadata"] == {}


def test_a_new_index_sums_its_whole_map():
    after = {"metadata": {"total_size": 0}, "weight_map": {"a": "s1", "c": "s2"}}
    settle_total_size({}, after, {"a": 7, "c": 30})
    assert after["metadata"]["total_size"] == 37
