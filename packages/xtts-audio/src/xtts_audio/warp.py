"""Frequency warping of mel features: the same speech in a higher or lower voice.

Scaling a spectrum's frequency axis by a factor moves its harmonics (the pitch) and its
formants (the vocal tract) together, as a shorter or longer vocal tract would: vocal tract
length perturbation (Jaitly & Hinton 2013), which makes new voices out of a corpus's
voices. On mel features it is a resampling of each frame along the mel axis:
`mel_warp_positions` says where each bin reads for a factor (NumPy, once), `warp_mel`
reads there (a gather and a linear interpolation per row, any mode of execution).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from xtts_audio._filters import hz_to_mel, mel_edges, mel_to_hz
from xtts_audio.config import MelConfig
from xtts_audio.errors import InputError

__all__ = ["mel_warp_positions", "warp_mel"]


def mel_warp_positions(config: MelConfig, factors) -> np.ndarray:
    """Where each mel bin reads when the frequency axis is scaled by each factor.

    The bin centred at `f` Hz takes the spectrum at `f / factor` Hz (a factor above 1
    raises the voice), found between the bins' centres on `config`'s mel scale; reads
    below the first bin or above the last take that bin.

    Args:
        config: the mel recipe the features were made with.
        factors: float [K], each > 0.

    Returns:
        float32 [K, n_mels]: fractional bin indices in `[0, n_mels - 1]`; a factor of 1
        gives `0, 1, ..., n_mels - 1`.

    Raises:
        InputError: a factor that is not a finite number > 0.
    """
    factors = np.asarray(factors, np.float64).reshape(-1)
    if not (np.all(np.isfinite(factors)) and np.all(factors > 0)):
        raise InputError(f"Expected warp factors > 0, received: factors={factors.tolist()}")
    centres = mel_edges(config)[1:-1]  # (M,) mel: evenly spaced
    step = centres[1] - centres[0] if config.n_mels > 1 else 1.0
    hz = mel_to_hz(centres, htk=config.htk)
    source = hz_to_mel(hz[None, :] / factors[:, None], htk=config.htk)  # (K, M)
    return np.clip((source - centres[0]) / step, 0, config.n_mels - 1).astype(np.float32)


def warp_mel(mel, positions) -> tf.Tensor:
    """Each row's frames read at its row of `positions` (linear interpolation between bins).

    Args:
        mel: float32 [batch, frames, n_mels] features (any scale: `ln` mels, dB, ...).
        positions: float32 [batch, n_mels] fractional bin indices in `[0, n_mels - 1]`,
            rows of `mel_warp_positions`.

    Returns:
        float32 [batch, frames, n_mels]. A frame that is constant across bins (padding)
        stays as it is.
    """
    mel = tf.convert_to_tensor(mel, tf.float32)
    positions = tf.convert_to_tensor(positions, tf.float32)
    low = tf.floor(positions)
    weight = (positions - low)[:, None, :]  # (B, 1, M)
    low = tf.cast(low, tf.int32)
    high = tf.minimum(low + 1, tf.shape(mel)[-1] - 1)
    below = tf.gather(mel, low, axis=2, batch_dims=1)  # (B, F, M)
    above = tf.gather(mel, high, axis=2, batch_dims=1)
    return below + (above - below) * weight
