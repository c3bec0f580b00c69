"""`Task`: what the trainer trains, as the trainer sees it. A task is a model, the batches
it reads, its losses, its evals and what it needs when a run starts; the loop, the
compiled steps, warm-up, compile cache, retrace guard, checkpoints, resume, distribution
and run files are the same for every task, and know a task only through this protocol.
The tasks themselves, and the registry that names them, are `xtts_train.tasks`.

A task's class knows what it needs before a model exists (`pipeline`, `configure`,
`check_memory`, its compiler table); an instance holds the built model and gives the
compiled steps their pieces: the losses of a batch (float32 scalars, `"loss"` the one
differentiated), a placeholder batch to warm a shape up with, and the loss settings the
steps take as inputs (so changing one compiles nothing). A batch's shape key is its
pipeline spec's (`spec.key_of(batch)`).

A step applies one update per `Objective` of the task, each its own AdamW: by default one,
the `"loss"` differentiated with respect to the model's trainable weights. A task that
trains networks against each other (a vocoder and its discriminators) names several, and
the networks besides the model (`networks`), which the checkpoints then hold too. Every
objective's gradients come from the same forward pass of the step (the updates are
simultaneous), and all are applied in the one compiled program of the batch's shape.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import keras
import tensorflow as tf

import xtts_data as xd
from xtts_train.config import StackConfig
from xtts_train.errors import ConfigError
from xtts_train.models import dropout
from xtts_train.runs.evals import ValidationLosses
from xtts_train.runs.run_writer import RunWriter

__all__ = ["Objective", "Task", "check_task_settings"]

Batch = Mapping[str, tf.Tensor]
Evaluation = Callable[[int], None]  # an eval, called with the step


@dataclasses.dataclass(frozen=True)
class Objective:
    """One update of a train step: `loss` (a key of the task's losses) differentiated with
    respect to `variables`, clipped to `train.clip_norm` on its own, applied by its own
    AdamW at the run's learning rate and weight decay.

    Attributes:
        name: names its optimizer (in checkpoints, and `CompiledSteps.optimizers`).
        loss: the key of `Task.losses` it minimises.
        variables: the trainable variables it updates; no two objectives share one.
        betas: its AdamW's (beta_1, beta_2): Keras's by default; GAN recipes lower them.
    """

    name: str
    loss: str
    variables: Sequence[tf.Variable]
    betas: tuple[float, float] = (0.9, 0.999)


class Task:
    """The base of a task: the built `model` and what the steps need of it.

    Attributes:
        model: the network trained (built: every variable exists).
        loss_config: the config section holding the values of `loss_settings`.

    Class attributes a task sets:
        name: its `train.task` value.
        loss_settings: the fields of `loss_config` the compiled steps take as float32
            inputs.
        weights_section: the config section that sizes its weights: a resumed run's must
            be the same (`model`, `vocoder`).
        compilers: device kind -> role -> compiler where its programs differ from
            `xtts_train.compile.compiler.AUTO`'s (measured: `resolve(..., table=)`).
        bucketed: its batches come in buckets whose sizes `train.memory_budget_gb` may
            plan (`xtts_train.training.planner`).
    """

    name: ClassVar[str]
    loss_settings: ClassVar[tuple[str, ...]] = ()
    weights_section: ClassVar[str] = "model"
    compilers: ClassVar[Mapping[str, Mapping[str, str]]] = {}
    bucketed: ClassVar[bool] = False

    model: keras.Model
    loss_config: Any

    # -- before a model exists ------------------------------------------------------------

    @classmethod
    def pipeline(cls, cache: xd.FeatureCache, data: xd.DataConfig, split: str, *,
                 repeat: bool) -> Any:  # fmt: skip
        """The task's batches of `split` from an opened cache, and their spec (`.spec`)."""
        raise NotImplementedError

    @classmethod
    def configure(cls, stack: StackConfig, tokenizer: xd.Tokenizer) -> StackConfig:
        """The run's config as the task needs it from the cache it trains on (the
        text-to-mel task: the vocabulary's size), its start-of-run needs checked before
        anything is compiled or written (`ConfigError`)."""
        return stack

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

    def objectives(self) -> tuple[Objective, ...]:
        """The updates of a step, applied in this order; by default one: `"loss"` with
        respect to the model's trainable weights."""
        return (Objective("model", "loss", tuple(self.model.trainable_variables)),)

    def networks(self) -> dict[str, keras.layers.Layer]:
        """The networks trained besides `model` (a vocoder's discriminators), by name:
        checkpointed beside it, never loaded for inference; none by default."""
        return {}

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
        count = sum(math.prod(w.shape) for w in self.model.trainable_weights)
        line = f"{self.name}: {count:,} trainable parameters"
        for name, network in self.networks().items():
            count = sum(math.prod(w.shape) for w in network.trainable_weights)
            line += f"; {name}: {count:,}"
        return line

    def on_first_batch(self, writer: RunWriter, batch: Batch) -> None:
        """What the run keeps of its first batch (the text-to-mel task: `synthesize`'s
        default voice); nothing by default."""

    def evaluation(self, stack: StackConfig, steps, writer: RunWriter, val, train,
                   tokenizer: xd.Tokenizer) -> Evaluation:  # fmt: skip
        """The run's eval, called with the step every `train.eval_every` steps; by default
        the validation losses (`val_<name>`, with a validation split).

        Args:
            stack: the run's config.
            steps: the run's `CompiledSteps` (its eval programs).
            val, train: the validation pipeline (None without one) and the training one.
            tokenizer: the cache's (what the run's texts are read with).
        """
        return ValidationLosses(stack, steps.evaluate, writer, val)


def check_task_settings(task: type[Task], stack: StackConfig) -> None:
    """Refuse the train settings `task` cannot honour (`ConfigError`), before any work."""
    budget = stack.train.memory_budget_gb
    if budget is not None and not task.bucketed:
        raise ConfigError(
            f"Expected train.memory_budget_gb null for the {task.name} task (no buckets to "
            f"plan: data.batch_size sets its batch), received: {budget}"
        )
