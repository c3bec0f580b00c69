"""`TextToMel`: an XTTS-style autoregressive text-to-mel transformer (sizes: `ModelConfig`).

```
tokens ─ embedding ─ conv prenet ─ transformer ──────────────┐ (B, T_text, D)
cond_mel ─ conv stack ─ transformer ─ pool into L latents ───┤ (B, L, D)
                                                   memory = concat ─┐
mel shifted right ─ prenet ─ causal self-attn + cross-attn(memory) ─┴─ hidden (B, F, D)
hidden ─ mel head ─ mel_before ─ postnet (residual) ─ mel_after
hidden ─ stop head ─ stop_logits
```
With a reduction factor `r > 1` the decoder runs one step per group of `r` frames: step
`s` reads the last frame of group `s - 1` and its heads write all `r` frames of group `s`.
Training (`call`) and inference (`infer`) run the same decoder; inference fills a
fixed-size frame buffer in a `tf.while_loop`, so both compile with XLA at static shapes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import keras
import tensorflow as tf

from xtts_train.config import ModelConfig
from xtts_train.errors import ConfigError
from xtts_train.models import dropout
from xtts_train.models.text_to_mel.layers import (
    CondEncoder,
    Decoder,
    Postnet,
    TextEncoder,
    key_mask,
)

__all__ = ["TextToMel", "dummy_batch"]

_INPUTS = ("tokens", "token_mask", "mel", "cond_mel", "cond_lengths")


def dummy_batch(
    config: ModelConfig, *, batch_size: int = 1, text_len: int = 4, frames: int | None = None,
    cond_frames: int = 8,
) -> dict[str, tf.Tensor]:  # fmt: skip
    """A batch of every `DatasetSpec` field, all real (no padding): builds a model cheaply.

    `frames` defaults to two decoder steps (`2 * reduction_factor`, at least 4).

    Returns:
        `tokens` int32 [batch, text_len] (ids 2), masks of ones, zero `mel`
        [batch, frames, n_mels] and `cond_mel` [batch, cond_frames, n_mels], full lengths.
    """
    if frames is None:
        frames = max(4, 2 * config.reduction_factor)
    b, t, f, c, m = batch_size, text_len, frames, cond_frames, config.n_mels
    steps = tf.range(f)[None, :]
    return {
        "tokens": tf.fill([b, t], 2),
        "token_lengths": tf.fill([b], t),
        "token_mask": tf.ones([b, t]),
        "mel": tf.zeros([b, f, m]),
        "mel_lengths": tf.fill([b], f),
        "mel_mask": tf.ones([b, f]),
        "stop_targets": tf.cast(tf.tile(steps, [b, 1]) >= f - 1, tf.float32),
        "speaker": tf.zeros([b], tf.int32),
        "cond_mel": tf.zeros([b, c, m]),
        "cond_lengths": tf.fill([b], c),
    }


def _shift_right(frames: tf.Tensor) -> tf.Tensor:
    """Teacher forcing input: a zero go frame, then frames 0 .. F-2: (B, F, M) → (B, F, M)."""
    return tf.pad(frames, [[0, 0], [1, 0], [0, 0]])[:, :-1]


def _groups(frames: int, r: int) -> int:
    """Decoder steps that cover `frames` frames, `r` per step."""
    return -(-frames // r)


def _check_batch(batch: Mapping[str, tf.Tensor], config: ModelConfig) -> None:
    missing = [name for name in _INPUTS if name not in batch]
    if missing:
        raise ConfigError(
            f"Expected a batch with fields {list(_INPUTS)}, received: fields={sorted(batch)}"
        )
    for name in ("mel", "cond_mel"):
        if batch[name].shape[-1] != config.n_mels:
            raise ConfigError(
                f"Expected {name} with n_mels={config.n_mels} channels (ModelConfig.n_mels), "
                f"received: {name}.shape={tuple(batch[name].shape)}"
            )


class TextToMel(keras.Model):
    """XTTS-style text-to-mel: text and speaker-reference encoders, autoregressive decoder.

    Outputs are float32 under any dtype policy (heads and postnet output run in float32).

    Args:
        config: the model sizes.
    """

    def __init__(self, config: ModelConfig, **kwargs: Any) -> None:
        if not isinstance(config, ModelConfig):
            raise ConfigError(f"Expected a ModelConfig, received: config={config!r}")
        super().__init__(**kwargs)
        self.config = config
        self.text_encoder = TextEncoder(config, name="text_encoder")
        self.cond_encoder = CondEncoder(config, name="cond_encoder")
        self.decoder = Decoder(config, name="decoder")
        r = config.reduction_factor  # each decoder step writes r frames
        self.mel_head = keras.layers.Dense(r * config.n_mels, dtype="float32", name="mel_head")
        self.stop_head = keras.layers.Dense(r, dtype="float32", name="stop_head")
        self.postnet = Postnet(config, name="postnet")

    def build(self, input_shape: Any) -> None:
        """Marks the model built; each sublayer creates its weights on the first call."""
        self.built = True

    def call(self, batch: Mapping[str, tf.Tensor], training: bool = False) -> dict[str, tf.Tensor]:
        """Teacher-forced prediction of every frame of `batch["mel"]` from the frames before it.

        Args:
            batch: `DatasetSpec` fields; reads `tokens` int32 [B, T], `token_mask` float32
                [B, T], `mel` float32 [B, F, M], `cond_mel` float32 [B, C, M],
                `cond_lengths` int32 [B], and `mel_mask` [B, F] when present (the postnet
                then sees zeros after the real frames). Shapes must be static.
            training: dropout on (the prenet's dropout is on in any case).

        Returns:
            `mel_before` and `mel_after` (postnet) float32 [B, F, M], `stop_logits` float32
            [B, F], and `attention` float32 [B, F, T]: the decoder's alignment head
            (head 0 of each block, averaged) over the text; the rest of each row went to
            the speaker latents. Frame `t` depends only on frames `< t` before the postnet;
            the postnet looks `postnet_kernel // 2` frames ahead.

        Raises:
            ConfigError: a missing field, or mels with another `n_mels` than the config.
        """
        _check_batch(batch, self.config)
        memory, memory_mask = self.encode(
            batch["tokens"], batch["token_mask"], batch["cond_mel"], batch["cond_lengths"],
            training=training,
        )  # fmt: skip
        frames = self._standardize(batch["mel"])  # (B, F, M)
        count = frames.shape[1]
        step_inputs = self._step_inputs(frames)  # (B, S, M), S = ceil(F / r)
        keep = self.decoder.prenet_keep(frames.shape[0], step_inputs.shape[1])
        hidden, attention = self.decoder(step_inputs, memory, memory_mask, keep,
                                         training=training)  # fmt: skip
        before, stop_logits = self._heads(hidden, count)  # (B, F, M), (B, F)
        mel_before, mel_after = self._outputs(before, batch.get("mel_mask"), training=training)
        text_len = batch["tokens"].shape[1]
        attention = self._per_frame(attention, count)[:, :, :text_len]  # (B, F, T)
        return {"mel_before": mel_before, "mel_after": mel_after, "stop_logits": stop_logits,
                "attention": attention}  # fmt: skip

    def encode(self, tokens, token_mask, cond_mel, cond_lengths, training=False):
        """The decoder's memory: text encodings followed by the speaker latents.

        Args:
            tokens: int32 [B, T]; token_mask: float32 [B, T];
            cond_mel: float32 [B, C, M] reference mel; cond_lengths: int32 [B] real frames.

        Returns:
            memory [B, T + L, D] and its attention mask bool [B, 1, T + L].
        """
        text = self.text_encoder(tokens, token_mask, training=training)  # (B, T, D)
        cond_mask = tf.sequence_mask(cond_lengths, tf.shape(cond_mel)[1], tf.float32)  # (B, C)
        latents = self.cond_encoder(self._standardize(cond_mel), cond_mask, training=training)
        memory = tf.concat([text, tf.cast(latents, text.dtype)], axis=1)  # (B, T + L, D)
        latent_mask = tf.ones(tf.shape(latents)[:2], tf.float32)  # latents are always real
        mask = tf.concat([tf.cast(token_mask, tf.float32), latent_mask], axis=1)
        return memory, key_mask(mask)

    def infer(self, tokens, token_mask, cond_mel, cond_lengths, *, max_frames: int):
        """Autoregressive generation into a fixed `max_frames` buffer (XLA-compatible).

        Step `t` runs the decoder over the whole buffer (causal, so later steps do not
        matter) and writes frames `t*r .. t*r + r - 1` (r = `reduction_factor`); the loop
        ends when every utterance has stopped.

        Args:
            tokens: int32 [B, T]; token_mask: float32 [B, T];
            cond_mel: float32 [B, C, M]; cond_lengths: int32 [B]. Static shapes.
            max_frames: frames of the buffer, a Python int.

        Returns:
            `mel` float32 [B, max_frames, M] after the postnet (frames from `lengths` on
            are not meaningful), `mel_before` [B, max_frames, M] (the frames fed back),
            `stop_probs` float32 [B, max_frames] (0 after the loop ended), `lengths`
            int32 [B]: first frame with stop probability > 0.5, plus one, or `max_frames`,
            and `attention` float32 [B, max_frames, T]: the alignment head over the text
            when each frame was generated (0 after the loop ended). With the config's
            inference window on, frame `t` attends only to the text symbols around the
            furthest peak of frames `< t` (see `ModelConfig.infer_window_ahead`). The
            prenet's dropout is off unless `ModelConfig.infer_prenet_dropout`, so the same
            inputs decode to the same frames.

        Raises:
            ConfigError: `max_frames` is not a positive int.
        """
        if isinstance(max_frames, bool) or not isinstance(max_frames, int) or max_frames < 1:
            raise ConfigError(
                f"Expected max_frames an int >= 1, received: max_frames={max_frames!r}"
            )
        if not self.mel_head.built:
            self(dummy_batch(self.config))  # variables cannot be created inside the loop
        memory, memory_mask = self.encode(tokens, token_mask, cond_mel, cond_lengths)
        before, probs, attention = self._generate(memory, memory_mask, tokens.shape,
                                                  max_frames)  # fmt: skip
        stopped = probs > 0.5  # (B, F)
        first = tf.argmax(tf.cast(stopped, tf.int32), axis=1, output_type=tf.int32)
        lengths = tf.where(tf.reduce_any(stopped, axis=1), first + 1, max_frames)
        mel_before, mel = self._outputs(before, tf.sequence_mask(lengths, max_frames))
        return {"mel": mel, "mel_before": mel_before, "stop_probs": probs, "lengths": lengths,
                "attention": attention[:, :, : tokens.shape[1]]}  # fmt: skip

    def _generate(self, memory, memory_mask, text_shape, max_frames: int):
        """The decoding loop: standardised frames (B, F, M), stop probabilities (B, F) and
        the alignment head's attention over the memory (B, F, S), F = `max_frames`.

        The buffers hold `steps * r` frames; step `t` writes frames `t*r .. t*r + r - 1`
        and ends the loop for an utterance when any of them has stop probability > 0.5.
        With the inference window on, `masks` (B, steps, S) holds each step's key mask:
        row `t` is set from the focus before step `t` runs and kept after, so re-running
        the decoder over the buffer shows every past step the keys it had.
        """
        batch, text_len = text_shape
        r = self.config.reduction_factor
        steps = _groups(max_frames, r)
        keep = self.decoder.prenet_keep(batch, steps, dropout=self.config.infer_prenet_dropout)
        windowed = self.config.infer_window_ahead > 0
        keys = tf.range(memory.shape[1])[None, :]  # (1, S)

        def window(focus):  # (B,) furthest peak so far → bool (B, 1, S)
            near = (keys >= focus[:, None] - self.config.infer_window_back) & (
                keys <= focus[:, None] + self.config.infer_window_ahead)  # fmt: skip
            return (near | (keys >= text_len))[:, None, :] & memory_mask

        def step(t, frames, probs, attention, masks, focus, done):
            at_t = tf.one_hot(t, steps)[None]  # (1, steps)
            in_group = tf.repeat(at_t, r, axis=1)  # (1, steps * r): the frames step t writes
            if windowed:
                masks = tf.where(at_t[:, :, None] > 0, window(focus), masks)
            hidden, align = self.decoder(self._step_inputs(frames), memory, masks, keep)
            now = tf.reshape(t, [1])
            group, logits = self._heads(tf.gather(hidden, now, axis=1), r)  # (B, r, M), (B, r)
            prob = tf.sigmoid(logits)  # (B, r)
            frames = frames + in_group[:, :, None] * tf.tile(group, [1, steps, 1])
            probs = probs + in_group * tf.tile(prob, [1, steps])
            row = tf.gather(align, now, axis=1)  # (B, 1, S)
            attention = attention + at_t[:, :, None] * row
            peak = tf.argmax(row[:, 0, :text_len], axis=1, output_type=tf.int32)
            stopped = tf.reduce_any(prob > 0.5, axis=1)
            return (t + 1, frames, probs, attention, masks, tf.maximum(focus, peak),
                    done | stopped)  # fmt: skip

        masks = memory_mask
        if windowed:
            masks = tf.tile(memory_mask, [1, steps, 1])  # (B, steps, S)
        start = (
            tf.constant(0),
            tf.zeros([batch, steps * r, self.config.n_mels]),
            tf.zeros([batch, steps * r]),
            tf.zeros([batch, steps, memory.shape[1]]),
            masks,
            tf.zeros([batch], tf.int32),
            tf.zeros([batch], tf.bool),
        )
        _, frames, probs, attention, *_ = tf.while_loop(
            lambda t, *state: ~tf.reduce_all(state[-1]), step, start,
            maximum_iterations=steps,
        )  # fmt: skip
        return (frames[:, :max_frames], probs[:, :max_frames],
                self._per_frame(attention, max_frames))  # fmt: skip

    def _step_inputs(self, frames: tf.Tensor) -> tf.Tensor:
        """Decoder inputs (B, F, M) → (B, S, M), S = ceil(F / r): a zero go frame, then the
        last frame of each group of `r` but the final one (r = 1: frames 0 .. F-2)."""
        r = self.config.reduction_factor
        if r == 1:
            return _shift_right(frames)
        count, n_mels = frames.shape[1], frames.shape[2]
        steps = _groups(count, r)
        padded = tf.pad(frames, [[0, 0], [0, steps * r - count], [0, 0]])
        return _shift_right(tf.reshape(padded, [-1, steps, r, n_mels])[:, :, -1])

    def _per_frame(self, attention: tf.Tensor, frames: int) -> tf.Tensor:
        """One attention row per decoder step (B, S, K) → one per frame (B, frames, K):
        the frames a step writes share its row."""
        r = self.config.reduction_factor
        return attention if r == 1 else tf.repeat(attention, r, axis=1)[:, :frames]

    def _standardize(self, mel: tf.Tensor) -> tf.Tensor:
        return (tf.cast(mel, tf.float32) - self.config.mel_mean) / self.config.mel_std

    def _heads(self, hidden: tf.Tensor, frames: int) -> tuple[tf.Tensor, tf.Tensor]:
        """hidden (B, S, D) → the first `frames` of the `S * r` standardised frames they
        write (B, frames, M) and their stop logits (B, frames); float32."""
        count = hidden.shape[1] * self.config.reduction_factor
        mel = tf.reshape(self.mel_head(hidden), [-1, count, self.config.n_mels])
        stop = tf.reshape(self.stop_head(hidden), [-1, count])
        return mel[:, :frames], stop[:, :frames]

    def _outputs(self, before: tf.Tensor, mask: tf.Tensor | None = None,
                 training: bool = False) -> tuple[tf.Tensor, tf.Tensor]:  # fmt: skip
        """Standardised frames (B, F, M) → mel before and after the postnet, in mel units.

        `mask` (B, F) marks real frames: the postnet sees zeros after them, as at the end
        of a buffer, so its output at the last real frames is the same in any bucket.
        """
        after = before + self.postnet(before, mask, training=training)
        scale, mean = self.config.mel_std, self.config.mel_mean
        return before * scale + mean, after * scale + mean

    def seed_states(self) -> list[tf.Variable]:
        """The dropout layers' seed states (`xtts_train.models.dropout.seed_states`)."""
        return dropout.seed_states(self)

    def parameter_count(self) -> int:
        """Trainable parameters (builds the model on a tiny batch first if needed)."""
        return sum(count for _, count in self._component_counts())

    def describe(self) -> str:
        """Trainable parameters per component, one line each, then the total."""
        rows = [f"{name:<14}{count:>14,}" for name, count in self._component_counts()]
        return "\n".join([*rows, f"{'total':<14}{self.parameter_count():>14,}"])

    def _component_counts(self) -> list[tuple[str, int]]:
        if not self.mel_head.built:
            self(dummy_batch(self.config))
        components = {
            "text_encoder": [self.text_encoder],
            "cond_encoder": [self.cond_encoder],
            "decoder": [self.decoder],
            "heads": [self.mel_head, self.stop_head],
            "postnet": [self.postnet],
        }
        return [
            (name, sum(math.prod(w.shape) for layer in layers for w in layer.trainable_weights))
            for name, layers in components.items()
        ]
