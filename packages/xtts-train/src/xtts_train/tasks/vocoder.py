"""The vocoder task: `Vocoder` on random aligned mel/audio segments
(`xtts_data.make_segment_dataset`: one (batch, frames, samples) shape, one program), its
losses weighed by the run's `vocoder` section, which also sizes it."""

from __future__ import annotations

import tensorflow as tf

import xtts_data as xd
from xtts_audio import MelConfig
from xtts_train.config import StackConfig, VocoderConfig
from xtts_train.models.vocoder.losses import vocoder_losses
from xtts_train.models.vocoder.model import AUTO_COMPILERS, Vocoder
from xtts_train.runs.evals import VocoderEvaluation
from xtts_train.training.task import Task

__all__ = ["VocoderTask"]


class VocoderTask(Task):
    """`Vocoder` on random aligned segments (`mel` [B, F, M] → `audio` [B, F * hop]);
    losses `vocoder_losses`: log-mel L1, multi-resolution STFT and the phase loss.

    Memory is not checked: a segment batch is kilobytes (16 x 32 frames), and the
    backbone runs at the frame rate.

    Args:
        model: a built `Vocoder`.
        audio: the mel recipe of the features (the loss's log-mels use it too).
        vocoder: the vocoder's section (its loss weights and STFT resolutions).
    """

    name = "vocoder"
    loss_settings = ("mel_weight", "stft_weight", "phase_weight")
    weights_section = "vocoder"
    compilers = AUTO_COMPILERS

    def __init__(self, model: Vocoder, audio: MelConfig, vocoder: VocoderConfig) -> None:
        self.model, self.audio, self.vocoder = model, audio, vocoder
        self.loss_config = vocoder

    @classmethod
    def pipeline(cls, cache, data, split, *, repeat):
        return xd.make_segment_dataset(cache, data, split, repeat=repeat)

    @classmethod
    def build(cls, stack: StackConfig) -> VocoderTask:
        model = Vocoder(stack.vocoder)
        model(tf.zeros([1, 4, stack.vocoder.n_mels]))  # variables before any trace
        return cls(model, stack.audio, stack.vocoder)

    def losses(self, batch, hyper, *, training):
        out = self.model.synthesis(batch["mel"])  # audio (B, F * hop), phase (B, F, bins)
        return vocoder_losses(out["audio"], batch["audio"], self.audio, self.vocoder,
                              mel_weight=hyper["mel_weight"], stft_weight=hyper["stft_weight"],
                              phase_pred=out["phase"],
                              phase_weight=hyper["phase_weight"])  # fmt: skip

    def trace_settings(self):
        return {**super().trace_settings(), "vocoder": repr(self.vocoder),
                "audio": repr(self.audio)}  # fmt: skip

    def evaluation(self, stack, steps, writer, val, train, tokenizer):
        return VocoderEvaluation(stack, steps.evaluate, steps.model, writer, val, train)
