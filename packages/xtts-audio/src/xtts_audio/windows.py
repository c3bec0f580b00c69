"""Where a stream's chunks and their windows lie, in frames: the rules a chunk of a
decoding is cut by and a vocoder window is placed by, one owner for TensorFlow's streams
(`xtts_train`) and the exported runtime's (`xtts_runtime`). Plain integers: no
TensorFlow."""

from __future__ import annotations

__all__ = ["CHUNK_FRAMES", "chunk_stop", "window_start"]

CHUNK_FRAMES = 32  # frames a streamed chunk holds unless told


def chunk_stop(first: int, chunk: int, end: int | None) -> int:
    """The frame after the chunk that starts at `first`: `chunk` frames on, or the
    stream's `end` (its last frame + 1) once known, if sooner."""
    return first + chunk if end is None else min(first + chunk, end)


def window_start(start: int, *, width: int, context: int, frames: int | None = None) -> int:
    """The first frame of the window of `width` frames that vocodes the chunk from frame
    `start`: `context` frames before it, shifted inward at the mel's ends (at 0, and at
    `frames` when the mel's length is known and at least `width`), so the chunk has
    `context` frames on each side or reaches the mel's own end.

    With `frames` None (a mel still arriving) the window only shifts at the start: a
    chunk of at most `width - 2 * context` frames with its `context` frames after it
    arrived has the same window as in the whole mel.
    """
    first = max(start - context, 0)
    return first if frames is None else max(min(first, frames - width), 0)
