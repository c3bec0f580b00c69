"""`TextToMel`: an XTTS-style autoregressive text-to-mel transformer (sizes: `ModelConfig`).

```
tokens ─ embedding ─ conv prenet ─ transformer ──────────────┐ (B, T_text, D)
cond_mel ─ conv stack ─ transformer ─ pool into L latents ───┤ (B, L, D)
                                                   memory = concat ─┐
mel shifted right ─ prenet ─ causal self-attn + cross-attn(memory) ─┴─ hidden (B, F, D)
hidden ─ mel head ─ mel_before ─ postnet (residual) ─ mel_after
hidden ─ stop head ─ stop_logits
```
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
from xtts_train.layers import CondEncoder, Decoder, Postnet, TextEncoder, key_mask

__all__ = ["TextToMel", "dummy_batch"]

_INPUTS = ("tokens", "token_mask", "mel", "cond_mel", "cond_lengths")


def dummy_batch(
    config: ModelConfig, *, batch_size: int = 1, text_len: int = 4, frames: int = 4,
    cond_frames: int = 8,
) -> dict[str, tf.Tensor]:  # fmt: skip
    """A batch of every `DatasetSpec` field, all real (no padding): builds a model cheaply.

    Returns:
        `tokens` int32 [batch, text_len] (ids 2), masks of ones, zero `mel`
        [batch, frames, n_mels] and `cond_mel` [batch, cond_frames, n_mels], full lengths.
    """
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
        self.mel_head = keras.layers.Dense(config.n_mels, dtype="float32", name="mel_head")
        self.stop_head = keras.layers.Dense(1, dtype="float32", name="stop_head")
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
            training: dropout on (the prenet's dropout is always on).

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
        keep = self.decoder.prenet_keep(frames.shape[0], frames.shape[1])
        hidden, attention = self.decoder(_shift_right(frames), memory, memory_mask, keep,
                                         training=training)  # fmt: skip
        before, stop_logits = self._heads(hidden)
        mel_before, mel_after = self._outputs(before, batch.get("mel_mask"), training=training)
        text_len = batch["tokens"].shape[1]
        return {"mel_before": mel_before, "mel_after": mel_after, "stop_logits": stop_logits,
                "attention": attention[:, :, :text_len]}  # fmt: skip

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

        Step `t` runs the decoder over the whole buffer (causal, so frames `>= t` do not
        matter) and writes frame `t`; the loop ends when every utterance has stopped.

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
            furthest peak of frames `< t` (see `ModelConfig.infer_window_ahead`).

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
        the alignment head's attention over the memory (B, F, S).

        With the inference window on, `masks` (B, F, S) holds each frame's key mask: row
        `t` is set from the focus before frame `t` is generated and kept after, so
        re-running the decoder over the buffer shows every past frame the keys it had.
        """
        batch, text_len = text_shape
        keep = self.decoder.prenet_keep(batch, max_frames)
        windowed = self.config.infer_window_ahead > 0
        keys = tf.range(memory.shape[1])[None, :]  # (1, S)

        def window(focus):  # (B,) furthest peak so far → bool (B, 1, S)
            near = (keys >= focus[:, None] - self.config.infer_window_back) & (
                keys <= focus[:, None] + self.config.infer_window_ahead)  # fmt: skip
            return (near | (keys >= text_len))[:, None, :] & memory_mask

        def step(t, frames, probs, attention, masks, focus, done):
            at_t = tf.one_hot(t, max_frames)[None]  # (1, F)
            if windowed:
                masks = tf.where(at_t[:, :, None] > 0, window(focus), masks)
            hidden, align = self.decoder(_shift_right(frames), memory, masks, keep)
            now = tf.reshape(t, [1])
            frame, logit = self._heads(tf.gather(hidden, now, axis=1))  # (B, 1, M), (B, 1)
            prob = tf.sigmoid(logit)  # (B, 1)
            frames = frames + at_t[:, :, None] * frame  # frame t was still zero
            row = tf.gather(align, now, axis=1)  # (B, 1, S)
            attention = attention + at_t[:, :, None] * row
            peak = tf.argmax(row[:, 0, :text_len], axis=1, output_type=tf.int32)
            return (t + 1, frames, probs + at_t * prob, attention, masks,
                    tf.maximum(focus, peak), done | (prob[:, 0] > 0.5))  # fmt: skip

        masks = memory_mask
        if windowed:
            masks = tf.tile(memory_mask, [1, max_frames, 1])  # (B, F, S)
        start = (
            tf.constant(0),
            tf.zeros([batch, max_frames, self.config.n_mels]),
            tf.zeros([batch, max_frames]),
            tf.zeros([batch, max_frames, memory.shape[1]]),
            masks,
            tf.zeros([batch], tf.int32),
            tf.zeros([batch], tf.bool),
        )
        _, frames, probs, attention, *_ = tf.while_loop(
            lambda t, *state: ~tf.reduce_all(state[-1]), step, start,
            maximum_iterations=max_frames,
        )  # fmt: skip
        return frames, probs, attention

    def _standardize(self, mel: tf.Tensor) -> tf.Tensor:
        return (tf.cast(mel, tf.float32) - self.config.mel_mean) / self.config.mel_std

    def _heads(self, hidden: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """hidden (B, F, D) → standardised frames (B, F, M), stop logits (B, F); float32."""
        return self.mel_head(hidden), tf.squeeze(self.stop_head(hidden), axis=-1)

    def _outputs(self, before: tf.Tensor, mask: tf.Tensor | None = None,
                 training: bool = False) -> tuple[tf.Tensor, tf.Tensor]:  # fmt: skip
        """Standardised frames (B, F, M) → mel before and after the postnet, in mel units.

        `mask` (B, F) marks real frames: the postnet sees zeros after them, as at the end
        of a buffer, so its output at the last real frames is the same in any bucket.
        """
        after = before + self.postnet(before, mask, training=training)
        scale, mean = self.config.mel_std, self.config.mel_mean
        return before * scale + mean, after * scale + mean

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
