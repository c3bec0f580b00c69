"""`DecodeWorker`: the one thread that decodes, fed by a bounded queue of jobs.

TensorFlow's programs are compiled once (`Engine.warm_up`, this thread's first task) and
then run by this thread alone, one job at a time in arrival order; the event loop only
parses requests and writes responses. A job is a callable that returns the audio as an
iterable of arrays (one array for a whole text, chunks for a stream); what it yields
reaches the request's coroutine through the event loop (`Job.next`). Past `max_queue`
waiting jobs, `submit` raises `BusyError` (503 with `Retry-After`). A job whose client
went away (`Job.cancel`) is skipped, or stopped at its next chunk.

This is where the decoder slots go next (issue 49 item 4): a scheduler that takes the
jobs of this queue into a fixed batch of slots, with the same `submit`/`Job` interface.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import queue
import threading
import time
from collections.abc import Callable, Iterable
from typing import NamedTuple

import numpy as np

from xtts_serve.errors import BusyError

__all__ = ["DecodeWorker", "Finished", "Job"]

_log = logging.getLogger(__name__)

Work = Callable[[], Iterable[np.ndarray]]


class Finished(NamedTuple):
    """A job's last event: it ended after `seconds` of decoding."""

    seconds: float


class Job:
    """One request's decoding, as the worker runs it; read by the request's coroutine.

    Args:
        work: returns the audio, an iterable of arrays.
        loop: the event loop of the coroutine that reads it.
    """

    def __init__(self, work: Work, loop: asyncio.AbstractEventLoop) -> None:
        self.work, self._loop = work, loop
        self._events: asyncio.Queue[np.ndarray | Finished | BaseException] = asyncio.Queue()
        self._cancelled = threading.Event()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def cancel(self) -> None:
        """Nobody reads it any more: skip it, or stop it at its next chunk."""
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
        warm_up: run first, in the thread (`Engine.warm_up`): compiles every program.
        max_queue: jobs waiting (the one running not counted); one more is refused.
    """

    def __init__(self, warm_up: Callable[[], object], *, max_queue: int) -> None:
        self._warm_up, self.max_queue = warm_up, max_queue
        self._jobs: queue.Queue[Job | None] = queue.Queue(maxsize=max_queue)
        self._ready, self._stopping = threading.Event(), threading.Event()
        self.failure: str | None = None  # why the warm-up failed
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

    def start(self) -> None:
        """Start the thread: the warm-up, then the jobs."""
        self._thread.start()

    def submit(self, work: Work) -> Job:
        """Queue `work`; call from the event loop that will read the job.

        Raises:
            BusyError: `max_queue` jobs are waiting already, or the server is stopping.
        """
        if self._stopping.is_set():
            raise BusyError("Expected a running server, received: a request while it shuts "
                            "down; retry on its replacement", retry_after=5)  # fmt: skip
        job = Job(work, asyncio.get_running_loop())
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
        """Whole seconds until the queue has likely drained: waiting jobs and the one
        running, at the mean decoding time so far; at least 1."""
        return max(1, math.ceil((self.depth + 1) * self._seconds))

    def stop(self, timeout: float = 30.0) -> None:
        """Refuse new jobs, answer the waiting ones `BusyError`, let the running one
        finish, and end the thread (waiting at most `timeout` seconds)."""
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
            self._warm_up()
        except Exception as error:  # the server stays up to say so (GET /healthz)
            _log.exception("warm-up failed")
            self.failure = f"{type(error).__name__}: {error}"
        self._ready.set()
        while (job := self._jobs.get()) is not None:
            if self.failure is not None:
                job.emit(BusyError(f"Expected a warm engine, received: its warm-up failed "
                                   f"({self.failure})", retry_after=60))  # fmt: skip
            elif not job.cancelled:
                self._run(job)

    def _run(self, job: Job) -> None:
        started = time.perf_counter()
        chunks = None
        try:
            chunks = iter(job.work())
            for chunk in chunks:
                job.emit(chunk)
                if job.cancelled:
                    break
            seconds = time.perf_counter() - started
            self._seconds = 0.8 * self._seconds + 0.2 * seconds
            job.emit(Finished(seconds))
        except Exception as error:  # this request fails alone; the thread goes on
            _log.exception("decoding failed")
            job.emit(error)
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()
