"""Multi-head attention whose training memory grows linearly in the sequence length.

Keras's attention keeps every layer's `[B, heads, T, S]` probabilities and dropout mask for
the backward pass: quadratic in the frames, 7 GiB for the `base` decoder at LJSpeech's
longest bucket. With `block > 0` the queries are taken `block` at a time and each block is
a `tf.recompute_grad` checkpoint (Rabe & Staats, "Self-attention does not need O(n²)
memory", 2021): the forward pass keeps only its inputs and output, and the backward pass
recomputes one block's scores at a time. A causal block stops at its last query's key, so
the blocks together compute about half the scores of the dense product.

The recomputation must draw the dropout mask the forward pass drew, so a block's mask comes
from a stateless seed: the layer's seed generator moves once per call (as Keras's dense
path does) and each block folds its index into that seed (`seeded_keep_mask`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import keras
import tensorflow as tf
from tensorflow.compiler.tf2xla.python.xla import dynamic_update_slice

from xtts_train.errors import ConfigError
from xtts_train.models.dropout import (
    Dropout,
    dropped,
    next_seed,
    quantized_rate,
    seeded_keep_mask,
)

__all__ = ["HEADS_FIRST", "MultiHeadAttention", "blocked_attention", "masked_softmax", "write_rows"]

HEADS_FIRST = [0, 2, 1, 3]  # (B, T, N, H) <-> (B, N, T, H)
Cache = tuple[tf.Tensor, tf.Tensor]  # head-major keys (B, N, P, H) and values (B, N, P, Hv)


class MultiHeadAttention(keras.layers.MultiHeadAttention):
    """Keras's multi-head attention with byte dropout (`Dropout`) on its probabilities and,
    with `block > 0`, query blocks recomputed in the backward pass (`blocked_attention`).

    The weights are Keras's, whatever `block`: a checkpoint loads into either.

    Args:
        block: queries per block; 0 (or a query length of at most `block`) computes the
            attention whole, as Keras does. A call that asks for the attention scores is
            computed whole too.
        causal: the layer is always called with `use_causal_mask=True`, so a block can
            stop at its last query's key.
        num_heads, key_dim, **kwargs: as `keras.layers.MultiHeadAttention`.
    """

    def __init__(self, num_heads: int, key_dim: int, *, block: int = 0, causal: bool = False,
                 **kwargs: Any) -> None:  # fmt: skip
        if isinstance(block, bool) or not isinstance(block, int) or block < 0:
            raise ConfigError(f"Expected block an int >= 0, received: block={block!r}")
        super().__init__(num_heads, key_dim, **kwargs)
        self.block = block
        self.causal = causal

    def _build_attention(self, rank: int) -> None:
        rate, self._dropout = self._dropout, 0.0
        super()._build_attention(rank)  # its own dropout at rate 0: no seed generator
        self._dropout = rate
        self._dropout_layer = Dropout(rate, dtype=self.dtype_policy)

    def _compute_attention(self, query, key, value, attention_mask=None, training=None,
                           return_attention_scores=False, use_causal_mask=False):  # fmt: skip
        """query (B, T, N, H), key (B, S, N, H), value (B, S, N, Hv), attention_mask bool
        (B|1, T, S) → output (B, T, N, Hv) and the probabilities (B, N, T, S) or None."""
        if self.block == 0 or return_attention_scores or query.shape[1] <= self.block:
            return super()._compute_attention(query, key, value, attention_mask, training,
                                              return_attention_scores, use_causal_mask)  # fmt: skip
        rate, seed = 0.0, None
        generator = self._dropout_layer.seed_generator
        if training and generator is not None and quantized_rate(self._dropout) > 0:
            rate, seed = self._dropout, next_seed(generator)
        output = blocked_attention(
            query * tf.cast(self._inverse_sqrt_key_dim, query.dtype), key, value,
            attention_mask, block=self.block, causal=self.causal, rate=rate, seed=seed,
        )  # fmt: skip
        return output, None

    def keys_values(self, source: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        """Keys and values of `source` (B, S, D), head-major: (B, N, S, H), (B, N, S, Hv).

        Keys and values a decoding computes once (the memory's) or one position at a time
        (a cache's) for `attend`."""
        key, value = self._key_dense(source), self._value_dense(source)
        return tf.transpose(key, HEADS_FIRST), tf.transpose(value, HEADS_FIRST)

    def _queries(self, query: tf.Tensor) -> tf.Tensor:
        """The layer's query input (B, Q, D) → scaled head-major queries (B, N, Q, H)."""
        query = tf.transpose(self._query_dense(query), HEADS_FIRST)
        return query * tf.cast(self._inverse_sqrt_key_dim, query.dtype)

    def attend(self, query: tf.Tensor, keys: tf.Tensor, values: tf.Tensor, mask: tf.Tensor,
               bias: tf.Tensor | None = None,
               training: bool = False) -> tuple[tf.Tensor, tf.Tensor]:  # fmt: skip
        """Queries against given keys and values (`keys_values`): what `call` computes,
        with an additive bias on the scores if given (location-relative alignment,
        `text_to_mel.location`); attention dropout only in `training`.

        Args:
            query: float [B, Q, D], the layer's query input.
            keys, values: head-major [B, N, S, H] and [B, N, S, Hv].
            mask: bool [B|1, Q|1, S], True where a query may attend.
            bias: float32 [B, N, Q, S] added to the scaled scores, or None.

        Returns:
            The output [B, Q, D] and the probabilities float [B, N, Q, S] (before dropout).
        """
        query = self._queries(query)  # (B, N, Q, H)
        probs = _probabilities(query, keys, mask[:, None], bias)  # (B, N, Q, S)
        kept = self._dropout_layer(probs, training=training)
        output = tf.transpose(tf.matmul(kept, values), HEADS_FIRST)  # (B, Q, N, Hv)
        return self._output_dense(output), probs

    def attend_cached(self, query: tf.Tensor, cache: Cache,
                      seen: tf.Tensor) -> tuple[tf.Tensor, Cache]:  # fmt: skip
        """One new position of a causal self-attention against a cache of the positions
        before it (no dropout): what `call` computes at that position.

        The scores against the cache and against the new position's own key are taken
        apart, and the cache is written only after it was read, so a compiled loop updates
        it in place instead of copying it each step.

        Args:
            query: float [B, 1, D], the layer's input at the new position.
            cache: head-major keys [B, N, P, H] and values [B, N, P, Hv] of the buffer.
            seen: bool [B|1, 1, P], True at the cached positions before the new one, whose
                index is the first False: one index for every row, or with B rows one a row
                (decoder slots; a row whose cache is full is not written).

        Returns:
            The output [B, 1, D], and the cache with the new key and value written at
            that index.
        """
        keys, values = cache
        key, value = self.keys_values(query)  # (B, N, 1, H)
        query = self._queries(query)  # (B, N, 1, H)
        mask = seen[:, None]  # (B|1, 1, 1, P)
        past = tf.where(
            mask, tf.matmul(query, keys, transpose_b=True), _large_negative(query.dtype)
        )  # (B, N, 1, P)
        now = tf.reduce_sum(query * key, axis=-1, keepdims=True)  # (B, N, 1, 1)
        probs = tf.nn.softmax(tf.concat([past, now], axis=-1))  # (B, N, 1, P + 1)
        past_probs = tf.where(mask, probs[..., :-1], tf.zeros((), probs.dtype))
        output = tf.matmul(past_probs, values) + probs[..., -1:] * value  # (B, N, 1, Hv)
        output = self._output_dense(tf.transpose(output, HEADS_FIRST))  # (B, 1, D)
        # The writes depend on every read of the cache (through `after`, zero): without
        # that XLA cannot order them, and copies the cache twice a step.
        after = tf.zeros((), output.dtype) * output[0, 0, 0]
        key, value = key + tf.cast(after, key.dtype), value + tf.cast(after, value.dtype)
        if seen.shape[0] == 1:  # one index: a slice written in place
            at = [0, 0, tf.reduce_sum(tf.cast(seen[0, 0], tf.int32)), 0]
            return output, (dynamic_update_slice(keys, key, at),
                            dynamic_update_slice(values, value, at))  # fmt: skip
        at = tf.reduce_sum(tf.cast(seen[:, 0], tf.int32), axis=1)  # (B,) an index a row
        return output, (_write_heads(keys, key, at), _write_heads(values, value, at))


def write_rows(buffer: tf.Tensor, new: tf.Tensor, at: tf.Tensor,
               live: tf.Tensor | None = None) -> tf.Tensor:  # fmt: skip
    """`buffer` [B, L, ...] with each row's `new` [B, K, ...] written at its own positions
    `at .. at + K - 1` (`at` int32 [B]) along axis 1: the rows of decoder slots, each at
    its own step. A row that is not `live` (bool [B]) or whose positions pass L is not
    written (its own values are written back, so no two writes meet)."""
    batch, length, count = buffer.shape[0], buffer.shape[1], new.shape[1]
    fits = at + count <= length  # (B,)
    if live is not None:
        fits &= live
    spots = tf.range(count)[None, :]  # (1, K)
    where = tf.where(fits[:, None], at[:, None] + spots, spots)  # (B, K)
    rows = tf.broadcast_to(tf.range(batch)[:, None], [batch, count])
    index = tf.stack([rows, where], axis=-1)  # (B, K, 2)
    kept = tf.gather_nd(buffer, index)  # (B, K, ...)
    mask = tf.reshape(fits, [batch] + [1] * (new.shape.rank - 1))
    return tf.tensor_scatter_nd_update(buffer, index, tf.where(mask, new, kept))


def blocked_attention(
    query: tf.Tensor, key: tf.Tensor, value: tf.Tensor, mask: tf.Tensor | None, *,
    block: int, causal: bool, rate: float = 0.0, seed: tf.Tensor | None = None,
    recompute: bool = True,
) -> tf.Tensor:  # fmt: skip
    """Attention `block` queries at a time, each block a `tf.recompute_grad` checkpoint.

    The arithmetic is Keras's (`keras.layers.Softmax` with a mask: masked scores set to a
    large negative number, fully masked rows zero), on head-major tensors.

    Args:
        query: float [B, T, N, H], already scaled by 1/sqrt(H).
        key: float [B, S, N, H]; value: float [B, S, N, Hv].
        mask: bool [B|1, T|1, S] (True: may attend) or None.
        block: queries per block, >= 1.
        causal: query `t` sees keys `<= t` only (`mask` must say so too): block `[a, b)`
            computes scores against keys `< b` only.
        rate: attention dropout (0: none); seed: int32 [2], its stateless seed.
        recompute: False keeps every block's scores for the backward pass instead (the
            same values; for testing that the recomputation draws the same masks).

    Returns:
        float [B, T, N, Hv].
    """
    length, keys = query.shape[1], key.shape[1]
    query, key, value = (tf.transpose(x, HEADS_FIRST) for x in (query, key, value))
    if mask is not None:
        mask = mask[:, None]  # (B|1, 1, T|1, S)
    outputs = []
    for index, start in enumerate(range(0, length, block)):
        stop = min(start + block, length)
        end = stop if causal else keys
        rows = None
        if mask is not None:
            rows = mask[:, :, start:stop, :end] if mask.shape[2] > 1 else mask[..., :end]
        block_seed = None if seed is None else tf.random.experimental.stateless_fold_in(seed, index)
        attend = _block(rows, end, rate, block_seed)
        if recompute:
            attend = tf.recompute_grad(attend)
        outputs.append(attend(query[:, :, start:stop], key, value))  # (B, N, Q, Hv)
    return tf.transpose(tf.concat(outputs, axis=2), HEADS_FIRST)  # (B, T, N, Hv)


def _write_heads(cache: tf.Tensor, new: tf.Tensor, at: tf.Tensor) -> tf.Tensor:
    """`write_rows` for a head-major cache [B, N, P, H] and its new position [B, N, 1, H]."""
    batch, heads = cache.shape[0], cache.shape[1]
    flat = tf.reshape(cache, [batch * heads, *cache.shape[2:]])
    written = write_rows(flat, tf.reshape(new, [batch * heads, *new.shape[2:]]),
                         tf.repeat(at, heads))  # fmt: skip
    return tf.reshape(written, cache.shape)


def _block(mask: tf.Tensor | None, end: int, rate: float,
           seed: tf.Tensor | None) -> Callable[..., tf.Tensor]:  # fmt: skip
    """One block's attention over keys `< end`: (query (B, N, Q, H), key (B, N, S, H),
    value (B, N, S, Hv)) → (B, N, Q, Hv). Pure: no variables, the dropout mask from `seed`."""

    def attend(query: tf.Tensor, key: tf.Tensor, value: tf.Tensor) -> tf.Tensor:
        probs = _probabilities(query, key[:, :, :end], mask)  # (B, N, Q, end)
        if seed is not None:
            probs = dropped(probs, seeded_keep_mask(probs.shape, rate, seed), rate)
        return tf.matmul(probs, value[:, :, :end])  # (B, N, Q, Hv)

    return attend


def _probabilities(query: tf.Tensor, keys: tf.Tensor, mask: tf.Tensor | None,
                   bias: tf.Tensor | None = None) -> tf.Tensor:  # fmt: skip
    """Keras's masked softmax of the scores: query (B, N, Q, H) (scaled), keys (B, N, S, H),
    mask bool (B|1, 1, Q|1, S) or None, bias float (B, N, Q, S) added to the scores or
    None → float (B, N, Q, S); a row with no key to see is zero, not uniform."""
    scores = tf.matmul(query, keys, transpose_b=True)  # (B, N, Q, S)
    if bias is not None:
        scores = scores + tf.cast(bias, scores.dtype)
    if mask is None:
        return tf.nn.softmax(scores)
    return masked_softmax(scores, mask)


def masked_softmax(scores: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
    """Keras's masked softmax over the last axis: masked scores set to a large negative
    number, masked probabilities zero (a row with nothing to see is zero, not uniform).
    scores float [..., S], mask bool broadcastable to them → float [..., S]."""
    probs = tf.nn.softmax(tf.where(mask, scores, _large_negative(scores.dtype)))
    return tf.where(mask, probs, tf.zeros((), probs.dtype))


def _large_negative(dtype: tf.DType) -> tf.Tensor:
    """Keras's masked-score value: -3e4 in float16, else -1e9."""
    return tf.constant(-3e4 if dtype == tf.float16 else -1e9, dtype)
