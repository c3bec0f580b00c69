"""`PieceStream`: one piece's audio a chunk at a time while its frames are decoded, by the
rules TensorFlow's streams follow (`xtts_audio.windows`): a chunk of `chunk_frames`
frames of the mel (the `window` program: the postnet over the chunk and its context) is
final once the frames its postnet reads are decoded, and the vocoder hears each chunk in
a window of `chunk_frames + 2 * vocoder_context` frames once the frames its window reads
have arrived. At the piece's end the frames voiced are followed by the silence the
vocoder's field reaches (as `decode_piece` vocodes a piece whole), so the chunks joined
are the piece's audio up to float rounding.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from xtts_audio.windows import chunk_stop, window_start
from xtts_runtime.loop import (
    Programs,
    piece_steps,
    started,
    stepping,
    stop_length,
    voiced_ending,
)

__all__ = ["MAX_VOCODED", "PieceStream", "stream_piece"]

# Frames a stream's vocoder window keeps after its first. On this project's 2-core CPU
# (tiny run, small vocoder, 8 streaming clients of `xtts-serve --runtime onnx --slots 8`,
# 20 s): 51.6 s of audio a second against 41.1 with windows that double from 32 frames
# and ~29 with 32 each (TensorFlow's streams' rule); no client's playback ran dry in
# either (every chunk arrived before the audio before it had played).
MAX_VOCODED = 256


def stream_piece(programs: Programs, manifest: Mapping[str, Any], voice: Mapping[str, np.ndarray],
                 ids: Sequence[int]) -> Iterator[np.ndarray]:  # fmt: skip
    """One piece's token ids decoded in `voice`, its audio float32 [samples] a chunk at a
    time as the decoder steps (`PieceStream`): `decode_piece`'s samples up to float
    rounding."""
    count, r = len(ids), manifest["reduction_factor"]
    stream = PieceStream(programs, manifest, voice, count=count)
    steps = stepping(*started(programs, manifest, voice, ids), steps=piece_steps(manifest, count),
                     r=r)  # fmt: skip
    for t, buffers in enumerate(steps, 1):  # (frames, probs), written in place
        yield from stream.advance(buffers[0], min(t * r, stream.buffer))
    frames, probs = buffers
    yield from stream.finish(frames, stop_length(manifest, probs, count))


class PieceStream:
    """A piece of `count` token ids, streamed in `voice` (`conditioning`'s).

    Args:
        programs, manifest: the voice folder's (its `window` program and `chunk_frames`).
        voice: the voice's `stats` are read.
        count: the piece's token ids.
    """

    def __init__(self, programs: Programs, manifest: Mapping[str, Any],
                 voice: Mapping[str, np.ndarray], *, count: int) -> None:  # fmt: skip
        self._programs, self._manifest, self._stats = programs, manifest, voice["stats"]
        self._count = count
        self.chunk, self._reach = manifest["chunk_frames"], manifest["postnet_context"]
        self._context = manifest["vocoder_context"]
        self._size = self.chunk  # frames the next vocoder window keeps
        self._hop, self._silence = manifest["audio"]["hop_length"], manifest["silence"]
        self.buffer = manifest["buffers"][count - 1]
        self._lengths = np.array([self.buffer], np.int32)  # no stop yet: every frame real
        self.first, self.end = 0, None  # the next chunk's first frame; the frames voiced
        self._mel = np.zeros([0, manifest["n_mels"]], np.float32)  # the chunks' mel so far
        self._done = 0  # mel frames the vocoder's windows have taken

    def advance(self, frames: np.ndarray, decoded: int) -> list[np.ndarray]:
        """The audio that `decoded` frames of `frames` (float32 [1, F, M] as the step
        wrote them, F >= the buffer) make final: float32 [samples] chunks."""
        return self._vocoded(self._chunks(frames, decoded), ended=False)

    def finish(self, frames: np.ndarray, length: int) -> list[np.ndarray]:
        """The rest of the piece's audio, now that its decoding ended at `length` frames
        (the stop token's frame + 1, or the buffer's)."""
        self._lengths[0] = length
        self.end, silence = voiced_ending(self._manifest, self._count, length)
        return self._vocoded([*self._chunks(frames, self.end), silence], ended=True)

    def _chunks(self, frames: np.ndarray, decoded: int) -> list[np.ndarray]:
        """The mel chunks now final: a chunk's postnet reads `postnet_context` frames
        after it (or up to the buffer's end), unless the piece ended."""
        chunks = []
        while True:
            target = min(self.first + self.chunk + self._reach, self.buffer)
            if self.end is None and not target <= decoded < self.buffer:  # (a full buffer
                return chunks  # ends the piece: `finish` cuts the rest)
            stop = chunk_stop(self.first, self.chunk, self.end)
            if stop <= self.first:
                return chunks
            feeds = {"frames": frames, "stats": self._stats, "lengths": self._lengths,
                     "first": np.array(self.first, np.int32)}  # fmt: skip
            mel = self._programs.window(feeds)["mel"]
            chunks.append(mel[0, : stop - self.first])
            self.first = stop

    def _vocoded(self, chunks: list[np.ndarray], *, ended: bool) -> list[np.ndarray]:
        """The vocoder's samples of the windows `chunks` make final (all, once `ended`:
        the mel's length known, its windows shifted inward, the last ending at the frames
        voiced). The first window keeps `chunk_frames` frames (the first audio soon), the
        next ones `MAX_VOCODED`: a window hears `vocoder_context` frames each side of what
        it keeps, so short windows cost the vocoder most (2.8x the frames kept at 32
        frames for the small vocoder's 29 each side)."""
        if chunks:  # (most steps make none)
            self._mel = np.concatenate([self._mel, *chunks])
        audio = []
        while True:
            size = self._size
            if ended:
                if self._done >= self.end:
                    return audio
            elif len(self._mel) < self._done + size + self._context:
                return audio
            width = size + 2 * self._context
            if ended:  # inside the mel: its last frames hear its end, as vocoded whole
                width = min(width, len(self._mel))
            first = window_start(self._done, width=width, context=self._context,
                                 frames=len(self._mel) if ended else None)  # fmt: skip
            window = np.full([1, width, self._mel.shape[1]], self._silence, np.float32)
            heard = self._mel[first : first + width]
            window[0, : len(heard)] = heard
            stop = min(self._done + size, self.end if ended else len(self._mel))
            samples = self._programs.vocoder({"mel": window})["audio"][0]
            keep = slice((self._done - first) * self._hop, (stop - first) * self._hop)
            audio.append(np.clip(samples[keep], -1.0, 1.0))
            self._done, self._size = stop, MAX_VOCODED
