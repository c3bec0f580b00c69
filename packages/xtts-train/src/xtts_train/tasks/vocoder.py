"""The vocoder task: `Vocoder` on random aligned mel/audio segments
(`xtts_data.make_segment_dataset`: one (batch, frames, samples) shape, one program), its
losses weighed by the run's `vocoder` section, which also sizes it. With
`vocoder.adversarial`, `Discriminators` train beside it: two objectives, two AdamWs, one
compiled step."""

from __future__ import annotations

import tensorflow as tf

import xtts_data as xd
from xtts_audio import MelConfig
from xtts_train.config import StackConfig, VocoderConfig
from xtts_train.errors import ConfigError
from xtts_train.models.vocoder.discriminators import (
    Discriminators,
    discriminator_loss,
    feature_loss,
    generator_loss,
)
from xtts_train.models.vocoder.losses import vocoder_losses
from xtts_train.models.vocoder.model import AUTO_COMPILERS, Vocoder
from xtts_train.runs.evals import VocoderEvaluation
from xtts_train.training.task import Objective, Task

__all__ = ["VocoderTask"]

_GAN_BETAS = (0.8, 0.9)


class VocoderTask(Task):
    """`Vocoder` on random aligned segments (`mel` [B, F, M] → `audio` [B, F * hop]);
    losses `vocoder_losses`: log-mel L1, multi-resolution STFT and the phase loss.

    With `vocoder.adversarial`, `Discriminators` judge the recording and the output: the
    vocoder's `loss` gains the hinge and feature-matching losses (`adversarial_weight`,
    `feature_weight`), and the discriminators minimise their own hinge loss
    (`disc_loss`), each objective by its own AdamW, both in the step's one program.

    Memory is not checked: a segment batch is kilobytes (16 x 32 frames), and the
    backbone runs at the frame rate.

    Args:
        model: a built `Vocoder`.
        audio: the mel recipe of the features (the loss's log-mels use it too).
        vocoder: the vocoder's section (its loss weights and STFT resolutions).
        discriminators: built `Discriminators` (with `vocoder.adversarial`), else None.
    """

    name = "vocoder"
    loss_settings = ("mel_weight", "stft_weight", "phase_weight")
    adversarial_settings = ("adversarial_weight", "feature_weight")
    weights_section = "vocoder"
    compilers = AUTO_COMPILERS

    def __init__(self, model: Vocoder, audio: MelConfig, vocoder: VocoderConfig,
                 discriminators: Discriminators | None = None) -> None:  # fmt: skip
        if (discriminators is None) == vocoder.adversarial:
            raise ConfigError(f"Expected discriminators exactly with vocoder.adversarial, "
                             f"received: adversarial={vocoder.adversarial}, "
                             f"discriminators={discriminators!r}")  # fmt: skip
        self.model, self.audio, self.vocoder = model, audio, vocoder
        self.discriminators = discriminators
        self.loss_config = vocoder

    @classmethod
    def pipeline(cls, cache, data, split, *, repeat):
        return xd.make_segment_dataset(cache, data, split, repeat=repeat)

    @classmethod
    def build(cls, stack: StackConfig) -> VocoderTask:
        model = Vocoder(stack.vocoder)
        model(tf.zeros([1, 4, stack.vocoder.n_mels]))  # variables before any trace
        discriminators = None
        if stack.vocoder.adversarial:
            discriminators = Discriminators(stack.vocoder, stack.audio.sample_rate)
            discriminators(tf.zeros([1, 4 * stack.audio.hop_length]))
        return cls(model, stack.audio, stack.vocoder, discriminators)

    def losses(self, batch, hyper, *, training):
        out = self.model.synthesis(batch["mel"])  # audio (B, F * hop), phase (B, F, bins)
        losses = vocoder_losses(out["audio"], batch["audio"], self.audio, self.vocoder,
                                mel_weight=hyper["mel_weight"],
                                stft_weight=hyper["stft_weight"], phase_pred=out["phase"],
                                phase_weight=hyper["phase_weight"])  # fmt: skip
        if self.discriminators is None:
            return losses
        real, real_features = self.discriminators(batch["audio"])
        fake, fake_features = self.discriminators(out["audio"])
        parts = {"adversarial": generator_loss(fake),
                 "feature": feature_loss(real_features, fake_features),
                 "disc_loss": discriminator_loss(real, fake)}  # fmt: skip
        loss = (losses["loss"] + hyper["adversarial_weight"] * parts["adversarial"]
                + hyper["feature_weight"] * parts["feature"])  # fmt: skip
        return {**losses, "loss": loss, **parts}

    def objectives(self):
        if self.discriminators is None:
            return super().objectives()
        # Vocos's AdamW betas for both networks of the adversarial stage.
        return (Objective("model", "loss", tuple(self.model.trainable_variables), _GAN_BETAS),
                Objective("discriminators", "disc_loss",
                          tuple(self.discriminators.trainable_variables), _GAN_BETAS))  # fmt: skip

    def networks(self):
        return {} if self.discriminators is None else {"discriminators": self.discriminators}

    def settings(self):
        names = self.loss_settings + (self.adversarial_settings if self.vocoder.adversarial
                                      else ())  # fmt: skip
        return {name: float(getattr(self.vocoder, name)) for name in names}

    def trace_settings(self):
        return {**super().trace_settings(), "vocoder": repr(self.vocoder),
                "audio": repr(self.audio)}  # fmt: skip

    def evaluation(self, stack, steps, writer, val, train, tokenizer):
        return VocoderEvaluation(stack, steps.evaluate, steps.model, writer, val, train)
