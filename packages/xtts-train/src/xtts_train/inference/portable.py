"""The inference programs of a run cut where a runtime without TensorFlow can loop over
them (`xtts-train export --format onnx`; `xtts_runtime`), the loop itself left to the
caller, as GPT-SoVITS and sherpa-onnx cut their autoregressive models:

```
clip-{rate}   audio (samples,) at `rate`                 → wave (the run's rate), bounds (2,)
features      wave (samples,)                            → mel (frames, M)
conditioning  reference mel (B, C, M), its frames (B,)   → latents, stats, pitch_term
prefill       tokens (B, T), token mask, latents         → memory_mask, align_keys,
                                                            memory_k_i, memory_v_i
step          frame, t, cache_k_i, cache_v_i, focus,     → group (B, r, M), probs (B, r),
              place, prefill's, pitch_term                 cache_k_i, cache_v_i, focus, place
finish        frames (B, F, M), stats, lengths, clip     → mel (B, F, M)
window        frames (B, F, M), stats, lengths, first    → mel (B, chunk, M): a stream's chunk
vocoder       mel (B, F, M)                              → audio (B, F * hop)
```

Each is the function TensorFlow decodes with (`xtts_audio.resample`, `silence_bounds` and
`mel_features` as `load_reference` reads a clip, `TextToMel.voice`, `join_memory`,
`Decoder.read_memory`, `generation.step_apart`, `TextToMel.to_mel` and the postfilters,
`Vocoder.synthesis`), traced at static shapes with named inputs and outputs: the step at
each text bucket (`TEXT_BUCKET`) with a cache of the bucket's longest buffer
(`text_buffer_frames`). The caller's loop (`xtts_runtime`'s) runs step after step from
zero caches, writes each group into its buffer, feeds the group's last frame back, stops
a row when any of its probabilities is above 0.5 or at its buffer's steps, and hands the
frames to `finish`: what `generation.advance` does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import tensorflow as tf

import xtts_audio as xa
from xtts_train.config import StackConfig
from xtts_train.models.text_to_mel.decoding import TEXT_BUCKET, text_buffer_frames
from xtts_train.models.text_to_mel.frames import denormalize_by, groups, identity_stats
from xtts_train.models.text_to_mel.free_running import mel_window
from xtts_train.models.text_to_mel.generation import Context, State, step_apart
from xtts_train.models.text_to_mel.model import TextToMel, join_memory
from xtts_train.models.text_to_mel.postfilters import apply, postfilters
from xtts_train.models.vocoder.model import Vocoder

__all__ = ["CLIP_RATES", "OUT_RATES", "Bucket", "Program", "buckets", "clip", "conditioning",
           "features", "finish", "prefill", "resampled", "step", "vocoder", "window"]  # fmt: skip

# The rates other than its own that an exported voice's audio is resampled to: Opus's
# (48 kHz; it encodes 8, 12, 16, 24 or 48 kHz alone).
OUT_RATES = (48000,)
# The rates of the reference clips an exported voice reads (with the run's own): those of
# common recordings. Each is one small program (a polyphase matrix of at most 0.3 M entries).
CLIP_RATES = (8000, 11025, 16000, 22050, 24000, 32000, 44100, 48000)


@dataclasses.dataclass(frozen=True)
class Bucket:
    """The static sizes of one text bucket's step program.

    Attributes:
        text: T, token ids of the bucket (a multiple of `TEXT_BUCKET`).
        steps: P, the decoder steps its cache holds: those of the bucket's longest buffer.
        frames: that buffer's frames (`text_buffer_frames` of `text` symbols).
    """

    text: int
    steps: int
    frames: int


@dataclasses.dataclass(frozen=True)
class Program:
    """A traced program: `function` (a `tf.function` of named `TensorSpec`s returning a
    dict) and its `signature`, in input order."""

    function: Callable
    signature: tuple[tf.TensorSpec, ...]


def buckets(stack: StackConfig, *, max_symbols: int) -> list[Bucket]:
    """The text buckets of texts of up to `max_symbols` token ids, each with its longest
    buffer (`text_buffer_frames`), in order."""
    count = -(-max_symbols // TEXT_BUCKET)
    sizes = [TEXT_BUCKET * (i + 1) for i in range(count)]
    r = stack.model.reduction_factor
    return [Bucket(text=t, steps=groups(text_buffer_frames(t, stack), r),
                   frames=text_buffer_frames(t, stack)) for t in sizes]  # fmt: skip


def clip(stack: StackConfig, *, rate: int) -> Program:
    """A mono clip `audio` float32 [samples] at `rate` as `load_reference` reads it:
    `wave` float32 [samples'] resampled to the run's rate (`xtts_audio.resample`) and its
    `bounds` int32 [2], the span `data.trim_top_db` keeps (`xtts_audio.silence_bounds`;
    the whole clip without trimming)."""
    signature = (tf.TensorSpec([None], tf.float32, "audio"),)

    def program(audio):
        wave = xa.resample(audio, orig_sr=rate, target_sr=stack.audio.sample_rate)
        if stack.data.trim_top_db is None:
            return {"wave": wave, "bounds": tf.stack([0, tf.shape(wave)[0]])}
        return {"wave": wave, "bounds": xa.silence_bounds(wave, top_db=stack.data.trim_top_db)}

    return _traced(program, signature)


def resampled(stack: StackConfig, *, rate: int) -> Program:
    """Audio `wave` float32 [samples] at the run's rate → `audio` float32 [samples'] at
    `rate` (`xtts_audio.resample`). (ONNX names an input and an output apart.)"""
    signature = (tf.TensorSpec([None], tf.float32, "wave"),)

    def program(wave):
        return {"audio": xa.resample(wave, orig_sr=stack.audio.sample_rate, target_sr=rate)}

    return _traced(program, signature)


def features(stack: StackConfig) -> Program:
    """The model's features of `wave` float32 [samples] at the run's rate: `mel` float32
    [frames, M] (`xtts_audio.mel_features`, the DFT as a matmul)."""
    signature = (tf.TensorSpec([None], tf.float32, "wave"),)

    def program(wave):
        return {"mel": xa.mel_features(wave, stack.audio, portable=True)}

    return _traced(program, signature)


def conditioning(model: TextToMel, *, batch: int, cond_frames: int) -> Program:
    """The voice of a reference clip: `latents` [B, L, D], `stats` float32 [B, 2, M]
    (identity statistics with `ModelConfig.voice_stats` off) and `pitch_term` [B, 1, D]
    (zeros without `ModelConfig.voice_pitch`), from `cond_mel` float32 [B, C, M] and
    `cond_lengths` int32 [B]."""
    config = model.config
    signature = (tf.TensorSpec([batch, cond_frames, config.n_mels], tf.float32, "cond_mel"),
                 tf.TensorSpec([batch], tf.int32, "cond_lengths"))  # fmt: skip

    def program(cond_mel, cond_lengths):
        latents, stats = model.voice(cond_mel, cond_lengths)
        term = model.decoder.pitch_term(model.clip_pitch(cond_mel, cond_lengths))
        return {
            "latents": latents,
            "stats": identity_stats(batch, config.n_mels) if stats is None else stats,
            "pitch_term": tf.broadcast_to(term, [batch, 1, config.d_model]),
        }

    return _traced(program, signature)


def prefill(model: TextToMel, *, batch: int, bucket: Bucket) -> Program:
    """What every step of a text's decoding reads: from `tokens` int32 [B, T],
    `token_mask` float32 [B, T] and the voice's `latents` [B, L, D], the memory's key
    mask `memory_mask` bool [B, 1, T + L], the alignment layer's keys `align_keys`
    float32 [B, T, W] and each decoder block's cross-attention keys and values
    `memory_k_{i}`, `memory_v_{i}` [B, N, T + L, H]."""
    config = model.config
    signature = (tf.TensorSpec([batch, bucket.text], tf.int32, "tokens"),
                 tf.TensorSpec([batch, bucket.text], tf.float32, "token_mask"),
                 tf.TensorSpec([batch, config.cond_latents, config.d_model], tf.float32,
                               "latents"))  # fmt: skip

    def program(tokens, token_mask, latents):
        text = model.text_encoder(tokens, token_mask)  # (B, T, D)
        memory, memory_mask = join_memory(text, token_mask, latents)
        memory_kvs, align_keys = model.decoder.read_memory(memory)
        outputs = {"memory_mask": memory_mask, "align_keys": align_keys}
        for i, (keys, values) in enumerate(memory_kvs):
            outputs |= {f"memory_k_{i}": keys, f"memory_v_{i}": values}
        return outputs

    return _traced(program, signature)


def step(model: TextToMel, decode, *, batch: int, bucket: Bucket,
         rows: bool = False) -> Program:  # fmt: skip
    """One decoder step (`generation.step_apart`) at the bucket's static sizes.

    Inputs: `frame` float32 [B, 1, M] (the last frame written; zeros at step 0), `t`
    int32 [] (steps run; with `rows`, int32 [B], each row's own: decoder slots, whose rows
    decode different texts, each at its own step), each block's self-attention cache
    `cache_k_{i}`, `cache_v_{i}` [B, N, P, H] (zeros at step 0), `focus` int32 [B] and
    `place` float32 [B] (zeros at step 0), `pitch_term` (the voice's) and prefill's
    outputs.

    Outputs: `group` float32 [B, r, M] (the step's frames as the heads write them),
    `probs` float32 [B, r] (their stop probabilities), and the next step's inputs of the
    same shapes, named `next_` and the input's name: the caches with the step written
    (`next_cache_k_{i}`, `next_cache_v_{i}`), `next_focus` (the furthest alignment peak)
    and `next_place` (the next step's position). ONNX names an input and an output apart.
    """
    config, width = model.config, bucket.text + model.config.cond_latents
    blocks = model.decoder.blocks
    heads, key_dim = blocks[0].self_attn.num_heads, blocks[0].self_attn.key_dim
    # W, the alignment layer's key width (0 without one): as the layer writes them.
    _, keys = model.decoder.read_memory(tf.zeros([1, width, config.d_model]))
    align_width = keys.shape[-1]
    specs = [tf.TensorSpec([batch, 1, config.n_mels], tf.float32, "frame"),
             tf.TensorSpec([batch] if rows else [], tf.int32, "t"),
             tf.TensorSpec([batch], tf.int32, "focus"),
             tf.TensorSpec([batch], tf.float32, "place"),
             tf.TensorSpec([batch, 1, config.d_model], tf.float32, "pitch_term"),
             tf.TensorSpec([batch, 1, width], tf.bool, "memory_mask"),
             tf.TensorSpec([batch, bucket.text, align_width], tf.float32,
                           "align_keys")]  # fmt: skip
    cache, memory = [batch, heads, bucket.steps, key_dim], [batch, heads, width, key_dim]
    for i in range(len(blocks)):
        specs += [tf.TensorSpec(cache, tf.float32, f"cache_{kv}_{i}") for kv in "kv"]
        specs += [tf.TensorSpec(memory, tf.float32, f"memory_{kv}_{i}") for kv in "kv"]

    def program(frame, t, focus, place, pitch_term, memory_mask, align_keys, *blocks_in):
        caches = [tuple(blocks_in[4 * i : 4 * i + 2]) for i in range(len(blocks))]
        memory_kvs = [tuple(blocks_in[4 * i + 2 : 4 * i + 4]) for i in range(len(blocks))]
        context = Context(memory_kvs, memory_mask, pitch_term, None, align_keys)
        state = State(t=t, frame=frame, frames=None, probs=None, attention=None,
                      caches=caches, focus=focus, done=None, place=place)  # fmt: skip
        group, probs, _, caches, peak, place = step_apart(
            model.decoder, model.heads, config, decode, context, state, text_len=bucket.text
        )
        outputs = {"group": group, "probs": probs, "next_focus": tf.maximum(focus, peak),
                   "next_place": place}  # fmt: skip
        for i, (keys, values) in enumerate(caches):
            outputs |= {f"next_cache_k_{i}": keys, f"next_cache_v_{i}": values}
        return outputs

    return _traced(program, tuple(specs))


def finish(model: TextToMel, decode, *, batch: int, cond_frames: int) -> Program:
    """A decoding's frames to the mel `infer` (and `decode_frames`' postfilters) return:
    from `frames` float32 [B, F, M] as the heads wrote them (F any), the voice's `stats`
    [B, 2, M], `lengths` int32 [B] (real frames: the postnet sees zeros after them) and the
    clip (`cond_mel` [B, C, M], `cond_lengths` [B], which postfilters read), `mel` float32
    [B, F, M]."""
    config = model.config
    signature = (tf.TensorSpec([batch, None, config.n_mels], tf.float32, "frames"),
                 tf.TensorSpec([batch, 2, config.n_mels], tf.float32, "stats"),
                 tf.TensorSpec([batch], tf.int32, "lengths"),
                 tf.TensorSpec([batch, cond_frames, config.n_mels], tf.float32, "cond_mel"),
                 tf.TensorSpec([batch], tf.int32, "cond_lengths"))  # fmt: skip
    stages = postfilters(decode)

    def program(frames, stats, lengths, cond_mel, cond_lengths):
        if config.voice_stats != "off":
            frames = denormalize_by(frames, stats)
        real = tf.sequence_mask(lengths, tf.shape(frames)[1], tf.float32)  # (B, F)
        _, mel = model.to_mel(frames, real)
        if stages:
            mel = apply(stages, mel, real, cond_mel, cond_lengths)
        return {"mel": mel}

    return _traced(program, signature)


def window(model: TextToMel, *, batch: int, chunk: int) -> Program:
    """A stream's chunk of the mel (`free_running.mel_window`, TensorFlow's streams' and
    slots' chunk program): from `frames` float32 [B, F, M] as the heads wrote them (F
    any, decoded up to `first + chunk` plus the postnet's context), the voice's `stats`,
    `lengths` int32 [B] (real frames: the decoding's buffer until it stopped) and the
    chunk's `first` frame int32 [], `mel` float32 [B, chunk, M] of frames `first ..`. No
    postfilter: a voice whose decoding needs the whole utterance has no window program."""
    config = model.config
    signature = (tf.TensorSpec([batch, None, config.n_mels], tf.float32, "frames"),
                 tf.TensorSpec([batch, 2, config.n_mels], tf.float32, "stats"),
                 tf.TensorSpec([batch], tf.int32, "lengths"),
                 tf.TensorSpec([], tf.int32, "first"))  # fmt: skip

    def program(frames, stats, lengths, first):
        return {"mel": mel_window(model, frames, stats, lengths, first, frames=chunk)}

    return _traced(program, signature)


def vocoder(model: Vocoder, *, batch: int) -> Program:
    """A vocoder's waveform of `mel` float32 [B, F, M] (F any): `audio` float32
    [B, F * hop_length], its spectra inverted by a matmul (`Vocoder.synthesis(portable=True)`)."""
    signature = (tf.TensorSpec([batch, None, model.config.n_mels], tf.float32, "mel"),)

    def program(mel):
        return {"audio": model.synthesis(mel, portable=True)["audio"]}

    return _traced(program, signature)


def _traced(program: Callable, signature: tuple[tf.TensorSpec, ...]) -> Program:
    return Program(tf.function(program, input_signature=list(signature), autograph=False),
                   signature)  # fmt: skip
