"""#16 items 5 and 6: the probe never outlives mtplint, leaves no temp directory, and is held
to a memory cap.

Each test starts the real `mtplint` on a fixture checkpoint, waits until the real probe
child runs, then ends mtplint the way a terminal (SIGINT), a CI cancel (SIGTERM) or the OOM
killer (SIGKILL) would. Exit codes: 130 for Ctrl-C, 128 + N for a terminating signal N
(143 for SIGTERM), as shells report them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mtplint.probe.lifecycle import sweep_stale
from mtplint.probe.memory_cap import format_size, parse_size

from fixtures.build import cached_build

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finds the probe child through /proc")

CHILD_MODULE = b"mtplint.probe.child"


def _children(pid: int) -> list[int]:
    out = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            out += [int(c) for c in (task / "children").read_text().split()]
    except OSError:
        pass
    return out


def _descendants(pid: int) -> list[int]:
    found, todo = [], _children(pid)
    while todo:
        p = todo.pop()
        found.append(p)
        todo += _children(p)
    return found


def _is_probe(pid: int) -> bool:
    try:
        return CHILD_MODULE in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def _running(pid: int) -> bool:
    """Alive and not a zombie (an orphan's zombie waits for a reaper that may never come in a
    container; it holds no memory and runs nothing)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


@pytest.fixture(scope="module")
def checkpoint() -> Path:
    return cached_build("dsv4-flash-official")


def sigint_as_at_a_terminal() -> None:
    """A child's SIGINT back to its default: a shell starts background jobs (a CI step run
    with `&`) with SIGINT ignored, and Python then installs no KeyboardInterrupt for it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(checkpoint: Path, tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir(exist_ok=True)
    # The cold child (no probe worker): the one mtplint starts itself (tests/probe/test_probe_worker.py
    # covers a worker's children).
    env = dict(
        os.environ,
        MTPLINT_CACHE_DIR=str(tmp_path / "cache"),
        TMPDIR=str(tmpdir),
        PYTHONUNBUFFERED="1",
        MTPLINT_WORKER_IDLE="0",
        **(env or {}),
    )
    return subprocess.Popen(
        [sys.executable, "-m", "mtplint", str(checkpoint), "--no-cache", "-q", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        preexec_fn=sigint_as_at_a_terminal,
    )


def _wait_for_probe(proc: subprocess.Popen, settle: float = 2.0) -> int:
    """The probe child's pid, once it has run for `settle` seconds (into vLLM's import)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        probes = [p for p in _descendants(proc.pid) if _is_probe(p)]
        if probes:
            time.sleep(settle)
            assert proc.poll() is None and _running(probes[0]), "the probe ended before the signal"
            return probes[0]
        time.sleep(0.1)
    proc.kill()
    raise AssertionError("no probe child started within 120 s")


def _gone_soon(pid: int, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _running(pid):
            return True
        time.sleep(0.1)
    return False


def _probe_dirs(tmp_path: Path) -> list[Path]:
    return list((tmp_path / "tmpdir").glob("mtplint-probe-*"))


@pytest.mark.probe
@pytest.mark.parametrize(
    ("signum", "code", "said"),
    [
        (signal.SIGINT, 130, "mtplint: interrupted"),
        (signal.SIGTERM, 143, "mtplint: terminated by SIGTERM"),
    ],
    ids=["SIGINT", "SIGTERM"],
)
def test_a_signal_to_mtplint_ends_the_probe_and_its_files(checkpoint, tmp_path, signum, code, said):
    proc = _start(checkpoint, tmp_path)
    probe = _wait_for_probe(proc)
    assert _probe_dirs(tmp_path), "the probe's temp directory should exist while it runs"
    os.kill(proc.pid, signum)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == code, err
    assert err.decode().strip().splitlines()[-1] == said
    assert "Traceback" not in err.decode()
    assert _gone_soon(probe), f"probe {probe} outlived mtplint"
    assert not _probe_dirs(tmp_path)
    assert not list((tmp_path / "tmpdir").iterdir())  # nor anything the child put in TMPDIR


@pytest.mark.probe
@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["SIGINT", "SIGTERM"])
def test_a_signal_to_a_matrix_ends_every_cell_s_probe(checkpoint, tmp_path, signum, code):
    """`mtplint matrix --jobs 2` waits for two probes at once, from two threads: a signal
    reaches only the main thread, which must end both."""
    (tmp_path / "tmpdir").mkdir()
    env = dict(
        os.environ,
        MTPLINT_CACHE_DIR=str(tmp_path / "cache"),
        TMPDIR=str(tmp_path / "tmpdir"),
        MTPLINT_WORKER_IDLE="0",
    )
    args = ["matrix", str(checkpoint), "-n", "1,2", "--jobs", "2", "--no-cache", "-q", "--format", "json"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "mtplint", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        preexec_fn=sigint_as_at_a_terminal,
    )
    deadline, probes = time.monotonic() + 120, []
    while len(probes) < 2 and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        probes = [p for p in _descendants(proc.pid) if _is_probe(p)]
        time.sleep(0.1)
    assert len(probes) == 2, "both cells' probes should run side by side"
    time.sleep(1.0)
    os.kill(proc.pid, signum)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == code, err
    assert out == b"" and "Traceback" not in err.decode()
    assert all(_gone_soon(p) for p in probes), "a cell's probe outlived the matrix"
    assert not list((tmp_path / "tmpdir").iterdir())


@pytest.mark.probe
def test_a_sigkilled_mtplint_takes_the_probe_with_it_and_the_next_run_sweeps_its_dir(checkpoint, tmp_path):
    proc = _start(checkpoint, tmp_path)
    probe = _wait_for_probe(proc)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)  # reaped: its pid is free, as after a shell's wait
    assert _gone_soon(probe), f"probe {probe} outlived its SIGKILLed parent"
    # A SIGKILLed process cannot remove its own files: its directory stays until the next
    # probe sweeps the directories whose owner is gone.
    left = _probe_dirs(tmp_path)
    assert len(left) == 1
    assert sweep_stale(tmp_path / "tmpdir") == left
    assert not _probe_dirs(tmp_path)


def test_the_sweep_leaves_a_live_owners_directory(tmp_path):
    from mtplint.probe.lifecycle import mark_owner

    mine = tmp_path / "mtplint-probe-live"
    mine.mkdir()
    mark_owner(mine)  # this (live) process owns it
    unmarked = tmp_path / "mtplint-probe-starting"
    unmarked.mkdir()  # a run that has not written its mark yet
    dead = tmp_path / "mtplint-probe-dead"
    dead.mkdir()
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (dead / "owner").write_text(f"{gone.stdout.strip()} -\n")
    assert sweep_stale(tmp_path) == [dead]
    assert mine.is_dir() and unmarked.is_dir()


# --- the memory cap (item 6) ------------------------------------------------------------


@pytest.mark.probe
@pytest.mark.parametrize("how", ["option", "environment"])
def test_a_probe_over_its_memory_limit_is_killed_and_reported(checkpoint, tmp_path, how):
    # A DeepSeek-V4-Flash probe peaks near 700 MiB resident; 256 MiB is passed during vLLM's import.
    if how == "option":
        proc = _start(checkpoint, tmp_path, "--probe-memory", "256MiB")
    else:
        proc = _start(checkpoint, tmp_path, env={"MTPLINT_PROBE_MEMORY": "256MiB"})
    _, err = proc.communicate(timeout=300)
    text = err.decode()
    assert proc.returncode == 3, text
    line = text.strip().splitlines()[-1]
    assert "over its limit of 256 MiB" in line and "--probe-memory" in line, line
    assert not _probe_dirs(tmp_path)


@pytest.mark.slow
def test_bad_memory_limits_are_usage_errors(checkpoint, tmp_path):
    proc = _start(checkpoint, tmp_path, "--probe-memory", "8 giga")
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2 and "--probe-memory must be a size such as 8GiB" in err.decode()
    proc = _start(checkpoint, tmp_path, env={"MTPLINT_PROBE_MEMORY": "lots"})
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2 and "MTPLINT_PROBE_MEMORY must be a size" in err.decode()


def test_a_checkpoint_cannot_raise_its_own_memory_limit(tmp_path):
    import shutil

    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    shutil.copy(cached_build("mimo-bf16") / "config.json", ckpt / "config.json")
    (ckpt / "mtplint.toml").write_text('probe-memory = "1TiB"\n')
    proc = subprocess.run(
        [sys.executable, "-m", "mtplint", str(ckpt), "-q"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2 and "probe-memory" in proc.stderr


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("8GiB", 8 << 30),
        ("8G", 8 << 30),
        ("8gb", 8 << 30),
        ("512 MiB", 512 << 20),
        ("1.5GiB", 3 << 29),
        (1 << 30, 1 << 30),
    ],
)
def test_sizes(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "lots", "-1GiB", "8 giga", True, 1 << 20])
def test_sizes_refused(text):
    with pytest.raises(ValueError):
        parse_size(text)


def test_sizes_shown():
    assert [format_size(n) for n in (8 << 30, 256 << 20, 3 << 29, 100)] == ["8 GiB", "256 MiB", "1.5 GiB", "100 B"]
