"""Free-running decoding of a `TextToMel`, outside the model: `infer` decodes whole
utterances into a fixed frame buffer; `stream_start`, `stream_advance` and `mel_window`
are the same loop cut into parts that cross `tf.function` boundaries (streaming). All
run `generation`'s loop with the model's layers and a `DecodeConfig` passed in, so how a
model decodes is the caller's choice, not the model's.
"""

from __future__ import annotations

import tensorflow as tf

from xtts_train.config import DecodeConfig
from xtts_train.errors import ConfigError
from xtts_train.models.text_to_mel.frames import denormalize_by
from xtts_train.models.text_to_mel.generation import (
    Context,
    State,
    advance,
    generate,
    start,
    stop_lengths,
)
from xtts_train.models.text_to_mel.model import TextToMel

__all__ = ["infer", "mel_window", "stream_advance", "stream_start"]

_PLAIN = DecodeConfig()  # decoding's defaults: the plain loop


def _check_max_frames(max_frames: int) -> None:
    if isinstance(max_frames, bool) or not isinstance(max_frames, int) or max_frames < 1:
        raise ConfigError(f"Expected max_frames an int >= 1, received: max_frames={max_frames!r}")


def infer(model: TextToMel, tokens, token_mask, cond_mel, cond_lengths, *, max_frames: int,
          decode: DecodeConfig = _PLAIN) -> dict[str, tf.Tensor]:  # fmt: skip
    """Autoregressive generation into a fixed `max_frames` buffer (XLA-compatible) by
    the loop of `generation.generate`: the same inputs decode to the same frames, and it
    ends when every utterance stops.

    Args:
        tokens: int32 [B, T]; token_mask: float32 [B, T];
        cond_mel: float32 [B, C, M]; cond_lengths: int32 [B]. Static shapes.
        max_frames: frames of the buffer, a Python int.
        decode: the loop's settings (its window, stop gate and prenet dropout); the
            postfilters are not applied here (`postfilters.decode_frames` does).

    Returns:
        `mel` float32 [B, max_frames, M] after the postnet (frames from `lengths` on
        are not meaningful), `mel_before` [B, max_frames, M] (the frames fed back),
        `stop_probs` float32 [B, max_frames] (0 after the loop ended), `lengths`
        int32 [B]: first frame with stop probability > 0.5, plus one, or `max_frames`,
        and `attention` float32 [B, max_frames, T]: the alignment head over the text
        when each frame was generated (0 after the loop ended). With the config's
        inference window on, frame `t` attends only to the text symbols around the
        furthest peak of frames `< t` (see `DecodeConfig.window_ahead`).

    Raises:
        ConfigError: `max_frames` is not a positive int.
    """
    _check_max_frames(max_frames)
    model.build_weights()
    memory, memory_mask, stats = model.encode(tokens, token_mask, cond_mel, cond_lengths)
    pitch = model.clip_pitch(cond_mel, cond_lengths)  # (B, 1, 2) | None
    before, probs, attention = generate(  # (B, F, M), (B, F), (B, F, T + L)
        model.decoder, model.heads, model.config, decode, memory, memory_mask,
        text_shape=tokens.shape, max_frames=max_frames, stats=stats, pitch=pitch,
    )  # fmt: skip
    lengths = stop_lengths(probs, max_frames)  # (B,)
    real = tf.sequence_mask(lengths, max_frames, tf.float32)  # (B, F)
    mel_before, mel = model.to_mel(before, real)
    return {"mel": mel, "mel_before": mel_before, "stop_probs": probs, "lengths": lengths,
            "attention": attention[:, :, : tokens.shape[1]]}  # fmt: skip


def stream_start(model: TextToMel, tokens, token_mask, cond_mel, cond_lengths, *,
                 max_frames: int,
                 decode: DecodeConfig = _PLAIN) -> tuple[Context, State]:  # fmt: skip
    """`infer`'s decoding before its first step, to be run a few steps at a time
    (`stream_advance`) and read out as it goes (`mel_window`): streaming.

    Args:
        tokens, token_mask, cond_mel, cond_lengths, max_frames, decode: as `infer`'s.

    Returns:
        `generation.start`'s `Context` (every step reads it) and `State` at step 0;
        nested tuples of tensors, which cross `tf.function` boundaries.

    Raises:
        ConfigError: `max_frames` is not a positive int.
    """
    _check_max_frames(max_frames)
    model.build_weights()
    memory, memory_mask, stats = model.encode(tokens, token_mask, cond_mel, cond_lengths)
    pitch = model.clip_pitch(cond_mel, cond_lengths)  # (B, 1, 2) | None
    return start(model.decoder, model.config, decode, memory, memory_mask, max_frames=max_frames,
                 stats=stats, pitch=pitch)  # fmt: skip


def stream_advance(model: TextToMel, context: Context, state: State, until: tf.Tensor, *,
                   decode: DecodeConfig = _PLAIN) -> State:  # fmt: skip
    """`infer`'s loop from `state` up to step `until`, or until every utterance stopped:
    the steps `infer` runs, in as many calls as the caller likes.

    Args:
        context, state: as `stream_start` (then `stream_advance`) returned them.
        until: int32 scalar, the step to stop before (past the buffer: its end).
        decode: the loop's settings, as `stream_start`'s.

    Returns:
        The `State` after the last step run (`state.t` steps run in all).
    """
    text_len = context.memory_mask.shape[-1] - model.config.cond_latents  # S = T + L
    return advance(model.decoder, model.heads, model.config, decode, context, state, until,
                   text_len=text_len)  # fmt: skip


def mel_window(model: TextToMel, before: tf.Tensor, stats: tf.Tensor, lengths: tf.Tensor,
               first: tf.Tensor, *, frames: int) -> tf.Tensor:  # fmt: skip
    """`infer`'s `mel` at frames `first .. first + frames - 1` of a decoding buffer, the
    postnet run over those frames and its context (`Postnet.context_frames` each side)
    alone: one static shape wherever the frames lie.

    Args:
        before: frames float32 [B, N, M] as the heads wrote them (`State.frames`, N >=
            the buffer's `max_frames`); frames up to `first + frames + context_frames`
            decoded.
        stats: float32 [B, 2, M], what `before` is normalised by (`Context.stats`).
        lengths: int32 [B], real frames (`stop_lengths`, `max_frames` where no stop yet):
            the postnet sees zeros from there on, as in `infer`.
        first: int32 scalar, the first frame.
        frames: frames to return, a Python int.

    Returns:
        float32 [B, frames, M] in mel units (frames past the buffer: not meaningful).
    """
    model.build_weights()
    reach = model.postnet.context_frames
    width = frames + 2 * reach
    padded = tf.pad(before, [[0, 0], [reach, frames + reach], [0, 0]])
    # A gather, not a slice: XLA compiles a slice's start into the program, once per value.
    window = tf.gather(padded, first + tf.range(width), axis=1)  # from frame first - reach
    if model.config.voice_stats != "off":
        window = denormalize_by(window, stats)
    at = first - reach + tf.range(width)  # (W,) the window's frame indices
    mask = (at[None, :] >= 0) & (at[None, :] < lengths[:, None])  # (B, W)
    _, mel = model.to_mel(window, mask)
    return mel[:, reach : reach + frames]
