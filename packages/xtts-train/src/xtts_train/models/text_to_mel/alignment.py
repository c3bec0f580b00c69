"""Text-to-frame alignment: the guided-attention loss and the alignment score.

Both read the decoder's cross-attention over the text (`TextToMel` output `attention`,
float32 [B, F, T]) and only its real part: frames `< mel length` and tokens `< token
length`, taken from the masks, so an utterance gives the same value in any bucket.

- `guided_attention_loss` (Tachibana et al. 2017, "Efficiently Trainable Text-to-Speech
  System Based on Deep Convolutional Networks with Guided Attention"): attention far from
  the diagonal `t / N = f / T` is penalised by `1 - exp(-(t/N - f/T)^2 / (2 sigma^2))`,
  which pulls an autoregressive decoder towards a monotonic alignment from the first
  steps instead of after thousands. The decoder's memory also holds the speaker latents;
  attention on them (what a row's text part lacks of 1) costs as much as attention far
  off the diagonal, or the head escapes the loss by reading only the latents (measured:
  with the text part alone penalised, the loss fell to 0 within 40 demo steps while the
  alignment score fell below that of no guidance).
- `alignment_score`: how much the attention looks like an alignment, in [0, 1]: focus
  (the mean peak of each frame's attention over the real text) × monotonicity (of the
  moves of that peak from one frame to the next, the share that go forward) × coverage
  (share of tokens that are some frame's peak). A diagonal scores 1; uniform attention
  over N tokens scores 1/N^2; attention stuck on one token scores 1/N.
- `forward_sum_loss` ("One TTS Alignment To Rule Them All", Badlani et al. 2021, as
  FastPitch and RAD-TTS use it): minus the log of the summed probability of every
  monotonic path through the attention from the first symbol at the first step to the
  last at the last, a step moving 0, 1 or 2 symbols (the forward algorithm, in log space).
  Where the guided loss pulls toward one diagonal, this rewards any monotonic alignment
  that covers the text, at the utterance's own pace.
- `beta_binomial_prior` (the same paper's static prior): at step `i` of `S`, the
  beta-binomial distribution over the `N` symbols with `a = i`, `b = S - i + 1`, a soft
  diagonal whose width grows toward the middle; its log is added to the alignment's scores
  in training (`TextToMel.call(prior=True)`), so attention starts near the diagonal.
"""

from __future__ import annotations

import tensorflow as tf

from xtts_train.compile.naming import name_scoped

__all__ = ["alignment_score", "beta_binomial_prior", "forward_sum_loss", "guided_attention_loss"]


def _masks(attention, token_mask, mel_mask):
    """float32 attention (B, F, T), token mask (B, 1, T), frame mask (B, F, 1)."""
    attention = tf.cast(attention, tf.float32)
    tokens = tf.cast(token_mask, tf.float32)[:, None, :]
    frames = tf.cast(mel_mask, tf.float32)[:, :, None]
    return attention, tokens, frames


@name_scoped("loss_guided_attention")
def guided_attention_loss(
    attention: tf.Tensor, token_mask: tf.Tensor, mel_mask: tf.Tensor, *,
    sigma: tf.Tensor | float,
) -> tf.Tensor:  # fmt: skip
    """Attention mass away from the diagonal or off the text, per real frame.

    Args:
        attention: [B, F, T] attention of each frame over the text (rows sum to <= 1;
            the rest went to other keys, which count as off the diagonal).
        token_mask: [B, T], 1 for real tokens; mel_mask: [B, F], 1 for real frames.
        sigma: width of the diagonal band, as a share of the text and of the frames
            (Tachibana et al. use 0.2).

    Returns:
        float32 scalar: over real frames, the sum of attention × penalty over real tokens
        plus the attention off the real text, divided by the real frames (in [0, 1]); 0
        without real frames.
    """
    attention, tokens, frames = _masks(attention, token_mask, mel_mask)
    n_tokens = tf.maximum(tf.reduce_sum(tokens, axis=2, keepdims=True), 1.0)  # (B, 1, 1)
    n_frames = tf.maximum(tf.reduce_sum(frames, axis=1, keepdims=True), 1.0)  # (B, 1, 1)
    t = tf.range(tf.shape(attention)[2], dtype=tf.float32)[None, None, :] / n_tokens
    f = tf.range(tf.shape(attention)[1], dtype=tf.float32)[None, :, None] / n_frames
    sigma = tf.cast(sigma, tf.float32)
    penalty = 1.0 - tf.exp(-tf.square(t - f) / (2.0 * sigma * sigma))  # (B, F, T)
    off_text = 1.0 - tf.reduce_sum(attention * tokens, axis=2, keepdims=True)  # (B, F, 1)
    total = tf.reduce_sum(attention * penalty * tokens * frames) + tf.reduce_sum(
        tf.maximum(off_text, 0.0) * frames
    )
    return total / tf.maximum(tf.reduce_sum(frames), 1.0)


@name_scoped("alignment_score")
def alignment_score(attention: tf.Tensor, token_mask: tf.Tensor,
                    mel_mask: tf.Tensor) -> tf.Tensor:  # fmt: skip
    """Focus × monotonicity × coverage of each utterance's attention (see the module).

    Args:
        attention: [B, F, T] attention of each frame over the text.
        token_mask: [B, T], 1 for real tokens; mel_mask: [B, F], 1 for real frames.

    Returns:
        float32 [B]: 1 for a diagonal, low for attention that is spread out, stuck or
        jumps back; 0 for an utterance without real frames.
    """
    attention, tokens, frames = _masks(attention, token_mask, mel_mask)
    real = attention * tokens
    real = real / tf.maximum(tf.reduce_sum(real, axis=2, keepdims=True), 1e-9)  # rows sum to 1
    frame_mask = frames[:, :, 0]  # (B, F)
    n_frames = tf.maximum(tf.reduce_sum(frame_mask, axis=1), 1.0)  # (B,)
    focus = tf.reduce_sum(tf.reduce_max(real, axis=2) * frame_mask, axis=1) / n_frames
    peaks = tf.argmax(real, axis=2, output_type=tf.int32)  # (B, F)
    pairs = frame_mask[:, 1:] * frame_mask[:, :-1]  # both frames real
    moves = pairs * tf.cast(peaks[:, 1:] != peaks[:, :-1], tf.float32)  # the peak moved
    forward = tf.reduce_sum(moves * tf.cast(peaks[:, 1:] > peaks[:, :-1], tf.float32), axis=1)
    moved = tf.reduce_sum(moves, axis=1)
    monotonic = tf.where(moved > 0, tf.math.divide_no_nan(forward, moved), 1.0)
    n_tokens = tf.maximum(tf.reduce_sum(tokens[:, 0], axis=1), 1.0)  # (B,)
    hit = tf.one_hot(peaks, tf.shape(attention)[2]) * frames  # (B, F, T)
    coverage = tf.reduce_sum(tf.reduce_max(hit, axis=1) * tokens[:, 0], axis=1) / n_tokens
    score = focus * monotonic * coverage
    return tf.where(tf.reduce_sum(frame_mask, axis=1) > 0, score, 0.0)


_LOG_FLOOR = -1e4  # log of "no path": finite, so the gradients of the paths that exist stay finite
_MOVES = 3  # a step moves 0, 1 or 2 symbols


@name_scoped("loss_forward_sum")
def forward_sum_loss(attention: tf.Tensor, token_mask: tf.Tensor, mel_mask: tf.Tensor, *,
                     reduction_factor: int = 1) -> tf.Tensor:  # fmt: skip
    """Minus the log-probability of the monotonic paths through the attention, per symbol.

    Args:
        attention: [B, F, T] attention of each frame over the text (the frames a decoder
            step writes share its row, `frames.per_frame`; rows sum to <= 1).
        token_mask: [B, T], 1 for real tokens; mel_mask: [B, F], 1 for real frames.
        reduction_factor: r, frames a decoder step writes: one row in r is a step's.

    Returns:
        float32 scalar: over the utterances with real frames, the mean of `-log sum_paths
        prod attention` divided by the utterance's real symbols; a path starts at symbol 0
        at the first step, ends at the last real symbol at the last real step, and moves
        0, 1 or 2 symbols a step. An utterance with more symbols than twice its steps has
        no path and costs about 1e4 per step.
    """
    attention, tokens, frames = _masks(attention, token_mask, mel_mask)
    rows = attention[:, ::reduction_factor]  # (B, S, T): one row a step
    steps = frames[:, ::reduction_factor, 0]  # (B, S)
    tokens = tokens[:, 0]  # (B, T)
    log_probs = tf.where(tokens[:, None] > 0, tf.math.log(tf.maximum(rows, 1e-8)), _LOG_FLOOR)
    start = tf.concat([log_probs[:, 0, :1], tf.fill(tf.shape(log_probs[:, 0, 1:]), _LOG_FLOOR)],
                      axis=1)  # (B, T): at symbol 0  # fmt: skip

    def forward(alpha, inputs):
        row, real = inputs  # (B, T), (B,)
        shifted = [tf.pad(alpha, [[0, 0], [k, 0]], constant_values=_LOG_FLOOR)[:, :-k]
                   if k else alpha for k in range(_MOVES)]  # fmt: skip
        moved = tf.reduce_logsumexp(tf.stack(shifted), axis=0) + row
        return tf.where(real[:, None] > 0, moved, alpha)  # a padded step keeps the last

    rest = (tf.transpose(log_probs[:, 1:], [1, 0, 2]), tf.transpose(steps[:, 1:]))
    alpha = tf.foldl(forward, rest, initializer=start)  # (B, T) at the last real step
    n_tokens = tf.reduce_sum(tokens, axis=1)  # (B,)
    last = tf.maximum(tf.cast(n_tokens, tf.int32) - 1, 0)
    total = -tf.gather(alpha, last, axis=1, batch_dims=1)  # (B,)
    real = tf.cast(tf.reduce_sum(steps, axis=1) > 0, tf.float32)
    per_symbol = total / tf.maximum(n_tokens, 1.0) * real
    return tf.reduce_sum(per_symbol) / tf.maximum(tf.reduce_sum(real), 1.0)


@name_scoped("beta_binomial_prior")
def beta_binomial_prior(token_mask: tf.Tensor, mel_mask: tf.Tensor, *,
                        reduction_factor: int = 1) -> tf.Tensor:  # fmt: skip
    """The log of the static beta-binomial alignment prior, one row a decoder step.

    Args:
        token_mask: [B, T], 1 for real tokens; mel_mask: [B, F], 1 for real frames.
        reduction_factor: r, frames a decoder step writes (S = ceil(F / r) steps).

    Returns:
        float32 [B, S, T]: at real step `i` (1-based) of the utterance's `S_b` real steps,
        `log BetaBinomial(k; n = N_b - 1, a = i, b = S_b - i + 1)` at its real symbols `k <
        N_b`; 0 at padded steps and symbols (they are masked elsewhere).
    """
    tokens = tf.cast(token_mask, tf.float32)  # (B, T)
    steps = tf.cast(mel_mask, tf.float32)[:, ::reduction_factor]  # (B, S)
    n = tf.reduce_sum(tokens, axis=1)[:, None, None] - 1.0  # (B, 1, 1)
    count = tf.reduce_sum(steps, axis=1)[:, None, None]  # (B, 1, 1)
    i = tf.range(1, steps.shape[1] + 1, dtype=tf.float32)[None, :, None]  # (1, S, 1)
    k = tf.range(tokens.shape[1], dtype=tf.float32)[None, None, :]  # (1, 1, T)
    a, b = i, tf.maximum(count - i + 1.0, 1.0)
    k_real = tf.minimum(k, tf.maximum(n, 0.0))  # padded symbols: any finite value
    lgamma = tf.math.lgamma
    log_choose = lgamma(n + 1.0) - lgamma(k_real + 1.0) - lgamma(n - k_real + 1.0)
    log_beta = lgamma(k_real + a) + lgamma(n - k_real + b) - lgamma(n + a + b)
    log_prior = log_choose + log_beta - (lgamma(a) + lgamma(b) - lgamma(a + b))
    real = (steps[:, :, None] > 0) & (tokens[:, None, :] > 0)
    return tf.where(real, log_prior, 0.0)
