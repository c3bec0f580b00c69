"""What decoding does to a `TextToMel`'s frames after the model wrote them: a chain of
postfilter stages (`DecodeConfig`'s), outside the model.

```
infer (the loop, the postnet) ─ mel ─ GlobalVariance ─ mel
                                    (decode.global_variance)
```
Each stage maps frames (B, F, M) to frames of the same shape and reads what the decoding
knows (`Decoded`: the frames as the model wrote them, which are real, the clip). A stage
that needs the whole utterance says so (`streams = False`), and streaming refuses it
(`check_streamable`). `decode_frames` is the whole decoding, the loop and the chain: what
`Decoding` and the exported SavedModel compile.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Protocol

import tensorflow as tf

from xtts_train.config import DecodeConfig
from xtts_train.errors import ConfigError
from xtts_train.models.text_to_mel.frames import clip_mask, match_global_variance, within_range
from xtts_train.models.text_to_mel.free_running import infer
from xtts_train.models.text_to_mel.model import TextToMel

__all__ = [
    "Decoded", "GlobalVariance", "Postfilter", "apply", "check_streamable",
    "decode_frames", "postfilters",
]  # fmt: skip


class Decoded(NamedTuple):
    """What a postfilter may read besides the frames it changes.

    Attributes:
        mel: float32 [B, F, M], the frames as the model decoded them (after the postnet),
            before any stage.
        real: float32 [B, F], 1 at frames before the stop (`infer`'s `lengths`).
        cond_mel: float32 [B, C, M], the reference clip; cond_lengths: int32 [B].
        clip_mask: float32 [B, C], 1 at the clip's real frames.
    """

    mel: tf.Tensor
    real: tf.Tensor
    cond_mel: tf.Tensor
    cond_lengths: tf.Tensor
    clip_mask: tf.Tensor


class Postfilter(Protocol):
    """A stage: frames (B, F, M) and what was decoded → frames (B, F, M)."""

    name: str  # its `DecodeConfig` field
    streams: bool  # whether a stream's windows can have it (it needs only their frames)

    def __call__(self, mel: tf.Tensor, decoded: Decoded) -> tf.Tensor: ...


class GlobalVariance:
    """The decoded mel's cepstral global variance matched to the clip's
    (`frames.match_global_variance`), then held within the levels each channel reaches in
    the clip (`frames.within_range`). Needs the whole utterance's variance."""

    name, streams = "global_variance", False

    def __call__(self, mel: tf.Tensor, decoded: Decoded) -> tf.Tensor:
        matched = match_global_variance(mel, decoded.real, decoded.cond_mel, decoded.clip_mask)
        return within_range(matched, decoded.real, decoded.cond_mel, decoded.clip_mask)


def postfilters(decode: DecodeConfig) -> list[Postfilter]:
    """The stages `decode` turns on, in order (`DecodeConfig.postfilters`)."""
    stages = {"global_variance": GlobalVariance}
    return [stages[name]() for name in decode.postfilters]


def apply(stages: Sequence[Postfilter], mel: tf.Tensor, real: tf.Tensor, cond_mel: tf.Tensor,
          cond_lengths: tf.Tensor) -> tf.Tensor:  # fmt: skip
    """`stages` in turn on decoded frames mel float32 [B, F, M] with real float32 [B, F]
    and the clip cond_mel float32 [B, C, M], cond_lengths int32 [B]."""
    decoded = Decoded(mel, real, cond_mel, cond_lengths, clip_mask(cond_mel, cond_lengths))
    for stage in stages:
        mel = stage(mel, decoded)
    return mel


def decode_frames(model: TextToMel, decode: DecodeConfig, tokens, token_mask, cond_mel,
                  cond_lengths, *, max_frames: int) -> dict[str, tf.Tensor]:  # fmt: skip
    """`free_running.infer` with `decode`'s loop settings, then `decode`'s postfilters on
    its `mel`.

    Args, Returns: as `free_running.infer`'s, `mel` after the stages.
    """
    result = infer(model, tokens, token_mask, cond_mel, cond_lengths, max_frames=max_frames,
                   decode=decode)  # fmt: skip
    stages = postfilters(decode)
    if stages:
        real = tf.sequence_mask(result["lengths"], max_frames, tf.float32)  # (B, F)
        result["mel"] = apply(stages, result["mel"], real, cond_mel, cond_lengths)
    return result


def check_streamable(decode: DecodeConfig) -> None:
    """Raises ConfigError for a postfilter a stream cannot have (its windows are decoded
    and read out a chunk at a time): the message names it and how to stream without it."""
    for stage in postfilters(decode):
        if not stage.streams:
            raise ConfigError(
                f"Expected decode.{stage.name}=false to stream, received true: "
                f"{_WHY_NOT_STREAMED[stage.name]}. Synthesise without streaming, or stream "
                f"with --set decode.{stage.name}=false"
            )


_WHY_NOT_STREAMED = {
    "global_variance": "it scales the frames by the whole utterance's variance, known only "
    "at its end",
}
