"""`mtplint matrix`: every combination of vLLM and deployment inputs in one report. The
table, verdict line, JSON and JUnit are checked on cells built here; the probe-marked test
lints the seed-000 checkpoint on two releases through the real probe."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable

import pytest
from mtplint.config.schema import Settings
from mtplint.core.findings import Finding, Location
from mtplint.core.probe_summary import ProbedVllm
from mtplint.core.run_inputs import RunInputs
from mtplint.matrix.cells import Cell, combinations, works_on
from mtplint.matrix.render import build_json, render_junit, render_text

MTPLINT = [sys.executable, "-m", "mtplint"]


def _finding(code: str, severity: str = "error") -> Finding:
    return Finding(code=code, name="n", severity=severity, message=f"{code} message", location=Location(file="x"))


def _cell(version: str, n: int, *codes: str, severity: str = "error") -> Cell:
    return Cell(
        vllm=ProbedVllm(version, "gabc"),
        inputs=RunInputs(path="ckpt", num_speculative_tokens=n),
        axes={"vllm": version, "n": n, "gpu": None, "tp": 1},
        findings=[_finding(c, severity) for c in codes],
    )


def test_combinations_cover_every_axis_value():
    combos = combinations({"vllm": ["a", "b"], "n": [1, 2, 3], "tp": [1]})
    assert len(combos) == 6 and {"vllm": "b", "n": 3, "tp": 1} in combos


def test_text_table_rows_are_vllm_columns_the_other_axes():
    cells = [
        _cell("0.29.0", 1, "MTP010"),
        _cell("0.29.0", 2, "MTP010", "MTP007"),
        _cell("0.33.0", 1),
        _cell("0.33.0", 2),
    ]
    text = render_text(cells, "error")
    lines = text.splitlines()
    assert lines[0].split() == ["vLLM", "n=1", "tp=1", "n=2", "tp=1"]
    assert lines[2].split()[:2] == ["0.29.0", "(gabc)"] and "MTP007 MTP010" in lines[2]
    assert lines[3].split()[2:] == ["clean", "clean"]
    assert "works on vLLM >= 0.33.0" in text


@pytest.mark.parametrize(
    ("clean", "verdict"),
    [
        ({"0.28.0": False, "0.31.0": True, "0.33.0": True}, "works on vLLM >= 0.31.0"),
        ({"0.28.0": True, "0.31.0": False, "0.33.0": True}, "works on vLLM 0.28.0, 0.33.0"),
        ({"0.28.0": False, "0.31.0": False}, "works on none"),
        ({"0.28.0": True, "0.31.0": True}, "works on every probed vLLM"),
    ],
)
def test_works_on(clean, verdict):
    cells = [_cell(v, 1, *([] if ok else ["MTP002"])) for v, ok in reversed(clean.items())]
    assert works_on(cells, "error").startswith(verdict)


def test_warnings_count_only_under_fail_on_warning():
    cells = [_cell("0.33.0", 1, "MTP013", severity="warning")]
    assert "clean" in render_text(cells, "error") and "MTP013" in render_text(cells, "warning")


def test_json_cells_carry_the_single_lint_finding_objects():
    doc = build_json([_cell("0.29.0", 1, "MTP010"), _cell("0.33.0", 1)], "error")
    assert [c["vllm"]["version"] for c in doc["cells"]] == ["0.29.0", "0.33.0"]
    f = doc["cells"][0]["findings"][0]
    assert f == json.loads(json.dumps(_finding("MTP010").to_dict(), default=str))
    assert doc["cells"][1]["findings"] == [] and doc["cells"][0]["inputs"] == {
        "path": "ckpt",
        "num_speculative_tokens": 1,
    }


def test_junit_has_a_suite_per_vllm_and_a_case_per_cell():
    xml = render_junit([_cell("0.29.0", 1, "MTP010"), _cell("0.29.0", 2), _cell("0.33.0", 1)], "error")
    suites = ET.fromstring(xml).findall("testsuite")
    assert [s.get("name") for s in suites] == ["vllm 0.29.0 (gabc)", "vllm 0.33.0 (gabc)"]
    assert [len(s.findall("testcase")) for s in suites] == [2, 1]
    assert suites[0].find("testcase").find("failure").get("message") == "MTP010"


@pytest.mark.probe
def test_matrix_gives_each_release_its_verdict(tmp_path):
    """Seed 000 after its artifact fix, kv-cache fp8: MTP010 on 0.29.0, clean on 0.33.0, in
    one report; a second run is served from the cache."""
    from recorded_cases import release_env

    from fixtures.build import cached_build

    release_env("0.29.0")
    ckpt = str(cached_build("dsv4-flash-w4a16-bf16mtp-fixed"))
    out = tmp_path / "m.json"
    args = [*MTPLINT, "matrix", ckpt, "--vllm-commit", "0.29.0,0.33.0", "--kv-cache-dtype", "fp8"]
    args += ["--format", "json", "--format", "text", "--output", str(out), "--output", "-"]
    env = dict(os.environ, MTPLINT_CACHE_DIR=str(tmp_path / "c"))
    proc = subprocess.run(args, capture_output=True, text=True, timeout=1200, env=env)
    assert proc.returncode == 1, proc.stderr[-3000:]
    cells = json.loads(out.read_text())["cells"]
    verdicts = {
        c["vllm"]["version"]: sorted({f["code"] for f in c["findings"] if f["severity"] == "error"}) for c in cells
    }
    # 0.29 also builds these W4A16 experts unquantized (its MoE matcher asks for `.0.gate_proj`): MTP003.
    assert "MTP010" in verdicts["0.29.0"] and verdicts["0.33.0"] == []
    assert "works on vLLM >= 0.33.0" in proc.stdout
    again = subprocess.run(args, capture_output=True, text=True, timeout=300, env=env)
    assert all(c["probe"]["cached"] for c in json.loads(out.read_text())["cells"]), again.stderr


def _fake_lint(
    delays: dict[int, float],
    fail: frozenset[int] = frozenset(),
    log: list | None = None,
    hooks: dict[int, Callable[[], None]] | None = None,
):
    """A lint standing in for session.lint where only the scheduling is under test: it sleeps
    per n (so cells end out of order) and tracks how many run at once. A hook for n runs
    before that cell ends: the tests order cells with events through it, never with sleeps."""
    import threading
    import time
    from types import SimpleNamespace

    from mtplint.core.errors import BadInput

    lock, state = threading.Lock(), {"now": 0, "most": 0}

    def lint(path, s, inventory, progress):
        n = s.lint.num_speculative_tokens
        with lock:
            state["now"] += 1
            state["most"] = max(state["most"], state["now"])
            if log is not None:
                log.append(("lint", s.lint.vllm_commit, n, inventory))
        if hooks and n in hooks:
            hooks[n]()
        time.sleep(delays[n])
        with lock:
            state["now"] -= 1
        if n in fail:
            raise BadInput(f"cell n={n} failed")
        result = SimpleNamespace(
            vllm=ProbedVllm(s.lint.vllm_commit),
            inputs=RunInputs(path="ckpt", num_speculative_tokens=n),
            findings=[],
            probe=None,
        )
        return SimpleNamespace(inventory=inventory, path_inventory=None, inputs=result.inputs, result=lambda: result)

    return lint, state


class _Submitted:
    """The futures run_matrix submits, in order; nth(i) waits until the i-th is submitted (a cell
    may start running before submit() returns its future)."""

    def __init__(self) -> None:
        import threading

        self._futures: list = []
        self._changed = threading.Condition()

    def add(self, future) -> None:
        with self._changed:
            self._futures.append(future)
            self._changed.notify_all()

    def nth(self, i: int):
        with self._changed:
            assert self._changed.wait_for(lambda: len(self._futures) > i, timeout=60), f"cell {i} never submitted"
            return self._futures[i]


def _recording_pool(monkeypatch) -> _Submitted:
    """Make run_matrix's pool record its futures, so a cell can wait for another cell's end."""
    import concurrent.futures

    submitted = _Submitted()
    base = concurrent.futures.ThreadPoolExecutor

    class Pool(base):  # type: ignore[misc, valid-type]
        def submit(self, fn, /, *args, **kwargs):
            future = super().submit(fn, *args, **kwargs)
            submitted.add(future)
            return future

    monkeypatch.setattr(concurrent.futures, "ThreadPoolExecutor", Pool)
    return submitted


def test_cells_side_by_side_keep_the_combinations_order_and_provision_first():
    import threading
    from pathlib import Path

    from mtplint.matrix.cells import run_matrix

    log: list = []
    # The two n=1 cells (one per vLLM, started first) wait for each other: two run at once.
    both_started = threading.Barrier(2, timeout=60)
    lint, state = _fake_lint({1: 0.0, 2: 0.0, 3: 0.0}, log=log, hooks={1: both_started.wait})
    axes = {"vllm": ["0.31.0", "0.33.0"], "n": [1, 2, 3], "gpu": [None], "tp": [1]}
    inventory = object()
    cells = run_matrix(
        Path("x"),
        Settings(),
        axes,
        lint,
        jobs=2,
        prepare=lambda s: log.append(("prepare", s.lint.vllm_commit)),
        inventory=inventory,
    )
    assert [(c.vllm.version, c.inputs.num_speculative_tokens) for c in cells] == [
        (v, n) for v in ("0.31.0", "0.33.0") for n in (1, 2, 3)
    ]
    assert log[:2] == [("prepare", "0.31.0"), ("prepare", "0.33.0")], "every vLLM provisioned before any cell"
    assert all(entry[3] is inventory for entry in log[2:]), "every cell lints the inventory read once"
    assert state["most"] == 2
    # The two cells started first are one of each vLLM: their workers start together.
    assert {entry[1] for entry in log[2:4]} == {"0.31.0", "0.33.0"}


def test_one_cell_at_a_time_with_jobs_1():
    from pathlib import Path

    from mtplint.matrix.cells import run_matrix

    lint, state = _fake_lint({1: 0.05, 2: 0.0})
    cells = run_matrix(Path("x"), Settings(), {"vllm": ["0.33.0"], "n": [1, 2], "gpu": [None], "tp": [1]}, lint, jobs=1)
    assert len(cells) == 2 and state["most"] == 1


def test_the_first_failing_cell_in_order_fails_the_matrix(monkeypatch):
    """n=3 fails first in time, n=2 first in the combinations' order: n=2's error is the one
    reported, as a matrix run one cell at a time would report it."""
    from concurrent.futures import wait
    from pathlib import Path

    from mtplint.core.errors import BadInput
    from mtplint.matrix.cells import run_matrix

    submitted = _recording_pool(monkeypatch)

    def second_fails_after_the_third() -> None:
        wait([submitted.nth(2)], timeout=60)
        assert submitted.nth(2).exception() is not None

    lint, _ = _fake_lint({1: 0.0, 2: 0.0, 3: 0.0}, fail=frozenset({2, 3}), hooks={2: second_fails_after_the_third})
    with pytest.raises(BadInput, match="cell n=2 failed"):
        run_matrix(Path("x"), Settings(), {"vllm": ["0.33.0"], "n": [1, 2, 3], "gpu": [None], "tp": [1]}, lint, jobs=3)


def test_end_running_probes_kills_every_waited_for_child():
    """What a matrix's main thread does on Ctrl-C: the probe children its cells wait for die
    (their threads reap them)."""
    from mtplint.probe import runner

    procs = [subprocess.Popen(["sleep", "60"], start_new_session=True) for _ in range(2)]
    try:
        with runner._running_lock:
            runner._running.update(procs)
        assert runner.end_running_probes() == 2
        assert [p.wait(timeout=10) for p in procs] == [-9, -9]
    finally:
        with runner._running_lock:
            runner._running.difference_update(procs)
        for p in procs:
            if p.poll() is None:
                p.kill()


def test_no_cell_starts_after_a_failure(monkeypatch):
    """One cell at a time past the first (jobs=2): n=1 fails once n=2 is running, n=2 finishes
    only after n=1's failure is final, and n=3 and n=4 never start. Events order the cells,
    so the test holds on a loaded machine (a sleep-ordered version failed 5 of 30 runs)."""
    import threading
    from concurrent.futures import wait
    from pathlib import Path

    from mtplint.core.errors import BadInput
    from mtplint.matrix.cells import run_matrix

    submitted = _recording_pool(monkeypatch)
    second_running = threading.Event()

    def first_fails_once_the_second_runs() -> None:
        assert second_running.wait(timeout=60)

    def second_ends_after_the_first() -> None:
        second_running.set()
        wait([submitted.nth(0)], timeout=60)

    log: list = []
    hooks = {1: first_fails_once_the_second_runs, 2: second_ends_after_the_first}
    lint, _ = _fake_lint({1: 0.0, 2: 0.0, 3: 0.0, 4: 0.0}, fail=frozenset({1}), log=log, hooks=hooks)
    with pytest.raises(BadInput, match="cell n=1 failed"):
        run_matrix(
            Path("x"), Settings(), {"vllm": ["0.33.0"], "n": [1, 2, 3, 4], "gpu": [None], "tp": [1]}, lint, jobs=2
        )
    assert submitted.nth(0).done()
    assert sorted(entry[2] for entry in log) == [1, 2]


def _at(path: str, version: str, n: int, *codes: str) -> Cell:
    cell = _cell(version, n, *codes)
    cell.inputs = RunInputs(path=path, num_speculative_tokens=n)
    return cell


def test_several_checkpoints_get_a_table_and_a_verdict_each():
    """`mtplint matrix A B`: one report, a table under each checkpoint's path in the order given,
    each with its own verdict; JSON keeps one row per checkpoint x cell and adds each one's
    verdict; JUnit names the checkpoint in each case."""
    cells = [_at("b", "0.33.0", 1, "MTP006"), _at("b", "0.33.0", 2, "MTP006"), _at("a", "0.33.0", 1)]
    cells.append(_at("a", "0.33.0", 2))
    text = render_text(cells, "error")
    assert text.index("b\n") < text.index("a\n")
    assert text.count("works on none of the probed vLLMs") == 1 and text.count("works on every probed vLLM") == 1
    doc = build_json(cells, "error")
    assert [(c["inputs"]["path"], c["inputs"]["num_speculative_tokens"]) for c in doc["cells"]] == [
        ("b", 1),
        ("b", 2),
        ("a", 1),
        ("a", 2),
    ]
    assert [(c["path"], c["works_on"].split(" (")[0]) for c in doc["checkpoints"]] == [
        ("b", "works on none of the probed vLLMs"),
        ("a", "works on every probed vLLM"),
    ]
    names = [case.get("name") for case in ET.fromstring(render_junit(cells, "error")).iter("testcase")]
    assert names == ["b n=1 tp=1", "b n=2 tp=1", "a n=1 tp=1", "a n=2 tp=1"]


def test_the_local_pool_runs_every_checkpoint_x_cell_in_the_report_s_order():
    """Several PATHs on the local pool: each target's cells lint its own path and inventory, the
    vLLMs provisioned once each, the report checkpoint by checkpoint."""
    from pathlib import Path
    from types import SimpleNamespace

    from mtplint.matrix.cells import Target, run_catalogue

    seen, prepared = [], []

    def lint(path, s, inventory, progress):
        seen.append((str(path), inventory, s.lint.vllm_commit, s.lint.num_speculative_tokens))
        result = SimpleNamespace(
            vllm=ProbedVllm(s.lint.vllm_commit),
            inputs=RunInputs(path=str(path), num_speculative_tokens=s.lint.num_speculative_tokens),
            findings=[],
            probe=None,
        )
        return SimpleNamespace(inventory=inventory, path_inventory=None, result=lambda: result)

    axes = {"vllm": ["0.31.0", "0.33.0"], "n": [1, 2], "gpu": [None], "tp": [1]}
    targets = [Target(Path("a"), Settings(), axes, "inv-a"), Target(Path("b"), Settings(), axes, "inv-b")]
    cells = run_catalogue(targets, lint, jobs=2, prepare=lambda s: prepared.append(s.lint.vllm_commit))
    assert prepared == ["0.31.0", "0.33.0"]
    assert [(c.inputs.path, c.vllm.version, c.inputs.num_speculative_tokens) for c in cells] == [
        (p, v, n) for p in ("a", "b") for v in ("0.31.0", "0.33.0") for n in (1, 2)
    ]
    assert sorted(seen) == sorted(
        (p, f"inv-{p}", v, n) for p in ("a", "b") for v in ("0.31.0", "0.33.0") for n in (1, 2)
    )


def test_cluster_secrets_go_only_to_the_actors_whose_cells_need_them(monkeypatch):
    """The cache secret to every actor (each cell seals its cache entries with it); a hub token
    only to the actors of hub checkpoints; nothing when the driver has neither."""
    from mtplint.matrix.cluster import _secrets

    monkeypatch.delenv("MTPLINT_CACHE_SECRET", raising=False)
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    monkeypatch.setenv("HF_TOKEN", "hf_x")
    assert _secrets(hub=False) == {}
    assert _secrets(hub=True) == {"HF_TOKEN": "hf_x"}
    monkeypatch.setenv("MTPLINT_CACHE_SECRET", "s")
    assert _secrets(hub=False) == {"MTPLINT_CACHE_SECRET": "s"}


@pytest.mark.slow
def test_cluster_errors_are_one_line_exit_2(tmp_path):
    """--cluster with no Ray cluster at the address, or an empty address: exit 2, one line
    naming --cluster, before any cell runs; no traceback."""
    from fixtures.build import cached_build

    ckpt = str(cached_build("glm45-air-mtp-dropped"))
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0")
    for address in ("", "127.0.0.1:9"):
        proc = subprocess.run(
            [*MTPLINT, "matrix", ckpt, "--cluster", address], capture_output=True, text=True, timeout=300, env=env
        )
        assert proc.returncode == 2, proc.stderr[-2000:]
        (line,) = proc.stderr.splitlines()
        assert line.startswith("mtplint: error: --cluster") and proc.stdout == ""
