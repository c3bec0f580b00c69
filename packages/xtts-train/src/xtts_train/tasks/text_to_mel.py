"""The text-to-mel task: `TextToMel` on bucketed text/mel batches (`xtts_data.make_dataset`:
K (batch, text, frames) shapes, one program each), its losses weighed by the run's
`text_to_mel` section, the vocabulary and evaluation sentences it needs when a run starts,
and the reference clip it keeps for `synthesize`."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import tensorflow as tf

import xtts_data as xd
from xtts_train.compile.memory import check_training_memory
from xtts_train.config import StackConfig, TextToMelConfig
from xtts_train.models.text_to_mel.decoding import text_ids
from xtts_train.models.text_to_mel.losses import total_loss
from xtts_train.models.text_to_mel.model import TextToMel, dummy_batch
from xtts_train.runs.evals import TextToMelEvaluation
from xtts_train.training.task import Task

__all__ = ["TextToMelTask", "eval_sentences"]


def eval_sentences(stack: StackConfig, tokenizer: xd.Tokenizer) -> list[tuple[str, list[int]]]:
    """(text, token ids) of `text_to_mel.eval_sentences` (a symbol outside the vocabulary
    is a `ConfigError` naming the sentence)."""
    texts = stack.text_to_mel.eval_sentences
    names = [f"text_to_mel.eval_sentences[{i}]" for i in range(len(texts))]
    return [(text, text_ids(text, stack.data.text, tokenizer, name=name).ids)
            for text, name in zip(texts, names, strict=True)]  # fmt: skip


class TextToMelTask(Task):
    """`TextToMel` on bucketed text/mel batches; losses `total_loss`: mel L1 before and
    after the postnet, stop BCE, guided attention (and the alignment score, a metric).

    Args:
        model: a built `TextToMel`.
        losses: the run's `text_to_mel` section (its loss weights).
    """

    name = "text_to_mel"
    loss_settings = ("stop_weight", "stop_pos_weight", "guided_attention_weight",
                     "guided_attention_sigma", "forward_sum_weight")  # fmt: skip
    bucketed = True

    def __init__(self, model: TextToMel, losses: TextToMelConfig) -> None:
        self.model, self.loss_config = model, losses

    @classmethod
    def pipeline(cls, cache, data, split, *, repeat):
        return xd.make_dataset(cache, data, split, repeat=repeat)

    @classmethod
    def configure(cls, stack, tokenizer):
        """The model's vocabulary is the cache's; the eval sentences must read in it."""
        model = dataclasses.replace(stack.model, vocab_size=tokenizer.vocab_size)
        stack = dataclasses.replace(stack, model=model)
        if stack.train.eval_every:
            eval_sentences(stack, tokenizer)
        return stack

    @classmethod
    def check_memory(cls, stack, spec):
        check_training_memory(stack.model, spec)

    @classmethod
    def build(cls, stack: StackConfig) -> TextToMelTask:
        model = TextToMel(stack.model, stack.audio)
        model(dummy_batch(stack.model))  # variables exist before any step is traced
        return cls(model, stack.text_to_mel)

    def losses(self, batch, hyper, *, training):
        prior = training and self.loss_config.alignment_prior
        outputs = self.model(batch, training=training, prior=prior)
        return total_loss(outputs, batch, stop_weight=hyper["stop_weight"],
                          pos_weight=hyper["stop_pos_weight"],
                          guided_weight=hyper["guided_attention_weight"],
                          guided_sigma=hyper["guided_attention_sigma"],
                          forward_sum_weight=(hyper["forward_sum_weight"]
                                              if self._forward_sum else None),
                          reduction_factor=self.model.config.reduction_factor)  # fmt: skip

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

    @property
    def _forward_sum(self) -> bool:
        """The forward-sum loss is in the compiled steps (`forward_sum_weight` above 0)."""
        return self.loss_config.forward_sum_weight > 0

    def trace_settings(self):
        settings = {**super().trace_settings(), "model": repr(self.model.config)}
        if self._forward_sum:  # another program, with the same weights
            settings["forward_sum"] = True
        if self.loss_config.alignment_prior:
            settings["alignment_prior"] = True
        return settings

    def on_first_batch(self, writer, batch):
        writer.keep_reference(batch)  # synthesize's default voice

    def evaluation(self, stack, steps, writer, val, train, tokenizer):
        sentences: Sequence[tuple[str, list[int]]] = ()
        if stack.train.eval_every:
            sentences = eval_sentences(stack, tokenizer)
        return TextToMelEvaluation(stack, steps.evaluate, steps.model, writer, val, sentences,
                                   buffers=(val or train).spec)  # fmt: skip
