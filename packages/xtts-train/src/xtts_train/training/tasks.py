"""Tasks: what the trainer trains. A task is a model, the batches it reads, its losses and
its metrics; the loop, the compiled steps, warm-up, compile cache, retrace guard,
checkpoints, resume, distribution and run files are the same for every task.

| task (`train.task`) | model | batches (`xtts_data`) | one program per |
|---|---|---|---|
| `text_to_mel` | `TextToMel` | `make_dataset`: K bucketed (batch, text, frames) shapes | bucket |
| `vocoder` | `Vocoder` | `make_segment_dataset`: one (batch, frames, samples) shape | run |

A task's class knows what it needs before a model exists (`pipeline`, `check_memory`);
an instance holds the built model and gives the compiled steps their pieces: the losses
of a batch (float32 scalars, `"loss"` the one differentiated), a placeholder batch to warm
a shape up with, and the loss settings the steps take as inputs (so changing one compiles
nothing). A batch's shape key is `xtts_train.training.steps.shape_of`'s, for every task.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import keras
import tensorflow as tf

import xtts_data as xd
from xtts_audio import MelConfig
from xtts_train.compile.memory import check_training_memory
from xtts_train.config import StackConfig, TrainConfig, VocoderConfig
from xtts_train.models import dropout
from xtts_train.models.text_to_mel.frames import frame_pitch
from xtts_train.models.text_to_mel.losses import total_loss
from xtts_train.models.text_to_mel.model import TextToMel, dummy_batch
from xtts_train.models.vocoder.losses import vocoder_losses
from xtts_train.models.vocoder.model import Vocoder
from xtts_train.runs.evals import TextToMelEvaluation, VocoderEvaluation
from xtts_train.runs.run_writer import RunWriter

__all__ = ["Task", "TextToMelTask", "VocoderTask", "task_class"]

Batch = Mapping[str, tf.Tensor]
Evaluation = Callable[[int], None]  # an eval, called with the step


class Task:
    """The base of a task: the built `model` and what the steps need of it.

    Attributes:
        model: the network trained (built: every variable exists).
        loss_config: the config section holding the values of `loss_settings`.

    Class attributes a task sets:
        name: its `train.task` value.
        loss_settings: the loss settings the compiled steps take as float32 inputs.
        speaks_sentences: its evals speak `train.eval_sentences` and `synthesize` needs a
            reference clip from the run (`reference.npy`, kept from the first batch).
    """

    name: ClassVar[str]
    loss_settings: ClassVar[tuple[str, ...]] = ()
    speaks_sentences: ClassVar[bool] = False

    model: keras.Model
    loss_config: Any

    # -- before a model exists ------------------------------------------------------------

    @classmethod
    def pipeline(cls, cache: xd.FeatureCache, data: xd.DataConfig, split: str, *,
                 repeat: bool) -> Any:  # fmt: skip
        """The task's batches of `split` from an opened cache, and their spec (`.spec`)."""
        raise NotImplementedError

    @classmethod
    def check_memory(cls, stack: StackConfig, spec: Any) -> None:
        """Refuse batch shapes whose step would not fit this machine (a `ConfigError`)."""

    @classmethod
    def build(cls, stack: StackConfig) -> Task:
        """The task with its model built: every variable exists before a step is traced."""
        raise NotImplementedError

    # -- the pieces of a step -------------------------------------------------------------

    def losses(self, batch: Batch, hyper: Mapping[str, tf.Tensor], *,
               training: bool) -> dict[str, tf.Tensor]:  # fmt: skip
        """Float32 scalar losses and metrics of `batch`; `"loss"` is differentiated."""
        raise NotImplementedError

    def placeholder_batch(self, signature: Mapping[str, tf.TensorSpec]) -> dict[str, tf.Tensor]:
        """A batch of `signature` to run a program once at warm-up (the update is gated
        off then, so its values only need to be finite)."""
        return {name: tf.zeros(spec.shape, spec.dtype) for name, spec in signature.items()}

    def settings(self) -> dict[str, float]:
        """The values of `loss_settings`, from `loss_config`."""
        return {name: float(getattr(self.loss_config, name)) for name in self.loss_settings}

    def token_tables(self) -> list[keras.Variable]:
        """The model's weights indexed by token id in their first axis (none by default):
        `fit --init-from` carries them over token by token."""
        return []

    def seed_states(self) -> list[tf.Variable]:
        """The model's dropout seed states, which Keras keeps out of its checkpoint."""
        return dropout.seed_states(self.model)

    def trace_settings(self) -> dict[str, Any]:
        """The configs its steps' graphs are built from (a stored trace's key: they are
        written out with their fields, `repr`)."""
        return {"task": self.name}

    def describe(self) -> str:
        """Trainable parameters, per component where the model tells them."""
        return f"{self.name}: {self.model.parameter_count():,} trainable parameters"

    def evaluation(self, stack: StackConfig, steps, writer: RunWriter, val, train,
                   sentences: Sequence[tuple[str, list[int]]]) -> Evaluation:  # fmt: skip
        """The run's eval, called with the step every `train.eval_every` steps.

        Args:
            stack: the run's config.
            steps: the run's `CompiledSteps` (its eval programs).
            val, train: the validation pipeline (None without one) and the training one.
            sentences: (text, token ids) of `train.eval_sentences` (when it speaks them).
        """
        raise NotImplementedError


class TextToMelTask(Task):
    """`TextToMel` on bucketed text/mel batches; losses `total_loss`: mel L1 before and
    after the postnet, stop BCE, guided attention, the pitch contour's with
    `ModelConfig.pitch_contour` (and the alignment score, a metric).

    Args:
        model: a built `TextToMel`.
        train: the run's `train` section (its loss weights).
    """

    name = "text_to_mel"
    loss_settings = ("stop_weight", "stop_pos_weight", "guided_attention_weight",
                     "guided_attention_sigma")  # fmt: skip
    speaks_sentences = True

    def __init__(self, model: TextToMel, train: TrainConfig) -> None:
        self.model, self.loss_config = model, train

    @classmethod
    def pipeline(cls, cache, data, split, *, repeat):
        return xd.make_dataset(cache, data, split, repeat=repeat)

    @classmethod
    def check_memory(cls, stack, spec):
        check_training_memory(stack.model, spec)

    @classmethod
    def build(cls, stack: StackConfig) -> TextToMelTask:
        model = TextToMel(stack.model, stack.audio)
        model(dummy_batch(stack.model))  # variables exist before any step is traced
        return cls(model, stack.train)

    def losses(self, batch, hyper, *, training):
        outputs = self.model(batch, training=training)
        pitch = None
        if self.model.config.pitch_contour:  # what the contour learns: the frames' own
            pitch = frame_pitch(batch["mel"], self.model.audio)
        return total_loss(outputs, batch, stop_weight=hyper["stop_weight"],
                          pos_weight=hyper["stop_pos_weight"],
                          guided_weight=hyper["guided_attention_weight"],
                          guided_sigma=hyper["guided_attention_sigma"], pitch=pitch)  # fmt: skip

    def placeholder_batch(self, signature):
        """One real frame and token per row (the losses average over real ones)."""
        batch = super().placeholder_batch(signature)
        b = signature["tokens"].shape[0]
        for name in ("token_lengths", "mel_lengths", "cond_lengths"):
            batch[name] = tf.ones([b], tf.int32)
        first = tf.one_hot(0, signature["mel"].shape[1])[None]  # (1, F)
        batch["mel_mask"] = tf.tile(first, [b, 1])
        batch["stop_targets"] = tf.tile(first, [b, 1])
        batch["token_mask"] = tf.tile(tf.one_hot(0, signature["tokens"].shape[1])[None], [b, 1])
        batch["tokens"] = tf.cast(batch["token_mask"], tf.int32) * 2
        return batch

    def token_tables(self):
        return [self.model.text_encoder.embedding.embeddings]  # (vocab_size, D)

    def describe(self):
        return self.model.describe()

    def trace_settings(self):
        return {**super().trace_settings(), "model": repr(self.model.config)}

    def evaluation(self, stack, steps, writer, val, train, sentences):
        return TextToMelEvaluation(stack, steps.evaluate, steps.model, writer, val, sentences,
                                   buffers=(val or train).spec)  # fmt: skip


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

    def evaluation(self, stack, steps, writer, val, train, sentences):
        return VocoderEvaluation(stack, steps.evaluate, steps.model, writer, val, train)


_TASKS: dict[str, type[Task]] = {"text_to_mel": TextToMelTask, "vocoder": VocoderTask}


def task_class(stack: StackConfig) -> type[Task]:
    """The class of the run's task (`train.task`)."""
    return _TASKS[stack.train.task]
