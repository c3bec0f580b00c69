"""The vocoder: `model.Vocoder` (mel frames → waveform, Vocos-style), its `layers`, its
`losses` (log-mel L1 and multi-resolution STFT), and `vocode_chunks` for streaming."""

from xtts_train.models.vocoder.losses import log_mel_l1, stft_loss, vocoder_losses
from xtts_train.models.vocoder.model import (
    Vocoder,
    head_spectrum,
    receptive_frames,
    synthesis_config,
    synthesize,
    vocode_chunks,
    window_start,
)

__all__ = [
    "Vocoder",
    "head_spectrum",
    "log_mel_l1",
    "receptive_frames",
    "stft_loss",
    "synthesis_config",
    "synthesize",
    "vocode_chunks",
    "vocoder_losses",
    "window_start",
]
