"""A vocoder run applied to a text-to-mel run's features: `Waveforms`, one owner for
`synthesize`, `evaluate` and the demo (a vocoder run, else Griffin-Lim), and `Vocoding`,
the vocoder compiled once for any length.

`Vocoding` runs a vocoder on whole utterances of any length through one compiled program:
windows of `chunk_frames + 2 * receptive_frames` frames, each keeping its chunk's samples
(`xtts_train.models.vocoder.model.vocode_chunks`), so a new length compiles nothing. The
same program vocodes a mel that arrives in pieces (`Vocoding.stream`), a chunk as soon as
the frames it hears have arrived.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np
import tensorflow as tf

from xtts_train.compile.compiler import resolve
from xtts_train.config import StackConfig
from xtts_train.errors import XttsTrainError
from xtts_train.models.vocoder.model import AUTO_COMPILERS, Vocoder, vocode_chunks, window_start
from xtts_train.runs.loading import load_run_config, load_vocoder
from xtts_train.runs.media import silence_feature, to_waveform

__all__ = [
    "STREAM_NEEDS_VOCODER",
    "VocoderStream",
    "Vocoding",
    "Waveforms",
    "check_same_audio",
    "check_vocoder",
]


def check_same_audio(vocoder: Path, vocoder_stack: StackConfig, run: Path,
                     run_stack: StackConfig) -> None:  # fmt: skip
    """A vocoder turns the features it was trained on into audio: those of another recipe
    (sample rate, hop, mels, band, scaling) would be misread, so they are refused.

    Raises:
        XttsTrainError: naming each differing `audio` field with both runs' values.
    """
    ours, theirs = vocoder_stack.audio.to_dict(), run_stack.audio.to_dict()
    differ = [f"audio.{k}: vocoder {ours.get(k)!r}, text-to-mel {theirs.get(k)!r}"
              for k in sorted(set(ours) | set(theirs)) if ours.get(k) != theirs.get(k)]  # fmt: skip
    if differ:
        raise XttsTrainError(
            f"Expected the vocoder {vocoder} trained on the features of {run}, received other "
            f"audio settings ({'; '.join(differ)}); train a vocoder with the run's audio "
            f"section"
        )


def check_vocoder(vocoder: Path, run: Path, run_stack: StackConfig | None = None) -> None:
    """Refuse, from their configs alone, a vocoder run that cannot voice `run`'s features.

    Args:
        vocoder: the vocoder run.
        run: the text-to-mel run (named in the message).
        run_stack: its config, when the caller has it (None: read from `run`).

    Raises:
        XttsTrainError: `vocoder` is not a vocoder run, `run` not a text-to-mel run, or
            their audio settings differ (`check_same_audio`).
    """
    if run_stack is None:
        run_stack = load_run_config(run, "text_to_mel")
    check_same_audio(vocoder, load_run_config(vocoder, "vocoder"), run, run_stack)


# Griffin-Lim estimates phases from the whole mel: pieces of it would not join.
STREAM_NEEDS_VOCODER = (
    "Expected --vocoder with --stream, received none: Griffin-Lim reconstructs the phases "
    "of the whole mel at once and cannot stream without audible joins; pass --vocoder RUN "
    "(a vocoder run trained on this run's features), or leave out --stream"
)


class Vocoding:
    """A vocoder compiled once for utterances of any length.

    A mel of F frames is vocoded in windows of `chunk_frames + 2 * context` frames (the
    model's receptive field each side), shifted inward at the ends, keeping each chunk's
    own samples: the whole-mel output up to float rounding. A mel shorter than a window is
    padded at its end with silence (the feature scale's floor), which only the last
    `context` frames can hear.

    Args:
        model: a built vocoder.
        chunk_frames: frames each window contributes.
        compiler: `train.compiler` (`auto`, `xla` or `graph`), resolved for decoding.
    """

    def __init__(self, model: Vocoder, *, chunk_frames: int = 128, compiler: str = "auto"):
        self.model, self.chunk = model, chunk_frames
        self.context = model.receptive_frames
        self.width = chunk_frames + 2 * self.context
        spec = tf.TensorSpec([1, self.width, model.config.n_mels], tf.float32)
        xla = resolve(compiler, "decode", table=AUTO_COMPILERS) == "xla"
        self._window = tf.function(lambda mel: model(mel), input_signature=[spec],
                                   jit_compile=xla)  # fmt: skip

    def __call__(self, mel: np.ndarray, *, silence: float) -> np.ndarray:
        """Samples of a mel.

        Args:
            mel: float32 [F, n_mels] features.
            silence: the feature value of silence (`silence_feature`).

        Returns:
            float32 [F * hop_length].
        """
        frames = len(mel)
        padded = np.full([max(frames, self.width), mel.shape[1]], silence, np.float32)
        padded[:frames] = mel
        audio = vocode_chunks(self.model, padded[None], chunk_frames=self.chunk,
                              context_frames=self.context, window=self._window)  # fmt: skip
        return audio[0, : frames * self.model.config.hop_length].numpy()

    def stream(self, pieces: Iterable[np.ndarray], *, silence: float) -> Iterator[np.ndarray]:
        """Samples of a mel that arrives in pieces (a decoding's chunks), a chunk at a time.

        Each chunk of `chunk_frames` frames is vocoded in one window of the compiled shape
        as soon as the `context` frames after it have arrived (the last ones once the
        pieces end), and nothing before it is vocoded again; frames of its window not
        arrived yet are silence, which the chunk cannot hear. Joined, the samples are
        `self(mel)` of the whole mel up to float rounding. `pushed` is the same stream
        fed by its caller.

        Args:
            pieces: float32 [frames_i, n_mels] each, the mel in order (any sizes).
            silence: the feature value of silence (`silence_feature`).

        Yields:
            float32 [chunk_frames * hop_length] (the last chunk: its own frames' samples).
        """
        stream = self.pushed(silence=silence)
        for piece in pieces:
            yield from stream.push(piece)
        yield from stream.end()

    def pushed(self, *, silence: float) -> VocoderStream:
        """`stream`'s vocoding for a mel its caller hands over piece by piece
        (`VocoderStream.push`, then `VocoderStream.end`): a server's, whose pieces come
        from decoder slots."""
        return VocoderStream(self, silence=silence)

    def warm_up(self) -> None:
        """Runs the window program once (XLA compiles it at its first run), e.g. before
        timing a stream."""
        self._window(tf.zeros([1, self.width, self.model.config.n_mels]))

    def samples(self, mel: np.ndarray, start: int, *, silence: float,
               frames: int | None = None) -> np.ndarray:  # fmt: skip
        """float32 samples of frames `start .. start + chunk - 1` of `mel` (frames arrived
        so far; `frames`: the whole mel's length, None while it is still arriving), from
        one window of the compiled program: a chunk of `stream`."""
        first = window_start(start, width=self.width, context=self.context, frames=frames)
        window = np.full([self.width, mel.shape[1]], silence, np.float32)
        arrived = mel[first : first + self.width]
        window[: len(arrived)] = arrived
        hop, stop = self.model.config.hop_length, min(start + self.chunk, len(mel))
        audio = self._window(tf.constant(window[None]))[0]  # (width * hop,)
        return audio[(start - first) * hop : (stop - first) * hop].numpy()


class VocoderStream:
    """A mel vocoded as it arrives, a `Vocoding` chunk at a time (`Vocoding.stream`'s rule).

    Args:
        vocoding: the compiled vocoder.
        silence: the feature value of silence (`silence_feature`).
    """

    def __init__(self, vocoding: Vocoding, *, silence: float) -> None:
        self._vocoding, self._silence = vocoding, silence
        self._mel = np.zeros([0, vocoding.model.config.n_mels], np.float32)
        self._done = 0  # frames vocoded

    def push(self, piece: np.ndarray) -> list[np.ndarray]:
        """The chunks `piece` (float32 [frames, n_mels], the next frames) makes final:
        float32 [chunk_frames * hop_length] each."""
        v = self._vocoding
        self._mel = np.concatenate([self._mel, np.asarray(piece, np.float32)])
        chunks = []
        while len(self._mel) >= self._done + v.chunk + v.context:
            chunks.append(v.samples(self._mel, self._done, silence=self._silence))
            self._done += v.chunk
        return chunks

    def end(self) -> list[np.ndarray]:
        """The rest, now that the mel's end is known (the windows shift inward); the last
        chunk has its own frames' samples."""
        v, chunks = self._vocoding, []
        while self._done < len(self._mel):
            chunks.append(v.samples(self._mel, self._done, silence=self._silence,
                                   frames=len(self._mel)))  # fmt: skip
            self._done += v.chunk
        return chunks


class Waveforms:
    """A text-to-mel run's features turned into audio: through a vocoder run trained on the
    same audio settings (checked when built: nothing is decoded for a misfit), else
    Griffin-Lim peak-normalised to 0.9. One owner for `synthesize`, `evaluate` and the demo.

    Args:
        run: the text-to-mel run whose features are turned into audio.
        stack: its config.
        vocoder: a vocoder run (`fit --task vocoder`); None: Griffin-Lim.
        griffin_lim_iters: iterations when there is no vocoder.
        chunk_frames: frames each vocoder window contributes (`Vocoding`'s; None: its
            default); a stream's audio comes a chunk at a time.

    Raises:
        XttsTrainError: `vocoder` is not a vocoder run, has no checkpoint, or was trained
            on other audio settings (each field named with both values).
    """

    def __init__(self, run: Path, stack: StackConfig, *, vocoder: str | Path | None = None,
                 griffin_lim_iters: int = 32, chunk_frames: int | None = None) -> None:  # fmt: skip
        self.audio, self.griffin_lim_iters = stack.audio, griffin_lim_iters
        self.vocoder = None if vocoder is None else Path(vocoder)
        self._vocoding = None
        if self.vocoder is not None:
            check_vocoder(self.vocoder, Path(run), stack)
            _, network = load_vocoder(self.vocoder)
            chunk = {} if chunk_frames is None else {"chunk_frames": chunk_frames}
            self._vocoding = Vocoding(network, compiler=stack.train.compiler, **chunk)
            self._silence = silence_feature(stack.audio)

    def __call__(self, features: np.ndarray) -> tf.Tensor:
        """float32 [samples] in [-1, 1] of features float32 [frames, n_mels]: `frames * hop`
        samples from the vocoder, Griffin-Lim's own count without one."""
        if self._vocoding is None:
            return to_waveform(features, self.audio, n_iter=self.griffin_lim_iters)
        wave = self._vocoding(np.asarray(features, np.float32), silence=self._silence)
        return tf.clip_by_value(tf.constant(wave), -1.0, 1.0)

    def stream(self, pieces: Iterable[np.ndarray]) -> Iterator[np.ndarray]:
        """Audio of features that arrive in pieces, a vocoder chunk at a time
        (`Vocoding.stream`): float32 [chunk_frames * hop] in [-1, 1] each, joined what
        `self(features)` returns for the whole.

        Args:
            pieces: float32 [frames_i, n_mels] each, the features in order.

        Raises:
            XttsTrainError: no vocoder (Griffin-Lim needs the whole mel).
        """
        if self._vocoding is None:
            raise XttsTrainError(STREAM_NEEDS_VOCODER)
        chunks = self._vocoding.stream(pieces, silence=self._silence)
        return (np.clip(chunk, -1.0, 1.0) for chunk in chunks)

    def pushed(self) -> VocoderStream:
        """`stream`'s vocoding for features handed over piece by piece
        (`VocoderStream.push`, then `end`); its chunks are not yet clipped to [-1, 1].

        Raises:
            XttsTrainError: no vocoder (Griffin-Lim needs the whole mel).
        """
        if self._vocoding is None:
            raise XttsTrainError(STREAM_NEEDS_VOCODER)
        return self._vocoding.pushed(silence=self._silence)

    def warm_up(self) -> None:
        """Compiles the vocoder's program now (e.g. before timing a stream); nothing to do
        for Griffin-Lim."""
        if self._vocoding is not None:
            self._vocoding.warm_up()
