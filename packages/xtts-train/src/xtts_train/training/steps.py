"""The compiled train and eval steps: one program per static batch shape, built once.

`CompiledSteps` is the registry of those programs, for any task
(`xtts_train.training.task`), looked up by a batch's key (its spec's `key_of`). Each step
(`StepFunctions`' bodies) is a `tf.function` traced with the exact `tf.TensorSpec`s of a
spec's shape (a `DatasetSpec` bucket, a `SegmentSpec`'s one shape), compiled by XLA or
run by TensorFlow's graph executor as `train.compiler` resolves for the device
(`xtts_train.compile.compiler`); `warm_up` traces (and compiles) every shape before
training, and any trace after it is a retrace: an error naming the shape (or a warning
with `allow_retrace`). The update is gated inside the graph
(`xtts_train.training.transforms.FiniteGate`): a non-finite loss or gradient skips it
(counted), and warm-up runs with the gate closed so it changes nothing.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence

import keras
import tensorflow as tf

from xtts_train.compile import traces
from xtts_train.compile.warmup import Job, Program, WarmUp, compile_workers, run_jobs
from xtts_train.config import TrainConfig
from xtts_train.errors import XttsTrainError
from xtts_train.training.optim import AdamW
from xtts_train.training.step_functions import StepFunctions
from xtts_train.training.task import Task

__all__ = ["CompiledSteps", "RetraceError", "kept_dtype_policy", "timed_step"]

logger = logging.getLogger(__name__)


class RetraceError(XttsTrainError, RuntimeError):
    """A compiled step was traced again after warm-up: a shape outside the spec arrived."""


def timed_step(
    train: Callable, batch: Mapping[str, tf.Tensor], *, step: int
) -> tuple[float, float]:
    """One update through `train` (e.g. `CompiledSteps.train`), waiting for its loss: the
    host syncs, so the time is the whole step's. Returns (seconds, loss)."""
    started = time.perf_counter()
    loss = float(train(batch, step=step)["loss"])
    return time.perf_counter() - started, loss


@contextlib.contextmanager
def kept_dtype_policy() -> Iterator[None]:
    """Restore Keras's global dtype policy on leaving (`build_steps` sets the run's)."""
    previous = keras.mixed_precision.global_policy()
    try:
        yield
    finally:
        keras.mixed_precision.set_global_policy(previous)


class CompiledSteps:
    """The registry of compiled train and eval programs of a task, one per shape of
    `spec` (and of `eval_spec`): built by `warm_up`, looked up by a batch's shape.

    The step bodies and the update chain are `StepFunctions`'; each role's programs are a
    `_RolePrograms`.

    Args:
        task: the model and its losses (`xtts_train.training.task.Task`).
        optimizer: an AdamW per objective of the task, by name
            (`xtts_train.training.build.make_optimizers`); for a task of one objective, its
            AdamW alone will do.
        spec: the batches' static shapes (`shapes`, each with a `key` and `batch_size`,
            and `signature(shape)`): an `xtts_data.DatasetSpec` or `SegmentSpec`.
        strategy: a `tf.distribute` strategy whose scope created `model` and `optimizer`,
            or `None` for one device (the whole step is then one program).

    Attributes:
        functions: the step bodies (`StepFunctions`).
        optimizers: {objective name: AdamW}.
        optimizer: what a checkpoint holds of them: the AdamW of a task of one objective
            (as runs have always been written), else `optimizers`.
        compilers: `{"train": c, "eval": c}`, each `"xla"` or `"graph"` (`train.compiler`
            resolved for this device).
        traces: Python traces of the train step per (batch, text, frames).
        eval_traces: the same for the eval step.
        nonfinite: updates skipped because the loss or a gradient was not finite (the
            `FiniteGate`'s variable, updated inside the step).
        consecutive_nonfinite: of those, how many in a row up to the last update.
        loss_scale: the `LossScale` of a `mixed_float16` run, else None.
        schedule: the learning rate of a step.
    """

    def __init__(self, task: Task, optimizer: AdamW | Mapping[str, AdamW], spec,
                 config: TrainConfig, eval_spec=None,
                 strategy: tf.distribute.Strategy | None = None):  # fmt: skip
        if isinstance(optimizer, AdamW):
            optimizer = {o.name: optimizer for o in task.objectives()[:1]}
        self.functions = functions = StepFunctions(task, optimizer, config, strategy)
        self.task, self.model = task, task.model
        self.optimizers = functions.optimizers
        self.optimizer = next(iter(optimizer.values())) if len(optimizer) == 1 else optimizer
        self.spec, self.config = spec, config
        self.eval_spec = eval_spec  # validation batches have shapes of their own
        self.replicas = functions.replicas
        _check_divisible(spec, self.replicas * config.grad_accum, self.replicas)
        self.nonfinite = functions.gate.skipped
        self.consecutive_nonfinite = functions.gate.consecutive
        self.loss_scale, self.schedule = functions.loss_scale, functions.schedule
        self.compilers = functions.compilers
        one = strategy is None  # else XLA (if chosen) per device, inside the step bodies
        train = functions.train if one else functions.replicated_train
        evaluate = functions.eval if one else functions.replicated_eval
        xla = {role: one and c == "xla" for role, c in self.compilers.items()}
        key_of = spec.key_of  # a validation batch's key is read the same way
        self._train = _RolePrograms("train", train, spec, key_of, functions,
                                    jit_compile=xla["train"])  # fmt: skip
        self._eval = _RolePrograms("eval", evaluate, eval_spec, key_of, functions,
                                   jit_compile=xla["eval"])  # fmt: skip
        self.traces, self.eval_traces = self._train.traces, self._eval.traces

    def warm_up(self, progress: Callable[[int, int, Program], None] | None = None, *,
                workers: int | None = None, defer_cached: bool = True) -> WarmUp:  # fmt: skip
        """Trace and compile the train step of every shape of `spec` and the eval step of
        every shape of `eval_spec` (see `xtts_train.compile.warmup`); no update happens (the gate
        is closed) and the dropout seed states end where they started.

        Args:
            progress: called as each program is compiled: `progress(done, total, program)`.
            workers: compile threads; default `config.compile_workers` (0: one per core).
            defer_cached: programs the compile cache holds load at their first call
                instead of running once here (see `xtts_train.compile.warmup.run_jobs`).
        """
        slots = [(role, shape) for role in (self._train, self._eval) for shape in role.shapes]
        jobs = [role.job(shape) for role, shape in slots]
        if workers is None:
            workers = compile_workers(self.config.compile_workers, len(jobs))
        # A compiling run moves the dropout seeds and a program the compile cache holds
        # does not run here: put them back, so a run's dropout does not depend on the cache.
        with _kept_values(self.task.seed_states()):
            programs, report = run_jobs(jobs, workers=workers, defer_cached=defer_cached,
                                        progress=progress)  # fmt: skip
        for (role, shape), program in zip(slots, programs, strict=True):
            role.table[shape.key] = program
        self._train.warm = self._eval.warm = True
        return report

    @property
    def compiled_shapes(self) -> int:
        """Train programs built by `warm_up`."""
        return len(self._train.table)

    def program(self, shape: tuple[int, ...], role: str = "train"):
        """The warmed-up program (a concrete function) of `role` (`"train"` or `"eval"`)
        at `shape` (a spec shape's key); its `.graph` is the traced step."""
        return (self._train if role == "train" else self._eval).table[shape]

    def step_function(self, role: str = "train") -> tf.types.experimental.PolymorphicFunction:
        """The `tf.function` of `role`'s step (`"train"`: `(batch, apply, hyper)`, `"eval"`:
        `(batch, hyper)`), whose concrete programs `warm_up` builds: what an exporter of
        the compiled programs reads (`xtts-bench hlo export`)."""
        return (self._train if role == "train" else self._eval).function

    def hyper(self, step: int) -> dict[str, tf.Tensor]:
        """The step's inputs besides the batch (`StepFunctions.hyper`)."""
        return self.functions.hyper(step)

    def train(self, batch: Mapping[str, tf.Tensor], *, step: int) -> dict[str, tf.Tensor]:
        """Update `step` + 1 on `batch` (dispatched without waiting for its results)."""
        return self._train.run(batch, self.hyper(step), allow_retrace=self.config.allow_retrace)

    def evaluate(self, batch: Mapping[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        """The eval step's losses of `batch` (dispatched without waiting for them)."""
        return self._eval.run(batch, self.hyper(0), allow_retrace=self.config.allow_retrace)


class _RolePrograms:
    """The programs of one role of `CompiledSteps`: the `tf.function` of its step body, its
    traces per shape, and the concrete program of each shape of its spec, looked up by a
    batch's shape (any other shape retraces: an error, or a warning with `allow_retrace`).

    Args:
        role: `"train"` (a body of `(batch, apply, hyper)`) or `"eval"` (`(batch, hyper)`).
        body: the step body (one of `StepFunctions`').
        spec: the role's batch shapes; None: it has no batches (an eval without validation).
        key_of: a batch's shape key (the spec's `key_of`).
        functions: the step functions: the `hyper` inputs, the compilers, the task.
        jit_compile: XLA compiles the whole step (one device and the `"xla"` compiler).

    Attributes:
        traces: Python traces of the body per shape key (the count runs once per trace,
            never per step).
        table: {shape key: concrete program}, filled by `CompiledSteps.warm_up`.
        warm: the warm-up is done: a trace after it warns.
    """

    def __init__(self, role: str, body: Callable, spec, key_of: Callable, functions: StepFunctions,
                 *, jit_compile: bool) -> None:  # fmt: skip
        self.role, self.spec, self.key_of, self.functions = role, spec, key_of, functions
        self.traces: collections.Counter = collections.Counter()
        self.table: dict[tuple[int, ...], Callable] = {}
        self.warm = False
        self.function = tf.function(self._counted(body), jit_compile=jit_compile, autograph=False)

    @property
    def shapes(self) -> tuple:
        """The spec's shapes (none without a spec)."""
        return tuple(self.spec.shapes) if self.spec is not None else ()

    def job(self, shape) -> Job:
        """Trace the step at `shape`; run it once on a placeholder batch, the update off."""
        signature = self.spec.signature(shape)
        hyper = self.functions.signature_of_hyper()
        args = self._inputs(signature, tf.TensorSpec([], tf.bool), hyper)

        def run(program) -> None:
            batch, hyper = self.functions.task.placeholder_batch(signature), self.functions.hyper(0)
            outputs = program(*self._inputs(batch, tf.constant(False), hyper))
            float(outputs["loss"])  # wait for it: the compile happens in this call

        name = f"{self.role} {'x'.join(map(str, shape.key))}"
        key, variables = None, ()
        if self.functions.strategy is None:  # replicated variables: traced every time
            variables = self.functions.variables()
            key = traces.key(name, args, self.functions.trace_settings(), variables)
        return Job(name, lambda: self.function.get_concrete_function(*args), run,
                   compiler=self.functions.compilers[self.role], key=key,
                   variables=variables)  # fmt: skip

    def run(self, batch: Mapping[str, tf.Tensor], hyper: dict[str, tf.Tensor], *,
            allow_retrace: bool) -> dict[str, tf.Tensor]:  # fmt: skip
        """The program of `batch`'s shape on `batch` (train: the update applies).

        Raises:
            RetraceError: no program has that shape, and not `allow_retrace`.
        """
        inputs = self._inputs(batch, tf.constant(True), hyper)
        program = self.table.get(self.key_of(batch))
        if program is not None:
            return program(*inputs)
        message = (
            f"batch shape {self.key_of(batch)} is not one of the "
            f"{len(self.table)} compiled shapes {sorted(self.table)}; it would "
            f"retrace and recompile the step"
        )
        if not allow_retrace:
            raise RetraceError(message + " (pass --allow-retrace to accept it)")
        logger.warning("%s", message)
        return self.function(*inputs)

    def _inputs(self, batch, apply, hyper) -> tuple:
        """The body's inputs: the train body's take `apply` (False: no update) as well."""
        return (batch, apply, hyper) if self.role == "train" else (batch, hyper)

    def _counted(self, body: Callable) -> Callable:
        """`body`, counting its traces per shape and warning of a trace after warm-up."""

        def traced(batch, *args):
            key = self.key_of(batch)
            self.traces[key] += 1
            if self.warm:
                logger.warning("step traced again after warm-up for shape %s", key)
            return body(batch, *args)

        return traced


@contextlib.contextmanager
def _kept_values(variables: Sequence[tf.Variable]) -> Iterator[None]:
    """Put `variables` back to their values on entering, on leaving."""
    before = [variable.read_value() for variable in variables]
    try:
        yield
    finally:
        for variable, value in zip(variables, before, strict=True):
            variable.assign(value)


def _check_divisible(spec, multiple: int, replicas: int) -> None:
    """Each replica, and each of its micro-batches, needs an equal static share."""
    for shape in spec.shapes:
        if shape.batch_size % multiple:
            raise XttsTrainError(
                f"batch shape {shape.key}: expected a batch size divisible by "
                f"{multiple} ({replicas} replica(s) x train.grad_accum "
                f"{multiple // replicas}), received: batch_size={shape.batch_size}; set "
                f"data.batch_multiple={multiple} (buckets) or a data.batch_size that divides"
            )
