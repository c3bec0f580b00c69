"""Losses of `Vocoder` outputs against the recordings: float32, XLA-compatible.

`mel_l1` compares log-mels (Vocos's reconstruction loss), `stft` is the multi-resolution
STFT loss of Parallel WaveGAN (Yamamoto et al. 2020): spectral convergence plus
log-magnitude L1 at several frame sizes. Magnitudes are floored before any square root or
log, so a silent target or prediction gives finite values and gradients.
"""

from __future__ import annotations

import tensorflow as tf

from xtts_audio import MelConfig, mel_spectrogram, stft
from xtts_train.config import VocoderConfig
from xtts_train.errors import ConfigError
from xtts_train.models.text_to_mel.losses import _check_weight
from xtts_train.training.naming import name_scoped

__all__ = ["log_mel_l1", "stft_loss", "vocoder_losses"]

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


def vocoder_losses(
    audio_pred: tf.Tensor,
    audio_true: tf.Tensor,
    mel_config: MelConfig,
    config: VocoderConfig,
    *,
    mel_weight: float | tf.Tensor | None = None,
    stft_weight: float | tf.Tensor | None = None,
) -> dict[str, tf.Tensor]:
    """The vocoder's training objective.

    Args:
        audio_pred: float [B, S], the vocoder's output (`Vocoder(mel)`).
        audio_true: float [B, S], the recording the mel was computed from, aligned.
        mel_config: the audio recipe (`mel_l1`'s mel).
        config: the vocoder config (`mel_weight`, `stft_weight`, `stft_resolutions`).
        mel_weight, stft_weight: the weights in `loss`; default the config's (a compiled
            step passes them as scalar tensors, so changing them needs no retrace).

    Returns:
        float32 scalars `loss` (`mel_weight * mel_l1 + stft_weight * stft`), `mel_l1`
        (`log_mel_l1`) and `stft` (`stft_loss`).

    Raises:
        ConfigError: the two waveforms' shapes differ or are not [B, S], or a negative
            or non-numeric weight.
    """
    mel_weight = config.mel_weight if mel_weight is None else mel_weight
    stft_weight = config.stft_weight if stft_weight is None else stft_weight
    _check_weight("mel_weight", mel_weight)
    _check_weight("stft_weight", stft_weight)
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
    return {"loss": loss, **parts}
