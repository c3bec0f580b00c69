"""A text decoded as pieces and spoken whole: the pieces of `text_pieces` (sentences, then
clauses, then words, each at most `decode.split_symbols` symbols) decoded side by
side or streamed in turn, and joined in the features with the silence each pause asks
for, so that the vocoder (or Griffin-Lim) hears one mel and the joins make no click.

One path for `synthesize` (whole or streamed) and `evaluate`: a text that fits in one
piece decodes exactly as it always has.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import NamedTuple

import numpy as np
from tqdm.auto import tqdm

import xtts_audio as xa
from xtts_data.joins import pause_frames  # its owner: joined training items pause the same way
from xtts_train.models.text_to_mel.decoding import Decoded, Decoding, Encoded, Ending
from xtts_train.models.text_to_mel.streaming import MelStream, Streaming
from xtts_train.runs.media import decoded_frames, silence_feature

__all__ = [
    "PieceMels",
    "Spoken",
    "decode_rows",
    "join_pieces",
    "pause_frames",
    "pause_silence",
    "piece_batch",
    "speak_pieces",
    "stream_pieces",
]

# Pieces of one text decoded side by side: rows of one program, padded to a power of two
# so that texts of 2, 3 or 4 pieces share programs (a longer text takes several batches).
MAX_PIECE_BATCH = 4


class Spoken(NamedTuple):
    """A text's pieces decoded and joined.

    Attributes:
        features: float32 [frames, n_mels]: the pieces' frames (each cut by
            `decoded_frames`) with each pause's silence between them.
        attention: float32 [frames, symbols]: each piece's alignment head over its own
            symbols, placed at its frames and symbols (zeros elsewhere and in pauses).
        stopped: the stop token ended every piece inside its buffer.
        alignment: the pieces' `alignment_score`s, weighted by their decoded frames.
        lengths: decoded frames of each piece (`Ending.length`).
    """

    features: np.ndarray
    attention: np.ndarray
    stopped: bool
    alignment: float
    lengths: list[int]


def piece_batch(pieces: int) -> int:
    """Rows of the program that decodes a text of `pieces` pieces side by side: 1, 2 or 4."""
    return 1 << math.ceil(math.log2(min(max(pieces, 1), MAX_PIECE_BATCH)))


def pause_silence(seconds: float, audio: xa.MelConfig) -> np.ndarray:
    """float32 [pause_frames, n_mels]: a pause of `seconds` in the features' silence."""
    return np.full([pause_frames(seconds, audio), audio.n_mels], silence_feature(audio),
                   np.float32)  # fmt: skip


def decode_rows(decoding: Decoding, rows: Sequence[Sequence[int]],
                references: Sequence[np.ndarray], *, progress: bool = False,
                desc: str = "decode") -> list[Decoded]:  # fmt: skip
    """Token rows decoded `decoding.batch_size` at a time, each in its own voice, with a
    progress bar over the rows (shown for more than one batch).

    Args:
        decoding: the compiled decoding; its buffer holds the longest row's speech.
        rows: token ids of each text or piece.
        references: float32 [frames, n_mels] of each row's voice.
        progress: show the bar; desc: its label.
    """
    shown = progress and len(rows) > decoding.batch_size
    with tqdm(total=len(rows), desc=desc, unit="piece", disable=not shown) as bar:
        return decoding(rows, list(references), done=bar.update)


def speak_pieces(decoding: Decoding, pieces: Sequence[Encoded], reference: np.ndarray,
                 audio: xa.MelConfig, *, progress: bool = False) -> Spoken:  # fmt: skip
    """Decode a text's `pieces` side by side (`decoding.batch_size` at a time, one voice),
    each cut by `decoded_frames`, and join them (`join_pieces`).

    Args:
        decoding: the compiled decoding; its buffer holds the longest piece.
        pieces: the text's pieces (`text_pieces`), at least one.
        reference: float32 [frames, n_mels], the voice's mel.
        audio: the run's recipe (frame rate, the features' silence).
        progress: a progress bar over the pieces (shown for more than one batch).
    """
    decoded = decode_rows(decoding, [p.ids for p in pieces], [reference] * len(pieces),
                          progress=progress)  # fmt: skip
    mels = [d.buffer[: int(decoded_frames(d.length, len(p.ids), decoding.max_frames, audio))]
            for p, d in zip(pieces, decoded, strict=True)]  # fmt: skip
    return join_pieces(pieces, mels, decoded, audio)


def stream_pieces(streaming: Streaming, pieces: Sequence[Encoded], reference: np.ndarray,
                  audio: xa.MelConfig, spoken: list[Spoken]) -> Iterator[np.ndarray]:  # fmt: skip
    """The pieces' mel streamed in turn, a chunk at a time, each pause's silence between
    them: the first piece's audio can play while the rest is decoded. Every piece's
    programs are compiled before this returns (`Streaming.__call__`), none while it streams.

    Args:
        streaming: the compiled streaming decoder; its buffer holds the longest piece.
        pieces, reference, audio: as `speak_pieces`'s.
        spoken: an empty list; once the stream is exhausted it holds the joined `Spoken`
            (its features are the chunks yielded, joined).

    Returns:
        float32 [frames_i, n_mels] chunks in order.
    """
    joined = PieceMels(pieces, audio, max_frames=streaming.max_frames)
    streams = [streaming(p.ids, reference, min_frames=floor)
               for p, floor in zip(pieces, joined.floors, strict=True)]  # fmt: skip
    return _chunks(streams, joined, spoken)


def _chunks(streams: list[MelStream], joined: PieceMels,
            spoken: list[Spoken]) -> Iterator[np.ndarray]:  # fmt: skip
    """`stream_pieces`' chunks: each stream's, then its piece's pause in silence."""
    for stream in streams:
        for chunk in stream:
            yield joined.add(chunk)
        yield from joined.end_piece(stream.ending)
    spoken.append(joined.spoken())


class PieceMels:
    """A text's pieces' mel as their decodings hand it out, chunk by chunk and piece by
    piece, with each pause's silence after its piece: `stream_pieces`' order, for a caller
    that decodes the pieces itself (a server's decoder slots).

    Args:
        pieces: the text's pieces (`text_pieces`), decoded in order.
        audio: the run's recipe.
        max_frames: the decoding buffer of each piece.

    Attributes:
        floors: frames each piece must be decoded to at least (its `min_frames`):
            `decoded_frames`' floor, so a stop token that fires at once still says it.
    """

    def __init__(self, pieces: Sequence[Encoded], audio: xa.MelConfig, *,
                 max_frames: int) -> None:  # fmt: skip
        self.pieces, self._audio = list(pieces), audio
        self.floors = [int(decoded_frames(0, len(p.ids), max_frames, audio)) for p in pieces]
        self._chunks: list[np.ndarray] = []  # the piece decoding now
        self._mels: list[np.ndarray] = []
        self._endings: list[Ending] = []

    @property
    def piece(self) -> int:
        """The index of the piece decoding now (`len(pieces)` once all ended)."""
        return len(self._mels)

    def add(self, chunk: np.ndarray) -> np.ndarray:
        """The next chunk float32 [frames, n_mels] of the piece decoding now, returned."""
        self._chunks.append(chunk)
        return chunk

    def end_piece(self, ending: Ending) -> list[np.ndarray]:
        """The piece decoding now ended (`ending`); returns its pause's silence float32
        [pause_frames, n_mels] to play next, or nothing (after the last piece, or none)."""
        piece = self.pieces[self.piece]
        self._mels.append(np.concatenate(self._chunks))
        self._chunks, self._endings = [], [*self._endings, ending]
        if not pause_frames(piece.pause, self._audio):  # 0 after the last piece
            return []
        return [pause_silence(piece.pause, self._audio)]

    def spoken(self) -> Spoken:
        """The text's `Spoken`, once every piece ended (`join_pieces`)."""
        return join_pieces(self.pieces, self._mels, self._endings, self._audio)


def join_pieces(pieces: Sequence[Encoded], mels: Sequence[np.ndarray],
                endings: Sequence[Decoded | Ending], audio: xa.MelConfig) -> Spoken:  # fmt: skip
    """The pieces' mels joined with each pause's silence, and their attention placed
    block by block; one piece is returned as it is.

    Args:
        pieces: the text's pieces (their pauses).
        mels: float32 [frames_i, n_mels] of each piece, as it should sound.
        endings: how each piece's decoding ended (its length, stop, attention, score).
        audio: the run's recipe.
    """
    if len(pieces) == 1:
        (mel,), (end,) = mels, endings
        return Spoken(mel, end.attention, end.stopped, end.alignment, [end.length])
    gaps = [pause_frames(p.pause, audio) for p in pieces[:-1]] + [0]
    pauses = [p.pause for p in pieces[:-1]] + [0.0]
    features = np.concatenate([part for mel, pause in zip(mels, pauses, strict=True)
                               for part in (mel, pause_silence(pause, audio))])  # fmt: skip
    attention = np.zeros([len(features), sum(e.attention.shape[1] for e in endings)], np.float32)
    row = column = 0
    for mel, gap, end in zip(mels, gaps, endings, strict=True):
        rows, columns = end.attention.shape
        attention[row : row + rows, column : column + columns] = end.attention
        row, column = row + len(mel) + gap, column + columns
    lengths = [e.length for e in endings]
    alignment = float(np.average([e.alignment for e in endings], weights=lengths))
    return Spoken(features, attention, all(e.stopped for e in endings), alignment, lengths)
