"""`Vocoder`: a Vocos-style vocoder (Siuzdenko 2023): mel frames → waveform (sizes:
`VocoderConfig`).

```
mel (B, F, M) ─ standardise ─ embed conv + norm ─ ConvNeXt blocks ─ norm ─ hidden (B, F, D)
hidden ─ dense head (float32) ─ log-magnitude, phase (B, F, N/2 + 1) each ─ spectrum
spectrum ─ inverse STFT (Hann, hop H, frame N, centred) ─ audio (B, F * H)
```
Every layer runs at the frame rate; the inverse STFT (`synthesize`) turns each frame's
predicted spectrum into samples. Frame `i` of the output is centred on sample `i * H`, as
frame `i` of a `center=True` mel (the cache's) is centred on sample `i * H` of its
recording, so the output lines up sample for sample with the audio the mel came from.
(Vocos's own "same" padding trims `(N - H) / 2` samples instead, which puts frame `i`'s
centre on sample `i * H + H / 2`: half a hop late against centred mels.)

`vocode_chunks` runs the same network over a long mel a chunk at a time (for streaming);
with at least `receptive_frames` frames of context it gives the whole-mel output.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import keras
import tensorflow as tf

from xtts_audio import MelConfig, istft, istft_matmul
from xtts_audio.windows import window_start
from xtts_train.compile.compiler import XLA
from xtts_train.config import VocoderConfig
from xtts_train.errors import ConfigError
from xtts_train.models.features import standardize
from xtts_train.models.vocoder.layers import EMBED_KERNEL, Backbone

__all__ = ["AUTO_COMPILERS", "Vocoder", "head_parts", "head_spectrum", "receptive_frames",
           "synthesis_config", "synthesize", "vocode_chunks", "window_start"]  # fmt: skip

# Where the vocoder's compilers differ from `compile.compiler.AUTO` (the text-to-mel
# model's): it is small (batch 16 x 32 frames), and on this project's 2-core CPU, 2 threads
# (`xtts-train check --task vocoder`, its eval and `Vocoding` timed alike), XLA ran a train
# step in 67 ms against 84 on the graph executor, an eval step in 18 against 25, and
# vocoded 2 s of audio in 14 against 20.
AUTO_COMPILERS = {"CPU": XLA}

# MelConfig needs a sample rate (for its filterbank); the inverse STFT never reads it.
_ANY_RATE = 22050
# Vocos clips the predicted magnitude here: exp of a large logit would overflow.
_MAX_MAGNITUDE = 1e2


def synthesis_config(config: VocoderConfig) -> MelConfig:
    """The STFT recipe the vocoder's head inverts: periodic Hann frames of
    `config.frame_length` samples, hop `config.hop_length`, centred (frame `i` is centred
    on sample `i * hop`). `xtts_audio.stft(audio, synthesis_config(config))` is its
    analysis. (`VocoderConfig` refuses frames that do not overlap, which would leave
    samples no window covers.)
    """
    return MelConfig(sample_rate=_ANY_RATE, n_fft=config.frame_length,
                     hop_length=config.hop_length, n_mels=config.n_mels, center=True)  # fmt: skip


def head_spectrum(head: tf.Tensor) -> tf.Tensor:
    """The head's output → each frame's complex spectrum, as Vocos's `ISTFTHead` reads it.

    Args:
        head: float32 [B, F, 2 * bins]: log-magnitudes, then phases (bins = N / 2 + 1).

    Returns:
        complex64 [B, F, bins]: `min(exp(log_magnitude), 100) * exp(1j * phase)`.
    """
    return tf.complex(*head_parts(head))


def head_parts(head: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """`head_spectrum`'s real and imaginary parts, float32 [B, F, bins] each: what an
    exported program inverts (`xtts_audio.istft_matmul`), with no complex dtype."""
    log_magnitude, phase = tf.split(tf.cast(head, tf.float32), 2, axis=-1)  # (B, F, bins) x2
    # Clipping the logit, not exp's output, keeps the gradient finite where it saturates.
    magnitude = tf.exp(tf.minimum(log_magnitude, math.log(_MAX_MAGNITUDE)))
    return magnitude * tf.cos(phase), magnitude * tf.sin(phase)


def synthesize(spectrum: tf.Tensor, config: VocoderConfig) -> tf.Tensor:
    """Inverse STFT of the head's spectra: exactly `frames * hop_length` samples.

    Weighted overlap-add of the Hann-windowed inverse FFTs, divided by the windows' exact
    sum of squares (`xtts_audio.istft`), then trimmed by `frame_length // 2` at the start so
    frame `i` is centred on sample `i * hop_length`: the inverse of
    `xtts_audio.stft(audio, synthesis_config(config))`.

    Args:
        spectrum: complex64 [B, F, frame_length // 2 + 1].
        config: the vocoder's config (`frame_length`, `hop_length`).

    Returns:
        float32 [B, F * hop_length].
    """
    frames = spectrum.shape[-2]
    if frames is None:  # a dynamic length: allowed, though compiled steps use static ones
        frames = tf.shape(spectrum)[-2]
    return istft(spectrum, synthesis_config(config), length=frames * config.hop_length)


def receptive_frames(config: VocoderConfig) -> int:
    """Frames of context, on each side, that one output frame's samples depend on.

    The embedding conv sees `EMBED_KERNEL // 2` frames each side, each ConvNeXt block
    `kernel // 2` more, and the samples of frame `m` sum the windows of frames within
    `ceil(frame_length / (2 * hop_length))` of it (norms and dense layers are per frame):
    `3 + layers * (kernel // 2) + ceil(frame_length / (2 * hop))`. Samples
    `[m * hop, (m + 1) * hop)` do not change when any mel frame further than this from `m`
    does. The bound is exact on the right; on the left one frame less is needed when
    `frame_length` is an even number of hops (frame `m + k/2`'s window starts inside
    frame `m`, frame `m - k/2`'s ends where it begins).
    """
    overlap = -(-config.frame_length // (2 * config.hop_length))
    return EMBED_KERNEL // 2 + config.layers * (config.kernel // 2) + overlap


def _check_mel(mel: tf.Tensor, config: VocoderConfig) -> None:
    if mel.shape.rank != 3 or mel.shape[-1] != config.n_mels or mel.shape[1] == 0:
        raise ConfigError(
            f"Expected mel [batch, frames >= 1, n_mels={config.n_mels}] (VocoderConfig.n_mels), "
            f"received: mel.shape={tuple(mel.shape)}"
        )


class Vocoder(keras.Model):
    """Vocos-style vocoder: ConvNeXt backbone at the frame rate, inverse-STFT head.

    Its input is the cache's features (`xtts_audio.mel_features` of the recording),
    standardised inside (`models.features.standardize`, as the text-to-mel model's). The head and
    the inverse STFT run in float32 under any dtype policy.

    Args:
        config: the sizes.

    Raises:
        ConfigError: not a `VocoderConfig`.
    """

    def __init__(self, config: VocoderConfig, **kwargs: Any) -> None:
        if not isinstance(config, VocoderConfig):
            raise ConfigError(f"Expected a VocoderConfig, received: config={config!r}")
        super().__init__(**kwargs)
        self.config = config
        self.backbone = Backbone(config, name="backbone")
        bins = config.frame_length // 2 + 1
        self.head = keras.layers.Dense(2 * bins, dtype="float32", name="head")

    def build(self, input_shape: Any) -> None:
        """Marks the model built; each sublayer creates its weights on the first call."""
        self.built = True

    def call(self, mel: tf.Tensor) -> tf.Tensor:
        """Mel frames → waveform.

        Args:
            mel: float [B, F, n_mels], the cache's features; a static shape compiles once.

        Returns:
            float32 [B, F * hop_length]: frame `i` is centred on sample `i * hop_length`.

        Raises:
            ConfigError: not rank 3, no frames, or another `n_mels` than the config's.
        """
        return self.synthesis(mel)["audio"]

    def synthesis(self, mel: tf.Tensor, *, portable: bool = False) -> dict[str, tf.Tensor]:
        """Mel frames → waveform, with the head's phases (what the phase loss reads).

        Args:
            mel: float [B, F, n_mels], as `call`'s.
            portable: invert the head's spectra with `xtts_audio.istft_matmul` (no complex
                dtype or FFT op: what ONNX and LiteRT take; equal within float32 rounding)
                instead of `synthesize`'s `xtts_audio.istft`.

        Returns:
            `audio` float32 [B, F * hop_length] (`call`'s output) and `phase` float32
            [B, F, frame_length // 2 + 1]: each frame's predicted STFT phase.

        Raises:
            ConfigError: as `call`.
        """
        _check_mel(mel, self.config)
        x = standardize(mel)  # (B, F, M)
        hidden = self.backbone(x)  # (B, F, D), compute dtype
        head = self.head(hidden)  # (B, F, 2 * bins) float32
        phase = tf.split(tf.cast(head, tf.float32), 2, axis=-1)[1]  # (B, F, bins)
        if portable:
            frames = mel.shape[1] if mel.shape[1] is not None else tf.shape(mel)[1]
            count = frames * self.config.hop_length
            audio = istft_matmul(*head_parts(head), synthesis_config(self.config), length=count)
        else:
            audio = synthesize(head_spectrum(head), self.config)
        return {"audio": audio, "phase": phase}  # (B, F * hop)

    @property
    def receptive_frames(self) -> int:
        """`receptive_frames(config)`: context frames each side of an output frame."""
        return receptive_frames(self.config)

    def parameter_count(self) -> int:
        """Trainable parameters (builds the model on a few frames first if needed)."""
        if not self.head.built:
            self(tf.zeros([1, 4, self.config.n_mels]))
        return sum(math.prod(w.shape) for w in self.trainable_weights)


def _windows(frames: int, chunk: int, context: int) -> list[tuple[int, int, int]]:
    """(first frame of the window, chunk start, chunk stop) of each chunk.

    Every window has the same width, `min(frames, chunk + 2 * context)` (one shape to
    compile), placed by `window_start`.
    """
    width = min(frames, chunk + 2 * context)
    return [
        (window_start(start, width=width, context=context, frames=frames), start,
         min(start + chunk, frames))
        for start in range(0, frames, chunk)
    ]  # fmt: skip


def vocode_chunks(
    model: Vocoder, mel: tf.Tensor, *, chunk_frames: int, context_frames: int,
    window: Callable[[tf.Tensor], tf.Tensor] | None = None,
) -> tf.Tensor:  # fmt: skip
    """Vocodes a long mel a chunk at a time: the streaming form of `model(mel)`.

    Each chunk of `chunk_frames` frames is vocoded inside a window with `context_frames`
    extra frames on each side (shifted inward at the mel's ends, so every window has
    the same shape), and only the chunk's own samples are kept. With `context_frames >=
    model.receptive_frames` the result equals `model(mel)` up to float rounding.

    Args:
        model: the vocoder (any dtype policy).
        mel: float [B, F, n_mels] with a static F.
        chunk_frames: frames each call contributes (>= 1).
        context_frames: frames of context on each side (>= 0).
        window: what vocodes one window, [B, width, n_mels] → [B, width * hop] (default
            `model`; e.g. a compiled program of the window's shape).

    Returns:
        float32 [B, F * hop_length].

    Raises:
        ConfigError: a bad chunk or context size, or a bad mel shape.
    """
    for name, value, least in (("chunk_frames", chunk_frames, 1),
                               ("context_frames", context_frames, 0)):  # fmt: skip
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ConfigError(f"Expected {name} an int >= {least}, received: {name}={value!r}")
    mel = tf.convert_to_tensor(mel)
    _check_mel(mel, model.config)
    frames, hop = mel.shape[1], model.config.hop_length
    if frames is None:
        raise ConfigError(f"Expected mel with a static frame count, received: {mel.shape}")
    width = min(frames, chunk_frames + 2 * context_frames)
    pieces = []
    for first, start, stop in _windows(frames, chunk_frames, context_frames):
        audio = (window or model)(mel[:, first : first + width])  # (B, width * hop)
        pieces.append(audio[:, (start - first) * hop : (stop - first) * hop])
    return tf.concat(pieces, axis=1)  # (B, F * hop)
