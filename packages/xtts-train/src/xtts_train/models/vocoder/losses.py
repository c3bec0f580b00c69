"""Losses of `Vocoder` outputs against the recordings: float32, XLA-compatible.

`mel_l1` compares log-mels (Vocos's reconstruction loss), `stft` is the multi-resolution
STFT loss of Parallel WaveGAN (Yamamoto et al. 2020): spectral convergence plus
log-magnitude L1 at several frame sizes. Magnitudes are floored before any square root or
log, so a silent target or prediction gives finite values and gradients. `phase` is
APNet's (Ai & Ling 2023) anti-wrapping phase loss on the head's phases: magnitude losses
leave the phase to be inferred, and it is what limits the copy synthesis's quality
(measured: docs/train/vocoder.md).
"""

from __future__ import annotations

import math

import tensorflow as tf

from xtts_audio import MelConfig, mel_spectrogram, stft
from xtts_train.compile.naming import name_scoped
from xtts_train.config import VocoderConfig
from xtts_train.errors import ConfigError
from xtts_train.models.loss_weights import check_weight
from xtts_train.models.vocoder.model import synthesis_config

__all__ = ["anti_wrap", "log_mel_l1", "phase_loss", "stft_loss", "vocoder_losses"]

# The log-mel floor: the `xtts` recipe's (Coqui's `log(clamp(x, min=1e-5))`).
_MEL_FLOOR = 1e-5
# The STFT magnitude floor (Parallel WaveGAN's), squared: applied to |X|^2 before the root.
_MAGNITUDE_FLOOR_SQUARED = 1e-14


@name_scoped("loss_mel_l1")
def log_mel_l1(audio_pred: tf.Tensor, audio_true: tf.Tensor, mel_config: MelConfig) -> tf.Tensor:
    """Mean |log mel(pred) - log mel(true)| over frames and mel bins.

    The mel is `xtts_audio.mel_spectrogram` with the audio recipe, then
    `log(max(mel, 1e-5))`: for the `xtts` recipe (power 2, `log="ln"`, `amin=1e-5`) that is
    exactly `mel_features`, the cache's features; for other recipes it is the same
    log-mel distance without their dB scaling or clipping (clipping would zero the
    gradient of every clipped bin).

    Args:
        audio_pred, audio_true: float [B, S] waveforms at `mel_config.sample_rate`.
        mel_config: the audio recipe.

    Returns:
        float32 scalar.
    """
    pred, true = (
        tf.math.log(tf.maximum(mel_spectrogram(tf.cast(a, tf.float32), mel_config), _MEL_FLOOR))
        for a in (audio_pred, audio_true)
    )  # (B, T, M) each
    return tf.reduce_mean(tf.abs(true - pred))


def _magnitude(audio: tf.Tensor, recipe: MelConfig) -> tf.Tensor:
    """|STFT| floored at 1e-7: (B, S) → (B, T, bins)."""
    spec = stft(audio, recipe)
    power = tf.square(tf.math.real(spec)) + tf.square(tf.math.imag(spec))
    return tf.sqrt(tf.maximum(power, _MAGNITUDE_FLOOR_SQUARED))


def _frobenius(x: tf.Tensor) -> tf.Tensor:
    # Floored so that the gradient at x = 0 (identical audio) is 0, not 0 / 0.
    return tf.sqrt(tf.maximum(tf.reduce_sum(tf.square(x)), _MAGNITUDE_FLOOR_SQUARED))


def _resolution(sample_rate: int, n_fft: int, hop: int, window: int) -> MelConfig:
    """One STFT of the loss: periodic Hann of `window` samples centred in `n_fft`, centred
    frames with zero padding (any signal length works)."""
    return MelConfig(sample_rate=sample_rate, n_fft=n_fft, hop_length=hop, win_length=window,
                     n_mels=1, center=True, pad_mode="constant")  # fmt: skip


@name_scoped("loss_stft")
def stft_loss(
    audio_pred: tf.Tensor,
    audio_true: tf.Tensor,
    *,
    resolutions: tuple[tuple[int, int, int], ...],
    sample_rate: int,
) -> tf.Tensor:
    """Multi-resolution STFT loss, averaged over `resolutions`.

    Per resolution: spectral convergence `||S_t - S_p||_F / ||S_t||_F` over the whole
    batch (Parallel WaveGAN's), plus the mean `|log S_t - log S_p|`, with magnitudes
    `S` floored at 1e-7. A silent target makes the convergence term large (its norm is
    the floor's) but finite.

    Args:
        audio_pred, audio_true: float [B, S] waveforms.
        resolutions: (n_fft, hop, window) triples, hop <= window <= n_fft.
        sample_rate: the audio's rate (names the recipe; the STFT does not depend on it).

    Returns:
        float32 scalar.
    """
    terms = []
    for n_fft, hop, window in resolutions:
        with tf.name_scope(f"stft_{n_fft}"):
            recipe = _resolution(sample_rate, n_fft, hop, window)
            pred = _magnitude(tf.cast(audio_pred, tf.float32), recipe)  # (B, T, bins)
            true = _magnitude(tf.cast(audio_true, tf.float32), recipe)
            convergence = _frobenius(true - pred) / _frobenius(true)
            log_l1 = tf.reduce_mean(tf.abs(tf.math.log(true) - tf.math.log(pred)))
            terms.append(convergence + log_l1)
    return tf.add_n(terms) / len(terms)


def anti_wrap(x: tf.Tensor) -> tf.Tensor:
    """|x| after wrapping into [-pi, pi]: the distance between two phases whose difference
    is `x` (APNet's anti-wrapping function, `|x - 2 pi round(x / 2 pi)|`)."""
    return tf.abs(x - 2 * math.pi * tf.round(x / (2 * math.pi)))


@name_scoped("loss_phase")
def phase_loss(phase_pred: tf.Tensor, audio_true: tf.Tensor, config: VocoderConfig) -> tf.Tensor:
    """APNet's phase losses: the mean anti-wrapped error of the instantaneous phase, of the
    group delay (its difference along frequency) and of the instantaneous angular
    frequency (its difference along time), summed.

    The recording's phases are its STFT at the head's own recipe (`synthesis_config`:
    frame `i` centred on sample `i * hop`). Frames whose window reaches past the segment's
    ends (`frame_length // (2 * hop)` each side, fewer if the segment is short) are left
    out: there the STFT sees padding, not the recording.

    Args:
        phase_pred: float32 [B, F, frame_length // 2 + 1], `Vocoder.synthesis`'s `phase`.
        audio_true: float [B, F * hop_length], the recording under those frames.
        config: the vocoder's config.

    Returns:
        float32 scalar, 0 to 3 pi.
    """
    frames = phase_pred.shape[1]
    true = stft(tf.cast(audio_true, tf.float32), synthesis_config(config))[:, :frames]
    edge = min(config.frame_length // (2 * config.hop_length), max(frames - 2, 0) // 2)
    pred, true = phase_pred[:, edge : frames - edge], tf.math.angle(true)[:, edge : frames - edge]
    instantaneous = tf.reduce_mean(anti_wrap(pred - true))
    group_delay = tf.reduce_mean(anti_wrap(_diff(pred, axis=2) - _diff(true, axis=2)))
    frequency = tf.reduce_mean(anti_wrap(_diff(pred, axis=1) - _diff(true, axis=1)))
    return instantaneous + group_delay + frequency


def _diff(x: tf.Tensor, *, axis: int) -> tf.Tensor:
    """Neighbour differences along `axis` of a rank-3 tensor (one fewer along it)."""
    n = x.shape[axis]
    return tf.gather(x, tf.range(1, n), axis=axis) - tf.gather(x, tf.range(n - 1), axis=axis)


def vocoder_losses(
    audio_pred: tf.Tensor,
    audio_true: tf.Tensor,
    mel_config: MelConfig,
    config: VocoderConfig,
    *,
    mel_weight: float | tf.Tensor | None = None,
    stft_weight: float | tf.Tensor | None = None,
    phase_pred: tf.Tensor | None = None,
    phase_weight: float | tf.Tensor | None = None,
) -> dict[str, tf.Tensor]:
    """The vocoder's training objective.

    Args:
        audio_pred: float [B, S], the vocoder's output (`Vocoder(mel)`).
        audio_true: float [B, S], the recording the mel was computed from, aligned.
        mel_config: the audio recipe (`mel_l1`'s mel).
        config: the vocoder config (`mel_weight`, `stft_weight`, `stft_resolutions`).
        mel_weight, stft_weight, phase_weight: the weights in `loss`; default the
            config's (a compiled step passes them as scalar tensors, so changing them
            needs no retrace).
        phase_pred: float32 [B, F, bins], the head's phases (`Vocoder.synthesis`); with
            it the phase loss is computed too.

    Returns:
        float32 scalars `loss` (`mel_weight * mel_l1 + stft_weight * stft`, plus
        `phase_weight * phase` with `phase_pred`), `mel_l1` (`log_mel_l1`), `stft`
        (`stft_loss`) and, with `phase_pred`, `phase` (`phase_loss`).

    Raises:
        ConfigError: the two waveforms' shapes differ or are not [B, S], or a negative
            or non-numeric weight.
    """
    mel_weight = config.mel_weight if mel_weight is None else mel_weight
    stft_weight = config.stft_weight if stft_weight is None else stft_weight
    phase_weight = config.phase_weight if phase_weight is None else phase_weight
    for name, weight in (("mel_weight", mel_weight), ("stft_weight", stft_weight),
                         ("phase_weight", phase_weight)):  # fmt: skip
        check_weight(name, weight)
    pred_shape, true_shape = audio_pred.shape, audio_true.shape
    if pred_shape.rank != 2 or pred_shape != true_shape:
        raise ConfigError(
            "Expected audio_pred and audio_true of one shape [batch, samples], received: "
            f"audio_pred.shape={tuple(pred_shape)}, audio_true.shape={tuple(true_shape)}"
        )
    resolutions, rate = config.stft_resolutions, mel_config.sample_rate
    parts = {
        "mel_l1": log_mel_l1(audio_pred, audio_true, mel_config),
        "stft": stft_loss(audio_pred, audio_true, resolutions=resolutions, sample_rate=rate),
    }
    loss = mel_weight * parts["mel_l1"] + stft_weight * parts["stft"]
    if phase_pred is not None:
        parts["phase"] = phase_loss(phase_pred, audio_true, config)
        loss += phase_weight * parts["phase"]
    return {"loss": loss, **parts}
