"""The building blocks of `TextToMel`: transformer block, encoders, decoder, postnet.

Each layer creates its sublayers' weights on its first call (`LazyLayer`), so a model is
built by calling it on a small batch (`model.dummy_batch`) instead of a symbolic trace.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import keras
import tensorflow as tf

from xtts_train.models.attention import MultiHeadAttention
from xtts_train.models.dropout import Dropout, keep_mask, next_seed, quantized_rate
from xtts_train.models.text_to_mel.location import Aligner

if TYPE_CHECKING:
    from xtts_train.config import ModelConfig

__all__ = [
    "Block",
    "CondEncoder",
    "Decoder",
    "LazyLayer",
    "Postnet",
    "TextEncoder",
    "key_mask",
    "positions",
]


def positions(x: tf.Tensor, start: tf.Tensor | int = 0) -> tf.Tensor:
    """Sinusoidal position encodings of positions `start ..` for the static length of `x`
    (B, T, D) → (1, T, D); with `start` int32 (B,), one start per row → (B, T, D)."""
    if isinstance(start, tf.Tensor) and start.shape.rank == 1:  # decoder slots (`step`)
        return tf.concat([positions(x[:1], start[b]) for b in range(start.shape[0])], axis=0)
    length, dim = tf.shape(x)[1], x.shape[-1]
    half = dim // 2
    steps = tf.cast(tf.range(length) + start, tf.float32)[:, None]  # (T, 1)
    freqs = tf.exp(-math.log(10000.0) * tf.range(half, dtype=tf.float32) / half)[None, :]
    angles = steps * freqs  # (T, D/2)
    table = tf.concat([tf.sin(angles), tf.cos(angles)], axis=-1)
    table = tf.pad(table, [[0, 0], [0, dim - 2 * half]])  # odd D: one zero channel
    return tf.cast(table[None], x.dtype)


def random_start(seed_generator: keras.random.SeedGenerator | None, most: int) -> tf.Tensor | int:
    """Where a training batch's positions start, the text's and the decoder's alike: an
    int32 scalar drawn uniformly from `[0, most]` (moving `seed_generator`, which the
    checkpoint keeps), or 0 without one. One offset for both keeps what sinusoidal
    encodings tell attention, the distance between a step and a symbol."""
    if seed_generator is None:
        return 0
    seed = next_seed(seed_generator)
    return tf.random.stateless_uniform([], seed, minval=0, maxval=most + 1, dtype=tf.int32)


def key_mask(mask: tf.Tensor) -> tf.Tensor:
    """Attention mask letting every query see the real keys: (B, S) → bool (B, 1, S)."""
    return mask[:, None, :] > 0


class LazyLayer(keras.layers.Layer):
    """A layer whose sublayers create their weights on the first call (no symbolic trace).

    Sublayers kept in lists are checkpoint children too, as `{attribute}_{index}`: Keras 3
    tracks list attributes for its own weight lists but does not give them to TensorFlow's
    checkpoint graph, so without this a `tf.train.Checkpoint` of the model would miss
    their weights.
    """

    def build(self, input_shape: Any) -> None:
        self.built = True

    def _trackable_children(self, save_type: str = "checkpoint", **kwargs: Any) -> dict:
        children = super()._trackable_children(save_type, **kwargs)
        if save_type == "checkpoint":
            for name in self._tracked:
                value = getattr(self, name)
                if isinstance(value, list | tuple):
                    for index, item in enumerate(value):
                        if isinstance(item, tf.__internal__.tracking.Trackable):
                            children.setdefault(f"{name}_{index}", item)
        return children


class Block(LazyLayer):
    """Pre-norm transformer block: self-attention (causal: each position sees the ones
    before it), optional cross-attention, feed-forward. The self-attention is computed
    `config.attention_block` queries at a time in training (`models.attention`)."""

    def __init__(self, config: ModelConfig, *, cross: bool = False, causal: bool = False,
                 **kwargs: Any) -> None:  # fmt: skip
        super().__init__(**kwargs)
        d, heads = config.d_model, config.heads
        self.causal = causal
        self.self_norm = keras.layers.LayerNormalization(epsilon=1e-5)
        self.self_attn = MultiHeadAttention(
            heads, d // heads, dropout=config.dropout, block=config.attention_block,
            causal=causal,
        )  # fmt: skip
        self.cross_norm = keras.layers.LayerNormalization(epsilon=1e-5) if cross else None
        self.cross_attn = (
            MultiHeadAttention(heads, d // heads, dropout=config.dropout) if cross else None
        )
        self.ff_norm = keras.layers.LayerNormalization(epsilon=1e-5)
        self.ff_in = keras.layers.Dense(d * config.ff_mult, activation="gelu")
        self.ff_out = keras.layers.Dense(d)
        self.drop = Dropout(config.dropout)

    def call(self, x, *, self_mask=None, memory=None, memory_mask=None, memory_bias=None,
             return_attention=False, training=False):  # fmt: skip
        """x: (B, T, D); self_mask: bool (B, 1|T, T); memory: (B, S, D), memory_mask (B, 1, S);
        memory_bias: float32 (B, heads, T, S) added to the cross-attention's scores, or None.

        Returns (B, T, D), and with `return_attention` also the cross-attention
        probabilities (B, heads, T, S) (before attention dropout).
        """
        h = self.self_norm(x)
        h = self.self_attn(
            h, h, attention_mask=self_mask, use_causal_mask=self.causal, training=training
        )
        x = x + self.drop(h, training=training)
        probs = None
        if self.cross_attn is not None:
            h = self.cross_norm(x)
            if memory_bias is None:
                h, probs = self.cross_attn(
                    h, memory, attention_mask=memory_mask, return_attention_scores=True,
                    training=training,
                )  # fmt: skip
            else:  # location-relative: Keras's attention takes no bias
                if not self.cross_attn.built:
                    self.cross_attn.build(h.shape, memory.shape)
                h, probs = self.cross_attn.attend(h, *self.cross_attn.keys_values(memory),
                                                  memory_mask, memory_bias, training)  # fmt: skip
            x = x + self.drop(h, training=training)
        h = self.drop(self.ff_in(self.ff_norm(x)), training=training)
        x = x + self.drop(self.ff_out(h), training=training)  # (B, T, D)
        return (x, probs) if return_attention else x

    def step(self, x, position, cache, memory_kv, memory_mask, memory_bias=None):
        """One position of a causal cross-attending block in a decoding, its past read
        from `cache` instead of recomputed: what `call` computes at `position`.

        Args:
            x: (B, 1, D), the block's input at `position` (int32 scalar, or int32 (B,):
                one a row, decoder slots).
            cache: keys and values of the self-attention, head-major (B, N, P, H), P the
                positions of the buffer; positions before `position` written.
            memory_kv: the cross-attention's keys and values of the memory
                (`MultiHeadAttention.keys_values`); memory_mask: bool (B, 1, S);
                memory_bias: float32 (B, N, 1, S) or None, as `call`'s.

        Returns:
            (B, 1, D), the cross-attention probabilities (B, N, 1, S), and `cache` with
            `position` written.
        """
        at = tf.reshape(position, [-1, 1])  # (B|1, 1)
        seen = (tf.range(cache[0].shape[2])[None, :] < at)[:, None, :]  # (B|1, 1, P)
        out, cache = self.self_attn.attend_cached(self.self_norm(x), cache, seen)
        x = x + out
        out, probs = self.cross_attn.attend(self.cross_norm(x), *memory_kv, memory_mask,
                                            memory_bias)  # fmt: skip
        x = x + out
        x = x + self.ff_out(self.ff_in(self.ff_norm(x)))  # (B, 1, D)
        return x, probs, cache


class TextEncoder(LazyLayer):
    """Token ids → encodings: embedding, masked residual convs, transformer blocks."""

    def __init__(self, config: ModelConfig, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        d = config.d_model
        self.scale = math.sqrt(d)
        self.embedding = keras.layers.Embedding(config.vocab_size, d)
        self.conv_norms = [
            keras.layers.LayerNormalization(epsilon=1e-5) for _ in range(config.text_convs)
        ]
        self.convs = [
            keras.layers.Conv1D(d, config.conv_kernel, padding="same", activation="relu")
            for _ in range(config.text_convs)
        ]
        self.blocks = [Block(config, name=f"block_{i}") for i in range(config.text_layers)]
        self.norm = keras.layers.LayerNormalization(epsilon=1e-5)
        self.drop = Dropout(config.dropout)

    def call(self, tokens, token_mask, training=False, start=0):
        """tokens: int32 (B, T); token_mask: (B, T) → (B, T, D), zero at padding; the
        positions count from `start` (`random_start` in training with
        `model.random_positions`)."""
        x = self.embedding(tokens) * self.scale  # (B, T, D)
        keep = tf.cast(token_mask, x.dtype)[:, :, None]  # (B, T, 1)
        x = x * keep
        for norm, conv in zip(self.conv_norms, self.convs, strict=True):
            # Zero the padding before each conv so real positions never see pad tokens.
            x = (x + self.drop(conv(norm(x) * keep), training=training)) * keep
        x = x + positions(x, start)
        for block in self.blocks:
            x = block(x, self_mask=key_mask(token_mask), training=training)
        return self.norm(x) * keep


class CondEncoder(LazyLayer):
    """Reference mel → `cond_latents` speaker latents: convs, transformer, attention pooling."""

    def __init__(self, config: ModelConfig, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        d, heads = config.d_model, config.heads
        self.convs = [
            keras.layers.Conv1D(d, config.conv_kernel, padding="same", activation="relu")
            for _ in range(config.cond_convs)
        ]
        self.blocks = [Block(config, name=f"block_{i}") for i in range(config.cond_layers)]
        self.norm = keras.layers.LayerNormalization(epsilon=1e-5)
        self.latents = self.add_weight(
            shape=(config.cond_latents, d),
            initializer=keras.initializers.RandomNormal(stddev=0.02),
            name="latents",
        )
        self.pool = keras.layers.MultiHeadAttention(heads, d // heads)
        self.pool_norm = keras.layers.LayerNormalization(epsilon=1e-5)
        self.drop = Dropout(config.dropout)

    def call(self, cond_mel, cond_mask, training=False):
        """cond_mel: standardised (B, C, M); cond_mask: (B, C) → latents (B, L, D)."""
        x = cond_mel
        keep = tf.cast(cond_mask, x.dtype)[:, :, None]  # (B, C, 1)
        for conv in self.convs:
            x = self.drop(conv(x * keep), training=training)  # (B, C, D)
        x = x * keep + positions(x)
        mask = key_mask(cond_mask)  # (B, 1, C)
        for block in self.blocks:
            x = block(x, self_mask=mask, training=training)
        x = self.norm(x)
        latents = tf.cast(self.latents, x.dtype)[None]  # (1, L, D)
        queries = tf.tile(latents, [tf.shape(x)[0], 1, 1])  # (B, L, D)
        pooled = self.pool(queries, x, attention_mask=mask, training=training)
        return self.pool_norm(queries + pooled)  # (B, L, D)


class Decoder(LazyLayer):
    """Previous frames + memory → hidden states: prenet, causal cross-attending blocks."""

    def __init__(self, config: ModelConfig, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rate = config.prenet_dropout
        self.prenet_dim = config.prenet_dim
        self.prenet = [keras.layers.Dense(config.prenet_dim, activation="relu") for _ in range(2)]
        self.seed = keras.random.SeedGenerator()
        self.project = keras.layers.Dense(config.d_model)
        pitch = config.voice_pitch  # the voice's pitch (`frames.pitch_stats`), projected
        self.pitch = keras.layers.Dense(config.d_model, name="pitch") if pitch else None
        self.blocks = [
            Block(config, cross=True, causal=True, name=f"block_{i}")
            for i in range(config.decoder_layers)
        ]
        self.norm = keras.layers.LayerNormalization(epsilon=1e-5)
        self.latents = config.cond_latents
        # `model.alignment: relative`: a position on the text carried from step to step.
        self.aligner = Aligner(config, name="aligner") if config.alignment == "relative" else None

    def prenet_keep(self, batch: int, frames: int) -> tf.Tensor:
        """Scaled dropout keep-masks of the two prenet layers in training: (2, B, F,
        prenet_dim), drawn once per sequence (decoding, `step`, has no prenet dropout)."""
        shape = (2, batch, frames, self.prenet_dim)
        rate = quantized_rate(self.rate)
        if rate == 0.0:
            return tf.ones(shape, self.compute_dtype)
        keep = keep_mask(shape, self.rate, self.seed)
        return tf.cast(keep, self.compute_dtype) / (1.0 - rate)

    def call(self, frames_in, memory, memory_mask, keep, pitch=None, training=False, start=0,
             prior=None):  # fmt: skip
        """frames_in: (B, F, M) shifted frames; memory (B, S, D); memory_mask bool (B, 1, S);
        keep: `prenet_keep` (2, B, F, P); start: the first step's position (the text's
        `start`, in training with `model.random_positions`); pitch: the voice's (B, 1, 2) with
        `model.voice_pitch` (`frames.pitch_stats`); prior: float32 (B, F, T) added to the
        alignment's scores in training (`alignment.beta_binomial_prior`, F here the
        steps) or None → hidden (B, F, D), and the alignment head's cross-attention over
        the memory (head 0 of every block, averaged over blocks),
        float32 (B, F, S). That head is the one the guided-attention loss shapes; the
        other heads are free to read the speaker latents. With `model.alignment: relative`
        the alignment is the alignment layer's attention instead (`location`; zero on
        the latents), the first block's output gets the vector of the symbols left after its
        position (`Aligner.left`) and the later blocks attend relative to it."""
        x = frames_in
        for layer, layer_keep in zip(self.prenet, tf.unstack(keep), strict=True):
            x = layer(x) * tf.cast(layer_keep, self.compute_dtype)  # (B, F, P)
        memory = tf.cast(memory, self.compute_dtype)
        x = self.project(x) + self.pitch_term(pitch)  # (B, F, D)
        x = x + positions(x, start)
        attention, places, width = [], None, memory.shape[1]
        text_len = width - self.latents
        head_prior = None  # the prior on head 0 of every block (content alignment)
        if prior is not None and self.aligner is None:
            heads = self.blocks[0].cross_attn.num_heads
            head_prior = tf.pad(prior[:, None], [[0, 0], [0, heads - 1], [0, 0],
                                                 [0, self.latents]])  # fmt: skip
        for index, block in enumerate(self.blocks):
            bias = head_prior if places is None else self.aligner.cross_bias(
                index, places, text_len, width)  # fmt: skip
            x, probs = block(x, memory=memory, memory_mask=memory_mask, memory_bias=bias,
                             return_attention=True, training=training)  # fmt: skip
            attention.append(tf.cast(probs[:, 0], tf.float32))  # (B, F, S)
            if index == 0 and self.aligner is not None:
                keys = self.aligner.keys(memory[:, :text_len])  # (B, T, W)
                weights, places = self.aligner(x, keys, memory_mask[:, 0, :text_len], prior)
                attention = [tf.pad(weights, [[0, 0], [0, 0], [0, self.latents]])]
                x = x + tf.cast(self.aligner.left(places, memory_mask[:, 0, :text_len]), x.dtype)
        if self.aligner is not None:
            return self.norm(x), attention[0]
        return self.norm(x), tf.add_n(attention) / len(attention)

    def pitch_term(self, pitch: tf.Tensor | None = None) -> tf.Tensor:
        """The pitch term every input frame gets: with `model.voice_pitch` the voice's `pitch`
        (B, 1, 2), projected (B, 1, D); zeros (1, 1, D) without (the cross-attention reads
        the rest of the voice from the speaker latents).

        Raises:
            ValueError: `model.voice_pitch` is on and no `pitch` was given.
        """
        term = tf.zeros([1, 1, self.project.units], self.compute_dtype)
        if self.pitch is not None:
            if pitch is None:
                raise ValueError("Expected the voice's pitch (B, 1, 2) with model.voice_pitch")
            term = term + self.pitch(pitch)  # (B, 1, D)
        return term

    def start(self, memory: tf.Tensor, steps: int,
              pitch: tf.Tensor | None = None,
              ) -> tuple[list, list, tf.Tensor, tf.Tensor]:  # fmt: skip
        """What a decoding of `steps` steps keeps between them (`step`): every block's
        empty self-attention cache, zeros (B, N, steps, H) keys and values, the
        cross-attention's keys and values of `memory` (B, S, D), computed once, the
        voice of every input frame (`pitch_term`, with the voice's `pitch`), and the
        alignment layer's keys of the text float32 (B, T, W) (`model.alignment:
        relative`; else (B, T, 0): none)."""
        memory_kvs, keys = self.read_memory(memory)
        return self.empty_caches(memory.shape[0], steps), memory_kvs, self.pitch_term(pitch), keys

    def empty_caches(self, batch: int, steps: int) -> list:
        """Every block's empty self-attention cache for `steps` steps of `batch` rows: zeros
        (B, N, steps, H) keys and values (`start`'s)."""
        caches = []
        for block in self.blocks:
            attn = block.self_attn
            shape = [batch, attn.num_heads, steps, attn.key_dim]
            caches.append((tf.zeros(shape, self.compute_dtype),) * 2)
        return caches

    def read_memory(self, memory: tf.Tensor) -> tuple[list, tf.Tensor]:
        """What every step reads of `memory` (B, S, D) (`start`'s): each block's
        cross-attention keys and values, and the alignment layer's keys of the text
        float32 (B, T, W) ((B, T, 0) without one)."""
        memory = tf.cast(memory, self.compute_dtype)
        memory_kvs = [block.cross_attn.keys_values(memory) for block in self.blocks]
        text = memory[:, : memory.shape[1] - self.latents]  # (B, T, D)
        keys = tf.zeros([*text.shape[:2], 0]) if self.aligner is None else self.aligner.keys(text)
        return memory_kvs, keys

    def step(self, frame, position, caches, memory_kvs, memory_mask, pitch_term,
             aligned=None):  # fmt: skip
        """Decoding step `position` (int32 scalar, or int32 (B,): one a row, decoder slots):
        what `call` computes at that position, each block's past read from its cache
        (`start`).

        Args:
            frame: (B, 1, M), the step's input (the last frame of the group before; zeros
                at step 0).
            caches, memory_kvs, pitch_term: as `start` returns them (the caches as the last step
                left them); memory_mask: bool (B, 1, S), this step's key mask of the memory.
            aligned: with `model.alignment: relative`, the alignment layer's keys (`start`),
                the real text symbols bool (B, T) and this step's position float32 (B,)
                (the moves of the steps before it); else None.

        Returns:
            hidden (B, 1, D), the alignment row float32 (B, 1, S) (as `call`'s), the
            caches with `position` written, and the next step's alignment position
            float32 (B,) (None without an aligner).
        """
        x = frame
        for layer in self.prenet:  # no dropout: decoding is deterministic
            x = layer(x)  # (B, 1, P)
        x = self.project(x) + pitch_term  # (B, 1, D)
        x = x + positions(x, position)
        written, attention, place = [], [], None
        width = memory_mask.shape[-1]
        for index, (block, cache, memory_kv) in enumerate(
                zip(self.blocks, caches, memory_kvs, strict=True)):  # fmt: skip
            bias = None
            if place is not None:  # this step's position (`aligned`'s), not the next one
                at = aligned[2][:, None]  # (B, 1)
                bias = self.aligner.cross_bias(index, at, width - self.latents, width)
            x, probs, cache = block.step(x, position, cache, memory_kv, memory_mask, bias)
            written.append(cache)
            attention.append(tf.cast(probs[:, 0], tf.float32))  # (B, 1, S)
            if index == 0 and self.aligner is not None:
                weights, place = self.aligner.step(x, *aligned)  # (B, 1, T), (B,)
                attention = [tf.pad(weights, [[0, 0], [0, 0], [0, self.latents]])]
                left = self.aligner.left(aligned[2][:, None], aligned[1])  # (B, 1, D)
                x = x + tf.cast(left, x.dtype)
        if self.aligner is not None:
            return self.norm(x), attention[0], written, place
        return self.norm(x), tf.add_n(attention) / len(attention), written, None


class Postnet(LazyLayer):
    """Residual conv postnet: (B, F, M) → correction (B, F, M).

    Attributes:
        context_frames: frames each side that one output frame reads,
            `postnet_layers * (postnet_kernel // 2)` (each conv sees `kernel // 2`).
    """

    def __init__(self, config: ModelConfig, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        k, channels = config.postnet_kernel, config.postnet_channels
        self.context_frames = config.postnet_layers * (k // 2)
        self.convs = [
            keras.layers.Conv1D(channels, k, padding="same", activation="tanh")
            for _ in range(config.postnet_layers - 1)
        ]
        self.out = keras.layers.Conv1D(config.n_mels, k, padding="same", dtype="float32")
        self.drop = Dropout(config.dropout)

    def call(self, x, frame_mask=None, training=False):
        """x: (B, F, M); frame_mask: (B, F) real frames or None. With one, every conv sees
        zeros after the real frames (as at the end of the buffer), so the output at real
        frames does not depend on how much padding follows. (Not named `mask`: Keras would
        take that argument for its own masking.)"""
        keep = 1.0 if frame_mask is None else tf.cast(frame_mask, x.dtype)[:, :, None]
        x = x * keep
        for conv in self.convs:
            x = self.drop(conv(x), training=training) * keep
        return self.out(x)
