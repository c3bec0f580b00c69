"""The frame arithmetic of `TextToMel`'s decoder: groups of `r` frames (`r` =
`ModelConfig.reduction_factor`) and the standardised mel scale it predicts in.

The decoder runs one step per group of `r` frames: step `s` reads the last frame of group
`s - 1` (`step_inputs`) and writes all `r` frames of group `s`; what it computes once per
step (an attention row) holds for each frame of the group (`per_frame`). The standardised
scale itself is `models.features`' (both networks'). Pure functions of
static shapes, shared by training (`TextToMel.call`) and decoding (`generation`).

With `ModelConfig.voice_stats` the decoder works one step further from the mel: on
standardised frames normalised by the reference clip's own per-channel mean (and
deviation: `clip_stats`, `normalize_by`), and its output is moved back by them (`denormalize_by`),
as AdaIN-VC's instance statistics (Chou et al. 2019) carry a voice.

`pitch_stats` is the pitch of a voice over frames that `ModelConfig.voice_pitch` gives the
decoder (`frame_pitch`, `xtts_audio.mel_pitch` of each frame, summed up over the harmonic
ones).

`match_global_variance` is the arithmetic of the postfilter `postfilters.GlobalVariance`
(`decode.global_variance`): the decoded mel's cepstral deviation over the utterance
scaled to the clip's, then held by `within_range` to the levels the clip reaches in each
channel.
"""

from __future__ import annotations

import math

import numpy as np
import tensorflow as tf

from xtts_audio import MelConfig, mel_pitch

__all__ = [
    "clip_mask", "clip_stats", "denormalize_by", "frame_pitch", "groups", "identity_stats",
    "match_global_variance", "normalize_by", "per_frame", "pitch_stats", "shift_right",
    "step_inputs", "within_range",
]  # fmt: skip

# The least cepstral deviation of an utterance that `match_global_variance` scales up (ln-mel
# units, where speech's coefficients deviate about 0.1-10): a flat one is not blown up.
_MIN_CEPSTRAL_DEVIATION = 1e-3
# The least deviation a channel of a clip is scaled by (standardised units, where a corpus's
# channels deviate about 0.5-1.2 within a clip): a near-constant channel is not blown up.
_MIN_DEVIATION = 0.1
# A frame counts towards a voice's pitch where its log-mel ripple matches a harmonic comb
# this well (`xtts_audio.mel_pitch`'s harmonicity: steady voiced speech 0.6-0.9; white
# noise's best chance match 0.4, above 0.6 in under 1% of its frames; silence 0.2).
_HARMONIC = 0.6
_PITCH_CENTRE = 150.0  # Hz: log2 pitch is read relative to it (speech spans about +-1.5)


def groups(frames: int, r: int) -> int:
    """Decoder steps that cover `frames` frames, `r` per step: `ceil(frames / r)`."""
    return -(-frames // r)


def shift_right(frames: tf.Tensor) -> tf.Tensor:
    """Teacher forcing input: a zero go frame, then frames 0 .. F-2: (B, F, M) → (B, F, M)."""
    return tf.pad(frames, [[0, 0], [1, 0], [0, 0]])[:, :-1]


def step_inputs(frames: tf.Tensor, r: int) -> tf.Tensor:
    """Decoder inputs (B, F, M) → (B, S, M), S = ceil(F / r): a zero go frame, then the
    last frame of each group of `r` but the final one (r = 1: frames 0 .. F-2)."""
    if r == 1:
        return shift_right(frames)
    count, n_mels = frames.shape[1], frames.shape[2]
    steps = groups(count, r)
    padded = tf.pad(frames, [[0, 0], [0, steps * r - count], [0, 0]])  # (B, S * r, M)
    return shift_right(tf.reshape(padded, [-1, steps, r, n_mels])[:, :, -1])


def per_frame(attention: tf.Tensor, frames: int, r: int) -> tf.Tensor:
    """One attention row per decoder step (B, S, K) → one per frame (B, frames, K): the
    frames a step writes share its row."""
    return attention if r == 1 else tf.repeat(attention, r, axis=1)[:, :frames]


def clip_mask(cond_mel: tf.Tensor, cond_lengths: tf.Tensor) -> tf.Tensor:
    """float32 [B, C]: 1 at a reference clip's real frames (cond_mel [B, C, M], cond_lengths
    int32 [B])."""
    return tf.sequence_mask(cond_lengths, tf.shape(cond_mel)[1], tf.float32)


def clip_stats(cond: tf.Tensor, cond_mask: tf.Tensor) -> tf.Tensor:
    """A reference clip's per-channel statistics over its real frames.

    Args:
        cond: standardised reference frames float32 [B, C, M].
        cond_mask: float32 [B, C], 1 at real frames (at least one per clip).

    Returns:
        float32 [B, 2, M]: each channel's mean, then its deviation (at least 0.1).
    """
    mean, spread = _moments(cond, cond_mask)  # (B, 1, M) each
    return tf.concat([mean, tf.maximum(spread, _MIN_DEVIATION)], axis=1)


def identity_stats(batch: int, n_mels: int) -> tf.Tensor:
    """Statistics `normalize_by` and `denormalize_by` leave frames alone with: float32 [B, 2, M]."""
    return tf.concat([tf.zeros([batch, 1, n_mels]), tf.ones([batch, 1, n_mels])], axis=1)


def normalize_by(frames: tf.Tensor, stats: tf.Tensor) -> tf.Tensor:
    """Standardised frames (B, F, M) → normalised by a clip's `stats` (B, 2, M)."""
    return (frames - stats[:, :1]) / stats[:, 1:]


def denormalize_by(frames: tf.Tensor, stats: tf.Tensor) -> tf.Tensor:
    """Frames normalised by a clip's `stats` (B, 2, M) → standardised: `normalize_by`'s inverse."""
    return frames * stats[:, 1:] + stats[:, :1]


def pitch_stats(mel: tf.Tensor, mask: tf.Tensor, audio: MelConfig) -> tf.Tensor:
    """A voice's pitch over frames: the mean and deviation of `log2(pitch / 150 Hz)` over
    the real frames that are harmonic (`xtts_audio.mel_pitch`).

    Args:
        mel: frames float [B, F, M] in the features' own units (not standardised).
        mask: float32 [B, F], 1 at real frames.
        audio: the recipe the features were made with.

    Returns:
        float32 [B, 1, 2]: the mean, then the deviation; zeros where no frame is harmonic.
    """
    octaves, voiced = frame_pitch(mel, audio)  # (B, F) each
    mean, spread = _moments(octaves[:, :, None], mask * voiced)  # (B, 1, 1) each
    return tf.concat([mean, spread], axis=-1)


def frame_pitch(mel: tf.Tensor, audio: MelConfig) -> tuple[tf.Tensor, tf.Tensor]:
    """Each frame's pitch and whether it is voiced, as `pitch_stats` reads them.

    Args:
        mel: frames float [B, F, M] in the features' own units.
        audio: the recipe the features were made with.

    Returns:
        `octaves` float32 [B, F]: `log2(pitch / 150 Hz)` of `xtts_audio.mel_pitch`, and
        `voiced` float32 [B, F]: 1 where the frame is harmonic (its pitch is read there).
    """
    pitch, harmonicity = mel_pitch(tf.cast(mel, tf.float32), audio)  # (B, F) each
    octaves = tf.math.log(pitch / _PITCH_CENTRE) / math.log(2.0)
    return octaves, tf.cast(harmonicity > _HARMONIC, tf.float32)


def match_global_variance(mel: tf.Tensor, mask: tf.Tensor, clip: tf.Tensor,
                          clip_mask: tf.Tensor) -> tf.Tensor:  # fmt: skip
    """Decoded mels with each cepstral coefficient's deviation over the utterance scaled to
    the clip's, its mean over the utterance kept: the global-variance postfilter (Toda &
    Tokuda 2007) with the clip's variance as the target.

    The cepstrum is the orthonormal DCT-II of each log-mel frame, so the map is linear
    per frame and the inverse DCT brings the frames back.

    Args:
        mel: log-mel frames float32 [B, F, M] (the decoding's, in mel units).
        mask: float32 [B, F], 1 at the utterance's real frames; the others are returned
            as they are.
        clip: the reference clip's log-mel frames float [B, C, M], in the same units.
        clip_mask: float32 [B, C], 1 at the clip's real frames (at least one per clip).

    Returns:
        float32 [B, F, M].
    """
    basis = _dct_basis(mel.shape[-1])  # (M, M)
    cepstra = tf.matmul(mel, basis, transpose_b=True)  # (B, F, M)
    mean, deviation = _moments(cepstra, mask)  # (B, 1, M) each
    _, target = _moments(tf.matmul(tf.cast(clip, tf.float32), basis, transpose_b=True),
                         clip_mask)  # fmt: skip
    scaled = mean + (cepstra - mean) * target / tf.maximum(deviation, _MIN_CEPSTRAL_DEVIATION)
    keep = mask[:, :, None]
    return tf.matmul(scaled, basis) * keep + mel * (1.0 - keep)


def _dct_basis(size: int) -> tf.Tensor:
    """The orthonormal DCT-II of `size` points as a matrix float32 [size, size] (row k:
    coefficient k; its transpose inverts it): `tf.signal.dct(type=2, norm="ortho")` as a
    matmul, which the ONNX and LiteRT converters take (an FFT they do not)."""
    n = np.arange(size)
    basis = np.cos(np.pi * (2 * n[None, :] + 1) * n[:, None] / (2 * size)) * math.sqrt(2 / size)
    basis[0] /= math.sqrt(2)
    return tf.constant(basis, tf.float32)


def within_range(mel: tf.Tensor, mask: tf.Tensor, clip: tf.Tensor,
                 clip_mask: tf.Tensor) -> tf.Tensor:  # fmt: skip
    """Decoded frames held, channel by channel, between the lowest and the highest level
    the clip reaches: the voice's own range.

    Scaling every cepstral deviation (`match_global_variance`) can carry a few frames far
    past anything the voice holds: where the decoding is smooth its high coefficients
    deviate little, and the gain that lifts them to the clip's lifts their noise with
    them. On a held-out voice, measured, it put 16 ln-units into the lowest mel channel,
    whose clip never passed -0.3, and a vocoder turns such frames into a buzz. Holding the
    levels keeps the postfilter's reshaping of the spectrum and drops only the levels the
    voice never reaches; the clip's lowest level is the features' floor where it is
    silent, so nothing is decoded below that either.

    Args:
        mel, mask, clip, clip_mask: as `match_global_variance`'s (frames past the
            utterance's end are returned as they are).

    Returns:
        float32 [B, F, M].
    """
    low, high = _extremes(tf.cast(clip, tf.float32), clip_mask)  # (B, 1, M) each
    keep = mask[:, :, None]
    return tf.clip_by_value(mel, low, high) * keep + mel * (1.0 - keep)


def _extremes(frames: tf.Tensor, mask: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """Per-channel least and greatest value (B, 1, M) of frames (B, F, M) over the real
    ones (mask (B, F), at least one)."""
    real = mask[:, :, None] > 0.0
    low = tf.reduce_min(tf.where(real, frames, frames.dtype.max), axis=1, keepdims=True)
    high = tf.reduce_max(tf.where(real, frames, frames.dtype.min), axis=1, keepdims=True)
    return low, high


def _moments(frames: tf.Tensor, mask: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """Per-channel mean and deviation (B, 1, M) of frames (B, F, M) over the real ones
    (mask (B, F), at least one: else 0 and 0)."""
    weights = mask[:, :, None] / tf.maximum(tf.reduce_sum(mask, axis=1), 1.0)[:, None, None]
    mean = tf.reduce_sum(frames * weights, axis=1, keepdims=True)
    return mean, tf.sqrt(tf.reduce_sum(tf.square(frames - mean) * weights, axis=1, keepdims=True))
