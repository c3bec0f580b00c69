"""`vocode`: copy synthesis, the standard check of a vocoder. Each recording's own mel goes
through the trained vocoder, and the result is scored against the recording beside
Griffin-Lim's from the same mel.

`Vocoding` runs a vocoder on whole utterances of any length through one compiled program:
windows of `chunk_frames + 2 * receptive_frames` frames, each keeping its chunk's samples
(`xtts_train.models.vocoder.model.vocode_chunks`), so a new length compiles nothing. The
same program vocodes a mel that arrives in pieces (`Vocoding.stream`), a chunk as soon as
the frames it hears have arrived.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf
from tqdm import tqdm

import xtts_audio as xa
import xtts_data as xd
from xtts_train.compile.compiler import resolve
from xtts_train.config import StackConfig
from xtts_train.errors import XttsTrainError
from xtts_train.models.vocoder.model import Vocoder, vocode_chunks, window_start
from xtts_train.runs.loading import latest_step, load_run_config, load_vocoder
from xtts_train.runs.media import silence_feature, to_waveform

__all__ = [
    "STREAM_NEEDS_VOCODER",
    "VocodeReport",
    "Vocoding",
    "Waveforms",
    "check_same_audio",
    "check_vocoder",
    "log_mel_distance",
    "vocode",
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
        xla = resolve(compiler, "decode", task="vocoder") == "xla"
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
        `self(mel)` of the whole mel up to float rounding.

        Args:
            pieces: float32 [frames_i, n_mels] each, the mel in order (any sizes).
            silence: the feature value of silence (`silence_feature`).

        Yields:
            float32 [chunk_frames * hop_length] (the last chunk: its own frames' samples).
        """
        mel = np.zeros([0, self.model.config.n_mels], np.float32)
        done = 0  # frames vocoded
        for piece in pieces:
            mel = np.concatenate([mel, np.asarray(piece, np.float32)])
            while len(mel) >= done + self.chunk + self.context:
                yield self._chunk(mel, done, silence=silence)
                done += self.chunk
        while done < len(mel):  # the mel's end is known: the windows shift inward
            yield self._chunk(mel, done, silence=silence, frames=len(mel))
            done += self.chunk

    def warm_up(self) -> None:
        """Runs the window program once (XLA compiles it at its first run), e.g. before
        timing a stream."""
        self._window(tf.zeros([1, self.width, self.model.config.n_mels]))

    def _chunk(self, mel: np.ndarray, start: int, *, silence: float,
               frames: int | None = None) -> np.ndarray:  # fmt: skip
        """Samples of frames `start .. start + chunk - 1` of `mel` (frames arrived so far;
        `frames`: the whole mel's length, None while it is still arriving)."""
        first = window_start(start, width=self.width, context=self.context, frames=frames)
        window = np.full([self.width, mel.shape[1]], silence, np.float32)
        arrived = mel[first : first + self.width]
        window[: len(arrived)] = arrived
        hop, stop = self.model.config.hop_length, min(start + self.chunk, len(mel))
        audio = self._window(tf.constant(window[None]))[0]  # (width * hop,)
        return audio[(start - first) * hop : (stop - first) * hop].numpy()


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

    def warm_up(self) -> None:
        """Compiles the vocoder's program now (e.g. before timing a stream); nothing to do
        for Griffin-Lim."""
        if self._vocoding is not None:
            self._vocoding.warm_up()


def log_mel_distance(audio: np.ndarray, truth: np.ndarray, config: xa.MelConfig) -> float:
    """Mean absolute difference of the recipe's features of two waveforms of one length,
    frame by frame (no alignment: a copy synthesis keeps the recording's timing)."""
    a, b = (xa.mel_features(tf.constant(x, tf.float32), config) for x in (audio, truth))
    return float(tf.reduce_mean(tf.abs(a - b)))


@dataclasses.dataclass(frozen=True)
class VocodeReport:
    """What `vocode` measured: per utterance its `id`, `seconds`, and the log-mel distance
    to the recording of the vocoder's (`vocoder`) and Griffin-Lim's (`griffin_lim`)
    re-synthesis of the recording's own mel; and `realtime`, seconds of audio the
    compiled vocoder wrote per second of wall time (compile excluded: a first call is
    made before the clock starts)."""

    run: Path
    data: Path
    split: str
    step: int
    griffin_lim_iters: int
    utterances: list[dict[str, Any]]
    realtime: float

    @property
    def summary(self) -> dict[str, float]:
        vocoder = float(np.mean([u["vocoder"] for u in self.utterances]))
        griffin_lim = float(np.mean([u["griffin_lim"] for u in self.utterances]))
        return {"vocoder_mean": vocoder, "griffin_lim_mean": griffin_lim,
                "ratio": vocoder / griffin_lim, "realtime": self.realtime}  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        return {"run": str(self.run), "data": str(self.data), "split": self.split,
                "step": self.step, "griffin_lim_iters": self.griffin_lim_iters,
                "summary": self.summary, "utterances": self.utterances}  # fmt: skip

    def format(self) -> str:
        head = f"{'id':<24}{'seconds':>8}{'vocoder':>9}{'GL':>8}"
        rows = [f"{u['id'][:23]:<24}{u['seconds']:>8.2f}{u['vocoder']:>9.3f}"
                f"{u['griffin_lim']:>8.3f}" for u in self.utterances]  # fmt: skip
        s = self.summary
        tail = (f"{len(self.utterances)} utterances ({self.split}) of {self.data}, vocoder step "
                f"{self.step}: log-mel distance to the recording {s['vocoder_mean']:.3f} "
                f"(vocoder) vs {s['griffin_lim_mean']:.3f} (Griffin-Lim, "
                f"{self.griffin_lim_iters} iterations): {s['ratio']:.2f}x; the vocoder ran "
                f"{self.realtime:.0f}x faster than real time")  # fmt: skip
        return "\n".join([head, *rows, tail])


def vocode(run: str | Path, data: str | Path, out: str | Path, *, split: str = "val",
           n: int | None = None, step: int | None = None, griffin_lim_iters: int = 60,
           progress: bool = False) -> VocodeReport:  # fmt: skip
    """Copy synthesis: each utterance's own mel through the vocoder of `run`, written as
    `out/<id>.wav`, with Griffin-Lim's from the same mel as `out/<id>.gl.wav`, both scored
    by their log-mel distance to the recording, which is written as `out/<id>.recording.wav`
    (as the features saw it: resampled, trimmed, cut to the vocoded length) for listening
    and for `xtts-bench vocoder`'s PESQ, STOI and word error rates.

    Args:
        run: a vocoder run (`xtts-train fit --task vocoder`).
        data: a cache built with `data.keep_audio`, or a corpus, with the run's audio
            settings (a cache of other settings is an error; nothing is resampled but the
            corpus's files, as `prepare` resamples them).
        split: `"val"`: the ids the run's `data.val_fraction` held out; `"all"`: every row.
        n: the first `n` utterances by id (None: all of the split).
        step: the checkpoint of this step (None: the last).
        griffin_lim_iters: iterations of the Griffin-Lim baseline.
        progress: a progress bar over the utterances.

    Raises:
        XttsTrainError: not a vocoder run, no checkpoint, nothing held out or nothing in
            the split.
        XttsDataError: a source with other audio settings, a cache without waveforms.
    """
    run, data, out = Path(run), Path(data), Path(out)
    stack, model = load_vocoder(run, step=step)
    if split == "val" and stack.data.val_fraction == 0:
        raise XttsTrainError(
            f"{run} held no utterances out of training (data.val_fraction=0): copy-synthesise "
            f"a corpus it never saw with --split all"
        )
    utterances = xd.read_utterances(data, stack.data, split, audio=stack.audio, limit=n,
                                    with_audio=True)  # fmt: skip
    if not utterances:
        raise XttsTrainError(f"{data}: no utterances in split {split!r} to copy-synthesise")
    vocoding = Vocoding(model, compiler=stack.train.compiler)
    silence = silence_feature(stack.audio)
    out.mkdir(parents=True, exist_ok=True)
    rows, wall = [], 0.0
    vocoding(utterances[0].mel, silence=silence)  # compiles: not timed
    for u in tqdm(utterances, desc="vocode", unit="utt", disable=not progress):
        started = time.perf_counter()
        vocoded = vocoding(u.mel, silence=silence)
        wall += time.perf_counter() - started
        griffin_lim = xa.griffin_lim(xa.denormalize(u.mel, stack.audio), stack.audio,
                                     n_iter=griffin_lim_iters).numpy()  # fmt: skip
        truth = _fit_length(u.audio, len(vocoded))
        rows.append({"id": u.id, "seconds": len(u.audio) / stack.audio.sample_rate,
                     "vocoder": log_mel_distance(vocoded, truth, stack.audio),
                     "griffin_lim": log_mel_distance(_fit_length(griffin_lim, len(vocoded)),
                                                     truth, stack.audio)})  # fmt: skip
        for name, wave in ((f"{u.id}.wav", vocoded), (f"{u.id}.gl.wav", griffin_lim),
                           (f"{u.id}.recording.wav", truth)):  # fmt: skip
            _write_wav(out / name, wave, stack.audio.sample_rate)
    step = step if step is not None else latest_step(run)
    seconds = sum(row["seconds"] for row in rows)
    return VocodeReport(run, data, split, step, griffin_lim_iters, rows, seconds / wall)


def _fit_length(wave: np.ndarray, samples: int) -> np.ndarray:
    """`wave` cut or zero-padded to `samples` (a copy synthesis writes F * hop samples)."""
    return np.pad(wave, (0, max(samples - len(wave), 0)))[:samples].astype(np.float32)


def _write_wav(path: Path, wave: np.ndarray, rate: int) -> None:
    clipped = tf.clip_by_value(tf.constant(wave, tf.float32), -1.0, 1.0)
    tf.io.write_file(str(path), tf.audio.encode_wav(clipped[:, None], rate))
