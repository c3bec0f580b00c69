"""The evals a training run makes every `train.eval_every` steps, one kind per task
(`xtts_train.training.task.Task.evaluation` picks it): each is called with the step and
logs its figures through the run's writer (metrics.jsonl and TensorBoard).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import keras
import numpy as np
import tensorflow as tf

import xtts_audio as xa
import xtts_data as xd
from xtts_train.config import StackConfig
from xtts_train.models.text_to_mel.decoding import Decoding, buffer_frames
from xtts_train.models.text_to_mel.model import TextToMel, dummy_batch
from xtts_train.runs.loading import load_reference
from xtts_train.runs.media import free_running_eval, mel_image, write_eval_media
from xtts_train.runs.run_writer import RunWriter

__all__ = ["TextToMelEvaluation", "ValidationLosses", "VocoderEvaluation"]

_FREE_RUNNING_ROWS = 4  # validation utterances decoded free-running at each eval
Batch = Mapping[str, tf.Tensor]
Evaluate = Callable[[Batch], Mapping[str, tf.Tensor]]  # the compiled eval step


def _mean_losses(evaluate: Evaluate, batches: Sequence[Batch]) -> dict[str, float]:
    """`val_<name>`: each loss averaged over `batches`."""
    losses = [evaluate(batch) for batch in batches]
    return {f"val_{k}": float(np.mean([float(x[k]) for x in losses])) for k in losses[0]}


def _take(pipeline, count: int) -> list[Batch]:
    iterator = iter(pipeline.dataset)
    return [next(iterator) for _ in range(count)]


class ValidationLosses:
    """The eval of a task without one of its own: with a validation split, the losses
    averaged over `train.eval_batches` validation batches (`val_<name>`); nothing without.

    Args:
        evaluate: the compiled eval step (`CompiledSteps.evaluate`).
        val: the validation pipeline, or None.
    """

    def __init__(self, stack: StackConfig, evaluate: Evaluate, writer: RunWriter,
                 val: xd.DataPipeline | None) -> None:  # fmt: skip
        self.stack, self.evaluate, self.writer, self.val = stack, evaluate, writer, val

    def __call__(self, step: int) -> None:
        if self.val is not None:
            batches = _take(self.val, self.stack.train.eval_batches)
            self.writer.log(step, _mean_losses(self.evaluate, batches))


class TextToMelEvaluation:
    """An eval of a text-to-mel run: the validation losses and media and free-running
    scores (with a validation split), and the eval sentences spoken free-running (always).

    Args:
        evaluate: the compiled eval step (`CompiledSteps.evaluate`).
        model: the trained model (its weights are copied to the decoder at each eval).
        val: the validation pipeline, or None.
        sentences: (text, token ids) of `text_to_mel.eval_sentences`.
        buffers: the spec whose longest bucket sizes the decoding buffer.
    """

    def __init__(self, stack: StackConfig, evaluate: Evaluate, model: keras.Model,
                 writer: RunWriter, val: xd.DataPipeline | None,
                 sentences: Sequence[tuple[str, list[int]]], *,
                 buffers: xd.DatasetSpec) -> None:  # fmt: skip
        self.stack, self.evaluate, self.model = stack, evaluate, model
        self.writer, self.sentences = writer, sentences
        self.val, self.buffers = val, buffers  # decoding room: the val (else train) spec
        self.decoding: Decoding | None = None

    def __call__(self, step: int) -> None:
        first, mean = None, {}
        if self.val is not None:
            batches = _take(self.val, self.stack.train.eval_batches)
            mean = _mean_losses(self.evaluate, batches)
            write_eval_media(self.writer.tensorboard, step, self.model, batches[0],
                             self.stack.audio)  # fmt: skip
            first = batches[0]
        reference = load_reference(self.writer.workdir, self.stack)
        mean.update(free_running_eval(self.writer.tensorboard, step, self._decoding(), first,
                                      reference, self.sentences, self.stack.audio))  # fmt: skip
        self.writer.log(step, mean)

    def _decoding(self) -> Decoding:
        """The free-running decoder of the evals (compiled at the first), with room for
        twice the longest validation (else training) bucket, on a one-device copy of the
        model that takes the trained weights at each eval (the trained model's variables
        may be mirrored over replicas, which a decoding loop outside the strategy cannot
        update)."""
        if self.decoding is None:
            copy = TextToMel(self.stack.model, self.stack.audio)
            copy(dummy_batch(self.stack.model))
            longest = max(shape.frames for shape in self.buffers.shapes)
            self.decoding = Decoding(
                copy, decode=self.stack.decode, cond_frames=self.stack.reference_frames,
                max_frames=buffer_frames(longest), batch_size=_FREE_RUNNING_ROWS,
                compiler=self.stack.train.compiler,
            )  # fmt: skip
        self.decoding.model.set_weights(self.model.get_weights())
        return self.decoding


class VocoderEvaluation:
    """An eval of a vocoder run: with a validation split, the losses averaged over
    `train.eval_batches` validation batches (`val_loss`, `val_mel_l1`, `val_stft`); always,
    copy synthesis of the first segments of one fixed batch (the first validation batch,
    else the run's first training batch) to TensorBoard: `vocoder/vocoded` and
    `vocoder/recording` audio and their mels side by side (`vocoder/mel_recording_then_vocoded`).

    Args:
        evaluate: the compiled eval step (`CompiledSteps.evaluate`).
        model: the trained vocoder (called on the fixed batch: its one compiled shape).
        val, train: the validation pipeline (or None) and the training pipeline.
        rows: segments written to TensorBoard, end to end.
    """

    def __init__(self, stack: StackConfig, evaluate: Evaluate, model: keras.Model,
                 writer: RunWriter, val, train, *, rows: int = 4) -> None:  # fmt: skip
        self.stack, self.evaluate, self.model, self.writer = stack, evaluate, model, writer
        self.val, self.train, self.rows = val, train, rows
        self.batch: Batch | None = None  # drawn at the first eval: (B, F, M), (B, F * hop)
        self.vocode = tf.function(lambda mel: model(mel, training=False), autograph=False)

    def __call__(self, step: int) -> None:
        mean = {}
        if self.val is not None:
            mean = _mean_losses(self.evaluate, _take(self.val, self.stack.train.eval_batches))
        if self.batch is None:
            self.batch = _take(self.val if self.val is not None else self.train, 1)[0]
        rows = min(self.rows, int(self.batch["mel"].shape[0]))
        vocoded = self.vocode(self.batch["mel"])[:rows]  # (rows, F * hop)
        audio = self.stack.audio
        joined = {name: tf.clip_by_value(tf.reshape(wave, [-1]), -1.0, 1.0)  # (rows * F * hop,)
                  for name, wave in (("recording", self.batch["audio"][:rows]),
                                     ("vocoded", vocoded))}  # fmt: skip
        with self.writer.tensorboard.as_default(step=step):
            for name, wave in joined.items():
                tf.summary.audio(f"vocoder/{name}", wave[None, :, None], audio.sample_rate)
            mels = [xa.mel_features(wave, audio) for wave in joined.values()]  # (frames, M)
            tf.summary.image("vocoder/mel_recording_then_vocoded", mel_image(*mels))
        self.writer.log(step, mean)
