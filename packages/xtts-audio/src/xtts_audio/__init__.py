"""xtts_audio: TensorFlow-native audio ops for TTS that match librosa.

Every op is a pure function of tensors plus a frozen config; each runs eagerly, in
`tf.function`, under `jit_compile=True` and inside `tf.data` (WAV decoding excepted from
XLA: strings cannot enter it).
"""

from xtts_audio.config import PRESETS, MelConfig
from xtts_audio.errors import ConfigError, InputError, XttsAudioError
from xtts_audio.spectral import (
    denormalize,
    mel_features,
    mel_spectrogram,
    normalize,
    num_frames,
    spectrogram,
)

__all__ = [
    "PRESETS",
    "ConfigError",
    "InputError",
    "MelConfig",
    "XttsAudioError",
    "denormalize",
    "mel_features",
    "mel_spectrogram",
    "normalize",
    "num_frames",
    "spectrogram",
]
