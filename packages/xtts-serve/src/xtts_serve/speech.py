"""Requests decoded together: a `Speech` is one request's decoding (its text's pieces,
each decoded in a slot in turn, the mel turned into audio as it comes), and a
`SlotScheduler` steps the decoder slots for every request admitted, vocodes the streams'
new chunks of the step together (one batch of vocoder windows), and hands each request
its own audio. `SerialScheduler` is the same interface for a decoding that cannot stream (a
postfilter that needs the whole utterance): one request at a time, decoded whole.

A request's pieces take one slot at a time, in order, each as its previous one leaves (at
the next step): so at most as many requests are admitted as there are slots, and an
admitted request never waits for a slot. What a request hears does not depend on its
neighbours: a slot computes what it would alone (`xtts_train.Slots`), and so does a row of
the vocoder's batch (`xtts_train.Vocoding.vocode`, checked at its warm-up).

Used by one thread at a time (the server's decoding thread, or `Engine.speak`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

import xtts_audio as xa
from xtts_audio import pcm16
from xtts_serve.errors import RequestError
from xtts_serve.scheduling import Heard, caught
from xtts_train import PieceMels, Slots, SlotStream, VocoderStream, Window

__all__ = ["SerialScheduler", "SlotScheduler", "Speech"]

# A stream's windows of the step, vocoded together: `Window`s → float32 samples each.
Vocode = Callable[[list[Window]], list[np.ndarray]]


class Speech:
    """One request's decoding through the slots: its pieces in turn, its audio as it comes.

    Args:
        utterance: the request's text and voice, prepared (`Engine.prepare`).
        audio: the run's recipe (pauses between pieces, silence).
        max_frames: each piece's decoding buffer.
        whole: turns the whole mel into audio at the end (float32 [samples]); None for a
            stream.
        pushed: a stream's vocoder windows, cut from each chunk as it comes (vocoded by
            the scheduler with the other streams'); None for a whole request.

    Attributes:
        finished: its last audio was handed out.
    """

    def __init__(self, utterance, *, audio: xa.MelConfig, max_frames: int,
                 whole: Callable[[np.ndarray], np.ndarray] | None = None,
                 pushed: VocoderStream | None = None) -> None:  # fmt: skip
        if (whole is None) == (pushed is None):
            raise ValueError("Expected one of whole and pushed")
        self.utterance = utterance
        self._mels = PieceMels(utterance.pieces, audio, max_frames=max_frames)
        self._whole, self._pushed = whole, pushed
        self.stream: SlotStream | None = None  # the piece decoding now
        self.finished = False

    @property
    def waiting(self) -> bool:
        """Its next piece waits to join a slot."""
        return not self.finished and self.stream is None

    def join(self, slots: Slots) -> None:
        """Its next piece joins a free slot of `slots`."""
        i = self._mels.piece
        self.stream = slots.join(self._mels.pieces[i].ids, self.utterance.reference,
                                 min_frames=self._mels.floors[i])  # fmt: skip

    def take(self, chunk: np.ndarray | None) -> list[np.ndarray | Window]:
        """Its audio from the next chunk of the piece decoding now (None: the piece ended).

        Returns:
            A stream's vocoder windows made final (their samples are its audio chunks); a
            whole request's float32 [samples] once its last piece ended; else nothing.
        """
        if chunk is not None:
            return self._audio([self._mels.add(chunk)])
        audio = self._audio(self._mels.end_piece(self.stream.ending))
        self.stream = None
        if self._mels.piece < len(self._mels.pieces):
            return audio
        self.finished = True
        if self._pushed is not None:
            return [*audio, *self._pushed.end()]
        return [self._whole(self._mels.spoken().features)]

    def _audio(self, mels: list[np.ndarray]) -> list[Window]:
        if self._pushed is None:
            return []
        return [w for mel in mels for w in self._pushed.push(mel)]


class SlotScheduler:
    """The decoder slots, stepped for every request admitted.

    Args:
        slots: the compiled slots (`xtts_train.Slots`).
        vocode: the streams' windows of a step → their samples (`Waveforms.vocode`);
            None: no request streams.
    """

    def __init__(self, slots: Slots, *, vocode: Vocode | None = None) -> None:
        self.slots, self._vocode = slots, vocode
        self._speeches: list[Speech] = []

    @property
    def room(self) -> bool:
        """One more request can be admitted: it will have a slot at the next step."""
        return len(self._speeches) < self.slots.decoding.slots

    @property
    def busy(self) -> int:
        """Requests admitted and not finished (each holds a slot)."""
        return len(self._speeches)

    def admit(self, speech: Speech) -> None:
        """`speech`'s first piece joins a slot at the next `step`.

        Raises:
            RequestError: no room (call only while `room`).
        """
        if not self.room:
            raise RequestError("Expected a free slot, received: every slot busy")
        self._speeches.append(speech)

    def step(self) -> list[tuple[Speech, Heard]]:
        """Join the waiting pieces, step the slots once (as far as the nearest chunk
        needs), vocode the streams' new windows together, and hand out each request's
        audio.

        Returns:
            (speech, its audio) for each request that got a chunk or ended a piece, in
            order (a stream's: int16 chunks), or (speech, the exception) for one whose
            audio failed (it is cancelled: the others go on; a failed vocoder batch fails
            the streams in it); a finished one is no longer admitted.

        Raises:
            Exception: the slots' decoding itself failed (every request in them with it).
        """
        for speech in self._speeches:
            if speech.waiting:
                speech.join(self.slots)
        owners = {id(s.stream): s for s in self._speeches}
        out = []
        for stream, chunk in self.slots.step():
            speech = owners[id(stream)]
            if not speech.finished:  # not failed at an earlier chunk of this step
                out.append((speech, caught(speech.take, chunk)))
                if isinstance(out[-1][1], Exception):
                    self.cancel(speech)
        out = self._vocoded(out)
        self._speeches = [s for s in self._speeches if not s.finished]
        return out

    def _vocoded(self, out: list[tuple[Speech, Heard]]) -> list[tuple[Speech, Heard]]:
        """`out` with every stream's windows replaced by their int16 chunks, the windows
        of all streams vocoded in one call; where that call fails, each stream in it gets
        the failure once (and is cancelled), the others their audio."""
        windows = [a for _, heard in out if _windowed(heard) for a in heard
                   if isinstance(a, Window)]  # fmt: skip
        if not windows:
            return out
        samples = caught(self._vocode, windows)
        if isinstance(samples, Exception):
            failed = {speech for speech, heard in out if _windowed(heard)}
            for speech in failed:
                self.cancel(speech)
            result = []
            for speech, heard in out:
                if speech not in failed:
                    result.append((speech, heard))
                elif all(s is not speech for s, _ in result):
                    result.append((speech, samples))
            return result
        chunks = iter([pcm16(c) for c in samples])
        return [(s, h if isinstance(h, Exception) else
                 [next(chunks) if isinstance(a, Window) else a for a in h])
                for s, h in out]  # fmt: skip

    def cancel(self, speech: Speech) -> None:
        """Stop decoding `speech` now (its client went away): its slot is free."""
        if speech.stream is not None:
            self.slots.leave(speech.stream)
            speech.stream = None
        speech.finished = True
        self._speeches = [s for s in self._speeches if s is not speech]


class SerialScheduler:
    """One request at a time, decoded whole at its one step (a decoding that cannot
    stream has no slots).

    Args:
        decode: a prepared utterance → float32 [samples], its whole audio.
    """

    def __init__(self, decode: Callable[[object], np.ndarray]) -> None:
        self._decode = decode
        self._speech: Speech | None = None

    @property
    def room(self) -> bool:
        return self._speech is None

    @property
    def busy(self) -> int:
        return int(self._speech is not None)

    def admit(self, speech: Speech) -> None:
        if not self.room:
            raise RequestError("Expected a free decoder, received: it is busy")
        self._speech = speech

    def step(self) -> list[tuple[Speech, Heard]]:
        speech, self._speech = self._speech, None
        if speech is None:
            return []
        speech.finished = True
        return [(speech, caught(lambda u: [self._decode(u)], speech.utterance))]

    def cancel(self, speech: Speech) -> None:
        speech.finished = True
        if self._speech is speech:
            self._speech = None


def _windowed(heard: Heard) -> bool:
    """`heard` holds vocoder windows still to vocode."""
    return not isinstance(heard, Exception) and any(isinstance(a, Window) for a in heard)
