"""The one scorer of `xtts-bench peers`: audio in, xtts's measures out.

Every system's syntheses are WAV files, each made from its own features by xtts-audio's
Griffin-Lim; the scorer turns each into the xtts preset's log-mel features
(`xtts_audio.mel_features`, after `xtts_data.load_audio`'s resampling and the run's
silence trim, as the held-out recordings get them) and compares it with every held-out
recording:

- `distance`: DTW log-mel distance to its own recording (`xtts_train.dtw_distance`);
- `pairing`: that distance over the mean distance to the other recordings
  (`xtts_train.pairing_scores`: ~1 ignores the text, 0 is the recording itself);
- `top1`: the share of syntheses whose nearest recording by DTW distance is their own:
  sentence identification (chance: 1 / n).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

import xtts_data as xd
from xtts_audio import MelConfig, mel_features
from xtts_bench.errors import SettingsError
from xtts_train import dtw_distances, pairing_scores

__all__ = ["score_mels", "score_wavs", "wav_mels"]


def score_mels(synthesised: Sequence[np.ndarray], truth: Sequence[np.ndarray]) -> dict:
    """Scores of `synthesised[i]` against `truth[i]` and the other truths.

    Args:
        synthesised: float [frames_i, n_mels] per sentence.
        truth: float [frames_j, n_mels] per sentence, in the same order; at least 2.

    Returns:
        `pairing_mean`, `distance_mean`, `top1` (share in [0, 1]), `chance_top1` and
        per sentence `pairing`, `distance`, `nearest` (index of the nearest truth).

    Raises:
        SettingsError: different counts, or fewer than 2 sentences.
    """
    if len(synthesised) != len(truth) or len(truth) < 2:
        raise SettingsError(
            f"Expected one synthesis per sentence and at least 2 sentences, received: "
            f"{len(synthesised)} syntheses, {len(truth)} sentences"
        )
    distances = np.array([dtw_distances(s, truth) for s in synthesised])  # (N, N)
    pairing = pairing_scores(distances)
    nearest = distances.argmin(axis=1)
    return {
        "pairing_mean": float(pairing.mean()),
        "distance_mean": float(np.diag(distances).mean()),
        "top1": float(np.mean(nearest == np.arange(len(truth)))),
        "chance_top1": 1.0 / len(truth),
        "pairing": pairing.tolist(),
        "distance": np.diag(distances).tolist(),
        "nearest": nearest.tolist(),
    }


def wav_mels(paths: Sequence[Path], audio: MelConfig, *,
             trim_top_db: float | None) -> list[np.ndarray]:  # fmt: skip
    """The features of each WAV file: float32 [frames, n_mels] each (resampled to
    `audio.sample_rate`, trimmed as `xtts-data prepare` trims)."""
    return [
        mel_features(xd.load_audio(Path(p), audio, trim_top_db=trim_top_db), audio).numpy()
        for p in paths
    ]


def score_wavs(paths: Sequence[Path], truth: Sequence[np.ndarray], audio: MelConfig, *,
               trim_top_db: float | None) -> dict:  # fmt: skip
    """`score_mels` of the WAV files `paths` (one per sentence, in `truth`'s order)."""
    return score_mels(wav_mels(paths, audio, trim_top_db=trim_top_db), truth)
