"""Masked losses of `TextToMel` outputs: float32, XLA-compatible, blind to padding.

Every loss is a mean over real frames only (`mel_mask`), so the same utterance gives the
same loss whatever bucket it was padded into.
"""

from __future__ import annotations

from collections.abc import Mapping

import tensorflow as tf

from xtts_train.compile.naming import name_scoped
from xtts_train.models.loss_weights import check_weight
from xtts_train.models.text_to_mel.alignment import (
    alignment_score,
    forward_sum_loss,
    guided_attention_loss,
)

__all__ = ["masked_l1", "stop_loss", "total_loss"]


@name_scoped("loss_mel_l1")
def masked_l1(pred: tf.Tensor, target: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
    """Mean absolute error over real frames and all mel bins.

    Args:
        pred: [B, F, M] predicted mel (any float dtype; computed in float32).
        target: [B, F, M] target mel.
        mask: [B, F], 1 for real frames, 0 for padding.

    Returns:
        float32 scalar: sum of |pred - target| over real frames / (real frames × M);
        0 when there are no real frames.
    """
    pred, target, mask = (tf.cast(x, tf.float32) for x in (pred, target, mask))
    errors = tf.abs(pred - target) * mask[:, :, None]  # (B, F, M)
    count = tf.reduce_sum(mask) * tf.cast(tf.shape(pred)[-1], tf.float32)
    return tf.reduce_sum(errors) / tf.maximum(count, 1.0)


@name_scoped("loss_stop_bce")
def stop_loss(
    logits: tf.Tensor, targets: tf.Tensor, mask: tf.Tensor, pos_weight: float = 5.0
) -> tf.Tensor:
    """Binary cross-entropy of stop logits, stop frames weighted by `pos_weight`.

    `stop_targets` are 1 from the last real frame on and `mel_mask` covers frames
    `< length`, so the mask keeps exactly one positive per utterance: its last frame.

    Args:
        logits: [B, F] stop logits.
        targets: [B, F] 1 for stop frames.
        mask: [B, F], 1 for real frames.
        pos_weight: weight of the positive (stop) terms, which are rare.

    Returns:
        float32 scalar: mean weighted BCE over real frames; 0 without real frames.
    """
    check_weight("pos_weight", pos_weight)
    logits, targets, mask = (tf.cast(x, tf.float32) for x in (logits, targets, mask))
    losses = tf.nn.weighted_cross_entropy_with_logits(targets, logits, pos_weight)  # (B, F)
    return tf.reduce_sum(losses * mask) / tf.maximum(tf.reduce_sum(mask), 1.0)


def total_loss(
    outputs: Mapping[str, tf.Tensor],
    batch: Mapping[str, tf.Tensor],
    *,
    stop_weight: float = 1.0,
    pos_weight: float = 5.0,
    guided_weight: float = 0.0,
    guided_sigma: float = 0.2,
    forward_sum_weight: float | None = None,
    reduction_factor: int = 1,
) -> dict[str, tf.Tensor]:
    """The training objective: L1 of the mel before and after the postnet, stop BCE, the
    guided-attention loss and, with a `forward_sum_weight`, the forward-sum alignment loss.

    Args:
        outputs: `TextToMel` outputs: `mel_before`, `mel_after` [B, F, M], `stop_logits`
            [B, F], `attention` [B, F, T].
        batch: the batch they were computed from: `mel` [B, F, M], `mel_mask` and
            `stop_targets` [B, F], `token_mask` [B, T].
        stop_weight: weight of the stop loss in `loss`.
        pos_weight: weight of stop frames inside the stop loss.
        guided_weight, guided_sigma: weight of the guided-attention loss in `loss`, and
            its band width (`xtts_train.models.text_to_mel.alignment.guided_attention_loss`).
        forward_sum_weight: weight of `alignment.forward_sum_loss` in `loss`; None: not
            computed (it is a loop over the decoder steps, so it costs when present even
            at weight 0). reduction_factor: the model's, for that loss.

    Returns:
        float32 scalars `loss` (`mel_before + mel_after + stop_weight * stop +
        guided_weight * guided_attention [+ forward_sum_weight * forward_sum]`),
        `mel_before`, `mel_after`, `stop`, `guided_attention`, `forward_sum` (with a
        `forward_sum_weight`), and `alignment` (the batch's mean `alignment_score`, a
        measure, not in `loss`).

    Raises:
        ConfigError: a negative or non-numeric weight.
    """
    check_weight("stop_weight", stop_weight)
    check_weight("guided_weight", guided_weight)
    mask, attention, token_mask = batch["mel_mask"], outputs["attention"], batch["token_mask"]
    parts = {
        "mel_before": masked_l1(outputs["mel_before"], batch["mel"], mask),
        "mel_after": masked_l1(outputs["mel_after"], batch["mel"], mask),
        "stop": stop_loss(outputs["stop_logits"], batch["stop_targets"], mask, pos_weight),
        "guided_attention": guided_attention_loss(attention, token_mask, mask, sigma=guided_sigma),
    }
    loss = (parts["mel_before"] + parts["mel_after"] + stop_weight * parts["stop"]
            + guided_weight * parts["guided_attention"])  # fmt: skip
    if forward_sum_weight is not None:
        check_weight("forward_sum_weight", forward_sum_weight)
        parts["forward_sum"] = forward_sum_loss(attention, token_mask, mask,
                                                reduction_factor=reduction_factor)  # fmt: skip
        loss = loss + forward_sum_weight * parts["forward_sum"]
    alignment = tf.reduce_mean(tf.stop_gradient(alignment_score(attention, token_mask, mask)))
    return {"loss": loss, **parts, "alignment": alignment}
