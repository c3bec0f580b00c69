"""Memory estimates: how they grow with the shapes, the checks' limits, and `fit` refusing
sizes that cannot fit before it compiles anything."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest
from train_helpers import MICRO, OVERRIDES, as_cli

from xtts_audio import MelConfig
from xtts_data import BatchShape, DatasetSpec
from xtts_train.cli import main
from xtts_train.compile import memory
from xtts_train.compile.memory import (
    check_decoding_memory,
    check_training_memory,
    decoding_bytes,
    training_bytes,
)
from xtts_train.config import DecodeConfig, ModelConfig, load_stack_config
from xtts_train.errors import ConfigError
from xtts_train.models.text_to_mel.decoding import Decoding
from xtts_train.models.text_to_mel.model import TextToMel, dummy_batch
from xtts_train.tasks.text_to_mel import TextToMelTask
from xtts_train.training.steps import CompiledSteps

TINY = ModelConfig.from_preset("tiny")
GiB = 2**30


@pytest.fixture
def sixteen_gib(monkeypatch):
    """A machine of 16 GiB, whatever this one has: the checks' limits are then exact."""
    monkeypatch.setattr(memory, "physical_memory", lambda: 16 * GiB)


def _row(config: ModelConfig, text: int, frames: int, cond: int = 128) -> int:
    """Bytes one more row of a shape adds."""
    one, two = (training_bytes(config, b, text, frames, cond_frames=cond) for b in (1, 2))
    return two - one


def _second_difference(f, x: int) -> int:
    return f(3 * x) - 2 * f(2 * x) + f(x)


def test_training_estimate_is_linear_in_batch():
    sizes = [training_bytes(TINY, b, 64, 512, cond_frames=128) for b in (1, 2, 3, 8)]
    assert sizes[1] - sizes[0] == sizes[2] - sizes[1] == (sizes[3] - sizes[0]) // 7 > 0
    assert sizes[0] > 9 * 4 * 1_400_000  # weights, AdamW's moments, gradients, update


@pytest.mark.parametrize("r", [1, 2])
def test_dense_training_attention_is_quadratic_in_frames_and_text(r):
    config = dataclasses.replace(TINY, reduction_factor=r, attention_block=0)
    frames = _second_difference(lambda f: _row(config, 64, f), 256)
    assert _second_difference(lambda f: _row(config, 64, f), 512) == 4 * frames
    # decoder self-attention: 4 copies x heads x (F / r)² per layer, second difference 2 x
    assert frames == 2 * 4 * config.heads * config.decoder_layers * (256 // r) ** 2 * 4
    text = _second_difference(lambda t: _row(config, t, 512), 64)
    assert _second_difference(lambda t: _row(config, t, 512), 128) == 4 * text


def test_blocked_training_attention_is_linear_in_frames_past_the_block():
    config = dataclasses.replace(TINY, attention_block=128)
    assert _second_difference(lambda f: _row(config, 64, f), 256) == 0  # 256 .. 768 frames
    # one block of scores at a time, against every key: grows with the frames
    assert _row(config, 64, 1024) - _row(config, 64, 512) == pytest.approx(
        2 * (_row(config, 64, 512) - _row(config, 64, 256)), rel=0.01)  # fmt: skip
    dense = dataclasses.replace(TINY, attention_block=0)
    assert _row(config, 64, 1024) < 0.6 * _row(dense, 64, 1024)


def test_training_estimate_grows_with_the_model():
    small = ModelConfig.from_preset("small")
    assert training_bytes(small, 8, 64, 512, cond_frames=128) > 2 * training_bytes(
        TINY, 8, 64, 512, cond_frames=128
    )


@pytest.mark.parametrize("overrides", [{}, {"reduction_factor": 3, "postnet_layers": 1,
                                            "cond_convs": 1, "vocab_size": 90,
                                            "voice_pitch": True},
                                       {"alignment": "relative"},
                                       {"alignment": "relative", "decoder_layers": 3}])  # fmt: skip
def test_parameter_count_from_the_sizes_is_the_model_s(overrides):
    config = dataclasses.replace(ModelConfig.from_preset("tiny"), **overrides)
    model = TextToMel(config, MelConfig.from_preset("xtts"))
    model(dummy_batch(config))
    assert memory._parameters(config) == model.parameter_count()


@pytest.mark.parametrize(("name", "value"), [("batch", 0), ("frames", 2.5), ("text", True)])
def test_training_estimate_rejects_a_bad_size(name, value):
    sizes = {"batch": 1, "text": 8, "frames": 8, **{name: value}}
    with pytest.raises(ConfigError, match=rf"Expected {name} an int >= 1, received: {name}="):
        training_bytes(TINY, sizes["batch"], sizes["text"], sizes["frames"], cond_frames=16)


def _spec(*shapes: tuple[int, int, int], cond: int = 128) -> DatasetSpec:
    return DatasetSpec(
        tuple(BatchShape(frames=f, text_len=t, batch_size=b) for b, t, f in shapes), 80, cond
    )


def test_training_check_names_the_largest_batch_that_fits(sixteen_gib):
    check_training_memory(TINY, _spec((32, 64, 256), (8, 64, 1024)))
    with pytest.raises(ConfigError) as refused:
        check_training_memory(TINY, _spec((32, 64, 256), (4096, 64, 1024)))
    message = str(refused.value)
    assert re.match(
        r"Expected a batch of at most \d+ rows of 64 tokens x 1024 frames on this machine, "
        r"received: batch shape \(batch, text, frames\)=\(4096, 64, 1024\) \(one training "
        r"step would need about [\d,.]+ GiB, more than half of the 16 GiB here\); lower "
        r"data.batch_size or data.frame_budget .*, or data.max_frames$",
        message,
    )
    fits = int(re.search(r"at most (\d+) rows", message)[1])
    check_training_memory(TINY, _spec((fits, 64, 1024)))
    with pytest.raises(ConfigError):
        check_training_memory(TINY, _spec((fits + 1, 64, 1024)))


@pytest.mark.parametrize(
    ("config", "spec", "fix"),
    [
        (TINY, _spec((1, 64, 10_000_000)), r"lower data.max_frames, data.max_text_len or data.cond_frames"),
        (TINY, _spec((1, 64, 64), cond=10_000_000), r"lower data.max_frames, .*data.cond_frames"),
        (dataclasses.replace(TINY, d_model=65536, heads=4), _spec((1, 8, 8)), r"lower the model's sizes \(model.d_model"),
    ],
)  # fmt: skip
def test_training_check_when_one_row_or_the_model_does_not_fit(sixteen_gib, config, spec, fix):
    with pytest.raises(
        ConfigError, match=rf"Expected a batch shape whose rows fit \(not one row of .*; {fix}"
    ):
        check_training_memory(config, spec)


def test_decoding_estimate_of_the_buffer_and_the_text(sixteen_gib):
    # Linear in the buffer (key/value caches): 100,000 frames fit (the 158 GiB the loop
    # once tried, recomputing the buffer at every step, was quadratic).
    assert decoding_bytes(TINY, 200_000) - decoding_bytes(TINY, 100_000) == pytest.approx(
        decoding_bytes(TINY, 100_000) - decoding_bytes(TINY, 0), rel=1e-3)  # fmt: skip
    assert decoding_bytes(TINY, 100_000) < GiB
    check_decoding_memory(TINY, 100_000, text_len=10)
    check_decoding_memory(TINY, 400, text_len=20_000)
    with pytest.raises(ConfigError, match=r"Expected max_text <= (\d+) tokens on this machine, received: max_text=10000000 .*decode a shorter text$") as refused:  # fmt: skip
        check_decoding_memory(TINY, 400, text_len=10_000_000, text_name="max_text")
    limit = int(re.search(r"<= (\d+) tokens", str(refused.value))[1])
    check_decoding_memory(TINY, 400, text_len=limit)
    with pytest.raises(ConfigError, match="text_len"):
        check_decoding_memory(TINY, 400, text_len=limit + 1)
    with pytest.raises(ConfigError, match=r"Expected max_frames <= (\d+) on this machine") as refused:  # fmt: skip
        check_decoding_memory(TINY, 10**9, text_len=10)
    limit = int(re.search(r"<= (\d+) on", str(refused.value))[1])
    check_decoding_memory(TINY, limit)
    with pytest.raises(ConfigError, match="max_frames"):
        check_decoding_memory(TINY, limit + 1)


def test_decoding_refuses_a_text_too_long_for_memory_before_compiling(sixteen_gib):
    config = load_stack_config(None, MICRO).model
    model = TextToMel(config)
    model(dummy_batch(config))
    decoding = Decoding(model, decode=DecodeConfig(), cond_frames=8, max_frames=16)
    reference = np.zeros([8, config.n_mels], np.float32)
    with pytest.raises(ConfigError, match=r"Expected text_len <= \d+ tokens on this machine, received: text_len=100032 "):  # fmt: skip
        decoding([[5] * 100_000 + [1]], reference)
    assert decoding.programs == 0


@pytest.mark.parametrize(
    ("sizes", "named"),
    [
        (["data.batch_size=1000000"], "data.batch_size"),
        (["data.max_frames=10000000"], "data.max_frames"),  # buckets: a budget of 4 x that
        (["data.policy=fixed", "data.max_frames=2000000"], "data.max_frames"),
        (["model.d_model=65536", "model.heads=4"], "model.d_model"),
    ],
)
def test_fit_refuses_sizes_too_large_for_memory_before_compiling(cache, tmp_path, capsys,
                                                                 monkeypatch, sizes, named):  # fmt: skip
    built, warm_ups = [], []
    monkeypatch.setattr(TextToMelTask, "build", lambda *args, **kw: built.append(args))
    monkeypatch.setattr(CompiledSteps, "warm_up", lambda *args, **kw: warm_ups.append(args))
    args = ["fit", "--data", str(cache), "--workdir", str(tmp_path / "run"), "--quiet"]
    assert main([*args, *as_cli([*OVERRIDES, *MICRO, *sizes])]) == 2
    assert not built  # refused after opening the cache: no model built, nothing compiled
    assert not warm_ups
    assert not (tmp_path / "run" / "config.yaml").exists()  # smaller sizes may follow there
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("xtts-train fit: error: Expected a batch ")
    assert re.search(r"about [\d,.]+ GiB, more than half of the \d+ GiB here", line)
    assert named in line
