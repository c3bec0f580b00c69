"""`TextToMel`: an XTTS-style autoregressive text-to-mel transformer (sizes: `ModelConfig`).

```
tokens ─ embedding ─ conv prenet ─ transformer ──────────────┐ (B, T_text, D)
cond_mel ─ conv stack ─ transformer ─ pool into L latents ───┤ (B, L, D)
                                                   memory = concat ─┐
mel shifted right ─ prenet ─ causal self-attn + cross-attn(memory) ─┴─ hidden (B, F, D)
hidden ─ mel head ─ mel_before ─ postnet (residual) ─ mel_after
hidden ─ stop head ─ stop_logits
```
With `ModelConfig.voice_stats` the decoder reads and its heads write frames normalised by
the reference clip's per-channel mean (and deviation), moved back before the postnet
(`frames.clip_stats`), and the conditioning encoder reads the clip normalised the same
way: the clip's statistics set the voice's spectral statistics, by that path alone.
With `voice_stats_source="utterance"` teacher forcing normalises by the spoken
utterance's own statistics instead, so the decoder learns to write frames with the
statistics it is given (inference still gives it the clip's). With `ModelConfig.voice_pitch`
every decoder input frame also gets the voice's pitch (`frames.pitch_stats`) from the same
frames: the utterance's in teacher forcing with `voice_stats_source="utterance"`, else the
clip's. How the model decodes (the loop's window, stop gate and prenet dropout; the
postfilters after it) is not the model's: free-running
decoding is `free_running`'s functions of a model and a `DecodeConfig`
(`postfilters.decode_frames` is the whole of it).
With a reduction factor `r > 1` the decoder runs one step per group of `r` frames: step
`s` reads the last frame of group `s - 1` and its heads write all `r` frames of group `s`
(the arithmetic: `frames`). Training (`call`) and decoding (`free_running.infer`) run the
same decoder; decoding fills a fixed-size frame buffer in a `tf.while_loop`
(`generation`), so both compile with XLA at static shapes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import keras
import tensorflow as tf

from xtts_audio import MelConfig
from xtts_train.config import ModelConfig
from xtts_train.errors import ConfigError
from xtts_train.models import dropout
from xtts_train.models.features import from_standard, standardize
from xtts_train.models.text_to_mel.alignment import beta_binomial_prior
from xtts_train.models.text_to_mel.frames import (
    clip_mask,
    clip_stats,
    denormalize_by,
    normalize_by,
    per_frame,
    pitch_stats,
    step_inputs,
)
from xtts_train.models.text_to_mel.layers import (
    CondEncoder,
    Decoder,
    Postnet,
    TextEncoder,
    key_mask,
    random_start,
)

__all__ = ["TextToMel", "dummy_batch", "join_memory"]

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


def join_memory(text: tf.Tensor, token_mask: tf.Tensor,
                latents: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:  # fmt: skip
    """The decoder's memory [B, T + L, D]: text encodings [B, T, D] then speaker latents
    [B, L, D], and its key mask bool [B, 1, T + L] (token_mask float32 [B, T]; latents
    are always real)."""
    memory = tf.concat([text, tf.cast(latents, text.dtype)], axis=1)  # (B, T + L, D)
    latent_mask = tf.ones(tf.shape(latents)[:2], tf.float32)
    mask = tf.concat([tf.cast(token_mask, tf.float32), latent_mask], axis=1)
    return memory, key_mask(mask)


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
        audio: the recipe of the features it reads; needed (for `mel_pitch`) with
            `ModelConfig.voice_pitch`.

    Raises:
        ConfigError: no `ModelConfig`, or `voice_pitch` on without an `audio` recipe of
            the model's `n_mels`.
    """

    def __init__(self, config: ModelConfig, audio: MelConfig | None = None,
                 **kwargs: Any) -> None:  # fmt: skip
        if not isinstance(config, ModelConfig):
            raise ConfigError(f"Expected a ModelConfig, received: config={config!r}")
        if config.voice_pitch and (audio is None or audio.n_mels != config.n_mels):
            raise ConfigError(
                f"Expected the features' audio recipe with n_mels={config.n_mels} for "
                f"model.voice_pitch=true (it reads pitch off the mel bins), received: "
                f"audio={audio!r}. Pass TextToMel(config, audio=stack.audio)"
            )
        super().__init__(**kwargs)
        self.config = config
        self.audio = audio
        self.text_encoder = TextEncoder(config, name="text_encoder")
        self.cond_encoder = CondEncoder(config, name="cond_encoder")
        self.decoder = Decoder(config, name="decoder")
        r = config.reduction_factor  # each decoder step writes r frames
        self.mel_head = keras.layers.Dense(r * config.n_mels, dtype="float32", name="mel_head")
        self.stop_head = keras.layers.Dense(r, dtype="float32", name="stop_head")
        self.postnet = Postnet(config, name="postnet")
        # `ModelConfig.random_positions`: each training batch's positions start at a draw.
        self.offsets = keras.random.SeedGenerator() if config.random_positions else None
        # `ModelConfig.own_frames`: which steps read the first pass's frames, a draw a batch.
        self.own_draws = keras.random.SeedGenerator() if config.own_frames else None

    def build(self, input_shape: Any) -> None:
        """Marks the model built; each sublayer creates its weights on the first call."""
        self.built = True

    def call(self, batch: Mapping[str, tf.Tensor], training: bool = False,
             prenet_dropout: bool = True, prior: bool = False) -> dict[str, tf.Tensor]:  # fmt: skip
        """Teacher-forced prediction of every frame of `batch["mel"]` from the frames before it.

        Args:
            batch: `DatasetSpec` fields; reads `tokens` int32 [B, T], `token_mask` float32
                [B, T], `mel` float32 [B, F, M], `cond_mel` float32 [B, C, M],
                `cond_lengths` int32 [B], and `mel_mask` [B, F] when present (the postnet
                then sees zeros after the real frames). Shapes must be static.
            training: dropout on (the prenet's dropout is on in any case, unless
                `prenet_dropout` is false).
            prenet_dropout: false: the prenet keeps every unit, as in free-running
                decoding (ground-truth-aligned frames, `inference.aligned`).
            prior: add the log of the beta-binomial alignment prior
                (`alignment.beta_binomial_prior`, from the masks' lengths) to the
                alignment's scores: head 0 of every cross-attention, or the alignment
                layer's with `ModelConfig.alignment: relative`. Training only: decoding
                does not know the length.

        Returns:
            `mel_before` and `mel_after` (postnet) float32 [B, F, M], `stop_logits` float32
            [B, F], and `attention` float32 [B, F, T]: the decoder's alignment head
            (head 0 of each block, averaged) over the text; the rest of each row went to
            the speaker latents. Frame `t` depends only on frames `< t` before the
            postnet; the postnet looks `Postnet.context_frames` frames ahead.

        Raises:
            ConfigError: a missing field, or mels with another `n_mels` than the config.
        """
        _check_batch(batch, self.config)
        start = random_start(self.offsets if training else None, self.config.random_positions)
        memory, memory_mask, stats = self.encode(
            batch["tokens"], batch["token_mask"], batch["cond_mel"], batch["cond_lengths"],
            training=training, start=start,
        )  # fmt: skip
        frames = standardize(batch["mel"])  # (B, F, M)
        spoken = tf.cast(batch.get("mel_mask", tf.ones(frames.shape[:2])), tf.float32)
        if self.config.voice_stats_source == "utterance":  # its own statistics and pitch
            stats = self._frame_stats(frames, spoken)
            pitch = self._pitch(batch["mel"], spoken)
        else:
            pitch = self.clip_pitch(batch["cond_mel"], batch["cond_lengths"])
        if stats is not None:
            frames = normalize_by(frames, stats)
        count, r = frames.shape[1], self.config.reduction_factor
        inputs = step_inputs(frames, r)  # (B, S, M), S = ceil(F / r)
        if prenet_dropout:
            keep = self.decoder.prenet_keep(frames.shape[0], inputs.shape[1])
        else:  # no draw: the seed states stay where they are
            keep = tf.ones([2, frames.shape[0], inputs.shape[1], self.decoder.prenet_dim],
                           self.decoder.compute_dtype)  # fmt: skip
        log_prior = None
        if prior:
            log_prior = beta_binomial_prior(batch["token_mask"], spoken, reduction_factor=r)
        if training and self.own_draws is not None:
            inputs = self._with_own_frames(inputs, memory, memory_mask, keep, pitch, start,
                                           log_prior, count)  # fmt: skip
        hidden, attention = self.decoder(inputs, memory, memory_mask, keep, pitch,
                                         training=training, start=start,
                                         prior=log_prior)  # fmt: skip
        before, stop_logits = self.heads(hidden, count)  # (B, F, M), (B, F)
        if stats is not None:
            before = denormalize_by(before, stats)
        mel_before, mel_after = self.to_mel(before, batch.get("mel_mask"), training=training)
        text_len = batch["tokens"].shape[1]
        attention = per_frame(attention, count, r)[:, :, :text_len]  # (B, F, T)
        return {"mel_before": mel_before, "mel_after": mel_after, "stop_logits": stop_logits,
                "attention": attention}  # fmt: skip

    def _with_own_frames(self, inputs, memory, memory_mask, keep, pitch, start, log_prior,
                         count):  # fmt: skip
        """`ModelConfig.own_frames`: the decoder inputs (B, S, M) with each step's frame
        replaced, with that probability, by the model's own teacher-forced prediction of
        it (a first pass of the decoder and mel head, without gradients)."""
        first, _ = self.decoder(inputs, memory, memory_mask, keep, pitch, training=True,
                                start=start, prior=log_prior)  # fmt: skip
        own, _ = self.heads(first, count)  # (B, F, M), the frames' space
        own = tf.stop_gradient(step_inputs(own, self.config.reduction_factor))  # (B, S, M)
        truth = dropout.keep_mask(inputs.shape[:2], self.config.own_frames, self.own_draws)
        return tf.where(truth[:, :, None], inputs, tf.cast(own, inputs.dtype))

    def encode(self, tokens, token_mask, cond_mel, cond_lengths, training=False, start=0):
        """The decoder's memory: text encodings followed by the speaker latents.

        Args:
            tokens: int32 [B, T]; token_mask: float32 [B, T];
            cond_mel: float32 [B, C, M] reference mel; cond_lengths: int32 [B] real frames.
            start: the text's first position (`layers.random_start` in training).

        Returns:
            memory [B, T + L, D], its attention mask bool [B, 1, T + L], and the clip's
            statistics that the decoder's frames are normalised by (`frames.clip_stats`:
            float32 [B, 2, M]; None with `ModelConfig.voice_stats` off).
        """
        text = self.text_encoder(tokens, token_mask, training=training, start=start)  # (B, T, D)
        latents, stats = self.voice(cond_mel, cond_lengths, training=training)
        memory, memory_mask = join_memory(text, token_mask, latents)
        return memory, memory_mask, stats

    def voice(self, cond_mel: tf.Tensor, cond_lengths: tf.Tensor,
              training: bool = False) -> tuple[tf.Tensor, tf.Tensor | None]:  # fmt: skip
        """What the reference clip gives a decoding: its speaker latents [B, L, D] and
        statistics (`frames.clip_stats`, float32 [B, 2, M]; None with
        `ModelConfig.voice_stats` off), from cond_mel float32 [B, C, M] and cond_lengths
        int32 [B] (`encode`'s)."""
        cond_mask = clip_mask(cond_mel, cond_lengths)  # (B, C)
        cond = standardize(cond_mel)  # (B, C, M)
        stats = self._frame_stats(cond, cond_mask)  # (B, 2, M) | None
        if stats is not None:  # the clip's statistics reach the frames by this path alone
            cond = normalize_by(cond, stats)
        return self.cond_encoder(cond, cond_mask, training=training), stats  # (B, L, D)

    def _frame_stats(self, cond: tf.Tensor, cond_mask: tf.Tensor) -> tf.Tensor | None:
        """`frames.clip_stats` of the standardised clip (B, C, M) as `ModelConfig.voice_stats`
        asks (None: off)."""
        if self.config.voice_stats == "off":
            return None
        return clip_stats(cond, cond_mask)

    def _pitch(self, mel: tf.Tensor, mask: tf.Tensor) -> tf.Tensor | None:
        """`frames.pitch_stats` (B, 1, 2) of mel (B, F, M), mask (B, F) with
        `ModelConfig.voice_pitch` (None: off)."""
        if not self.config.voice_pitch:
            return None
        return pitch_stats(mel, mask, self.audio)

    def clip_pitch(self, cond_mel: tf.Tensor, cond_lengths: tf.Tensor) -> tf.Tensor | None:
        """`frames.pitch_stats` (B, 1, 2) of a reference clip (B, C, M) over its real
        frames (cond_lengths int32 [B]) with `ModelConfig.voice_pitch` (None: off)."""
        return self._pitch(cond_mel, clip_mask(cond_mel, cond_lengths))

    def build_weights(self) -> None:
        """Creates the weights on a tiny batch if needed: not inside a decoding's loop."""
        if not self.mel_head.built:
            self(dummy_batch(self.config))

    def heads(self, hidden: tf.Tensor, frames: int) -> tuple[tf.Tensor, tf.Tensor]:
        """hidden (B, S, D) → the first `frames` of the `S * r` standardised frames they
        write (B, frames, M) and their stop logits (B, frames); float32."""
        count = hidden.shape[1] * self.config.reduction_factor
        mel = tf.reshape(self.mel_head(hidden), [-1, count, self.config.n_mels])
        stop = tf.reshape(self.stop_head(hidden), [-1, count])
        return mel[:, :frames], stop[:, :frames]

    def to_mel(self, before: tf.Tensor, mask: tf.Tensor | None = None,
                 training: bool = False) -> tuple[tf.Tensor, tf.Tensor]:  # fmt: skip
        """Standardised frames (B, F, M) → mel before and after the postnet, in mel units.

        `mask` (B, F) marks real frames: the postnet sees zeros after them, as at the end
        of a buffer, so its output at the last real frames is the same in any bucket.
        """
        after = before + self.postnet(before, mask, training=training)
        return from_standard(before), from_standard(after)

    def seed_states(self) -> list[tf.Variable]:
        """The dropout layers' seed states (`xtts_train.models.dropout.seed_states`)."""
        return dropout.seed_states(self)

    def parameter_count(self) -> int:
        """Trainable parameters (builds the model on a tiny batch first if needed)."""
        return sum(count for _, count in _component_counts(self))

    def describe(self) -> str:
        """Trainable parameters per component, one line each, then the total."""
        rows = [f"{name:<14}{count:>14,}" for name, count in _component_counts(self)]
        return "\n".join([*rows, f"{'total':<14}{self.parameter_count():>14,}"])


def _component_counts(model: TextToMel) -> list[tuple[str, int]]:
    """(component, trainable parameters) of `model`, built on a tiny batch first if needed."""
    if not model.mel_head.built:
        model(dummy_batch(model.config))
    components = {
        "text_encoder": [model.text_encoder],
        "cond_encoder": [model.cond_encoder],
        "decoder": [model.decoder],
        "heads": [model.mel_head, model.stop_head],
        "postnet": [model.postnet],
    }
    return [
        (name, sum(math.prod(w.shape) for layer in layers for w in layer.trainable_weights))
        for name, layers in components.items()
    ]
