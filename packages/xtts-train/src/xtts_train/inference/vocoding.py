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

import logging
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np
import tensorflow as tf

from xtts_train.compile.compiler import resolve
from xtts_train.config import StackConfig
from xtts_train.errors import ConfigError, XttsTrainError
from xtts_train.models.vocoder.model import AUTO_COMPILERS, Vocoder, vocode_chunks, window_start
from xtts_train.runs.loading import load_run_config, load_vocoder
from xtts_train.runs.media import silence_feature, to_waveform

__all__ = [
    "STREAM_NEEDS_VOCODER",
    "VocoderStream",
    "Vocoding",
    "Waveforms",
    "Window",
    "check_same_audio",
    "check_vocoder",
]

_log = logging.getLogger(__name__)


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


class Window(NamedTuple):
    """One window of `Vocoding`'s compiled program and the samples of it a chunk keeps.

    Attributes:
        mel: float32 [width, n_mels], the frames the window hears.
        keep: the chunk's own samples of the window's `width * hop_length`.
    """

    mel: np.ndarray
    keep: slice


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
        batches: the window program's batch sizes for `vocode` (each compiled once; a
            whole mel always runs at 1): windows vocoded together run at the smallest
            that holds them, a lone one at `batches[0]`.

    Raises:
        ConfigError: a batch size that is not a positive int.
    """

    def __init__(self, model: Vocoder, *, chunk_frames: int = 128, compiler: str = "auto",
                 batches: tuple[int, ...] = (1,)) -> None:  # fmt: skip
        if not batches or any(isinstance(b, bool) or not isinstance(b, int) or b < 1
                              for b in batches):  # fmt: skip
            raise ConfigError(f"Expected batches: positive ints, received: {batches!r}")
        self.model, self.chunk = model, chunk_frames
        self.context = model.receptive_frames
        self.width = chunk_frames + 2 * self.context
        self.batches = tuple(sorted(set(batches)))
        xla = resolve(compiler, "decode", table=AUTO_COMPILERS) == "xla"
        self._programs = {
            b: tf.function(lambda mel: model(mel), jit_compile=xla, input_signature=[
                tf.TensorSpec([b, self.width, model.config.n_mels], tf.float32)], autograph=False)
            for b in sorted({1, *self.batches})
        }  # fmt: skip

    @property
    def traces(self) -> dict[str, int]:
        """Times each window program was traced (batch size → count)."""
        return {f"vocoder x{b}": f.experimental_get_tracing_count()
                for b, f in self._programs.items()}  # fmt: skip

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
                              context_frames=self.context, window=self._programs[1])  # fmt: skip
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
            yield from self.vocode(stream.push(piece))
        yield from self.vocode(stream.end())

    def pushed(self, *, silence: float) -> VocoderStream:
        """`stream`'s windows for a mel its caller hands over piece by piece
        (`VocoderStream.push`, then `VocoderStream.end`), vocoded by `vocode`: a server's,
        whose pieces come from decoder slots and whose streams' windows run together."""
        return VocoderStream(self, silence=silence)

    def window(self, mel: np.ndarray, start: int, *, silence: float,
               frames: int | None = None) -> Window:  # fmt: skip
        """The window that vocodes frames `start .. start + chunk - 1` of `mel` (float32
        [arrived, n_mels], the frames arrived so far; `frames`: the whole mel's length,
        None while it is still arriving): `stream`'s rule."""
        first = window_start(start, width=self.width, context=self.context, frames=frames)
        window = np.full([self.width, mel.shape[1]], silence, np.float32)
        arrived = mel[first : first + self.width]
        window[: len(arrived)] = arrived
        hop, stop = self.model.config.hop_length, min(start + self.chunk, len(mel))
        return Window(window, slice((start - first) * hop, (stop - first) * hop))

    def vocode(self, windows: Sequence[Window]) -> list[np.ndarray]:
        """Each window's kept samples (float32), the windows run together: in batches of
        the smallest size in `batches` that holds the rest (filled with zeros, never kept),
        else the largest. A window's samples are the same in any batch beside any others as
        long as the program's rows do not depend on each other or on the batch size, which
        `warm_up` checks."""
        out, left = [], list(windows)
        while left:
            size = next((b for b in self.batches if b >= len(left)), self.batches[-1])
            batch, left = left[:size], left[size:]
            mels = np.zeros([size, self.width, self.model.config.n_mels], np.float32)
            for row, window in enumerate(batch):
                mels[row] = window.mel
            audio = self._programs[size](tf.constant(mels)).numpy()  # (size, width * hop)
            out += [audio[row, w.keep] for row, w in enumerate(batch)]
        return out

    def warm_up(self) -> None:
        """Runs each window program once (XLA compiles at its first run) and checks that a
        window's samples do not depend on its batch, so that a stream's audio never
        depends on the streams beside it: at the largest size, rows of other order or
        other neighbours must give the same samples (else every window runs alone), and
        each smaller size must give the largest's (else it is not used; logged). On these
        CPUs the kernels of some small batches round differently from larger ones. With
        one window a call (`batches` (1,)) there is nothing to check: the program runs once."""
        if self.batches == (1,):
            self._programs[1](tf.zeros([1, self.width, self.model.config.n_mels]))
            return
        top = self.batches[-1]
        rng = np.random.default_rng(0)
        mels = rng.uniform(-4.0, 1.0, [top, self.width, self.model.config.n_mels])
        mels = tf.constant(mels.astype(np.float32))
        ref = self._programs[top](mels).numpy()
        alone = tf.concat([mels[:1], tf.zeros_like(mels[1:])], axis=0)
        program = self._programs[top]
        rows_apart = (np.array_equal(program(mels[::-1]).numpy(), ref[::-1])
                      and np.array_equal(program(alone).numpy()[0], ref[0]))  # fmt: skip
        agree = [b for b, program in self._programs.items()
                 if np.array_equal(program(mels[:b]).numpy(), ref[:b])]  # fmt: skip
        if not rows_apart:
            _log.warning("the vocoder's rows depend on their neighbours here: every window "
                         "runs alone")  # fmt: skip
            self.batches = (1,)
        elif set(self.batches) - set(agree):
            _log.warning("the vocoder's batches of %s round differently from %d's here: "
                         "not used", sorted(set(self.batches) - set(agree)), top)  # fmt: skip
            self.batches = tuple(b for b in self.batches if b in agree)


class VocoderStream:
    """A mel cut into `Vocoding` windows as it arrives (`Vocoding.stream`'s rule).

    Args:
        vocoding: the compiled vocoder.
        silence: the feature value of silence (`silence_feature`).
    """

    def __init__(self, vocoding: Vocoding, *, silence: float) -> None:
        self._vocoding, self._silence = vocoding, silence
        self._mel = np.zeros([0, vocoding.model.config.n_mels], np.float32)
        self._done = 0  # frames cut into windows

    def push(self, piece: np.ndarray) -> list[Window]:
        """The windows of the chunks `piece` (float32 [frames, n_mels], the next frames)
        makes final (`Vocoding.vocode` gives their float32 [chunk_frames * hop_length])."""
        v = self._vocoding
        self._mel = np.concatenate([self._mel, np.asarray(piece, np.float32)])
        windows = []
        while len(self._mel) >= self._done + v.chunk + v.context:
            windows.append(v.window(self._mel, self._done, silence=self._silence))
            self._done += v.chunk
        return windows

    def end(self) -> list[Window]:
        """The rest, now that the mel's end is known (the windows shift inward); the last
        chunk keeps its own frames' samples."""
        v, windows = self._vocoding, []
        while self._done < len(self._mel):
            windows.append(v.window(self._mel, self._done, silence=self._silence,
                                    frames=len(self._mel)))  # fmt: skip
            self._done += v.chunk
        return windows


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
        batches: the vocoder window's batch sizes for streams vocoded together
            (`Vocoding`'s).

    Raises:
        XttsTrainError: `vocoder` is not a vocoder run, has no checkpoint, or was trained
            on other audio settings (each field named with both values).
    """

    def __init__(self, run: Path, stack: StackConfig, *, vocoder: str | Path | None = None,
                 griffin_lim_iters: int = 32, chunk_frames: int | None = None,
                 batches: tuple[int, ...] = (1,)) -> None:  # fmt: skip
        self.audio, self.griffin_lim_iters = stack.audio, griffin_lim_iters
        self.vocoder = None if vocoder is None else Path(vocoder)
        self._vocoding = None
        if self.vocoder is not None:
            check_vocoder(self.vocoder, Path(run), stack)
            _, network = load_vocoder(self.vocoder)
            chunk = {} if chunk_frames is None else {"chunk_frames": chunk_frames}
            self._vocoding = Vocoding(network, compiler=stack.train.compiler, batches=batches,
                                      **chunk)  # fmt: skip
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
        """`stream`'s windows for features handed over piece by piece
        (`VocoderStream.push`, then `end`), for `vocode`.

        Raises:
            XttsTrainError: no vocoder (Griffin-Lim needs the whole mel).
        """
        if self._vocoding is None:
            raise XttsTrainError(STREAM_NEEDS_VOCODER)
        return self._vocoding.pushed(silence=self._silence)

    def vocode(self, windows: Sequence[Window]) -> list[np.ndarray]:
        """The audio of `pushed` streams' windows, run together (`Vocoding.vocode`):
        float32 in [-1, 1] each.

        Raises:
            XttsTrainError: no vocoder.
        """
        if self._vocoding is None:
            raise XttsTrainError(STREAM_NEEDS_VOCODER)
        return [np.clip(audio, -1.0, 1.0) for audio in self._vocoding.vocode(windows)]

    @property
    def batches(self) -> tuple[int, ...]:
        """The window batch sizes `vocode` runs (after `warm_up`'s check); () for
        Griffin-Lim."""
        return () if self._vocoding is None else self._vocoding.batches

    @property
    def traces(self) -> dict[str, int]:
        """Times each vocoder program was traced (none for Griffin-Lim)."""
        return {} if self._vocoding is None else self._vocoding.traces

    def warm_up(self) -> None:
        """Compiles the vocoder's program now (e.g. before timing a stream); nothing to do
        for Griffin-Lim."""
        if self._vocoding is not None:
            self._vocoding.warm_up()
