"""`synthesize`: text → mel with the trained model (compiled decoding) → waveform.

Decoding is the model's `infer`: a fixed `max_frames` buffer, the stop token, one XLA
program, no per-frame Python. The mel becomes audio with xtts-audio's Griffin-Lim.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import tensorflow as tf
import yaml
from matplotlib.figure import Figure

import xtts_audio as xa
from xtts_data import DataConfig, Tokenizer, load_audio, text_to_ids
from xtts_train import compile_cache
from xtts_train.alignment import alignment_score
from xtts_train.config import ModelConfig, StackConfig, TrainConfig
from xtts_train.errors import XttsTrainError
from xtts_train.media import decoded_frames, to_waveform
from xtts_train.model import TextToMel, dummy_batch

__all__ = ["Synthesis", "load_run", "synthesize"]


@dataclasses.dataclass(frozen=True)
class Synthesis:
    """What `synthesize` wrote: the WAV, the mel picture, and how long the speech is."""

    wav: Path
    png: Path
    frames: int
    seconds: float
    stopped: bool  # the stop token ended it (not max_frames or the two-frames-per-symbol floor)
    alignment: float  # `alignment_score` of the decoding's attention over its frames and text


def load_run(workdir: str | Path) -> tuple[StackConfig, TextToMel, Tokenizer]:
    """The config, the model with the last checkpoint's weights, and the tokenizer of a run.

    Raises:
        XttsTrainError: not a run folder, or no checkpoint yet.
    """
    workdir = Path(workdir)
    try:
        sections = yaml.safe_load((workdir / "config.yaml").read_text())
        tokenizer = Tokenizer.from_dict(json.loads((workdir / "tokenizer.json").read_text()))
    except FileNotFoundError as error:
        raise XttsTrainError(
            f"{workdir} is not a training run ({error.filename} missing)"
        ) from None
    stack = StackConfig(
        xa.MelConfig.from_dict(sections["audio"]), DataConfig.from_dict(sections["data"]),
        ModelConfig.from_dict(sections["model"]), TrainConfig.from_dict(sections["train"]),
    )  # fmt: skip
    latest = tf.train.latest_checkpoint(str(workdir / "checkpoints"))
    if latest is None:
        raise XttsTrainError(f"{workdir} has no checkpoint yet: train it with `xtts-train fit`")
    model = TextToMel(stack.model)
    model(dummy_batch(stack.model))
    try:
        restored = tf.train.Checkpoint(model=model).restore(latest)
        restored.expect_partial()  # the optimizer and step are training state
        restored.assert_existing_objects_matched()
    except (AssertionError, ValueError) as error:  # a weight missing, or of another shape
        raise XttsTrainError(
            f"{latest} does not hold every weight of the model in {workdir / 'config.yaml'} "
            f"(written by another model configuration or an older xtts-train?): {error}"
        ) from None
    return stack, model, tokenizer


def synthesize(workdir: str | Path, text: str, out: str | Path, *,
               reference: str | Path | None = None, max_frames: int = 400,
               griffin_lim_iters: int = 32) -> Synthesis:  # fmt: skip
    """Speak `text` with the run's model; writes `out` (WAV) and `out` with `.png`.

    Args:
        workdir: the training run.
        text: what to say (normalised with the run's text settings).
        out: the WAV file to write.
        reference: a WAV/FLAC/OGG of the voice to condition on; default: the reference
            clip saved by `fit` (a crop of a training utterance).
        max_frames: the decoding buffer; speech longer than this is cut.
        griffin_lim_iters: Griffin-Lim iterations.
    """
    stack, model, tokenizer = load_run(workdir)
    ids = text_to_ids(text, stack.data.text, tokenizer)[0]
    if len(ids) <= 1:
        raise XttsTrainError(f"no known symbols in the text {text!r} after normalisation")
    cond = _reference(Path(workdir), stack, reference)  # (C, M)
    result = _decode(model, ids, cond, stack.data.cond_frames, max_frames)
    decoded = int(result["lengths"][0])
    frames = int(decoded_frames(decoded, len(ids), max_frames, stack.audio))
    features = result["mel"][0, :frames]  # (F, M) in the recipe's feature scale
    wave = to_waveform(features, stack.audio, n_iter=griffin_lim_iters)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tf.io.write_file(str(out), tf.audio.encode_wav(wave[:, None], stack.audio.sample_rate))
    png = out.with_suffix(".png")
    attention = result["attention"][0, :frames, : len(ids)]  # (F, T) real frames and tokens
    _plot(features.numpy(), attention.numpy(), png, text)
    stopped = frames == decoded < max_frames
    seconds = frames * stack.audio.hop_length / stack.audio.sample_rate
    score = float(alignment_score(attention[None], tf.ones([1, len(ids)]), tf.ones([1, frames]))[0])
    return Synthesis(out, png, frames, seconds, stopped, score)


# Token ids are padded to a multiple of this (masked, as in training), so texts of similar
# length share one compiled decoding program (and its compile-cache entry).
TEXT_BUCKET = 32


def _decode(model: TextToMel, ids: list[int], cond: np.ndarray, cond_frames: int,
            max_frames: int) -> dict[str, tf.Tensor]:  # fmt: skip
    """`model.infer` compiled for the padded text length, the run's reference length and
    `max_frames`: traced with stable names and published to the compile cache."""
    text = -(-len(ids) // TEXT_BUCKET) * TEXT_BUCKET
    tokens = np.zeros([1, text], np.int32)
    tokens[0, : len(ids)] = ids
    reference = np.zeros([1, cond_frames, cond.shape[-1]], np.float32)
    reference[0, : len(cond)] = cond[:cond_frames]
    mask = (np.arange(text) < len(ids)).astype(np.float32)[None]  # (1, T)
    inputs = [tf.constant(tokens), tf.constant(mask), tf.constant(reference),
              tf.constant([min(len(cond), cond_frames)], tf.int32)]  # fmt: skip
    decode = tf.function(
        lambda t, m, c, n: model.infer(t, m, c, n, max_frames=max_frames), jit_compile=True
    )
    with compile_cache.collect():
        with compile_cache.stable_names(f"decode {text}x{cond_frames}x{max_frames}"):
            program = decode.get_concrete_function(*inputs)
        return program(*inputs)


def _reference(workdir: Path, stack: StackConfig, reference: str | Path | None) -> np.ndarray:
    if reference is None:
        path = workdir / "reference.npy"
        if not path.exists():
            raise XttsTrainError(f"{workdir} has no saved reference clip: pass --reference")
        return np.load(path)
    wave = load_audio(Path(reference), stack.audio)
    mel = xa.mel_features(wave, stack.audio).numpy()
    return mel[: stack.data.cond_frames]


def _plot(mel: np.ndarray, attention: np.ndarray, path: Path, title: str) -> None:
    """The decoded mel (F, M) above the alignment head's attention (F, T), frames shared."""
    figure = Figure(figsize=(8, 5))
    top, bottom = figure.subplots(2, 1, sharex=True)
    top.imshow(mel.T, origin="lower", aspect="auto", interpolation="nearest")
    top.set_ylabel("mel band")
    top.set_title(title[:80], fontsize=9)
    bottom.imshow(attention.T, origin="lower", aspect="auto", interpolation="nearest")
    bottom.set_xlabel("frame")
    bottom.set_ylabel("text symbol")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
