"""xtts_audio: TensorFlow-native audio ops for TTS that match librosa.

Every op is a pure function of tensors plus a frozen config; each runs eagerly, in
`tf.function`, under `jit_compile=True` and inside `tf.data` (WAV decoding excepted from
XLA: strings cannot enter it).

Names load on first use (`xtts_audio.startup.lazy_exports`): `import xtts_audio` does not
import TensorFlow; `xtts_audio.mel_spectrogram` does.
"""

from typing import TYPE_CHECKING

from xtts_audio.startup import lazy_exports

if TYPE_CHECKING:
    from xtts_audio.config import PRESETS, MelConfig
    from xtts_audio.effects import deemphasis, preemphasis, silence_bounds, trim_silence
    from xtts_audio.errors import ConfigError, InputError, XttsAudioError
    from xtts_audio.griffin_lim import griffin_lim, istft, istft_matmul, mel_to_magnitude
    from xtts_audio.pitch import PITCH_RANGE, mel_pitch
    from xtts_audio.resample import resample, resampled_length, to_mono
    from xtts_audio.spectral import (
        denormalize,
        mel_features,
        mel_spectrogram,
        normalize,
        num_frames,
        spectrogram,
        stft,
        stft_matmul,
    )
    from xtts_audio.warp import mel_warp_positions, warp_mel
    from xtts_audio.wav import decode_wav, load_wav
    from xtts_audio.wav_write import (
        WAV_HEADER_BYTES,
        WavWriter,
        pcm16,
        stream_wav_header,
        wav_bytes,
        write_wav,
    )

__all__ = [
    "PITCH_RANGE",
    "PRESETS",
    "WAV_HEADER_BYTES",
    "ConfigError",
    "InputError",
    "MelConfig",
    "WavWriter",
    "XttsAudioError",
    "decode_wav",
    "deemphasis",
    "denormalize",
    "griffin_lim",
    "istft",
    "istft_matmul",
    "load_wav",
    "mel_features",
    "mel_pitch",
    "mel_spectrogram",
    "mel_to_magnitude",
    "mel_warp_positions",
    "normalize",
    "num_frames",
    "pcm16",
    "preemphasis",
    "resample",
    "resampled_length",
    "silence_bounds",
    "spectrogram",
    "stft",
    "stft_matmul",
    "stream_wav_header",
    "to_mono",
    "trim_silence",
    "warp_mel",
    "wav_bytes",
    "write_wav",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        **dict.fromkeys(["PRESETS", "MelConfig"], "config"),
        **dict.fromkeys(["deemphasis", "preemphasis", "silence_bounds", "trim_silence"], "effects"),
        **dict.fromkeys(["ConfigError", "InputError", "XttsAudioError"], "errors"),
        **dict.fromkeys(
            ["griffin_lim", "istft", "istft_matmul", "mel_to_magnitude"], "griffin_lim"
        ),
        **dict.fromkeys(["PITCH_RANGE", "mel_pitch"], "pitch"),
        **dict.fromkeys(["resample", "resampled_length", "to_mono"], "resample"),
        **dict.fromkeys(
            ["denormalize", "mel_features", "mel_spectrogram", "normalize", "num_frames",
             "spectrogram", "stft", "stft_matmul"],
            "spectral",
        ),
        **dict.fromkeys(["mel_warp_positions", "warp_mel"], "warp"),
        **dict.fromkeys(["decode_wav", "load_wav"], "wav"),
        **dict.fromkeys(
            [
                "WAV_HEADER_BYTES",
                "WavWriter",
                "pcm16",
                "stream_wav_header",
                "wav_bytes",
                "write_wav",
            ],
            "wav_write",
        ),
    },
)  # fmt: skip
