"""The persistent compile cache: its folder and key, checked entries, and end to end through
the `xtts-train` console script in fresh processes (hits, misses, damage, concurrency)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys

import pytest
from train_helpers import MICRO, ONE_SHAPE, as_cli, cli_env

from xtts_train.compile import compile_cache
from xtts_train.compile.compile_cache import CompileCache

ENTRY = "xla_compile_cache__123__456__XLA_CPU_JIT.pb"


def test_default_root_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("XTTS_COMPILE_CACHE", str(tmp_path / "mine"))
    assert compile_cache.default_root() == tmp_path / "mine"
    for off in ("off", "0", ""):
        monkeypatch.setenv("XTTS_COMPILE_CACHE", off)
        assert compile_cache.default_root() is None
    monkeypatch.delenv("XTTS_COMPILE_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    if sys.platform.startswith("linux"):
        assert compile_cache.default_root() == tmp_path / "xdg" / "xtts" / "xla"


def test_machine_key_names_tensorflow_and_changes_with_xla_flags(monkeypatch):
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    key = compile_cache.machine_key()
    assert key.startswith("tf2.")
    assert key == compile_cache.machine_key()
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_enable_fast_math=true")
    assert compile_cache.machine_key() != key


def _stored(cache: CompileCache, data: bytes, name: str = ENTRY):
    path = cache.store / f"{name}.{hashlib.sha256(data).hexdigest()}"
    path.write_bytes(data)
    return path


def test_checked_entries_are_linked_and_damaged_ones_removed(tmp_path):
    first = CompileCache(tmp_path)
    first.store.mkdir(parents=True)
    good = _stored(first, b"an executable")
    damaged = _stored(first, b"another one", ENTRY.replace("123", "124"))
    damaged.write_bytes(b"anoth")  # truncated
    (first.store / "notes.txt").write_text("not an entry")  # foreign: ignored, kept
    cache = CompileCache(tmp_path).open()
    assert (cache.staging / ENTRY).read_bytes() == b"an executable"
    assert not (cache.staging / ENTRY.replace("123", "124")).exists()
    assert cache.removed == [damaged.name]
    assert not damaged.exists()
    assert good.exists()
    assert (cache.store / "notes.txt").exists()


def test_copies_another_process_removes_while_this_one_opens_are_skipped(tmp_path, monkeypatch):
    # Two processes opening one store at once: each keeps the newest copy of an entry and
    # removes the older ones, so a copy listed by one may be gone when it looks again.
    store = CompileCache(tmp_path)
    store.store.mkdir(parents=True)
    older, newer = _stored(store, b"build one"), _stored(store, b"build two")
    os.utime(older, (1, 1))
    lone = _stored(store, b"only", ENTRY.replace("123", "125"))
    check, checked = compile_cache._intact, []

    def another_process_prunes(path, sha):
        checked.append(path)
        if len(checked) == 3:  # all listed and checked; then the other process prunes
            older.unlink()
            lone.unlink()
        return check(path, sha) or path in (older, lone)

    monkeypatch.setattr(compile_cache, "_intact", another_process_prunes)
    cache = CompileCache(tmp_path).open()
    assert (cache.staging / ENTRY).read_bytes() == b"build two"
    assert cache.linked == {ENTRY}  # the entry with no copy left is compiled again
    assert newer.exists()


def test_publish_stores_new_entries_under_their_checksum(tmp_path):
    cache = CompileCache(tmp_path).open()
    (cache.staging / ENTRY).write_bytes(b"compiled")
    (cache.staging / "scratch.tmp").write_bytes(b"not an entry")
    assert cache.publish() == [ENTRY]
    assert cache.publish() == []  # once
    stored = cache.store / f"{ENTRY}.{hashlib.sha256(b'compiled').hexdigest()}"
    assert stored.read_bytes() == b"compiled"
    assert cache.entries() == 1


def test_a_program_is_held_only_while_every_entry_it_wrote_is_intact(tmp_path):
    first = CompileCache(tmp_path).open()
    (first.staging / ENTRY).write_bytes(b"compiled")
    first.publish()
    first.remember("abc", {ENTRY})
    assert first.holds("abc")
    assert not first.holds("def")  # never compiled here
    assert CompileCache(tmp_path).open().holds("abc")  # a later process
    for stored in first.store.glob(f"{ENTRY}.*"):
        stored.write_bytes(b"compi")  # damaged: removed at open, so compiled again
    assert not CompileCache(tmp_path).open().holds("abc")


def test_entries_compiled_outside_collect_are_not_published(tmp_path):
    cache = CompileCache(tmp_path).open()
    (cache.staging / ENTRY).write_bytes(b"a tf.data map function")
    cache.forget_unpublished()
    assert cache.publish() == []


def test_staging_folders_of_dead_processes_are_removed(tmp_path):
    cache = CompileCache(tmp_path)
    cache.store.mkdir(parents=True)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    stale = cache.store / f".staging-{dead}-00ff"
    stale.mkdir()
    alive = cache.store / f".staging-{os.getpid()}-00aa"
    alive.mkdir()
    cache.open()
    assert not stale.exists()
    assert alive.exists()


# -- end to end: the console script in new processes ------------------------------------------
# A second process finding what the first stored is the subject: the slow tier (`hatch run
# test-slow`). The cache's parts are tested above, in this process.


# The compile cache holds XLA programs: these fits ask for XLA (on a CPU `auto` is the
# graph executor, which compiles nothing).
def _fit(cache, workdir, root, *extra: str) -> subprocess.Popen:
    command = [sys.executable, "-m", "xtts_train.cli", "fit", "--data", str(cache),
               "--workdir", str(workdir), "--quiet", "--steps", "1",
               *as_cli([*ONE_SHAPE, *MICRO, "train.compiler=xla"]), *extra]  # fmt: skip
    return subprocess.Popen(command, env=cli_env(root), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip


def _summary(process: subprocess.Popen, workdir) -> dict:
    _, stderr = process.communicate(timeout=600)
    assert process.returncode == 0, stderr[-3000:]
    return json.loads((workdir / "summary.json").read_text())


@pytest.fixture(scope="module")
def cold(cache, tmp_path_factory):
    """Two fits started at once on an empty compile cache: (cache root, their summaries)."""
    root = tmp_path_factory.mktemp("xla")
    runs = [root.parent / "cold-a", root.parent / "cold-b"]
    processes = [_fit(cache, run, root) for run in runs]
    return root, [_summary(process, run) for process, run in zip(processes, runs, strict=True)]


@pytest.mark.slow
def test_processes_compiling_at_once_share_the_cache_safely(cold):
    root, summaries = cold
    for summary in summaries:
        assert summary["warm_up"]["compiled"] == 1
        assert summary["warm_up"]["cache_hits"] == summary["warm_up"]["deferred"] == 0
        assert summary["compile_cache"]["dir"].startswith(str(root))
        assert summary["retraces_after_warmup"] == 0
    entries = list(root.glob("*/*.pb.*"))
    assert entries  # both published the same program: one entry (or two, if its bytes differ)
    for entry in entries:
        assert hashlib.sha256(entry.read_bytes()).hexdigest() == entry.name.rsplit(".", 1)[1]
    assert not list(root.glob("*/.staging-*"))  # both removed their staging folders


@pytest.mark.slow
def test_a_second_process_with_the_same_config_hits(cold, cache, tmp_path):
    root, _ = cold
    # Other learning-rate settings and step counts: inputs of the step, same program.
    summary = _summary(_fit(cache, tmp_path / "run", root, "--set", "train.learning_rate=0.01",
                            "--steps", "2"), tmp_path / "run")  # fmt: skip
    assert summary["warm_up"]["cache_hits"] == 1
    assert summary["warm_up"]["compiled"] == 0
    # Known by its trace's fingerprint: not run in the warm-up, loaded by the first step,
    # which compiled nothing.
    assert summary["warm_up"]["deferred"] == 1
    assert summary["compile_cache"]["compiled_outside_collect"] == 0
    assert summary["steps"] == 2
    # Registered from its stored trace: nothing traced in Python.
    assert summary["warm_up"]["stored"] == summary["compiled_shapes"] == 1
    assert summary["traces"] == 0


@pytest.mark.slow
def test_a_changed_model_config_misses(cold, cache, tmp_path):
    root, _ = cold
    summary = _summary(_fit(cache, tmp_path / "run", root, "--set", "model.prenet_dim=48"),
                       tmp_path / "run")  # fmt: skip
    assert summary["warm_up"]["compiled"] == 1
    assert summary["warm_up"]["cache_hits"] == summary["warm_up"]["stored"] == 0


@pytest.mark.slow
def test_a_damaged_entry_is_compiled_again(cold, cache, tmp_path):
    root = tmp_path / "xla"
    shutil.copytree(cold[0], root)  # the other tests keep the intact cache
    entries = list(root.glob("*/*.pb.*"))
    for entry in entries:
        with open(entry, "r+b") as file:
            file.truncate(entry.stat().st_size // 2)
    summary = _summary(_fit(cache, tmp_path / "again", root), tmp_path / "again")
    assert len(summary["compile_cache"]["removed_damaged"]) == len(entries) >= 1
    assert summary["warm_up"]["compiled"] == 1
    assert summary["final_loss"] is not None


@pytest.mark.slow
def test_a_graph_executor_fit_compiles_nothing_and_a_second_one_traces_nothing(
    cold, cache, tmp_path
):  # fmt: skip
    root = tmp_path / "xla"
    shutil.copytree(cold[0], root)
    before = {p for p in root.rglob("*") if p.is_file()}
    # Deterministic, seeded data: both fits take the same first batch.
    graph = ("--set", "train.compiler=graph", "--set", "data.deterministic=true",
             "--set", "data.seed=0")  # fmt: skip
    summary = _summary(_fit(cache, tmp_path / "run", root, *graph), tmp_path / "run")
    assert summary["compiler"]["train"] == "graph"
    warm = summary["warm_up"]
    assert warm["graph_programs"] == 1
    assert warm["compiled"] == warm["cache_hits"] == warm["deferred"] == warm["stored"] == 0
    assert [p["compiler"] for p in warm["programs"].values()] == ["graph"]
    assert summary["retraces_after_warmup"] == 0
    # No executable written, only the program's trace.
    assert [p.parent.name for p in {p for p in root.rglob("*") if p.is_file()} - before] == [
        "traces"
    ]
    again = _summary(_fit(cache, tmp_path / "again", root, *graph), tmp_path / "again")
    assert again["warm_up"]["stored"] == again["warm_up"]["deferred"] == 1  # run by step 1
    assert again["warm_up"]["graph_programs"] == 1
    assert again["traces"] == 0
    # The same first step whether its program ran in the warm-up or was registered and
    # deferred (a warm-up leaves no trace in the weights, the optimizer or the seeds).
    assert again["final_loss"] == summary["final_loss"]
