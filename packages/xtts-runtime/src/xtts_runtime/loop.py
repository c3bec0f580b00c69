"""The decoding loop over an exported voice's programs (`xtts_train.inference.portable`
writes them): what `generation.advance` runs inside TensorFlow, here in numpy.

Step `t` reads the last frame written (zeros at step 0), its caches and alignment state,
and writes the `r` frames of group `t` and their stop probabilities; a piece ends when
any probability is above 0.5 or at its buffer's last step (`voice.json`'s `buffers`:
each text length's, as the training side sizes it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from xtts_runtime.programs import AnyProgram

__all__ = [
    "Programs",
    "Spoken",
    "conditioning",
    "decode_piece",
    "piece_steps",
    "prefilled",
    "spoken",
    "started",
    "stepping",
    "stop_length",
    "voiced_ending",
]


@dataclasses.dataclass(frozen=True)
class Programs:
    """A voice's programs: `steps[i]` has the cache of bucket `i` (the `clip-{rate}`
    programs are `Voice`'s, loaded at a clip of their rate; the `slots-{b}` steps,
    `Slots`')."""

    features: AnyProgram
    conditioning: AnyProgram
    prefill: AnyProgram
    steps: list[AnyProgram]
    finish: AnyProgram
    vocoder: AnyProgram
    window: AnyProgram | None = None  # a stream's chunk of the mel (None: pieces whole)


@dataclasses.dataclass(frozen=True)
class Spoken:
    """One piece decoded.

    Attributes:
        mel: float32 [length, n_mels], the decoded frames after the postnet.
        length: frames decoded: the stop token's frame + 1, or the buffer's frames.
        stopped: the stop token fired inside the buffer.
        audio: float32 [frames * hop_length] in [-1, 1]: the vocoder's samples of the
            frames voiced (at least the `floors` of `voice.json`).
    """

    mel: np.ndarray
    length: int
    stopped: bool
    audio: np.ndarray


def conditioning(programs: Programs, manifest: Mapping[str, Any],
                 reference: np.ndarray) -> dict[str, np.ndarray]:  # fmt: skip
    """The voice of a clip's mel `reference` float32 [frames, n_mels], cut or zero-padded to
    the run's `cond_frames`: `latents`, `stats`, `pitch_term`, and the clip itself
    (`cond_mel`, `cond_lengths`, which the postfilters read)."""
    frames = manifest["cond_frames"]
    used = min(len(reference), frames)
    cond = np.zeros([1, frames, manifest["n_mels"]], np.float32)
    cond[0, :used] = reference[:used]
    clip = {"cond_mel": cond, "cond_lengths": np.array([used], np.int32)}
    return clip | programs.conditioning(clip)


def decode_piece(programs: Programs, manifest: Mapping[str, Any],
                 voice: Mapping[str, np.ndarray], ids: Sequence[int]) -> Spoken:  # fmt: skip
    """One piece's token ids (ending `<eos>`) decoded and vocoded in `voice`
    (`conditioning`'s)."""
    *_, (frames, probs) = stepping(*started(programs, manifest, voice, ids),
                                   steps=piece_steps(manifest, len(ids)),
                                   r=manifest["reduction_factor"])  # fmt: skip
    return spoken(programs, manifest, voice, frames, probs, len(ids))


def started(programs: Programs, manifest: Mapping[str, Any], voice: Mapping[str, np.ndarray],
            ids: Sequence[int]) -> tuple[AnyProgram, dict[str, np.ndarray]]:  # fmt: skip
    """A piece's decoding before its first step: the step program of its text's bucket
    and its feeds (`prefilled`, zero caches), for `stepping`."""
    bucket = next(i for i, size in enumerate(manifest["bucket_text"]) if size >= len(ids))
    step = programs.steps[bucket]
    feeds = prefilled(programs, manifest, voice, ids)
    for name, spec in step.inputs.items():
        if name.startswith("cache_"):
            feeds[name] = np.zeros(spec.shape, np.float32)
    return step, feeds


def stop_length(manifest: Mapping[str, Any], probs: np.ndarray, count: int) -> int:
    """Frames a piece of `count` token ids decoded, from its stop probabilities float32
    [1, >= its buffer]: the first above 0.5, plus one, or its buffer's."""
    buffer = manifest["buffers"][count - 1]
    above = probs[0, :buffer] > 0.5
    return int(np.argmax(above)) + 1 if above.any() else buffer


def piece_steps(manifest: Mapping[str, Any], count: int) -> int:
    """Decoder steps of the buffer of a piece of `count` token ids (`voice.json`'s)."""
    return -(-manifest["buffers"][count - 1] // manifest["reduction_factor"])


def prefilled(programs: Programs, manifest: Mapping[str, Any], voice: Mapping[str, np.ndarray],
              ids: Sequence[int]) -> dict[str, np.ndarray]:  # fmt: skip
    """A piece's step inputs before its first step, batch 1: what `prefill` reads of its
    token ids (padded to `text_len`) in `voice`, the voice's `pitch_term`, and the first
    step's `focus`, `place` and `frame` (zeros); the caches are the caller's (zeros)."""
    tokens = np.zeros([1, manifest["text_len"]], np.int32)
    tokens[0, : len(ids)] = ids
    feeds = programs.prefill({"tokens": tokens, "token_mask": (tokens != 0).astype(np.float32),
                              "latents": voice["latents"]})  # fmt: skip
    return feeds | {"pitch_term": voice["pitch_term"], "focus": np.zeros([1], np.int32),
                    "place": np.zeros([1], np.float32),
                    "frame": np.zeros([1, 1, manifest["n_mels"]], np.float32)}  # fmt: skip


def spoken(programs: Programs, manifest: Mapping[str, Any], voice: Mapping[str, np.ndarray],
           frames: np.ndarray, probs: np.ndarray, count: int) -> Spoken:  # fmt: skip
    """A piece of `count` token ids from its decoded `frames` float32 [1, F, M] and stop
    probabilities [1, F] (F >= its buffer; zeros after the last step run): stopped at the
    first probability above 0.5 or at its buffer's end, its mel through `finish`, vocoded.

    `finish` reads the frames voiced and the postnet's context after them, not the whole
    buffer: a mel frame's postnet reads `postnet_context` frames each side, so the frames
    voiced come out as the buffer's would (the tests' equality with TensorFlow's whole
    buffer runs through it)."""
    buffer = manifest["buffers"][count - 1]
    stopped = bool((probs[0, :buffer] > 0.5).any())
    length = stop_length(manifest, probs, count)
    voiced, _ = voiced_ending(manifest, count, length)
    read = min(buffer, voiced + manifest["postnet_context"])
    mel = programs.finish({"frames": frames[:, :read], "stats": voice["stats"],
                           "lengths": np.array([length], np.int32),
                           "cond_mel": voice["cond_mel"],
                           "cond_lengths": voice["cond_lengths"]})["mel"][0]  # fmt: skip
    return Spoken(mel[:length], length, stopped, _vocoded(programs, manifest, mel, count, length))


def stepping(step: AnyProgram, feeds: dict[str, np.ndarray], *, steps: int,
             r: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:  # fmt: skip
    """The decoder's frames float32 [1, steps * r, M] and stop probabilities [1, steps * r]
    from `feeds` (the prefill's, the voice's, zero state), the same two buffers after each
    step (zeros not yet written), up to the first group with a probability above 0.5.
    The program's `stepper` keeps the state between steps (onnxruntime's in bound
    buffers, copied by nothing)."""
    run = step.stepper(feeds)
    frames = np.zeros([1, steps * r, feeds["frame"].shape[-1]], np.float32)
    probs = np.zeros([1, steps * r], np.float32)
    for t in range(steps):
        group, chance = run(t)
        frames[:, t * r : (t + 1) * r], probs[:, t * r : (t + 1) * r] = group, chance
        yield frames, probs
        if (chance > 0.5).any():
            return


def voiced_ending(manifest: Mapping[str, Any], count: int,
                  length: int) -> tuple[int, np.ndarray]:  # fmt: skip
    """How a piece of `count` token ids that decoded `length` frames ends: the frames it
    voices (at least its floor, `voice.json`'s `floors`) and the silence after them that
    the vocoder hears, float32 [min(vocoder_context, buffer - voiced), M] (the SavedModel
    export vocodes the whole buffer, silence after the frames voiced)."""
    voiced = max(length, manifest["floors"][count - 1])
    after = min(manifest["vocoder_context"], manifest["buffers"][count - 1] - voiced)
    return voiced, np.full([after, manifest["n_mels"]], manifest["silence"], np.float32)


def _vocoded(programs: Programs, manifest: Mapping[str, Any], mel: np.ndarray, count: int,
             length: int) -> np.ndarray:  # fmt: skip
    """The vocoder's samples of the frames voiced: the decoded `length`, at least the
    text's floor (`voice.json`'s `floors`), heard with the silence after them, up to the
    buffer's end, that the vocoder's receptive field reaches (`vocoder_context`): the
    samples of the SavedModel export, which vocodes the whole buffer, clipped to [-1, 1]."""
    voiced, silence = voiced_ending(manifest, count, length)
    heard = np.concatenate([mel[:voiced], silence])  # (voiced + context, M)
    audio = programs.vocoder({"mel": heard[None]})["audio"][0]
    return np.clip(audio[: voiced * manifest["audio"]["hop_length"]], -1.0, 1.0)
