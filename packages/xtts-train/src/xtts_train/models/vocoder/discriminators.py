"""The vocoder's adversarial stage: HiFi-GAN's multi-period discriminator (Kong et al. 2020),
Vocos's multi-resolution one (Siuzdenko 2023), and their hinge and feature-matching losses.

```
audio (B, S) ─┬─ period p ∈ periods:  (B, S/p, p, 1) ─ Conv2D (5, 1) stride (3, 1) x4,
              │                                        (5, 1), post (3, 1) ─ logits
              └─ resolution (n_fft, hop, window) ∈ stft_resolutions:
                     STFT real, imaginary (B, T, bins, 2) ─ Conv2D (3, 9) x4 (freq stride 2
                     after the first), (3, 3), post (3, 3) ─ logits
```
Each sub-discriminator returns its logits and every hidden layer's activations (the
features matched). The widths scale with `VocoderConfig.disc_channels`: HiFi-GAN's period
discriminator is 32, 128, 512, 1024, 1024 channels at 32; Vocos's resolution one is 32
throughout. A narrower one is what a CPU can afford (measured: docs/train/vocoder.md).
"""

from __future__ import annotations

import keras
import tensorflow as tf

from xtts_audio import MelConfig, stft
from xtts_train.compile.naming import name_scoped
from xtts_train.config import VocoderConfig
from xtts_train.models.text_to_mel.layers import LazyLayer

__all__ = ["Discriminators", "discriminator_loss", "feature_loss", "generator_loss"]

# HiFi-GAN's and Vocos's leaky ReLU slope.
_SLOPE = 0.1
# The period discriminator's widths, in units of `disc_channels` (HiFi-GAN's at 32).
_PERIOD_WIDTHS = (1, 4, 16, 32, 32)


def _conv(channels: int, kernel: tuple[int, int], strides=(1, 1)) -> keras.layers.Conv2D:
    return keras.layers.Conv2D(channels, kernel, strides=strides, padding="same")


class _Stack(LazyLayer):
    """Convolutions with leaky ReLUs, then a one-channel post convolution: (B, H, W, C) →
    (logits (B, H', W'), [each hidden activation])."""

    def __init__(self, convs: list[keras.layers.Conv2D], post: keras.layers.Conv2D, **kwargs):
        super().__init__(**kwargs)
        self.convs, self.post = convs, post

    def call(self, x):
        features = []
        for conv in self.convs:
            x = tf.nn.leaky_relu(conv(x), _SLOPE)
            features.append(x)
        return self.post(x)[..., 0], features


class PeriodDiscriminator(_Stack):
    """HiFi-GAN's discriminator of one period `p`: the waveform folded into `p` columns,
    each column convolved along time (kernel 5, stride 3), so it sees every `p`-th sample."""

    def __init__(self, period: int, channels: int, **kwargs):
        convs = [_conv(channels * w, (5, 1), (3, 1)) for w in _PERIOD_WIDTHS[:-1]]
        convs.append(_conv(channels * _PERIOD_WIDTHS[-1], (5, 1)))
        super().__init__(convs, _conv(1, (3, 1)), **kwargs)
        self.period = period

    def call(self, audio):  # (B, S)
        samples = audio.shape[1]
        pad = -samples % self.period  # reflect to a whole number of periods, as HiFi-GAN
        if pad:
            audio = tf.pad(audio, [[0, 0], [0, pad]], mode="REFLECT")
        folded = tf.reshape(audio, [-1, (samples + pad) // self.period, self.period, 1])
        return super().call(folded)


class ResolutionDiscriminator(_Stack):
    """Vocos's discriminator of one STFT resolution: the complex spectrogram's real and
    imaginary parts as two channels (so it judges phase too), convolved over time and
    frequency, halving the frequency axis after the first layer."""

    def __init__(self, resolution: tuple[int, int, int], sample_rate: int, channels: int,
                 **kwargs):  # fmt: skip
        convs = [_conv(channels, (3, 9))]
        convs += [_conv(channels, (3, 9), (1, 2)) for _ in range(3)]
        convs.append(_conv(channels, (3, 3)))
        super().__init__(convs, _conv(1, (3, 3)), **kwargs)
        n_fft, hop, window = resolution
        self.recipe = MelConfig(sample_rate=sample_rate, n_fft=n_fft, hop_length=hop,
                                win_length=window, n_mels=1, center=True)  # fmt: skip

    def call(self, audio):  # (B, S)
        spectrum = stft(audio, self.recipe)  # (B, T, bins) complex
        return super().call(tf.stack([tf.math.real(spectrum), tf.math.imag(spectrum)], -1))


class Discriminators(LazyLayer):
    """Every sub-discriminator of the adversarial stage: one per period of
    `config.periods`, one per resolution of `config.stft_resolutions` (a `LazyLayer`:
    the checkpoints hold the weights of the sublayers kept in lists).

    Args:
        config: the vocoder's section (`periods`, `stft_resolutions`, `disc_channels`).
        sample_rate: the audio's (the STFT recipes need one; it changes nothing else).

    Call:
        audio: float32 [B, S] → (logits: [float32 [B, ...] per sub-discriminator],
        features: [[float32 activations] per sub-discriminator]).
    """

    def __init__(self, config: VocoderConfig, sample_rate: int, **kwargs):
        super().__init__(**kwargs)
        channels = config.disc_channels
        self.subs = [PeriodDiscriminator(p, channels) for p in config.periods] + [
            ResolutionDiscriminator(r, sample_rate, channels) for r in config.stft_resolutions
        ]

    def call(self, audio):
        judged = [sub(tf.cast(audio, tf.float32)) for sub in self.subs]
        logits = [tf.cast(x, tf.float32) for x, _ in judged]  # float16 under mixed precision
        return logits, [[tf.cast(f, tf.float32) for f in features] for _, features in judged]


@name_scoped("loss_discriminator")
def discriminator_loss(real: list[tf.Tensor], fake: list[tf.Tensor]) -> tf.Tensor:
    """Hinge loss of the discriminators (Vocos's): `mean(relu(1 - D(real))) +
    mean(relu(1 + D(fake)))`, averaged over sub-discriminators. Float32 scalar."""
    return tf.add_n([tf.reduce_mean(tf.nn.relu(1.0 - r)) + tf.reduce_mean(tf.nn.relu(1.0 + f))
                     for r, f in zip(real, fake, strict=True)]) / len(real)  # fmt: skip


@name_scoped("loss_generator")
def generator_loss(fake: list[tf.Tensor]) -> tf.Tensor:
    """Hinge loss of the generator: `mean(relu(1 - D(fake)))`, averaged over
    sub-discriminators. Float32 scalar."""
    return tf.add_n([tf.reduce_mean(tf.nn.relu(1.0 - f)) for f in fake]) / len(fake)


@name_scoped("loss_feature_matching")
def feature_loss(real: list[list[tf.Tensor]], fake: list[list[tf.Tensor]]) -> tf.Tensor:
    """Feature matching (HiFi-GAN's, normalised as Vocos's): the mean |real - fake| of each
    hidden activation, summed over a sub-discriminator's layers, averaged over
    sub-discriminators. Float32 scalar."""
    return tf.add_n([tf.reduce_mean(tf.abs(r - f))
                     for reals, fakes in zip(real, fake, strict=True)
                     for r, f in zip(reals, fakes, strict=True)]) / len(real)  # fmt: skip
