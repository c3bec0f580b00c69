"""The decoding thread's queue and the voice store, on their own (no model): the thread
driven on a scheduler of fake requests, each a list of chunks, one chunk a step."""

from __future__ import annotations

import re
import threading

import numpy as np
import pytest

from xtts_serve import (
    BusyError,
    ConfigError,
    DecodeWorker,
    RequestError,
    UnknownVoiceError,
    Voice,
    VoiceStore,
)
from xtts_serve.openai_names import OPENAI_VOICES
from xtts_serve.worker import Finished


class FakeSpeech:
    """A request whose audio is `chunks` (an iterable), one a step."""

    def __init__(self, chunks) -> None:
        self.chunks, self.finished = iter(chunks), False


class FakeScheduler:
    """`slots` requests side by side; each step hands each its next chunk (or its failure,
    an exception among its chunks)."""

    def __init__(self, slots: int) -> None:
        self.slots, self.speeches = slots, []

    @property
    def room(self) -> bool:
        return len(self.speeches) < self.slots

    @property
    def busy(self) -> int:
        return len(self.speeches)

    def admit(self, speech: FakeSpeech) -> None:
        assert self.room
        self.speeches.append(speech)

    def step(self):
        out = []
        for speech in list(self.speeches):
            chunk = next(speech.chunks, None)
            if chunk is None or isinstance(chunk, Exception):
                self.cancel(speech)
            out.append((speech, chunk if isinstance(chunk, Exception) else
                        [] if chunk is None else [chunk]))  # fmt: skip
        return out

    def cancel(self, speech: FakeSpeech) -> None:
        speech.finished = True
        self.speeches.remove(speech)


def _worker(slots: int, *, max_queue: int = 4, start=None) -> DecodeWorker:
    worker = DecodeWorker(start or (lambda: FakeScheduler(slots)), max_queue=max_queue,
                          slots=slots)  # fmt: skip
    worker.start()
    return worker


async def _heard(job) -> list:
    """A job's chunks until `Finished`."""
    chunks = []
    while not isinstance(event := await job.next(), Finished):
        chunks.append(event)
    return chunks


@pytest.mark.anyio
async def test_a_cancelled_job_frees_its_slot_at_the_next_step():
    """A client that goes away frees its slot: its request leaves at the next step, and
    the next request (waiting for that one slot) is decoded."""
    produced, gate = [], threading.Event()

    def chunks():
        for i in range(100):
            produced.append(i)
            yield np.zeros(4, np.int16)
            gate.wait(5)  # the reader cancels before chunk 1 is made

    worker = _worker(1)
    job = worker.submit(lambda: FakeSpeech(chunks()))
    assert len(await job.next()) == 4
    after = worker.submit(lambda: FakeSpeech([np.ones(2, np.int16)]))
    job.cancel()
    gate.set()
    assert [list(c) for c in await _heard(after)] == [[1, 1]]
    assert produced in ([0], [0, 1])  # cancelled before or after it asked for chunk 1
    worker.stop()


@pytest.mark.anyio
async def test_jobs_share_the_steps_and_a_failure_is_its_own():
    """Two slots: a job whose audio fails gets its exception and leaves, the job waiting
    takes its slot while the long one goes on, and each gets its own chunks."""
    worker = _worker(2)
    long = worker.submit(lambda: FakeSpeech([np.full(1, i, np.int16) for i in range(50)]))
    failing = worker.submit(lambda: FakeSpeech([np.zeros(1, np.int16), FloatingPointError("x")]))
    short = worker.submit(lambda: FakeSpeech([np.full(1, 7, np.int16)]))
    assert len(await failing.next()) == 1
    with pytest.raises(FloatingPointError):
        await failing.next()
    assert [int(c[0]) for c in await _heard(short)] == [7]
    assert [int(c[0]) for c in await _heard(long)] == list(range(50))
    assert worker.busy == 0
    worker.stop()


@pytest.mark.anyio
async def test_a_request_the_engine_refuses_when_admitted_fails_alone():
    def refused():
        raise RequestError("Expected a voice, received: it was deleted")

    worker = _worker(1)
    job = worker.submit(refused)
    with pytest.raises(RequestError, match="it was deleted"):
        await job.next()
    ok = worker.submit(lambda: FakeSpeech([np.zeros(3, np.int16)]))
    assert len((await _heard(ok))[0]) == 3
    worker.stop()


@pytest.mark.anyio
async def test_queue_bound_and_shutdown_answer_busy():
    release = threading.Event()
    worker = _worker(1, max_queue=2, start=lambda: (release.wait(5), FakeScheduler(1))[1])
    waiting = [worker.submit(lambda: FakeSpeech([np.zeros(1)])) for _ in range(2)]
    assert worker.depth == 2
    assert not worker.ready
    busy = r"Expected at most 2 requests waiting for the decoder \(--max-queue\)"
    with pytest.raises(BusyError, match=busy) as caught:
        worker.submit(lambda: FakeSpeech([np.zeros(1)]))
    assert caught.value.retry_after >= 3  # two waiting, one slot, at 1 s each
    worker.stop(timeout=0)  # still in its warm-up: the waiting jobs are answered now
    release.set()
    for job in waiting:
        with pytest.raises(BusyError, match="it shut down before this request was decoded"):
            await job.next()
    with pytest.raises(BusyError, match="while it shuts down"):
        worker.submit(lambda: FakeSpeech([np.zeros(1)]))


@pytest.mark.anyio
async def test_a_failed_warm_up_is_reported_and_answers_busy():
    def start():
        raise MemoryError("no room for the programs")

    worker = _worker(1, start=start)
    job = worker.submit(lambda: FakeSpeech([np.zeros(1)]))
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


def test_the_voice_store_resolves_aliases_and_openais_names():
    """An alias names a voice it started with; OpenAI's names the default voice unless an
    alias names them, or a voice of that id takes the name."""
    voices = [_voice("run"), _voice("tone"), _voice("alloy")]
    store = VoiceStore(voices, max_uploads=1, aliases={"narrator": "tone", "echo": "tone"})
    assert [store.get(name).id for name in ("narrator", "echo", "ash", "alloy", "run")] == [
        "tone", "tone", "run", "alloy", "run"]  # fmt: skip
    assert store.aliases == {**dict.fromkeys(OPENAI_VOICES[1:], "run"), "echo": "tone",
                             "narrator": "tone"}  # fmt: skip
    with pytest.raises(RequestError, match="'narrator', one the server started with"):
        store.remove("narrator")
    assert VoiceStore([_voice("tone")], max_uploads=1).aliases == {}  # no default voice
    with pytest.raises(UnknownVoiceError, match=r"Expected voice one of \['tone'\] or an "):
        VoiceStore([_voice("tone")], max_uploads=1).get("alloy")


@pytest.mark.parametrize(
    ("aliases", "message"),
    [
        ({"narrator": "nobody"}, "Expected voice aliases to voices the server starts with ['run', 'tone'], received: {'narrator': 'nobody'}"),
        ({"tone": "run"}, "Expected voice aliases named other than the voices ['run', 'tone'], received: ['tone'], which would hide them"),
    ],
)  # fmt: skip
def test_the_voice_store_refuses_an_alias_to_no_voice_or_over_one(aliases, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        VoiceStore([_voice("run"), _voice("tone")], max_uploads=1, aliases=aliases)
