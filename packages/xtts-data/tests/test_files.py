"""Atomic files with the process's permissions, stale temp files cleared, one writer per
folder (a dead holder's lock is free again)."""

from __future__ import annotations

import errno
import os
import stat

import numpy as np
import pytest
import tensorflow as tf
from data_helpers import AUDIO, DATA

from xtts_data import CacheError, CorpusError, LockError, prepare, write_demo_corpus
from xtts_data.cli import main
from xtts_data.doctor import time_batches
from xtts_data.errors import OutputExistsError
from xtts_data.files import folder_lock, replaced_folder, write_json_atomic, write_npy_atomic


def test_a_second_writer_is_refused_with_the_holders_pid(tmp_path):
    corpus = write_demo_corpus(tmp_path / "corpus", n=2, max_seconds=1.0).path
    with (
        folder_lock(tmp_path / "cache", purpose="a test"),
        pytest.raises(
            LockError, match=rf"in use by another process \(pid {os.getpid()} .*: a test\)"
        ),
    ):
        prepare(corpus, tmp_path / "cache", audio=AUDIO, data=DATA)
    (tmp_path / "cache" / ".lock").write_text("pid 999999 on gone: killed\n")  # no flock held
    result = prepare(corpus, tmp_path / "cache", audio=AUDIO, data=DATA)  # taken over
    assert result.ok == 2


def test_cache_files_get_the_shards_permissions_and_temp_files_are_cleared(tmp_path):
    corpus = write_demo_corpus(tmp_path / "corpus", n=2, max_seconds=1.0).path
    mask = os.umask(0o022)
    try:
        prepare(corpus, tmp_path / "cache", audio=AUDIO, data=DATA)
    finally:
        os.umask(mask)
    modes = {
        path.name: stat.S_IMODE(path.stat().st_mode)
        for path in (tmp_path / "cache").rglob("*")
        if path.is_file() and path.name != ".lock"
    }
    assert set(modes.values()) == {0o644}, modes
    stale = tmp_path / "cache" / ".report.json.123.tmp"  # a writer killed mid-write
    stale.write_text("{")
    prepare(corpus, tmp_path / "cache", audio=AUDIO, data=DATA)  # the same build: complete
    assert not stale.exists()


def test_a_folder_that_is_a_file_is_an_error(tmp_path):
    (tmp_path / "x").write_text("")
    with pytest.raises(LockError, match="is a file"), folder_lock(tmp_path / "x", purpose="t"):
        pass
    write_json_atomic(tmp_path / "y.json", {"a": 1})
    assert not list(tmp_path.glob(".*.tmp"))


def test_a_folder_is_replaced_whole_or_not_at_all(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "old").write_text("old")
    with pytest.raises(OutputExistsError, match="--force"), replaced_folder(out, force=False):
        pytest.fail("the block ran over a folder that was not to be replaced")

    def killed_half_way():
        with replaced_folder(out, force=True) as staging:
            (staging / "new").write_text("new")
            raise RuntimeError("killed half way")

    with pytest.raises(RuntimeError, match="killed"):
        killed_half_way()
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # no staging folder left
    assert [p.name for p in out.iterdir()] == ["old"]
    with replaced_folder(out, force=True) as staging:
        (staging / "new").write_text("new")
    assert [p.name for p in out.iterdir()] == ["new"]


def test_an_array_is_written_whole_and_reads_back(tmp_path):
    array = np.arange(12, dtype=np.float32).reshape(3, 4)
    write_npy_atomic(tmp_path / "a.npy", array)
    back = np.load(tmp_path / "a.npy")
    assert back.dtype == np.float32
    np.testing.assert_array_equal(back, array)
    assert not list(tmp_path.glob(".*.tmp"))


def test_a_full_disk_is_one_error_and_leaves_no_partial_shard(tmp_path, monkeypatch):
    corpus = write_demo_corpus(tmp_path / "corpus", n=2, max_seconds=1.0).path

    sync = os.fsync

    def full(fd):  # the disk fills up while a shard is written
        if ".tfrecord." in os.readlink(f"/proc/self/fd/{fd}"):
            raise OSError(errno.ENOSPC, "No space left on device")
        sync(fd)

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(CacheError, match=r"cannot write the cache \(No space left on device\); "):
        prepare(corpus, tmp_path / "cache", audio=AUDIO, data=DATA)
    assert (tmp_path / "cache" / "build.json").exists()
    assert not [p for p in (tmp_path / "cache").rglob("*") if p.name.endswith(".tmp")]
    monkeypatch.undo()
    assert prepare(corpus, tmp_path / "cache", audio=AUDIO, data=DATA).ok == 2  # resumes


def test_doctor_works_on_a_corpus_smaller_than_a_batch(tmp_path, capsys):
    corpus = write_demo_corpus(tmp_path / "corpus", n=3, max_seconds=1.0).path
    prepare(corpus, tmp_path / "cache", audio=AUDIO, data=DATA)
    config = tmp_path / "fixed.yaml"
    config.write_text("data: {policy: fixed, batch_size: 8, val_fraction: 0.0}\n")
    for extra in ([], ["--config", str(config)]):  # batches fill across repeated epochs
        assert main(["doctor", str(tmp_path / "cache"), "--batches", "2", *extra]) == 0
    assert "samples/s" in capsys.readouterr().out


def test_a_pipeline_that_gives_no_batch_says_why():
    # `xtts-bench compare` times its baselines this way: a corpus smaller than a batch
    # once raised a bare StopIteration.
    empty = iter(tf.data.Dataset.range(0).repeat())
    with pytest.raises(CorpusError, match="fewer utterances than its batch size"):
        time_batches(empty, batches=2)
