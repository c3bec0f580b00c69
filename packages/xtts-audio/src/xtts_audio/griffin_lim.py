"""Inverse STFT and Griffin-Lim phase reconstruction: mel → waveform in TensorFlow.

Lets a user listen to a model's mel output without a vocoder. Runs eagerly, in
`tf.function`, under `jit_compile=True` and in `tf.data`.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from xtts_audio import _filters
from xtts_audio._checks import leading as _leading
from xtts_audio.config import MelConfig
from xtts_audio.errors import ConfigError, InputError
from xtts_audio.spectral import stft

__all__ = ["griffin_lim", "istft", "istft_matmul", "mel_to_magnitude"]

# Below this the window sum-square is treated as zero (librosa uses the float32 tiny too).
_TINY = float(np.finfo(np.float32).tiny)


def istft(stft_matrix, config: MelConfig, *, length: int | None = None) -> tf.Tensor:
    """Inverse of `xtts_audio.stft`: weighted overlap-add, normalised as `librosa.istft`.

    `tf.signal.inverse_stft` with the analysis window does the overlap-add; dividing by the
    exact window sum-square (not `inverse_stft_window_fn`'s steady-state estimate) keeps the
    first and last frames exact too.

    Args:
        stft_matrix: complex64 [..., frames, n_fft // 2 + 1].
        config: the recipe the STFT was computed with.
        length: samples to return; default `(frames - 1) * hop_length` when centred.

    Returns:
        float32 [..., length].
    """
    stft_matrix = tf.convert_to_tensor(stft_matrix)
    if not stft_matrix.dtype.is_complex or stft_matrix.shape[-1] != config.n_freqs:
        raise InputError(
            f"Expected complex [..., frames, {config.n_freqs}], received: "
            f"dtype={stft_matrix.dtype.name}, shape={stft_matrix.shape}"
        )
    window = tf.constant(_filters.window(config), tf.float32)
    signal = tf.signal.inverse_stft(
        stft_matrix,
        frame_length=config.n_fft,
        frame_step=config.hop_length,
        fft_length=config.n_fft,
        window_fn=lambda _length, dtype: tf.cast(window, dtype),
    )
    return _normalised(signal, _dim(stft_matrix, -2), config, length)


def istft_matmul(real, imag, config: MelConfig, *, length: int | None = None) -> tf.Tensor:
    """`istft` of a spectrum given as its real and imaginary parts, each frame's inverse
    FFT a matmul with a fixed DFT basis: no complex dtype and no FFT op, so the ONNX and
    LiteRT converters take it (exported programs, `xtts-train export --format onnx`).
    Equal to `istft` within float32 rounding (~1e-6 of the signal's scale; more at the
    ends of a recipe that is not centred, where the windows' sum of squares nears zero).

    As `irfft`, the imaginary parts of the first and (even `n_fft`) last bins are ignored.

    Args:
        real, imag: float32 [..., frames, n_fft // 2 + 1].
        config: the recipe the STFT was computed with.
        length: samples to return; default `(frames - 1) * hop_length` when centred.

    Returns:
        float32 [..., length].
    """
    real, imag = tf.convert_to_tensor(real, tf.float32), tf.convert_to_tensor(imag, tf.float32)
    if real.shape[-1] != config.n_freqs or real.shape != imag.shape:
        raise InputError(
            f"Expected real and imaginary parts [..., frames, {config.n_freqs}] of one "
            f"shape, received: real={real.shape}, imag={imag.shape}"
        )
    # The inverse DFT of samples 0..n/2 only: sample n - j is sample j's sum with the sine
    # part's sign flipped (cos is even in j, sin odd), so half the basis gives every sample.
    cosines, sines = _filters.inverse_dft(config)  # (bins, n // 2 + 1) each
    even = tf.matmul(real, tf.constant(cosines, tf.float32))  # (..., frames, n // 2 + 1)
    odd = tf.matmul(imag, tf.constant(sines, tf.float32))
    n, half = config.n_fft, config.n_fft // 2
    mirrored = tf.gather(even + odd, np.arange(n - half - 1, 0, -1), axis=-1)  # n-1 .. half+1
    window = tf.constant(_filters.window(config), tf.float32)
    frames = tf.concat([even - odd, mirrored], -1) * window  # (..., frames, n_fft)
    signal = _overlap_add(frames, config.hop_length)
    return _normalised(signal, _dim(real, -2), config, length, overlap_add=_overlap_add)


def _normalised(signal: tf.Tensor, frames, config: MelConfig, length: int | None, *,
                overlap_add=tf.signal.overlap_and_add) -> tf.Tensor:  # fmt: skip
    """An overlap-added signal [..., samples] of `frames` windowed frames divided by the
    windows' exact sum of squares (summed by `overlap_add`: the one op on the FFT path,
    the converter-friendly `_overlap_add` on the matmul one), trimmed (centred frames) and
    cut or padded to `length` (`istft`'s)."""
    window = tf.constant(_filters.window(config), tf.float32)
    squares = tf.broadcast_to(tf.square(window), tf.stack([frames, config.n_fft]))
    norm = overlap_add(squares, config.hop_length)
    signal = signal / tf.where(norm > _TINY, norm, tf.ones_like(norm))
    start = config.n_fft // 2 if config.center else 0
    if length is None:
        length = _covered_samples(frames, config)
    signal = signal[..., start:]
    # Pad when asked for more samples than the frames cover, as librosa.istft does.
    missing = length - _dim(signal, -1)
    missing = max(missing, 0) if isinstance(missing, int) else tf.maximum(missing, 0)
    paddings = [[0, 0]] * (signal.shape.rank - 1) + [[0, missing]]
    return _leading(tf.pad(signal, paddings), length)


def _overlap_add(frames: tf.Tensor, hop: int) -> tf.Tensor:
    """`tf.signal.overlap_and_add(frames, hop)` of frames [..., F, N] as ceil(N / hop)
    shifted sums (a reshape and pads), which the ONNX converter takes with F unknown
    (its lowering of `overlap_and_add` fails there): float32 [..., (F - 1) * hop + N]."""
    width, rank = frames.shape[-1], frames.shape.rank
    parts = -(-width // hop)
    if parts * hop != width:
        frames = tf.pad(frames, [[0, 0]] * (rank - 1) + [[0, parts * hop - width]])
    pieces = tf.reshape(frames, tf.concat([tf.shape(frames)[:-1], [parts, hop]], 0))
    total = 0.0
    for j in range(parts):  # piece j of frame i lands on hop i + j
        total += tf.pad(pieces[..., j, :], [[0, 0]] * (rank - 2) + [[j, parts - 1 - j], [0, 0]])
    signal = tf.reshape(total, tf.concat([tf.shape(total)[:-2], [-1]], 0))
    if parts * hop == width:
        return signal
    return _leading(signal, (_dim(frames, -2) - 1) * hop + width)


def _dim(tensor: tf.Tensor, axis: int):
    """The static size of `axis` when known (keeps XLA shapes static), else a tensor."""
    size = tensor.shape[axis]
    return size if size is not None else tf.shape(tensor)[axis]


def _covered_samples(frames, config: MelConfig):
    return (frames - 1) * config.hop_length + (0 if config.center else config.n_fft)


def mel_to_magnitude(mel, config: MelConfig) -> tf.Tensor:
    """Linear mel → STFT magnitude through the filterbank's pseudo-inverse.

    Args:
        mel: float [..., frames, n_mels] linear mel (|STFT|^power through the filterbank).
        config: the recipe.

    Returns:
        float32 [..., frames, n_fft // 2 + 1], non-negative magnitude (power 1).
    """
    mel = tf.cast(tf.convert_to_tensor(mel), tf.float32)
    if mel.shape[-1] != config.n_mels:
        raise InputError(
            f"Expected mel [..., frames, {config.n_mels}], received: shape={mel.shape}"
        )
    inverse = tf.constant(_filters.mel_pseudo_inverse(config), tf.float32)
    linear = tf.maximum(tf.linalg.matmul(mel, inverse), 0.0)
    return linear if config.power == 1.0 else tf.sqrt(linear)


def griffin_lim(
    mel,
    config: MelConfig,
    *,
    n_iter: int = 32,
    momentum: float = 0.99,
    seed: int = 0,
    length: int | None = None,
) -> tf.Tensor:
    """Mel → waveform: pseudo-inverse filterbank, then fast Griffin-Lim.

    The phase starts random (stateless, from `seed`) and is refined `n_iter` times with
    Perraudin et al.'s momentum, as `librosa.griffinlim` does. For model features, pass
    `xtts_audio.denormalize(features, config)`.

    Args:
        mel: float [..., frames, n_mels] linear mel, as `mel_spectrogram` returns.
        config: the recipe the mel was computed with.
        n_iter: Griffin-Lim iterations (>= 1).
        momentum: 0 gives classic Griffin-Lim; librosa's default is 0.99.
        seed: seed of the initial random phase.
        length: samples to return (default: what the frames cover).

    Returns:
        float32 [..., samples].
    """
    if isinstance(n_iter, bool) or not isinstance(n_iter, int) or n_iter < 1:
        raise ConfigError(f"griffin_lim: expected n_iter >= 1, received: n_iter={n_iter!r}")
    if not 0.0 <= momentum < 1.0:
        raise ConfigError(f"griffin_lim: expected 0 <= momentum < 1, received: {momentum=}")
    magnitude = tf.cast(mel_to_magnitude(mel, config), tf.complex64)
    if length is None:
        length = _covered_samples(_dim(magnitude, -2), config)
    # Philox explicitly: the automatic choice differs under XLA, and so would the phase.
    phase = tf.random.stateless_uniform(tf.shape(magnitude), seed=[seed, 0], alg="philox")
    phase = phase * (2.0 * np.pi)
    angles = tf.exp(tf.complex(tf.zeros_like(phase), phase))
    blend = momentum / (1.0 + momentum)

    def step(i, angles, previous):
        rebuilt = stft(istft(magnitude * angles, config, length=length), config)
        angles = rebuilt - tf.cast(blend, tf.complex64) * previous
        angles = angles / tf.cast(tf.abs(angles) + 1e-16, tf.complex64)
        return i + 1, angles, rebuilt

    _, angles, _ = tf.while_loop(
        lambda i, *_: i < n_iter, step, (tf.constant(0), angles, tf.zeros_like(angles))
    )
    return istft(magnitude * angles, config, length=length)
