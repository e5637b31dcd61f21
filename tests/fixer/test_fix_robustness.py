"""`mtplint fix` against a hostile or failing file system: a read-only directory, an immutable file,
a full disk, temp files left by a killed run, a symlinked config.json and a concurrent run.

Each failure is exit 2 with one line naming the path and the problem, and leaves the checkpoint as
it was (or as far as the ordered, atomic writes got). Faults are real where the sandbox allows it
(read-only bind mounts, tmpfs, chattr need root); otherwise the errno is injected at the
system call that would raise it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from mtplint.core.errors import BadInput
from mtplint.fixer.apply import BACKUP_SUFFIX, WriteFailed, apply
from mtplint.fixer.plan import INDEX_NAME, Change, render
from mtplint.fixer.workdir import LOCK_NAME, fix_lock, remove_leftovers

from fixtures.build import cached_build
from fixtures.sparse import write_sparse

ROOT = os.geteuid() == 0


# ---- helpers ------------------------------------------------------------------------------------


def small_checkpoint(d: Path) -> Path:
    """config.json + an index + one sparse shard: enough for apply() (no probe needed)."""
    d.mkdir(parents=True, exist_ok=True)
    (d / "config.json").write_text(json.dumps({"model_type": "llama", "num_nextn_predict_layers": 0}, indent=2) + "\n")
    write_sparse(d / "model-00001-of-00001.safetensors", [("w", "BF16", (4, 4))])
    (d / INDEX_NAME).write_text(
        json.dumps({"metadata": {}, "weight_map": {"w": "model-00001-of-00001.safetensors"}}, indent=2) + "\n"
    )
    return d


def two_file_plan(d: Path):
    """Edits of the index and of config.json: written index first, config.json last."""
    changes = [
        Change(fix="t", file=INDEX_NAME, summary="", edit=lambda doc: doc["metadata"].__setitem__("edited", 1)),
        Change(
            fix="t", file="config.json", summary="", edit=lambda doc: doc.__setitem__("num_nextn_predict_layers", 1)
        ),
    ]
    rendered = render(d, changes)
    assert set(rendered.json) == {INDEX_NAME, "config.json"}
    return rendered


def contents(d: Path) -> dict[str, object]:
    """Small files by content; sparse shards (GBs of holes) by size, mtime and inode."""
    out: dict[str, object] = {}
    for p in sorted(d.iterdir()):
        if p.is_file() and not p.is_symlink():
            st = p.stat()
            out[p.name] = p.read_bytes() if st.st_size < 2**20 else (st.st_size, st.st_mtime_ns, st.st_ino)
    return out


def one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    assert "Traceback" not in text
    return lines[0]


def _mount(*args: str) -> bool:
    return subprocess.run(["mount", *args], capture_output=True).returncode == 0


@contextlib.contextmanager
def read_only(d: Path):
    """Make `d` unwritable for this process: chmod for a normal user; for root (whom chmod does not
    stop) a read-only bind mount of the directory onto itself."""
    if not ROOT:
        d.chmod(0o555)
        try:
            yield
        finally:
            d.chmod(0o755)
        return
    if not _mount("--bind", str(d), str(d)):
        pytest.skip("running as root and mount is not permitted here: no way to make a directory read-only")
    try:
        if not _mount("-o", "remount,ro,bind", str(d)):
            pytest.skip("cannot remount the bind mount read-only here")
        yield
    finally:
        subprocess.run(["umount", str(d)], capture_output=True)


@contextlib.contextmanager
def immutable(p: Path):
    if subprocess.run(["chattr", "+i", str(p)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not available here (needs root and a file system with inode flags)")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(p)], capture_output=True)


@contextlib.contextmanager
def small_tmpfs(d: Path, size: str):
    d.mkdir(parents=True, exist_ok=True)
    if not ROOT or not _mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(d)):
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield d
    finally:
        subprocess.run(["umount", str(d)], capture_output=True)


def fill(d: Path) -> None:
    """Use up every free block of d's file system."""
    fd = os.open(d / "filler", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"\1" * 4096)
    finally:
        os.close(fd)
    assert os.statvfs(d).f_bavail == 0


# ---- read-only directory ------------------------------------------------------------------------


def test_apply_in_a_read_only_directory_is_refused_before_any_write(tmp_path):
    d = small_checkpoint(tmp_path / "ckpt")
    rendered = two_file_plan(d)
    before = contents(d)
    with read_only(d), pytest.raises(BadInput) as exc:
        apply(d, rendered)
    assert exc.value.path == str(d)
    assert "cannot write in this directory" in str(exc.value)
    assert "read-only" in str(exc.value) or "permission denied" in str(exc.value)
    assert contents(d) == before


def _fix_argv() -> list[str]:
    return [sys.executable, "-m", "mtplint", "fix"]


def test_fix_cli_on_a_read_only_directory_is_exit_2_before_probing(tmp_path):
    d = small_checkpoint(tmp_path / "ckpt")
    with read_only(d):
        started = time.monotonic()
        proc = subprocess.run([*_fix_argv(), str(d)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    line = one_line(proc.stderr)
    assert str(d) in line and LOCK_NAME in line
    assert "the file system is read-only (EROFS)" in line or "permission denied (EACCES)" in line
    assert time.monotonic() - started < 60  # refused up front, not after a probe
    assert not (d / LOCK_NAME).exists()


# ---- immutable file -----------------------------------------------------------------------------


def test_immutable_config_is_refused_before_the_index_is_written(tmp_path):
    d = small_checkpoint(tmp_path / "ckpt")
    rendered = two_file_plan(d)
    before = contents(d)
    with immutable(d / "config.json"), pytest.raises(BadInput) as exc:
        apply(d, rendered)
    assert exc.value.path == str(d / "config.json")
    assert "immutable" in str(exc.value)
    assert contents(d) == before  # the index (written before config.json) was not touched either


def test_a_file_that_turns_unwritable_mid_plan_is_named_with_what_was_written(tmp_path, monkeypatch):
    """Between the check and the write (chattr by someone else): the rename into place fails with
    EPERM; the error names the file and says the index was already written."""
    d = small_checkpoint(tmp_path / "ckpt")
    rendered = two_file_plan(d)
    real_replace = os.replace

    def replace(src, dst, *a, **kw):
        if Path(dst).name == "config.json":
            raise PermissionError(errno.EPERM, "Operation not permitted", str(dst))
        return real_replace(src, dst, *a, **kw)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(WriteFailed) as exc:
        apply(d, rendered)
    bad = exc.value.bad_input()
    line = bad.one_line()
    assert line.startswith(f"{d / 'config.json'}: cannot replace it: operation not permitted")
    assert "(EPERM)" in line and f"already written: {INDEX_NAME}" in line
    assert bad.exit_code == 2
    assert not [p for p in d.iterdir() if p.name.endswith(".mtplint-tmp")]


# ---- full disk ----------------------------------------------------------------------------------


def test_full_disk_names_the_file_and_leaves_no_temp_file(tmp_path):
    with small_tmpfs(tmp_path / "fs", "256k") as fs:
        d = small_checkpoint(fs / "ckpt")
        rendered = two_file_plan(d)
        before = contents(d)
        fill(fs)
        with pytest.raises(WriteFailed) as exc:
            apply(d, rendered)
        assert exc.value.errno == errno.ENOSPC
        line = exc.value.bad_input().one_line()
        assert str(d / INDEX_NAME) in line and "no space left on the device (ENOSPC)" in line
        assert "nothing was changed" in line
        assert contents(d) == before
        assert not [p for p in d.iterdir() if p.name.endswith(".mtplint-tmp")]


def test_enospc_at_fsync_names_the_file(tmp_path, monkeypatch):
    """Where no tmpfs can be mounted: a delayed-allocation file system reports ENOSPC at fsync."""
    d = small_checkpoint(tmp_path / "ckpt")
    rendered = two_file_plan(d)
    before = contents(d)
    monkeypatch.setattr(os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(errno.ENOSPC, "No space left")))
    with pytest.raises(WriteFailed) as exc:
        apply(d, rendered)
    line = exc.value.bad_input().one_line()
    assert str(d / INDEX_NAME) in line and "(ENOSPC)" in line and "keep the original" in line
    assert contents(d) == before


# ---- leftover temp files ------------------------------------------------------------------------


def test_leftover_temp_files_are_removed_and_named(tmp_path):
    d = small_checkpoint(tmp_path / "ckpt")
    leftovers = [".config.json.k2j3h4.mtplint-tmp", ".model-mtp-aliases.safetensors.x.mtplint-tmp"]
    for name in leftovers:
        (d / name).write_text("partial")
    (d / "keep.mtplint-tmp").write_text("not ours: no leading dot")
    (d / ".dir.mtplint-tmp").mkdir()
    (d / ".link.mtplint-tmp").symlink_to(d / "config.json")
    assert remove_leftovers(d) == sorted(leftovers)
    assert not any((d / n).exists() for n in leftovers)
    assert (d / "keep.mtplint-tmp").exists() and (d / ".dir.mtplint-tmp").is_dir()
    assert (d / ".link.mtplint-tmp").is_symlink() and (d / "config.json").exists()
    assert remove_leftovers(d) == []


# ---- symlinked config.json ----------------------------------------------------------------------


def test_symlinked_config_inside_the_checkpoint_is_written_through(tmp_path):
    d = small_checkpoint(tmp_path / "ckpt")
    (d / "configs").mkdir()
    (d / "config.json").rename(d / "configs" / "v2.json")
    (d / "config.json").symlink_to("configs/v2.json")
    old = (d / "configs" / "v2.json").read_text()
    rendered = two_file_plan(d)
    apply(d, rendered)
    assert (d / "config.json").is_symlink() and os.readlink(d / "config.json") == "configs/v2.json"
    assert json.loads((d / "configs" / "v2.json").read_text())["num_nextn_predict_layers"] == 1
    backup = d / f"config.json{BACKUP_SUFFIX}"
    assert not backup.is_symlink() and backup.read_text() == old
    assert not [p for p in (d / "configs").iterdir() if p.name.endswith(".mtplint-tmp")]


@pytest.mark.parametrize("where", ["outside", "dangling", "directory"])
def test_symlinked_config_leading_out_of_the_checkpoint_is_refused(tmp_path, where):
    d = small_checkpoint(tmp_path / "ckpt")
    outside = tmp_path / "shared-config.json"
    outside.write_text((d / "config.json").read_text())
    rendered = two_file_plan(d)
    (d / "config.json").unlink()
    target = {"outside": outside, "dangling": tmp_path / "nowhere.json", "directory": d / "sub"}[where]
    if where == "directory":
        target.mkdir()
    (d / "config.json").symlink_to(target)
    before, outside_before = contents(d), outside.read_bytes()
    with pytest.raises(BadInput) as exc:
        apply(d, rendered)
    assert exc.value.path == str(d / "config.json")
    assert "symlink" in str(exc.value)
    assert contents(d) == before and outside.read_bytes() == outside_before
    assert (d / "config.json").is_symlink()


# ---- the lock -----------------------------------------------------------------------------------


def test_lock_waits_for_the_holder_and_is_removed_after(tmp_path):
    d = small_checkpoint(tmp_path / "ckpt")
    told: list[str] = []
    order: list[str] = []
    with fix_lock(d, told.append):
        assert (d / LOCK_NAME).read_text().strip() == str(os.getpid())

        def second():
            with fix_lock(d, told.append):
                order.append("second")

        t = threading.Thread(target=second)
        t.start()
        time.sleep(1.0)
        assert t.is_alive() and order == []  # blocked while the first holds it
        order.append("first done")
    t.join(10)
    assert not t.is_alive()
    assert order == ["first done", "second"]
    assert len(told) == 1 and "another mtplint fix" in told[0] and str(os.getpid()) in told[0]
    assert not (d / LOCK_NAME).exists()


def test_a_fixs_own_lock_and_temp_files_are_not_leftovers_to_its_own_lints(tmp_path):
    """The fix's lints run under its lock, after it removed every leftover: the lock and temp
    files there are its work in progress (MTP022 reported them on the fix's own re-lint). The
    same files without a holder are an interrupted fix's."""
    from mtplint.inventory.shard_source import LocalShards

    d = small_checkpoint(tmp_path / "ckpt")
    temp = d / ".config.json.0123abcd.rollback.mtplint-tmp"
    with fix_lock(d, print):
        temp.write_text("")
        assert LocalShards(d).fix_leftovers() == []
    assert LocalShards(d).fix_leftovers() == [temp.name]  # left behind: now a leftover
    (d / LOCK_NAME).write_text("4242\n")
    assert LocalShards(d).fix_leftovers() == sorted([temp.name, LOCK_NAME])


def test_lock_file_planted_as_a_symlink_is_not_written_through(tmp_path):
    d = small_checkpoint(tmp_path / "ckpt")
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (d / LOCK_NAME).symlink_to(victim)
    with pytest.raises(BadInput) as exc, fix_lock(d, print):
        pass
    assert exc.value.path == str(d) and "symbolic link" in str(exc.value)
    assert victim.read_text() == "precious"


# ---- through the CLI, on a real fixture: one probe for the module, then cache hits ----------------

# No MTP layer on disk while config.json declares one: MTP006 recommends set-mtp-depth (a config.json
# edit), and `--only alias-mtp-head-embed` plans nothing, so a run that must not write stays cheap.
RECIPE = "dsv4-flash-no-mtp"
NOTHING = ["--only", "alias-mtp-head-embed"]
DEPTH = ["--only", "set-mtp-depth"]


@pytest.fixture(scope="module")
def fixture(tmp_path_factory) -> dict:
    cache = tmp_path_factory.mktemp("robust-cache")
    return {"src": cached_build(RECIPE), "env": dict(os.environ, MTPLINT_CACHE_DIR=str(cache))}


def copy_fixture(fixture: dict, dest: Path) -> Path:
    subprocess.run(["cp", "-r", "--sparse=always", str(fixture["src"]), str(dest)], check=True)
    return dest


def run_fix(fixture: dict, d: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*_fix_argv(), str(d), "-q", *args], capture_output=True, text=True, env=fixture["env"], timeout=900
    )


@pytest.mark.probe
def test_fix_removes_leftovers_of_a_killed_run_and_says_so(tmp_path, fixture):
    d = copy_fixture(fixture, tmp_path / "ckpt")
    leftover = d / f".config.json.{uuid.uuid4().hex[:8]}.mtplint-tmp"
    leftover.write_text('{"half": ')
    proc = run_fix(fixture, d, *NOTHING)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # MTP006 remains: nothing selected fixes it
    assert f"removed 1 leftover temp file(s) of an interrupted fix: {leftover.name}" in proc.stdout
    assert "nothing to fix with alias-mtp-head-embed" in proc.stdout
    assert not leftover.exists() and not (d / LOCK_NAME).exists()


@pytest.mark.probe
def test_second_fix_waits_for_the_lock_then_plans_from_what_the_first_wrote(tmp_path, fixture):
    d = copy_fixture(fixture, tmp_path / "ckpt")
    run_fix(fixture, d, *NOTHING)  # warm the probe cache: the wait below is then all that takes time
    fd = os.open(d / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)  # the first run holds the lock
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, b"424242\n")
        proc = subprocess.Popen(
            [*_fix_argv(), str(d), "-q", *DEPTH],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=fixture["env"],
        )
        first = proc.stderr.readline()  # blocks until the waiting message
        assert f"mtplint: {d}: another mtplint fix (pid 424242) is changing this checkpoint; waiting" in first
        time.sleep(2.0)
        assert proc.poll() is None, "the second run must wait, not go ahead"
        assert json.loads((d / "config.json").read_text())["num_nextn_predict_layers"] == 1
        # What "the first run" writes while the second waits: the second must plan from it.
        cfg = json.loads((d / "config.json").read_text())
        cfg["num_nextn_predict_layers"] = 0
        (d / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    finally:
        os.close(fd)
    out, err = proc.communicate(timeout=900)
    assert proc.returncode in (0, 1), out + err
    assert "nothing to fix with set-mtp-depth" in out, out
    assert not (d / f"config.json{BACKUP_SUFFIX}").exists()
    assert not (d / LOCK_NAME).exists()


@pytest.mark.slow
def test_dry_run_takes_no_lock_and_works_on_a_read_only_directory(tmp_path, fixture):
    d = copy_fixture(fixture, tmp_path / "ckpt")
    with read_only(d):
        proc = run_fix(fixture, d, *DEPTH, "--dry-run")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "dry run: nothing written" in proc.stdout
    assert not (d / LOCK_NAME).exists()


@pytest.mark.slow
def test_cli_on_a_full_disk_is_exit_2_naming_the_file(tmp_path, fixture):
    with small_tmpfs(tmp_path / "fs", "64m") as fs:
        d = copy_fixture(fixture, fs / "ckpt")
        before = contents(d)
        fill(fs)
        proc = run_fix(fixture, d, *DEPTH)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        line = one_line(proc.stderr)
        assert line.startswith(f"mtplint: error: {d / 'config.json'}: cannot keep the original as config.json")
        assert "no space left on the device (ENOSPC); nothing was changed" in line
        assert contents(d) == before
        assert not [p for p in d.iterdir() if p.name.endswith(".mtplint-tmp")]
        assert not (d / LOCK_NAME).exists()
