"""`DecodeWorker`: the one thread that decodes, fed by a bounded queue of jobs.

TensorFlow's programs are compiled once (`start`, this thread's first task: the engine's
warm-up) and then run by this thread alone; the event loop only parses requests and
writes responses. The thread admits waiting jobs while its scheduler has room (a free
decoder slot each), in arrival order, and steps the scheduler for all of them together:
each step hands every admitted job its new audio, which reaches the request's coroutine
through the event loop (`Job.next`). Past `max_queue` waiting jobs, `submit` raises
`BusyError` (503 with `Retry-After`). A job whose client went away (`Job.cancel`) is
skipped, or leaves its slot before the next step.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import queue
import threading
import time
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from xtts_serve.errors import BusyError
from xtts_serve.scheduling import Request, Scheduler

__all__ = ["DecodeWorker", "Finished", "Job"]

_log = logging.getLogger(__name__)

Make = Callable[[], Request]  # a request's decoding, made in the decoding thread


class Finished(NamedTuple):
    """A job's last event: it ended after `seconds` of decoding."""

    seconds: float


class Job:
    """One request's decoding, as the worker runs it; read by the request's coroutine.

    Args:
        make: makes the request's decoding (`Engine.speech`), once admitted.
        loop: the event loop of the coroutine that reads it.
    """

    def __init__(self, make: Make, loop: asyncio.AbstractEventLoop) -> None:
        self.make, self._loop = make, loop
        self._events: asyncio.Queue[np.ndarray | Finished | BaseException] = asyncio.Queue()
        self._cancelled = threading.Event()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def cancel(self) -> None:
        """Nobody reads it any more: skip it, or free its slot before the next step."""
        self._cancelled.set()

    async def next(self) -> np.ndarray | Finished:
        """The next array of audio, or `Finished` after the last one.

        Raises:
            Exception: what the work raised, or `BusyError` when the server stopped first.
        """
        event = await self._events.get()
        if isinstance(event, BaseException):
            raise event
        return event

    def emit(self, event: np.ndarray | Finished | BaseException) -> None:
        """From the worker's thread: hand `event` to the reader."""
        with contextlib.suppress(RuntimeError):  # its loop closed: nobody is reading
            self._loop.call_soon_threadsafe(self._events.put_nowait, event)


class DecodeWorker:
    """The decoding thread and its queue.

    Args:
        start: run first, in the thread: compiles every program (`Engine.warm_up`) and
            returns the scheduler to drive (`Engine.scheduler`).
        max_queue: jobs waiting (those admitted not counted); one more is refused.
        slots: jobs decoded side by side (`Engine.slots`), for `Retry-After`.
    """

    def __init__(self, start: Callable[[], Scheduler], *, max_queue: int, slots: int = 1) -> None:
        self._start, self.max_queue, self.slots = start, max_queue, slots
        self._jobs: queue.Queue[Job | None] = queue.Queue(maxsize=max_queue)
        self._ready, self._stopping = threading.Event(), threading.Event()
        self.failure: str | None = None  # why the warm-up failed
        self._scheduler: Scheduler | None = None
        self._admitted: dict[Request, tuple[Job, float]] = {}  # and when
        self._seconds = 1.0  # a job's decoding time, a running mean (Retry-After)
        self._thread = threading.Thread(target=self._serve, name="xtts-serve-decoder",
                                        daemon=True)  # fmt: skip

    @property
    def ready(self) -> bool:
        """The warm-up is done and succeeded: every program is compiled."""
        return self._ready.is_set() and self.failure is None

    @property
    def depth(self) -> int:
        """Jobs waiting for the decoder."""
        return self._jobs.qsize()

    @property
    def busy(self) -> int:
        """Jobs being decoded (each in a slot)."""
        return len(self._admitted)

    def start(self) -> None:
        """Start the thread: the warm-up, then the jobs."""
        self._thread.start()

    def submit(self, make: Make) -> Job:
        """Queue a request's decoding; call from the event loop that will read the job.

        Raises:
            BusyError: `max_queue` jobs are waiting already, or the server is stopping.
        """
        if self._stopping.is_set():
            raise BusyError("Expected a running server, received: a request while it shuts "
                            "down; retry on its replacement", retry_after=5)  # fmt: skip
        job = Job(make, asyncio.get_running_loop())
        try:
            self._jobs.put_nowait(job)
        except queue.Full:
            raise BusyError(
                f"Expected at most {self.max_queue} requests waiting for the decoder "
                f"(--max-queue), received: one more; retry after {self.retry_after()} s",
                retry_after=self.retry_after(),
            ) from None
        return job

    def retry_after(self) -> int:
        """Whole seconds until the queue has likely drained: the waiting jobs, `slots` at
        a time after those decoding now, at the mean decoding time so far; at least 1."""
        return max(1, math.ceil((self.depth // self.slots + 1) * self._seconds))

    def stop(self, timeout: float = 30.0) -> None:
        """Refuse new jobs, answer the waiting ones `BusyError`, let those decoding finish,
        and end the thread (waiting at most `timeout` seconds)."""
        self._stopping.set()
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                break
            if job is not None:
                job.emit(BusyError("Expected a running server, received: it shut down "
                                   "before this request was decoded", retry_after=5))  # fmt: skip
        self._jobs.put(None)
        self._thread.join(timeout)

    def _serve(self) -> None:
        try:
            self._scheduler = self._start()
        except Exception as error:  # the server stays up to say so (GET /healthz)
            _log.exception("warm-up failed")
            self.failure = f"{type(error).__name__}: {error}"
        self._ready.set()
        closing = False
        while not closing or self._admitted:
            try:
                closing = self._admit(closing)
                for speech, (job, _) in list(self._admitted.items()):
                    if job.cancelled:
                        self._scheduler.cancel(speech)
                        del self._admitted[speech]
                if self._admitted:
                    self._step()
            except Exception as error:  # a bug: its jobs fail, and the thread goes on
                _log.exception("the decoding thread failed")
                self._fail_all(error)

    def _admit(self, closing: bool) -> bool:
        """Admit waiting jobs while there is room (waiting for one when none is decoding);
        returns whether the queue has ended (`stop`)."""
        while not closing and (self._scheduler is None or self._scheduler.room):
            try:
                job = self._jobs.get(block=not self._admitted)
            except queue.Empty:
                break
            if job is None:
                return True
            if self.failure is not None:
                job.emit(BusyError(f"Expected a warm engine, received: its warm-up failed "
                                   f"({self.failure})", retry_after=60))  # fmt: skip
            elif not job.cancelled:
                try:
                    speech = job.make()
                except Exception as error:  # this request fails alone
                    job.emit(error)
                    continue
                self._scheduler.admit(speech)
                self._admitted[speech] = (job, time.perf_counter())
        return closing

    def _step(self) -> None:
        """One step of the scheduler; each job gets its audio, or its own failure."""
        try:
            events = self._scheduler.step()
        except Exception as error:  # the slots' decoding failed: every job in them fails
            _log.exception("decoding failed")
            self._fail_all(error)
            return
        ended = {}  # speech -> its failure, or None: finished (in the order they ended)
        for speech, heard in events:
            job, _ = self._admitted[speech]
            if isinstance(heard, Exception):  # logged by the scheduler
                job.emit(heard)
                ended[speech] = heard
                continue
            for audio in heard:
                job.emit(audio)
            if speech.finished:
                ended.setdefault(speech, None)
        for speech, failure in ended.items():
            job, started = self._admitted.pop(speech)
            if failure is None:
                seconds = time.perf_counter() - started
                self._seconds = 0.8 * self._seconds + 0.2 * seconds
                job.emit(Finished(seconds))

    def _fail_all(self, error: Exception) -> None:
        """Every job decoding now ends with `error`; their slots are free."""
        for speech, (job, _) in self._admitted.items():
            self._scheduler.cancel(speech)
            job.emit(error)
        self._admitted.clear()
