"""One runtime speaking the benchmark's texts in a process of its own (`xtts-bench
runtime` starts one per runtime and thread count): it imports only what its runtime
needs, so its start, its memory and its speed are that runtime's alone.

    python -m xtts_bench._speaker '{"runtime": "onnx", "voice": DIR, "threads": 1, ...}'

Prints one JSON line when the first text's first audio is ready (`{"event": "first"}`:
the parent's clock gives the cold start), then one with the figures: per text the audio
seconds, the median wall seconds of `repeats` calls after a warm-up call (the whole
text), and the median seconds to its first audio over as many calls of its stream (the
runtime's `Voice.chunks`, TensorFlow's `stream_pieces` into `Waveforms.stream` as
`synthesize --stream` runs it: each the first chunk's audio); the peak RSS.
"""

from __future__ import annotations

import json
import resource
import statistics
import sys
import time
from collections.abc import Callable, Iterator

import numpy as np

Speak = Callable[[str], Iterator[np.ndarray]]  # a text → its audio, in parts


def _exported(job: dict) -> tuple[Speak, Speak]:
    """(the whole text, piece by piece; its stream, chunk by chunk): the voice folder's
    programs, onnxruntime's or LiteRT's."""
    from xtts_runtime import Voice

    voice = Voice(job["voice"], threads=job["threads"])

    def speak(text: str) -> Iterator[np.ndarray]:
        for said, pause in voice.stream(text):
            yield said.audio
            yield pause

    return speak, voice.chunks


def _tensorflow(job: dict) -> tuple[Speak, Speak]:
    """(the whole text: its pieces decoded side by side, joined, vocoded; its stream, a
    chunk at a time as `synthesize --stream` speaks it)."""
    import dataclasses
    from pathlib import Path

    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(job["threads"])
    tf.config.threading.set_inter_op_parallelism_threads(job["threads"])
    from xtts_train import (
        Decoding,
        Streaming,
        Waveforms,
        load_reference,
        load_run,
        piece_batch,
        speak_pieces,
        stream_pieces,
        text_buffer_frames,
        text_pieces,
    )

    run = Path(job["run"])
    stack, model, tokenizer = load_run(run)
    train = dataclasses.replace(stack.train, compiler=job["compiler"])
    stack = dataclasses.replace(stack, train=train)
    waveforms = Waveforms(run, stack, vocoder=job["vocoder"])
    reference = load_reference(run, stack)
    decodings: dict[tuple[int, int], Decoding] = {}
    streamings: dict[int, Streaming] = {}

    def read(text: str) -> tuple[list, int]:
        pieces = text_pieces(text, stack.data.text, tokenizer, name="the text",
                             max_symbols=stack.decode.split_symbols)  # fmt: skip
        return pieces, max(text_buffer_frames(len(p.ids), stack) for p in pieces)

    def speak(text: str) -> Iterator[np.ndarray]:
        pieces, frames = read(text)
        key = (frames, piece_batch(len(pieces)))
        if key not in decodings:
            decodings[key] = Decoding(model, decode=stack.decode,
                                      cond_frames=stack.reference_frames, max_frames=frames,
                                      batch_size=key[1], compiler=job["compiler"])  # fmt: skip
        spoken = speak_pieces(decodings[key], pieces, reference, stack.audio)
        yield waveforms(spoken.features).numpy()

    def stream(text: str) -> Iterator[np.ndarray]:
        pieces, frames = read(text)
        if frames not in streamings:
            streamings[frames] = Streaming(model, decode=stack.decode,
                                           cond_frames=stack.reference_frames,
                                           max_frames=frames, compiler=job["compiler"])  # fmt: skip
        mel = stream_pieces(streamings[frames], pieces, reference, stack.audio, [])
        yield from waveforms.stream(mel)

    return speak, stream


def _said(speak: Speak, text: str) -> tuple[float, float, int]:
    """(seconds to the first audio, seconds to the whole, samples) of one call."""
    start = time.perf_counter()
    first, samples = None, 0
    for part in speak(text):
        first = time.perf_counter() - start if first is None else first
        samples += len(part)
    return first, time.perf_counter() - start, samples


def main(job: dict) -> dict:
    speak, stream = (_tensorflow if job["runtime"].startswith("tf-") else _exported)(job)
    texts = job["texts"]
    parts = stream(texts[0])
    next(parts)
    print(json.dumps({"event": "first"}), flush=True)
    for _ in parts:
        pass
    figures = []
    for text in texts:
        _said(speak, text)  # warm: any program of this text's shapes is built
        _said(stream, text)
        calls = [_said(speak, text) for _ in range(job["repeats"])]
        firsts = [_said(stream, text) for _ in calls]
        seconds = calls[0][2] / job["sample_rate"]
        wall = statistics.median(c[1] for c in calls)
        figures.append({"text": text, "audio_s": seconds, "wall_s": wall,
                        "rtf": wall / seconds,
                        "first_audio_s": statistics.median(c[0] for c in firsts)})  # fmt: skip
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"event": "done", "texts": figures, "peak_rss_mb": peak}


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))), flush=True)
