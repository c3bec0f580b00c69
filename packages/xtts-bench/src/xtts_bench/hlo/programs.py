"""The programs a run compiles, built as the run builds them, for `xtts-bench hlo export`.

For a stack config (and `--set` overrides) the steps are built as `fit` builds them
(`xtts_train.build_steps`, `train.compiler` forced to `xla`) for the chosen bucket shapes:
a prepared cache's (`data`) or those planned for LJSpeech's lengths (`ljspeech`). Per
shape a train step (`train_<batch>x<text>x<frames>`, `(batch, apply, hyper)`) and an eval
step (`eval_...`, `(batch, hyper)`); for a text-to-mel run, the decoding program of
`synthesize` and `evaluate` (`xtts_train.Decoding`: the free-running loop and the decoding
stages) at `decode_batch` rows, the longest bucket's text (rounded up to `xtts_train.TEXT_BUCKET`),
the reference frames, and a buffer of twice the longest bucket's frames (`buffer_frames`),
named `decode_<batch>x<text>x<reference>x<buffer>`.

A decoding loop ends when every row's stop probability passes 0.5, which on synthetic
weights happens at a random frame. The manifest therefore fills the stop head's bias at
`STOP_BIAS`: no row stops, the loop runs its whole buffer, and a decoding's time is that of
the longest utterance the buffer holds (the runner also reports it per frame).
"""

from __future__ import annotations

import dataclasses
import functools
import pathlib
from collections.abc import Mapping

import numpy as np
import tensorflow as tf

import xtts_data as xd
from xtts_audio import num_frames
from xtts_bench.errors import SettingsError
from xtts_data.buckets import assign
from xtts_train import (
    Decoding,
    StackConfig,
    TextToMel,
    buffer_frames,
    build_steps,
    decoding_inputs,
    load_stack_config,
    task_class,
)

__all__ = ["KINDS", "STOP_BIAS", "ExportConfig", "Program", "batch_shares", "build_programs",
           "ljspeech_spec"]  # fmt: skip

KINDS = ("train", "eval", "decode")
STOP_BIAS = -30.0  # a stop logit this low never passes 0.5: the loop runs its whole buffer
_DECODE_LABELS = ("batch/tokens", "batch/token_mask", "batch/cond_mel", "batch/cond_lengths")


@dataclasses.dataclass(frozen=True, kw_only=True)
class ExportConfig:
    """What `export_hlo` writes.

    Attributes:
        out: the folder written (created).
        config: a stack config YAML (a recipe), or None for the defaults.
        overrides: `section.key=value` settings applied after it (as `xtts-train --set`).
        data: a prepared feature cache: its pipeline's bucket shapes.
        ljspeech: instead of `data`, the shapes planned for LJSpeech's lengths.
        buckets: indices into the spec's shapes to export (None: all).
        kinds: which programs: `train`, `eval`, `decode` (`KINDS`; decode only for a
            text-to-mel run).
        decode_batch: rows of the decoding program (`evaluate` decodes 8 together).
        inputs: also write each program's parameters (`<program>.inputs.npz`): a real
            batch (with `data`) and the initial state, for a check against TensorFlow.
    """

    out: pathlib.Path
    config: pathlib.Path | None = None
    overrides: tuple[str, ...] = ()
    data: pathlib.Path | None = None
    ljspeech: bool = False
    buckets: tuple[int, ...] | None = None
    kinds: tuple[str, ...] = KINDS
    decode_batch: int = 8
    inputs: bool = False

    def __post_init__(self) -> None:
        if (self.data is None) == (not self.ljspeech):
            raise SettingsError(f"Expected one source of batch shapes, a cache (--data) or "
                                f"--ljspeech, received: data={self.data}, "
                                f"ljspeech={self.ljspeech}")  # fmt: skip
        if self.inputs and self.data is None:
            raise SettingsError("Expected --data with --inputs (a real batch), received "
                                "--ljspeech")  # fmt: skip
        unknown = sorted(set(self.kinds) - set(KINDS))
        if unknown or not self.kinds:
            raise SettingsError(f"Expected programs among {', '.join(KINDS)}, received: "
                                f"{', '.join(unknown) or 'none'}")  # fmt: skip
        if isinstance(self.decode_batch, bool) or self.decode_batch < 1:
            raise SettingsError(f"Expected --decode-batch >= 1, received: {self.decode_batch}")


@dataclasses.dataclass(frozen=True)
class Program:
    """One program to export: `function(*inputs)` is what a run calls.

    Attributes:
        name: `<kind>_<shape>` (`train_16x96x512`, `decode_8x96x128x1024`).
        kind: one of `KINDS`.
        key: its shape's numbers, as in its name.
        function: the `tf.function` (XLA-compiled) the run calls.
        inputs: its arguments: `(batch, apply, hyper)` of a train step, `(batch, hyper)`
            of an eval step, `(tokens, token_mask, cond_mel, cond_lengths)` of a decoding.
        labels: a name prefix per argument (its parameters' names start with it).
        fills: fill rules by parameter name that replace the derived ones.
        frames: the frames a decoding's buffer holds (None for a step).
        share: a step's share of an epoch's batches (`batch_shares`), None for a decoding.
        batch_frames: a step's (rows, padded frames a row), from its spec shape (a
            text-to-mel `BatchShape` or a vocoder's `SegmentShape`); None for a decoding.
    """

    name: str
    kind: str
    key: tuple[int, ...]
    function: tf.types.experimental.PolymorphicFunction
    inputs: tuple
    labels: tuple[str, ...]
    fills: Mapping[str, dict] = dataclasses.field(default_factory=dict)
    frames: int | None = None
    share: float | None = None
    batch_frames: tuple[int, int] | None = None

    @functools.cached_property
    def concrete(self) -> tf.types.experimental.ConcreteFunction:
        """The traced program of `inputs`: its `captured_inputs` are the variables the
        exported module takes after the arguments."""
        return self.function.get_concrete_function(*self.inputs)


def _ljspeech_lengths(stack: StackConfig) -> tuple[np.ndarray, np.ndarray]:
    """Mel frames and tokens of LJSpeech-like clips: 1.1-10.1 s, spread evenly; ~17
    symbols a second."""
    seconds = np.linspace(1.1, 10.1, 1000)
    frames = num_frames((seconds * stack.audio.sample_rate).astype(np.int64), stack.audio)
    return frames, np.ceil(seconds * 17).astype(np.int64) + 1


def ljspeech_spec(stack: StackConfig) -> xd.DatasetSpec:
    """The stack's batch shapes on LJSpeech's lengths (`_ljspeech_lengths`), as
    `xtts_data.plan_shapes` plans them."""
    shapes = xd.plan_shapes(*_ljspeech_lengths(stack), stack.data)
    return xd.DatasetSpec(tuple(shapes), stack.audio.n_mels, stack.data.cond_frames)


def batch_shares(frames: np.ndarray, shapes) -> list[float]:
    """Each shape's share of an epoch's batches when utterances of `frames` fill them: the
    utterances its bucket holds (`xtts_data.buckets.assign`) over its batch size,
    normalised. One shape (a vocoder's segments) has it all."""
    if len(shapes) == 1:
        return [1.0]
    held = np.bincount(assign(np.asarray(frames), list(shapes)),
                       minlength=len(shapes))[: len(shapes)]  # fmt: skip
    batches = held / np.asarray([s.batch_size for s in shapes], np.float64)
    return (batches / batches.sum()).tolist()


def _stack_and_pipeline(config: ExportConfig):
    """The stack (compiler xla, configured for the cache), the cache's train pipeline
    (None with `ljspeech`), the spec, and the utterances' frames (the cache's, or
    LJSpeech's planned lengths)."""
    stack = load_stack_config(config.config, config.overrides, cache=config.data)
    train = dataclasses.replace(stack.train, compiler="xla", compile_workers=1)
    stack = dataclasses.replace(stack, train=train)
    task = task_class(stack.train.task)
    if config.data is None:
        return stack, None, ljspeech_spec(stack), _ljspeech_lengths(stack)[0]
    opened = xd.FeatureCache.open(config.data, audio=stack.audio, data=stack.data)
    stack = task.configure(stack, opened.tokenizer)
    pipeline = task.pipeline(opened, stack.data, "train", repeat=True)
    return stack, pipeline, pipeline.spec, opened.manifest.samples.frames


def _chosen_shapes(spec, buckets: tuple[int, ...] | None) -> list:
    shapes = list(spec.shapes)
    if buckets is None:
        return shapes
    for index in buckets:
        if not -len(shapes) <= index < len(shapes):
            raise SettingsError(f"--bucket: expected an index into the spec's {len(shapes)} "
                                f"shapes, received: {index}")  # fmt: skip
    return [shapes[i] for i in buckets]


def _first_batches(pipeline, keys: set, *, limit: int = 500) -> dict:
    """The first batch of each shape in `keys` among the pipeline's first `limit`."""
    found: dict = {}
    for _, batch in zip(range(limit), pipeline.dataset, strict=False):
        key = pipeline.spec.key_of(batch)
        if key in keys:
            found.setdefault(key, batch)
        if len(found) == len(keys):
            break
    return found


def build_programs(config: ExportConfig):
    """The steps (`CompiledSteps`, nothing compiled) and the chosen `Program`s: per shape
    its train and eval steps, then the decoding (a text-to-mel run).

    Call it inside `kept_dtype_policy()`: it sets the run's Keras dtype policy.

    Returns:
        (stack, steps, programs).
    """
    stack, pipeline, spec, frames = _stack_and_pipeline(config)
    if set(config.kinds) == {"decode"} and stack.train.task != "text_to_mel":
        raise SettingsError(f"Expected a program to export, received only --program decode "
                            f"for a {stack.train.task} run, which has no decoding: export "
                            f"its train or eval steps")  # fmt: skip
    chosen = dataclasses.replace(spec, shapes=tuple(_chosen_shapes(spec, config.buckets)))
    shares = batch_shares(frames, spec.shapes)
    share = dict(zip([s.key for s in spec.shapes], shares, strict=True))
    # The programs run on another machine: its memory is what the runner measures.
    steps = build_steps(stack, chosen, chosen, check_memory=False)
    real = _first_batches(pipeline, {s.key for s in chosen.shapes}) if config.inputs else {}
    batches = {s.key: dict(real.get(s.key) or steps.task.placeholder_batch(spec.signature(s)))
               for s in chosen.shapes}  # fmt: skip
    programs = []
    for shape in chosen.shapes:
        programs += _steps_of(shape, batches[shape.key], steps, stack, config.kinds,
                              share[shape.key])  # fmt: skip
    if "decode" in config.kinds and isinstance(steps.model, TextToMel):
        longest = max(chosen.shapes, key=lambda s: s.frames)
        programs.append(_decoding(stack, steps.model, longest, batches[longest.key],
                                  config.decode_batch))  # fmt: skip
    return stack, steps, programs


def _steps_of(spec_shape, batch: dict, steps, stack: StackConfig, kinds: tuple[str, ...],
              share: float) -> list[Program]:  # fmt: skip
    """The train and eval steps of one spec shape, as `fit` calls them."""
    key = tuple(spec_shape.key)
    shape = "x".join(map(str, key))
    sized = {"share": share, "batch_frames": (spec_shape.batch_size, spec_shape.frames)}
    found = []
    if "train" in kinds:  # at the peak learning rate: an update that changes the weights
        found.append(Program(f"train_{shape}", "train", key, steps.step_function("train"),
                             (batch, tf.constant(True), steps.hyper(stack.train.warmup_steps)),
                             ("batch", "apply", "hyper"), **sized))  # fmt: skip
    if "eval" in kinds:  # as `CompiledSteps.evaluate` calls it
        found.append(Program(f"eval_{shape}", "eval", key, steps.step_function("eval"),
                             (batch, steps.hyper(0)), ("batch", "hyper"), **sized))  # fmt: skip
    return found


def _decoding(stack: StackConfig, model: TextToMel, longest, batch: dict,
              rows: int) -> Program:  # fmt: skip
    """The decoding program of `rows` rows of the longest bucket's text, conditioned on the
    batch's clips, into a buffer of twice its frames."""
    max_frames = buffer_frames(longest.frames)
    decoding = Decoding(model, decode=stack.decode, cond_frames=stack.reference_frames,
                        max_frames=max_frames, batch_size=rows, compiler="xla",
                        check_memory=False)  # fmt: skip
    tokens, lengths = batch["tokens"].numpy(), batch["token_lengths"].numpy()
    cond = batch["cond_mel"].numpy()
    picked = [i % len(tokens) for i in range(rows)]
    ids = [tokens[i, : max(1, lengths[i])].tolist() for i in picked]
    # The first row as long as the bucket's text: the program's text length.
    ids[0] = [t if t else 1 for t in tokens[0].tolist()]
    inputs = tuple(decoding_inputs(ids, [cond[i] for i in picked], batch_size=rows,
                                   cond_frames=stack.reference_frames))  # fmt: skip
    key = (rows, int(inputs[0].shape[1]), stack.reference_frames, max_frames)
    no_stop = {"kind": "constant", "value": STOP_BIAS,
               "note": "no row stops: the loop runs its whole buffer"}  # fmt: skip
    fills = {"batch/token_mask": {"kind": "ones"}, _stop_bias(model): no_stop}
    return Program("decode_" + "x".join(map(str, key)), "decode", key, decoding.function,
                   inputs, _DECODE_LABELS, fills, max_frames)  # fmt: skip


def _stop_bias(model: TextToMel) -> str:
    """The manifest name of the stop head's bias (as `export` names a variable)."""
    bias = model.stop_head.bias
    return getattr(bias, "path", None) or bias.name.removesuffix(":0")
