"""`RunWriter`: every file a training run writes in its work dir, each write kill-safe.

```
workdir/
  config.yaml      the resolved config; a resume must share its task, audio section and
                   its model's section (`model`, or `vocoder` for a vocoder run)
  tokenizer.json   the cache's symbol table, for synthesis; a resume must share it
  reference.npy    a conditioning clip for `synthesize` (a damaged one is saved again; a
                   text-to-mel run's only)
  metrics.jsonl    a JSON line per log and eval; a resume drops the lines after its checkpoint
  tensorboard/     the same scalars (and the loop's eval media, through `tensorboard`)
  checkpoints/     model, optimizer, step, non-finite count, dropout seeds; finite weights
                   only (`Checkpoints`, which the writer opens once the model exists)
  summary.json     the run's figures, written at its end
```

A kill leaves every file either as it was or complete: whole files go through
`xtts_data.files.write_bytes_atomic` (a killed writer leaves a temp file, which `recover`
removes), and a metrics line is appended with one `os.write` on a file opened with
`O_APPEND`, so a kill can cut only the last line, which the reader drops. A checkpoint
counts once TensorFlow's `checkpoints/checkpoint` state names it (written after its files).
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import tensorflow as tf
import yaml

import xtts_data as xd
from xtts_data.files import remove_stale_temp_files, write_bytes_atomic, write_npy_atomic
from xtts_train.config import StackConfig, as_written
from xtts_train.errors import XttsTrainError
from xtts_train.runs.loading import latest_step, load_reference, step_of

__all__ = ["Checkpoints", "RunWriter", "forget_metrics_after", "latest_step", "logged_step"]

logger = logging.getLogger(__name__)


def _filled(stack: StackConfig, section: str, value: object) -> object:
    """A section of an earlier run's config.yaml with the defaults of keys added since
    filled in (as `load_run_config` reads it), or the value itself when it does not parse."""
    try:
        value = as_written({section: value})[section]
        return type(getattr(stack, section)).from_dict(value).to_dict()
    except (ValueError, TypeError, AttributeError):
        return value


def logged_step(line: str) -> int | None:
    """The step of a metrics.jsonl line, or None for a line a kill cut short."""
    try:
        return int(json.loads(line)["step"])
    except (ValueError, KeyError, TypeError):
        return None


def forget_metrics_after(path: Path, step: int) -> None:
    """Drop the lines of metrics.jsonl a killed run logged after its last checkpoint
    (they are redone, so no step repeats), and a line a kill cut short."""
    if path.exists():
        lines = path.read_text().splitlines()
        kept = [line for line, logged in zip(lines, map(logged_step, lines), strict=True)
                if logged is not None and logged <= step]  # fmt: skip
        write_bytes_atomic(path, "".join(line + "\n" for line in kept).encode())


def _append_line(path: Path, line: str) -> None:
    """Append `line` and a newline in one write: a kill can cut it, not interleave it."""
    data = (line + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)  # less the umask
    try:
        written = os.write(fd, data)
    finally:
        os.close(fd)
    if written != len(data):  # a regular file writes all of it unless the disk is full
        raise OSError(f"{path}: wrote {written} of the {len(data)} bytes of a line (disk full?)")


def _described(tokenizer: xd.Tokenizer) -> str:
    symbols = tokenizer.symbols
    shown = symbols if len(symbols) <= 24 else symbols[:24] + "…"
    return f"{len(symbols)} symbols {shown!r}, languages {list(tokenizer.languages)}"


class RunWriter:
    """The files of one training process's work dir (worker i > 0: `workdir/worker-i`).

    In the order `fit` calls them: `recover` (before anything else), `write_config` and
    `write_tokenizer` (once the sizes are known to fit), `open` (once the model exists:
    checkpoints and TensorBoard), `resume`, then `keep_reference`, `log`, `save` while
    training, and `write_summary` at the end.
    """

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.metrics = workdir / "metrics.jsonl"
        # Set by `open`: nothing here starts TensorFlow or writes a file.
        self.tensorboard: tf.summary.SummaryWriter | None = None
        self.checkpoints: Checkpoints | None = None

    # -- files written before the model exists -------------------------------------------

    def recover(self, stack: StackConfig) -> None:
        """Remove what a killed run left half-written: temp files of atomic writers, and a
        reference clip that cannot be read (the run saves it again)."""
        for stale in remove_stale_temp_files(self.workdir):
            logger.info("removed %s, left by a killed run", stale.name)
        if (self.workdir / "reference.npy").exists():
            try:
                load_reference(self.workdir, stack)
            except XttsTrainError as error:
                logger.warning("%s; it is saved again", error)
                (self.workdir / "reference.npy").unlink()

    def write_config(self, stack: StackConfig, *, weights: str = "model") -> None:
        """Write the resolved config, or check a resumed run was started with the same task
        and model.

        Args:
            weights: the section that sizes the task's weights (`Task.weights_section`:
                `model`, `vocoder`).

        Raises:
            XttsTrainError: `config.yaml` holds another task (`train.task`), or another
                audio section or `weights` section.
        """
        path = self.workdir / "config.yaml"
        resolved = stack.to_dict()
        if path.exists():
            before = yaml.safe_load(path.read_text())
            task = (before.get("train") or {}).get("task", "text_to_mel")  # older runs: one
            if task != stack.train.task:
                raise XttsTrainError(
                    f"{self.workdir} holds a run of task {task}, received: train.task="
                    f"{stack.train.task}; use a new --workdir for it"
                )
            for section in ("audio", weights):
                if _filled(stack, section, before.get(section)) != resolved[section]:
                    raise XttsTrainError(
                        f"{self.workdir} holds a run with another {section} config; resume it "
                        f"with the same settings or use a new --workdir"
                    )
        write_bytes_atomic(path, yaml.safe_dump(resolved, sort_keys=False).encode("utf-8"))

    def write_tokenizer(self, cache: Path, tokenizer: xd.Tokenizer) -> None:
        """Copy the cache's `tokenizer.json` (for synthesis); a resumed run's ids must mean
        what they meant, so its symbol table is frozen.

        Args:
            cache: the feature cache folder, holding `tokenizer.json`.
            tokenizer: the cache's tokenizer (read from that file).

        Raises:
            XttsTrainError: the run's `tokenizer.json` holds another symbol table.
        """
        path = self.workdir / "tokenizer.json"
        if path.exists():
            before = xd.Tokenizer.from_dict(json.loads(path.read_text(encoding="utf-8")))
            if before != tokenizer:
                raise XttsTrainError(
                    f"{cache}'s symbol table disagrees with the run's in {self.workdir} "
                    f"(cache: {_described(tokenizer)}; run: {_described(before)}); resume "
                    f"with the cache the run was trained on, or use a new --workdir"
                )
        write_bytes_atomic(path, (cache / "tokenizer.json").read_bytes())

    # -- checkpoints and TensorBoard -------------------------------------------------------

    def open(self, *, model: object, optimizer: object, nonfinite: tf.Variable,
             seed_states: Sequence[tf.Variable], keep: int,
             networks: Mapping[str, object] | None = None) -> None:  # fmt: skip
        """Open the checkpoints of these objects (`Checkpoints`) and the TensorBoard writer."""
        self.checkpoints = Checkpoints(self.workdir, model=model, optimizer=optimizer,
                                       nonfinite=nonfinite, seed_states=seed_states,
                                       keep=keep, networks=networks)  # fmt: skip
        self.tensorboard = tf.summary.create_file_writer(str(self.workdir / "tensorboard"))

    @property
    def latest_checkpoint(self) -> str | None:
        """The path of the newest checkpoint (None before the first)."""
        return self.checkpoints.manager.latest_checkpoint

    def resume(self, step: int) -> int:
        """Restore the checkpoint of `step` (0: none, start afresh) and drop the metrics
        lines logged after it. Returns the restored step."""
        restored = self.checkpoints.restore(step) if step else 0
        # 0: a run killed before its first checkpoint starts its metrics afresh
        forget_metrics_after(self.metrics, restored)
        return restored

    def save(self, step: int) -> None:
        """`Checkpoints.save`: a checkpoint of `step` if the weights are finite."""
        self.checkpoints.save(step)

    # -- files written while training ------------------------------------------------------

    def keep_reference(self, batch: Mapping[str, tf.Tensor]) -> None:
        """Save a conditioning clip for `synthesize` (when no --reference is given): the
        first utterance's `cond_mel` (float [batch, cond_frames, n_mels]) to its length."""
        path = self.workdir / "reference.npy"
        if not path.exists():
            write_npy_atomic(path, batch["cond_mel"][0, : int(batch["cond_lengths"][0])].numpy())

    def log(self, step: int, values: Mapping[str, float]) -> None:
        """Append `{"step": step, **values}` to metrics.jsonl, and the finite values to
        TensorBoard (when open)."""
        _append_line(self.metrics, json.dumps({"step": step, **values}))
        if self.tensorboard is None:
            return
        with self.tensorboard.as_default(step=step):
            for name, value in values.items():
                if isinstance(value, float) and math.isfinite(value):
                    tf.summary.scalar(name, value)

    def write_summary(self, summary: Mapping) -> None:
        """Write summary.json (indented JSON, in `summary`'s order)."""
        write_bytes_atomic(self.workdir / "summary.json",
                           (json.dumps(summary, indent=1) + "\n").encode())  # fmt: skip


class Checkpoints:
    """`workdir/checkpoints`: the model, optimizer, step, count of skipped non-finite
    updates, dropout seed states and the networks trained beside the model, the newest
    `keep` kept, written with finite weights only.

    Args:
        workdir: the run's work dir.
        model: a trackable (a Keras model, a `tf.Module`); its `trainable_variables` must
            be finite for a checkpoint to be written.
        optimizer: a trackable (or a dict of them): its slots and iteration count.
        nonfinite: int64 []: the count of skipped non-finite updates.
        seed_states: the dropout layers' seed states (Keras keeps them out of the model's
            checkpoint: saved beside it, a resumed run draws the dropout masks an
            uninterrupted one would).
        keep: `train.keep_checkpoints`.
        networks: trackables trained beside the model, by name (`Task.networks`: a
            vocoder's discriminators), their weights finite too; none by default.
    """

    def __init__(self, workdir: Path, *, model: object, optimizer: object,
                 nonfinite: tf.Variable, seed_states: Sequence[tf.Variable],
                 keep: int, networks: Mapping[str, object] | None = None) -> None:  # fmt: skip
        networks = dict(networks or {})
        self.workdir, self.keep = workdir, keep
        self.weights = [v for m in (model, *networks.values()) for v in m.trainable_variables]
        self.seed_states = list(seed_states)
        # int64 []: the checkpoint's step, written only when a checkpoint is (the loop
        # counts in a Python int: reading a variable each step would sync)
        self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
        self.checkpoint = tf.train.Checkpoint(
            model=model, optimizer=optimizer, step=self.step, nonfinite=nonfinite,
            seed_states=list(seed_states), **networks,
        )  # fmt: skip
        self.manager = tf.train.CheckpointManager(
            self.checkpoint, str(workdir / "checkpoints"), max_to_keep=keep
        )

    def at(self, step: int) -> str:
        """The checkpoint of `step`: the newest, or an older one the other workers share.

        Raises:
            XttsTrainError: no checkpoint of `step` is kept here (the steps held named).
        """
        for path in reversed(self.manager.checkpoints):
            if path.endswith(f"-{step}"):
                return path
        raise XttsTrainError(
            f"Expected {self.workdir / 'checkpoints'} to hold the checkpoint of step {step}, "
            f"the newest every worker holds, received: steps "
            f"{[step_of(p) for p in self.manager.checkpoints]} (it keeps "
            f"train.keep_checkpoints={self.keep}); resume every worker from a copy of one "
            f"worker's work dir"
        )

    def restore(self, step: int) -> int:
        """Restore the checkpoint of `step` (`at`); every object it holds must match.
        Returns the restored step."""
        path = self.at(step)
        restored = self.checkpoint.restore(path)
        names = [name for name, _ in tf.train.list_variables(path)]
        if not self.seed_states or any(name.startswith("seed_states") for name in names):
            restored.assert_existing_objects_matched()
        else:  # saved before the seeds were (a model without dropout has none to save)
            logger.warning("%s holds no dropout seed states; they start afresh", path)
        logger.info("resumed from step %d", int(self.step))
        return int(self.step)

    def save(self, step: int) -> None:
        """Checkpoint `step` unless it already is the newest checkpoint or the weights are
        not finite (logged as an error)."""
        latest = self.manager.latest_checkpoint
        if latest and step_of(latest) == step:
            return
        finite = tf.reduce_all([tf.reduce_all(tf.math.is_finite(v)) for v in self.weights])
        if not bool(finite):  # one host sync for all the weights
            logger.error("step %d: weights are not finite; checkpoint not written", step)
            return
        self.step.assign(step)
        self.manager.save(checkpoint_number=step)
