"""The decoding thread's queue and the voice store, on their own (no model)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from xtts_serve import BusyError, DecodeWorker, RequestError, UnknownVoiceError, Voice, VoiceStore
from xtts_serve.worker import Finished


@pytest.mark.anyio
async def test_a_cancelled_job_stops_at_its_next_chunk():
    """A client that goes away frees the decoder: its work is closed after the chunk it
    was producing, and the next job runs."""
    produced, gate = [], threading.Event()

    def work():
        for i in range(100):
            produced.append(i)
            yield np.zeros(4, np.int16)
            gate.wait(5)  # the reader cancels before chunk 1 is made

    worker = DecodeWorker(lambda: None, max_queue=2)
    worker.start()
    job = worker.submit(work)
    assert len(await job.next()) == 4
    job.cancel()
    gate.set()
    after = worker.submit(lambda: [np.ones(2, np.int16)])
    assert list(await after.next()) == [1, 1]
    assert isinstance(await after.next(), Finished)
    assert produced in ([0], [0, 1])  # cancelled before or after it asked for chunk 1
    worker.stop()


@pytest.mark.anyio
async def test_queue_bound_and_shutdown_answer_busy():
    release = threading.Event()
    worker = DecodeWorker(lambda: release.wait(5), max_queue=2)  # held in its warm-up
    worker.start()
    waiting = [worker.submit(lambda: [np.zeros(1)]) for _ in range(2)]
    assert worker.depth == 2
    assert not worker.ready
    busy = r"Expected at most 2 requests waiting for the decoder \(--max-queue\)"
    with pytest.raises(BusyError, match=busy) as caught:
        worker.submit(lambda: [np.zeros(1)])
    assert caught.value.retry_after >= 3  # two waiting and one running, at 1 s each
    worker.stop(timeout=0)  # still in its warm-up: the waiting jobs are answered now
    release.set()
    for job in waiting:
        with pytest.raises(BusyError, match="it shut down before this request was decoded"):
            await job.next()
    with pytest.raises(BusyError, match="while it shuts down"):
        worker.submit(lambda: [np.zeros(1)])


@pytest.mark.anyio
async def test_a_failed_warm_up_is_reported_and_answers_busy():
    def warm_up():
        raise MemoryError("no room for the programs")

    worker = DecodeWorker(warm_up, max_queue=2)
    worker.start()
    job = worker.submit(lambda: [np.zeros(1)])
    with pytest.raises(BusyError, match=r"its warm-up failed \(MemoryError: no room"):
        await job.next()
    assert worker.failure == "MemoryError: no room for the programs"
    assert not worker.ready
    worker.stop()


def _voice(name: str) -> Voice:
    return Voice(name, name, "folder", np.zeros([4, 2], np.float32))


def test_the_voice_store_forgets_the_least_recently_used_upload():
    store = VoiceStore([_voice("run")], max_uploads=2)
    first, second = (store.add(np.full([4, 2], i, np.float32), name=f"u{i}") for i in range(2))
    assert first.id != second.id
    assert first.id.startswith("voice-")
    store.get(first.id)  # used: the second is now the least recently used
    third = store.add(np.zeros([4, 2], np.float32))
    assert [v.id for v in store.list()] == ["run", first.id, third.id]
    assert third.name == third.id  # no name given: its id
    with pytest.raises(UnknownVoiceError, match="Expected voice one of") as caught:
        store.get(second.id)
    assert caught.value.status == 400
    with pytest.raises(RequestError, match="one the server started with"):
        store.remove("run")
    store.remove(first.id)
    with pytest.raises(UnknownVoiceError, match="which names none") as caught:
        store.remove(first.id)
    assert caught.value.status == 404
    assert store.default == "run"
    assert VoiceStore([], max_uploads=1).default is None
