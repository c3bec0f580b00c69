"""`vocode`: copy synthesis, the standard check of a vocoder. Each recording's own mel goes
through the trained vocoder (`xtts_train.inference.vocoding.Vocoding`), and the result is
scored against the recording beside Griffin-Lim's from the same mel.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf
from tqdm import tqdm

import xtts_audio as xa
import xtts_data as xd
from xtts_train.errors import XttsTrainError
from xtts_train.inference.vocoding import Vocoding
from xtts_train.runs.loading import latest_step, load_vocoder
from xtts_train.runs.media import silence_feature

__all__ = ["VocodeReport", "log_mel_distance", "vocode"]


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
    config = stack.data
    if xd.FeatureCache.is_cache(data):  # a vocoder reads no text: the cache's settings do
        text = xd.FeatureCache.open(data).manifest.settings.data["text"]
        config = dataclasses.replace(config, text=xd.TextConfig.from_dict(text))
    utterances = xd.read_utterances(data, config, split, audio=stack.audio, limit=n,
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
            xa.write_wav(out / name, wave, stack.audio.sample_rate)
    step = step if step is not None else latest_step(run)
    seconds = sum(row["seconds"] for row in rows)
    return VocodeReport(run, data, split, step, griffin_lim_iters, rows, seconds / wall)


def _fit_length(wave: np.ndarray, samples: int) -> np.ndarray:
    """`wave` cut or zero-padded to `samples` (a copy synthesis writes F * hop samples)."""
    return np.pad(wave, (0, max(samples - len(wave), 0)))[:samples].astype(np.float32)
