"""Reading a training run back: its config (checked to be of the expected task), its
newest checkpoint's step, a checkpoint's weights into a built model, a whole run's model
(`load_run`, `load_vocoder`) and its reference clip (`load_reference`). `fit` (on resume),
`synthesize`, `evaluate` and `vocode` read runs through these."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

import xtts_audio as xa
from xtts_data import Tokenizer, load_audio
from xtts_data.clips import ClipError, check_clip_audio, check_clip_voice
from xtts_data.config import override_key
from xtts_train.config import StackConfig, load_stack_config, refuse_moved_settings
from xtts_train.errors import XttsTrainError
from xtts_train.models.text_to_mel.model import TextToMel, dummy_batch
from xtts_train.models.vocoder.model import Vocoder

__all__ = [
    "INFERENCE_SETTINGS", "kept_steps", "latest_step", "load_reference", "load_run",
    "load_run_config", "load_vocoder", "restore_weights", "step_of",
]  # fmt: skip

# The settings of a trained run that may change when it is read back (`--set` of `evaluate`
# and `synthesize`): how it decodes, not what it learned.
INFERENCE_SETTINGS = "decode."


def latest_step(workdir: str | Path) -> int:
    """The step of the newest checkpoint in `workdir` (0 when there is none)."""
    latest = tf.train.latest_checkpoint(str(Path(workdir) / "checkpoints"))
    return step_of(latest) if latest else 0


def kept_steps(workdir: str | Path) -> list[int]:
    """The steps of the checkpoints kept in `workdir`, ascending (empty when there are none)."""
    indexes = (Path(workdir) / "checkpoints").glob("ckpt-*.index")
    return sorted(step_of(str(index.with_suffix(""))) for index in indexes)


def step_of(path: str) -> int:
    """The step of a checkpoint path (`.../ckpt-<step>`)."""
    return int(path.rsplit("-", 1)[1])


def load_run_config(workdir: Path, task: str, overrides: Sequence[str] = ()) -> StackConfig:
    """A run's `config.yaml`, checked to be a run of `task` (`train.task`), with
    `overrides` of its decoding settings applied (`decode.KEY=VALUE`, as `--set`).

    Raises:
        XttsTrainError: not a run folder, a run of another task, or an override of a
            setting other than `decode.*` (those shape the weights).
        ConfigError: an invalid config or override value, or a decoding setting by the
            name it had before the `decode` section (`model.infer_KEY`).
    """
    if not (workdir / "config.yaml").is_file():
        raise XttsTrainError(f"{workdir} is not a training run ({workdir / 'config.yaml'} missing)")
    refuse_moved_settings(overrides)
    for override in overrides:
        if not override_key(override).startswith(INFERENCE_SETTINGS):
            raise XttsTrainError(
                f"Expected --set {INFERENCE_SETTINGS}KEY=VALUE, a decoding setting of the "
                f"trained run, received: {override!r} (the other settings shape the "
                f"weights, or the training)"
            )
    stack = load_stack_config(workdir / "config.yaml", overrides, written=True)
    if stack.train.task != task:
        raise XttsTrainError(
            f"Expected a {task} run, received: {workdir}, a run of train.task={stack.train.task}"
        )
    return stack


def restore_weights(workdir: Path, model: keras.Model, *, step: int | None = None) -> str:
    """Load a built model's weights from a run's checkpoint (the last, or `step`'s).

    Returns:
        The checkpoint's path.

    Raises:
        XttsTrainError: no checkpoint yet, none at `step`, or one that does not hold every
            weight of `model` (another configuration).
    """
    latest = tf.train.latest_checkpoint(str(workdir / "checkpoints"))
    if latest is None:
        raise XttsTrainError(f"{workdir} has no checkpoint yet: train it with `xtts-train fit`")
    if step is not None:
        latest = str(workdir / "checkpoints" / f"ckpt-{step}")
        if not Path(latest + ".index").is_file():
            raise XttsTrainError(f"{workdir} has no checkpoint of step {step} "
                                 f"(kept: {kept_steps(workdir)})")  # fmt: skip
    try:
        restored = tf.train.Checkpoint(model=model).restore(latest)
        restored.expect_partial()  # the optimizer and step are training state
        restored.assert_existing_objects_matched()
    except (AssertionError, ValueError) as error:  # a weight missing, or of another shape
        raise XttsTrainError(
            f"{latest} does not hold every weight of the model in {workdir / 'config.yaml'} "
            f"(written by another model configuration or an older xtts-train?): {error}"
        ) from None
    return latest


def load_run(workdir: str | Path, *, step: int | None = None, overrides: Sequence[str] = (),
             ) -> tuple[StackConfig, TextToMel, Tokenizer]:  # fmt: skip
    """The config, the model with a checkpoint's weights, and the tokenizer of a run.

    Args:
        workdir: the training run.
        step: the checkpoint saved at this step; None: the last one.
        overrides: `decode.KEY=VALUE` settings of its decoding (`load_run_config`).

    Raises:
        XttsTrainError: not a run folder, an invalid `config.yaml` (`ConfigError`), a
            vocoder run, no checkpoint yet, none at `step`, or an override of another
            setting.
    """
    workdir = Path(workdir)
    stack = load_run_config(workdir, "text_to_mel", overrides)
    if not (workdir / "tokenizer.json").is_file():
        raise XttsTrainError(f"{workdir} is not a training run ({workdir / 'tokenizer.json'} "
                             f"missing)")  # fmt: skip
    tokenizer = Tokenizer.from_dict(json.loads((workdir / "tokenizer.json").read_text()))
    model = TextToMel(stack.model, stack.audio)
    model(dummy_batch(stack.model))
    restore_weights(workdir, model, step=step)
    return stack, model, tokenizer


def load_vocoder(workdir: str | Path, *, step: int | None = None) -> tuple[StackConfig, Vocoder]:
    """The config and the vocoder with a checkpoint's weights of a vocoder run.

    Raises:
        XttsTrainError: not a run, a text-to-mel run, no checkpoint, or none at `step`.
    """
    workdir = Path(workdir)
    stack = load_run_config(workdir, "vocoder")
    model = Vocoder(stack.vocoder)
    model(tf.zeros([1, 4, stack.vocoder.n_mels]))
    restore_weights(workdir, model, step=step)
    return stack, model


def load_reference(workdir: Path, stack: StackConfig, reference: str | Path | None = None, *,
                   max_seconds: float | None = None) -> np.ndarray:  # fmt: skip
    """float32 [frames, n_mels]: the mel of `reference` (an audio file) as the cache's
    references are made (resampled to the run's rate, trimmed with its `data.trim_top_db`),
    its first `StackConfig.reference_frames` frames at most (`data.cond_frames` unless
    `decode.reference_frames` asks for more), or the run's saved reference clip (a
    crop of `data.cond_frames` of a training utterance) when None. With `max_seconds`, a
    longer `reference` is refused (a server's bound on uploaded clips).

    Raises:
        XttsDataError: `reference` does not decode as audio.
        XttsTrainError: no `reference` given and the run saved none; one longer than
            `max_seconds`; a silent reference
            (its peak under -60 dBFS); one shorter than `data.cond_frames` frames (naming
            how many seconds it must last).
    """
    if reference is None:
        path = workdir / "reference.npy"
        if not path.exists():
            raise XttsTrainError(f"{workdir} has no saved reference clip: pass --reference")
        try:
            return np.load(path)
        except (ValueError, OSError, EOFError):
            raise XttsTrainError(
                f"{path} is damaged (a killed write?): pass --reference, or resume the run "
                f"(`xtts-train fit` saves it again)"
            ) from None
    whole = load_audio(Path(reference), stack.audio)  # resampled to the run's rate
    try:
        check_clip_audio(str(reference), seconds=len(whole) / stack.audio.sample_rate,
                         peak=float(np.max(np.abs(whole))), max_seconds=max_seconds)  # fmt: skip
        wave = load_audio(Path(reference), stack.audio, trim_top_db=stack.data.trim_top_db)
        mel = xa.mel_features(wave, stack.audio).numpy()
        check_clip_voice(str(reference), frames=len(mel), need=stack.data.cond_frames,
                         top_db=stack.data.trim_top_db, config=stack.audio)  # fmt: skip
    except ClipError as error:
        raise XttsTrainError(str(error)) from None
    return mel[: stack.reference_frames]
