"""Mels as pictures and sound: for `synthesize` and for TensorBoard at eval intervals."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

import numpy as np
import tensorflow as tf

import xtts_audio as xa
from xtts_data.joins import silence_feature  # its owner: joined training items pause in it
from xtts_train.models.text_to_mel.decoding import Decoding
from xtts_train.models.text_to_mel.model import TextToMel

__all__ = [
    "attention_image",
    "decoded_frames",
    "free_running_eval",
    "mel_image",
    "silence_feature",
    "to_waveform",
    "write_eval_media",
]


def decoded_frames(length, symbols, max_frames: int, audio: xa.MelConfig) -> tf.Tensor:
    """Frames of a decoded mel to turn into sound: the decoded `length`, but at least two
    per text symbol (an undertrained stop head fires at once) and enough for Griffin-Lim's
    reflect padding; at most `max_frames`. Works on ints and on int32 scalar tensors."""
    floor = tf.maximum(2 * symbols, audio.n_fft // audio.hop_length + 1)
    return tf.maximum(length, tf.minimum(floor, max_frames))


def to_waveform(features: tf.Tensor, audio: xa.MelConfig, *, n_iter: int = 32) -> tf.Tensor:
    """Model features → a waveform by Griffin-Lim, peak-normalised to 0.9.

    One traced program per recipe and `n_iter`, for any number of frames: eagerly, the
    iterations' ops ran one by one, 8x the time (1.65 against 0.2 s for 150 frames and 32
    iterations on a 2-core CPU, after a trace of about 1 s).

    Args:
        features: float32 [frames, n_mels] in the recipe's feature scale.
        audio: the recipe the features were made with.
        n_iter: Griffin-Lim iterations.

    Returns:
        float32 [samples] in [-1, 1].
    """
    return _griffin_lim_program(audio, n_iter)(tf.cast(features, tf.float32))


@functools.lru_cache(maxsize=8)
def _griffin_lim_program(audio: xa.MelConfig, n_iter: int):
    """`to_waveform`'s program for a recipe and `n_iter` (a bad `n_iter` is refused at its
    trace, by `griffin_lim`)."""

    def waveform(features: tf.Tensor) -> tf.Tensor:
        wave = xa.griffin_lim(xa.denormalize(features, audio), audio, n_iter=n_iter)
        peak = tf.maximum(tf.reduce_max(tf.abs(wave)), 1e-6)
        return tf.clip_by_value(wave / peak * 0.9, -1.0, 1.0)

    signature = [tf.TensorSpec([None, audio.n_mels], tf.float32, name="features")]
    return tf.function(waveform, input_signature=signature, autograph=False)


def mel_image(*mels: tf.Tensor) -> tf.Tensor:
    """Mels side by side as one grey image, low bands at the bottom.

    Args:
        mels: float32 [frames_i, n_mels] each, on one feature scale.

    Returns:
        float32 [1, n_mels, sum of frames_i, 1] in [0, 1], for `tf.summary.image`.
    """
    joined = tf.concat([tf.cast(m, tf.float32) for m in mels], axis=0)  # (F, M)
    low, high = tf.reduce_min(joined), tf.reduce_max(joined)
    scaled = (joined - low) / tf.maximum(high - low, 1e-6)
    return tf.reverse(tf.transpose(scaled), axis=[0])[None, :, :, None]


def attention_image(attention: tf.Tensor) -> tf.Tensor:
    """One utterance's attention as a grey image: frames across, text tokens upwards.

    Args:
        attention: float32 [frames, tokens] (real frames and tokens only).

    Returns:
        float32 [1, tokens, frames, 1], scaled so the largest weight is white.
    """
    attention = tf.cast(attention, tf.float32)
    scaled = attention / tf.maximum(tf.reduce_max(attention), 1e-6)
    return tf.reverse(tf.transpose(scaled), axis=[0])[None, :, :, None]


def write_eval_media(writer: tf.summary.SummaryWriter, step: int, model: TextToMel,
                     batch: Mapping[str, tf.Tensor], audio: xa.MelConfig, *,
                     griffin_lim_iters: int = 32) -> None:  # fmt: skip
    """The first utterance of a validation batch: target | teacher-forced mel, the
    decoder's attention over the text, and audio.

    Teacher-forced: each frame is predicted from the true frames before it, as in the
    validation loss (free-running output is `xtts-train synthesize`'s job).
    """
    frames, tokens = int(batch["mel_lengths"][0]), int(batch["token_lengths"][0])
    outputs = model(batch, training=False)
    predicted = outputs["mel_after"][0, :frames]  # (F, M)
    target = batch["mel"][0, :frames]
    with writer.as_default(step=step):
        tf.summary.image("val/mel_target_then_predicted", mel_image(target, predicted))
        attention = outputs["attention"][0, :frames, :tokens]  # (F, T) real frames and tokens
        tf.summary.image("val/attention", attention_image(attention))
        wave = to_waveform(predicted, audio, n_iter=griffin_lim_iters)
        tf.summary.audio("val/predicted_griffin_lim", wave[None, :, None], audio.sample_rate)


def free_running_eval(writer: tf.summary.SummaryWriter, step: int, decoding: Decoding,
                      batch: Mapping[str, tf.Tensor] | None, reference: np.ndarray,
                      sentences: Sequence[tuple[str, Sequence[int]]], audio: xa.MelConfig, *,
                      griffin_lim_iters: int = 32) -> dict[str, float]:  # fmt: skip
    """What the model says on its own, at an eval: decoded free-running (the compiled
    `infer`, ended by the stop token, conditioned on `reference`).

    The first `decoding.batch_size` utterances of the validation `batch` (None: no
    validation split) give `val_free_duration_ratio` (median of decoded / true frames)
    and `val_free_alignment` (mean alignment score). Each of `sentences` (text, token ids)
    goes to TensorBoard as `sentence_<i>/mel`, `sentence_<i>/attention` and
    `sentence_<i>/audio`, with its alignment score as a scalar; their mean alignment is
    returned as `sentences_alignment`.
    """
    metrics = {}
    if batch is not None:
        n = min(decoding.batch_size, int(batch["tokens"].shape[0]))
        lengths = batch["token_lengths"].numpy()
        rows = [batch["tokens"][i, : lengths[i]].numpy() for i in range(n)]
        decoded = decoding(rows, reference)
        true = batch["mel_lengths"][:n]
        ratios = [d.length / int(t) for d, t in zip(decoded, true, strict=True)]
        metrics = {
            "val_free_duration_ratio": float(np.median(ratios)),
            "val_free_alignment": float(np.mean([d.alignment for d in decoded])),
        }
    if not sentences:
        return metrics
    spoken = decoding([ids for _, ids in sentences], reference)
    metrics["sentences_alignment"] = float(np.mean([d.alignment for d in spoken]))
    with writer.as_default(step=step):
        for i, ((text, ids), d) in enumerate(zip(sentences, spoken, strict=True)):
            frames = int(decoded_frames(d.length, len(ids), decoding.max_frames, audio))
            mel = d.buffer[:frames]
            tf.summary.image(f"sentence_{i}/mel", mel_image(mel), description=text)
            tf.summary.image(f"sentence_{i}/attention", attention_image(d.attention))
            wave = to_waveform(mel, audio, n_iter=griffin_lim_iters)
            tf.summary.audio(f"sentence_{i}/audio", wave[None, :, None], audio.sample_rate,
                             description=text)  # fmt: skip
            tf.summary.scalar(f"sentence_{i}/alignment", d.alignment)
    return metrics
