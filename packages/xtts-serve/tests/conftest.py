"""A tiny trained run, a tiny vocoder and engines on them, built once per test session.

The micro model of xtts-train's tests (`train_helpers`), 10 steps, one batch shape, on a
demo corpus of 16 short utterances; utterances of at most 1.2 s (`data.max_seconds`), so
the decoding buffer is ~100 frames; pieces of at most 20 symbols (`decode.split_symbols`),
so one text bucket: the engines' warm-up compiles a handful of programs. The two runs are
trained once per session, however many xdist workers ask (`train_helpers.once`); the
engines, in memory, once per worker.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from train_helpers import MICRO, OVERRIDES, VOCODER, once

from xtts_audio import wav_bytes
from xtts_data import prepare, write_demo_corpus
from xtts_serve import Engine, EngineConfig, OnnxEngine
from xtts_train import fit, load_stack_config
from xtts_train.export_voice import export_voice
from xtts_train.synthesize import synthesize

SHORT = [
    "data.num_buckets=1",
    "data.max_seconds=1.2",
    "train.checkpoint_every=10",
    "train.compiler=graph",
]
TEXT_TO_MEL = [*OVERRIDES, *MICRO, *SHORT, "train.steps=10"]
VOCODER_RUN = [*VOCODER, *SHORT, "train.steps=10", "train.eval_every=0"]
DECODE = ("decode.split_symbols=20",)  # the engine's and synthesize's `--set`
GRIFFIN_LIM_DECODE = ("decode.split_symbols=0",)
# Three pieces of at most 20 symbols: decoded side by side (a batch of 4), or streamed
# piece after piece with pauses between them.
TEXT = "Fine day. It was a quiet one, and we read."


def _fit(corpus: Path, root: Path, overrides: list[str]) -> None:
    stack = load_stack_config(None, overrides)
    prepare(corpus, root / "cache", audio=stack.audio, data=stack.data)
    fit(stack, root / "cache", root / "run", progress=False)


@pytest.fixture(scope="session")
def text() -> str:
    """A text of three pieces (`TEXT`)."""
    return TEXT


@pytest.fixture(scope="session")
def corpus(tmp_path_factory) -> Path:
    def write(folder: Path) -> None:
        write_demo_corpus(folder, n=16, min_seconds=0.4, max_seconds=1.0, seed=3)

    return once(tmp_path_factory, "serve-corpus", write)


@pytest.fixture(scope="session")
def run(corpus, tmp_path_factory) -> Path:
    """A 10-step text-to-mel run of the micro model."""
    return once(tmp_path_factory, "serve-text-to-mel",
                 lambda root: _fit(corpus, root, TEXT_TO_MEL)) / "run"  # fmt: skip


@pytest.fixture(scope="session")
def vocoder_run(corpus, tmp_path_factory) -> Path:
    """A 10-step micro vocoder run on the same audio settings."""
    return once(tmp_path_factory, "serve-vocoder",
                 lambda root: _fit(corpus, root, VOCODER_RUN)) / "run"  # fmt: skip


@pytest.fixture(scope="session")
def engine(run, vocoder_run) -> Engine:
    """An engine with the vocoder, warm: pieces of 20 symbols, so texts of up to 200
    characters decode in batches of 1, 2 or 4 pieces; streams vocoded in batches."""
    engine = Engine(EngineConfig(run=run, vocoder=vocoder_run, max_chars=200, overrides=DECODE,
                                 vocoder_batching="on"))  # fmt: skip
    engine.warm_up()
    return engine


@pytest.fixture(scope="session")
def voice_folder(run, vocoder_run, tmp_path_factory) -> Path:
    """The run and the vocoder exported to ONNX (`--set` `DECODE`), slots of 1 and 4."""

    def export(root: Path) -> None:
        export_voice(run, root / "voice", vocoder=vocoder_run, slots=(1, 4), overrides=DECODE,
                    progress=False)  # fmt: skip

    return once(tmp_path_factory, "serve-onnx", export) / "voice"


@pytest.fixture(scope="session")
def onnx_engine(voice_folder) -> OnnxEngine:
    """The exported voice in onnxruntime, 4 slots, warm."""
    engine = OnnxEngine(EngineConfig(run=voice_folder, runtime="onnx", max_chars=200))
    engine.warm_up()
    return engine


@pytest.fixture(scope="session", params=["tf", "onnx"])
def any_engine(request):
    """Each runtime's engine in turn (`engine`, `onnx_engine`): the slots' guarantees hold
    on both."""
    return request.getfixturevalue("engine" if request.param == "tf" else "onnx_engine")


@pytest.fixture(scope="session")
def tone_clip(engine):
    """`tone_clip(seconds, hz=220)`: WAV bytes of a tone and its overtones at the run's
    rate, a voice to condition on."""

    def clip(seconds: float, hz: float = 220) -> bytes:
        t = np.arange(int(seconds * engine.sample_rate)) / engine.sample_rate
        wave = sum(0.3 / k * np.sin(2 * np.pi * hz * k * t) for k in range(1, 6))
        return wav_bytes(np.asarray(wave, np.float32), engine.sample_rate)

    return clip


@pytest.fixture(scope="session")
def griffin_lim_engine(run) -> Engine:
    """An engine without a vocoder (Griffin-Lim) and without splitting: one program."""
    config = EngineConfig(run=run, max_chars=20, overrides=GRIFFIN_LIM_DECODE)
    engine = Engine(config)
    engine.warm_up()
    return engine


@pytest.fixture(scope="session")
def synthesized(run, vocoder_run, engine, tmp_path_factory):
    """`synthesize(text, stream=...)`: the WAV bytes `xtts-train synthesize` writes with
    the vocoder and the engine's buffer, once per text and mode."""
    folder, made = tmp_path_factory.mktemp("synthesize"), {}

    def wav(text: str, *, stream: bool = False) -> bytes:
        if (text, stream) not in made:
            out = folder / f"{len(made)}.wav"
            synthesize(run, text, out, vocoder=vocoder_run, max_frames=engine.max_frames,
                       stream=stream, overrides=list(DECODE))  # fmt: skip
            made[text, stream] = out.read_bytes()
        return made[text, stream]

    return wav


@pytest.fixture
def anyio_backend() -> str:
    """The async tests run on asyncio, the loop uvicorn serves on (trio, which selenium
    brings, is not one the server supports)."""
    return "asyncio"
