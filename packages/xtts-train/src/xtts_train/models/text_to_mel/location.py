"""Location-relative alignment (`ModelConfig.alignment = "relative"`): a position on the
text that the decoder carries from step to step, and attention biased by each symbol's
distance from it.

After Very Attentive Tacotron (Battenberg et al., NAACL 2025) and the GMM attention of
Battenberg et al. (ICASSP 2020): an alignment layer keeps a position `p` on the text (a
float, in symbols). At decoder step `s`, from the first decoder block's output, it asks
for a move in (0, `move_limit(r)`) symbols (a sigmoid), so the position only goes
forward, by a bounded step, and never stops for good; it never passes the last real
symbol. Its attention over the text is content scores (the same output against the text
encodings) plus a learned bias of each symbol's distance from `p_s`, and every later
decoder block's cross-attention gets, per head, a learned bias of each symbol's distance
from `p_s` too, read from a table by linear interpolation (distances beyond `REACH` take
the table's end values). Content still decides *what* a step reads; the position decides
*where*, so attention cannot jump back or lose its place on a text longer than any clip
it trained on. (A first form moved the position to the attention's expected symbol: after
700 steps it stalled on a symbol and never stopped, a fixed point of frames and position.)

The first block's output also gets a learned vector of the symbols left to say (the last
symbol's index - `p_s`, read from a table by linear interpolation, 0 once the position
holds at the end): the stop head and the later blocks know where the text ends. Without
it the stop token keyed on elapsed time alone and never fired on texts shorter than every
clip ("Sit down.": the position at the end after 14 steps, no stop in 100).

`p_s` is the sum of the moves of the steps before `s`, so training computes every
position at once (an exclusive cumulative sum) and the transformer blocks stay parallel
over the frames; decoding adds one move a step, the position in the loop state beside
the KV cache (`generation.State`), so decoding, streaming and the server's slots share it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import keras
import numpy as np
import tensorflow as tf

from xtts_train.config import RELATIVE_REACH
from xtts_train.models.attention import masked_softmax

if TYPE_CHECKING:
    from xtts_train.config import ModelConfig

__all__ = ["REACH", "Aligner", "last_symbol", "move_limit", "relative_bias"]

REACH = RELATIVE_REACH  # symbols each side that the bias tables tell apart
# Every table starts as a Gaussian of this many symbols about the position (in log
# space): the layers read near it from the first step instead of learning to from zeros.
_START_WIDTH = 1.5
# The move a step asks for at the start, in symbols a frame (speech: 0.1-0.2).
_START_RATE = 0.15


def move_limit(reduction_factor: int) -> float:
    """The most symbols the position moves in one decoder step of `reduction_factor`
    frames: half a symbol a frame (speech runs at 0.1-0.2 symbols a frame at hop 256 and
    22,050 Hz), at least one."""
    return max(1.0, 0.5 * reduction_factor)


def relative_bias(table: tf.Tensor, distance: tf.Tensor) -> tf.Tensor:
    """A bias table read at fractional distances by linear interpolation.

    Args:
        table: float [..., 2 * REACH + 1]: the bias at distances -REACH .. REACH.
        distance: float32 [B, Q, T]: each symbol's distance from the position (symbol
            index - position); beyond +-REACH the table's end values.

    Returns:
        float32 [B, ..., Q, T] (the table's leading axes after the batch).
    """
    at = tf.clip_by_value(distance, -REACH, REACH) + REACH  # (B, Q, T) in [0, 2 REACH]
    bias = _interpolated(table, at, axis=-1)  # (..., B, Q, T)
    leading = table.shape.rank - 1
    if leading == 0:
        return bias
    order = [leading, *range(leading), leading + 1, leading + 2]
    return tf.transpose(bias, order)  # (B, ..., Q, T)


def _interpolated(table: tf.Tensor, at: tf.Tensor, axis: int) -> tf.Tensor:
    """`table` read along `axis` (0 or -1) at fractional indices `at` float32 (in [0,
    width - 1]) by linear interpolation, float32: the indices' shape in place of that
    axis."""
    low = tf.minimum(tf.floor(at), table.shape[axis] - 2)
    share = at - low  # in [0, 1]
    index = tf.cast(low, tf.int32)
    table = tf.cast(table, tf.float32)
    below = tf.gather(table, index, axis=axis)
    above = tf.gather(table, index + 1, axis=axis)
    if axis == 0:  # the table's other axes follow the indices'
        share = tf.reshape(share, [*share.shape, *[1] * (table.shape.rank - 1)])
    return below + (above - below) * share


def last_symbol(text_mask: tf.Tensor) -> tf.Tensor:
    """The index of each row's last real symbol float32 (B, 1) (0 with none), where the
    position stops: text_mask bool (B, T)."""
    return tf.maximum(tf.reduce_sum(tf.cast(text_mask, tf.float32), axis=1, keepdims=True) - 1, 0)


def _bump() -> np.ndarray:
    """A table's start: the log of a Gaussian of `_START_WIDTH` symbols about distance 0,
    float32 [2 REACH + 1]."""
    distance = np.arange(-REACH, REACH + 1, dtype=np.float32)
    return (-np.square(distance) / (2 * _START_WIDTH**2)).astype(np.float32)


class Aligner(keras.layers.Layer):
    """The alignment layer, the cross-attentions' relative bias tables and the symbols-left
    vectors.

    Weights: a query and a key projection (width `d_model // heads`), the alignment
    layer's table (2 REACH + 1), one table per later decoder block and head
    (`decoder_layers - 1, heads, 2 REACH + 1`), and the symbols-left table (REACH + 1,
    d_model), zeros at the start.
    """

    def __init__(self, config: ModelConfig, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        width = config.d_model // config.heads
        self.scale = 1.0 / math.sqrt(width)
        self.limit = move_limit(config.reduction_factor)
        self.norm = keras.layers.LayerNormalization(epsilon=1e-5)
        self.query = keras.layers.Dense(width, name="query")
        # No bias: a key bias adds the same score to every symbol (no gradient, no effect).
        self.key = keras.layers.Dense(width, use_bias=False, name="key")
        share = min(_START_RATE * config.reduction_factor / self.limit, 0.9)
        start_logit = keras.initializers.Constant(math.log(share / (1 - share)))
        self.rate = keras.layers.Dense(1, bias_initializer=start_logit, name="rate")
        self.table = self.add_weight(
            shape=(2 * REACH + 1,), initializer=keras.initializers.Constant(_bump()),
            name="table",
        )  # fmt: skip
        self.ending = self.add_weight(
            shape=(REACH + 1, config.d_model), initializer="zeros", name="ending",
        )  # fmt: skip
        blocks = max(config.decoder_layers - 1, 1)
        start = np.broadcast_to(_bump(), (blocks, config.heads, 2 * REACH + 1))
        self.cross_tables = self.add_weight(
            shape=start.shape, initializer=keras.initializers.Constant(start.copy()),
            name="cross_tables",
        )  # fmt: skip

    def build(self, input_shape: Any) -> None:
        """Marks the layer built; the projections create their weights on the first call."""
        self.built = True

    def keys(self, text: tf.Tensor) -> tf.Tensor:
        """The text encodings (B, T, D) → the alignment layer's keys float32 (B, T, W),
        computed once a decoding."""
        return tf.cast(self.key(text), tf.float32)

    def read(self, hidden: tf.Tensor, keys: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """Decoder states (B, Q, D) → their content scores against `keys` float32 (B, Q,
        T) and the moves they ask for float32 (B, Q), in (0, `move_limit`) symbols."""
        hidden = self.norm(hidden)
        query = tf.cast(self.query(hidden), tf.float32)  # (B, Q, W)
        keys = tf.cast(keys, tf.float32)  # a layer's call casts them to its compute dtype
        content = tf.matmul(query, keys, transpose_b=True) * self.scale
        moves = self.limit * tf.sigmoid(tf.cast(self.rate(hidden), tf.float32))[..., 0]
        return content, moves

    def attend(self, content: tf.Tensor, positions: tf.Tensor,
               text_mask: tf.Tensor) -> tf.Tensor:  # fmt: skip
        """The alignment layer's attention: content scores (B, Q, T) plus the table's bias of
        each symbol's distance from `positions` float32 (B, Q), over the real symbols
        `text_mask` bool (B, T) → float32 (B, Q, T), zero at padding."""
        symbols = tf.range(content.shape[-1], dtype=tf.float32)[None, None, :]  # (1, 1, T)
        logits = content + relative_bias(self.table, symbols - positions[:, :, None])
        return masked_softmax(logits, text_mask[:, None, :])

    def call(self, hidden: tf.Tensor, keys: tf.Tensor, text_mask: tf.Tensor,
             prior: tf.Tensor | None = None) -> tuple[tf.Tensor, tf.Tensor]:  # fmt: skip
        """Teacher forcing: every step's position (the moves of the steps before it, held
        at the last real symbol) and attention.

        Args:
            hidden: (B, S, D), the first decoder block's output at every step.
            keys: float32 (B, T, W) (`keys`); text_mask: bool (B, T).
            prior: float32 (B, S, T) added to the content scores (training's alignment
                prior, `alignment.beta_binomial_prior`), or None.

        Returns:
            The attention float32 (B, S, T) and each step's position float32 (B, S).
        """
        content, moves = self.read(hidden, keys)  # (B, S, T), (B, S)
        if prior is not None:
            content = content + prior
        positions = tf.minimum(tf.cumsum(moves, axis=1, exclusive=True), last_symbol(text_mask))
        return self.attend(content, positions, text_mask), positions

    def step(self, hidden: tf.Tensor, keys: tf.Tensor, text_mask: tf.Tensor,
             position: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:  # fmt: skip
        """One decoding step of `call`: hidden (B, 1, D) at `position` float32 (B,) →
        the step's attention float32 (B, 1, T) and the next step's position (B,)."""
        content, moves = self.read(hidden, keys)
        weights = self.attend(content, position[:, None], text_mask)
        ahead = tf.minimum(position + moves[:, 0], last_symbol(text_mask)[:, 0])
        return weights, ahead

    def left(self, positions: tf.Tensor, text_mask: tf.Tensor) -> tf.Tensor:
        """The vector added to the first block's output at `positions` float32 (B, Q):
        the `ending` table read at the symbols left to the last real symbol of
        `text_mask` bool (B, T) (0 .. REACH, further ones as REACH) by linear
        interpolation → float32 (B, Q, D)."""
        at = tf.clip_by_value(last_symbol(text_mask) - positions, 0.0, REACH)  # (B, Q)
        return _interpolated(self.ending, at, axis=0)

    def cross_bias(self, block: int, positions: tf.Tensor, text_len: int,
                   width: int) -> tf.Tensor:  # fmt: skip
        """Decoder block `block`'s (>= 1) cross-attention bias: float32 (B, N, Q, width),
        each head's table read at every text symbol's distance from `positions` (B, Q);
        zero at the keys after the `text_len` symbols (the speaker latents)."""
        symbols = tf.range(text_len, dtype=tf.float32)[None, None, :]  # (1, 1, T)
        bias = relative_bias(self.cross_tables[block - 1], symbols - positions[:, :, None])
        return tf.pad(bias, [[0, 0], [0, 0], [0, 0], [0, width - text_len]])
