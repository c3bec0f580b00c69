"""The recipes of `recipes/`: each loads in both packages and trains the preset its name
promises; `xtts-train check` accepts the CPU recipe, and what check validates before it
compiles accepts the others; the CPU recipe trains a few steps on a tiny corpus."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from train_helpers import as_cli, train_cli

import xtts_data as xd
from xtts_bench.hlo import ljspeech_spec
from xtts_data.config import load_config
from xtts_train.cli import main
from xtts_train.compile import memory
from xtts_train.compile.memory import check_training_memory
from xtts_train.config import ModelConfig, load_stack_config
from xtts_train.tasks.registry import build_steps, task_class
from xtts_train.training.steps import kept_dtype_policy

RECIPES = sorted((Path(__file__).resolve().parents[1] / "recipes").glob("*.yaml"))
CPU_TINY = next(path for path in RECIPES if path.stem == "cpu-tiny")

# What each file name promises: the config section and preset of the network it trains.
PRESET_OF = {
    "cpu-tiny": ("model", "tiny"),
    "cpu-vocoder": ("vocoder", "small"),
    "cpu-voices": ("model", "tiny-voices"),
    "gpu-small": ("model", "small"),
    "gpu-base": ("model", "base"),
    "gpu-vocoder": ("vocoder", "base"),
}
# The host whose memory `fit` checks a text-to-mel recipe's steps against (half of it):
# a laptop for the CPU recipe, GPU machines as the recipes' headers name them.
HOST_GIB = {"cpu-tiny": 8, "cpu-voices": 8, "gpu-small": 32, "gpu-base": 64}

# Overrides that keep the CPU recipe's run tiny and fast; none is a feature setting, so
# the cache built from the recipe serves them.
TINY = [
    "data.batch_size=4",  # 24 clips: batches of 16 would each hold most of the corpus
    "data.num_buckets=1",  # one shape to build at warm-up instead of three
    "data.cond_frames=16",  # the clips are 35-86 frames: 64 would be mostly padding
    "train.steps=3",
]  # fmt: skip


@pytest.fixture
def host(monkeypatch):
    """Make `fit`'s memory check see a host of `gib` GiB."""

    def set_host(gib: int) -> None:
        monkeypatch.setattr(memory, "physical_memory", lambda: gib * 2**30)

    return set_host


@pytest.fixture(scope="module")
def features() -> list[str]:
    """Overrides of the recipes' feature settings for this machine. The recipes read
    phonemes (phonemizer + espeak-ng); without them the tests read letters: everything
    else in the recipes is still exercised, and xtts-data tests the phonemes."""
    try:
        xd.normalize_text("Fine day.", xd.TextConfig(phonemes=True, symbols=None))
    except xd.ConfigError:  # no phonemizer, or no espeak-ng for it
        return ["data.text.phonemes=false"]
    return []


@pytest.fixture(scope="module")
def cache(tmp_path_factory, features) -> Path:
    """24 demo clips of 0.4-1 s prepared with the CPU recipe, waveforms kept: a cache with
    them serves the text-to-mel recipes too, and the vocoder recipe needs them."""
    root = tmp_path_factory.mktemp("recipes")
    xd.write_demo_corpus(root / "corpus", n=24, min_seconds=0.4, max_seconds=1.0, seed=3)
    audio, data = load_config(CPU_TINY, [*features, "data.keep_audio=true"])
    xd.prepare(root / "corpus", root / "cache", audio=audio, data=data)
    return root / "cache"


def test_every_recipe_names_its_preset():
    assert {path.stem for path in RECIPES} == set(PRESET_OF)


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda path: path.stem)
def test_recipe_loads_in_both_packages_with_its_preset(recipe):
    stack = load_stack_config(recipe)
    assert load_config(recipe) == (stack.audio, stack.data)  # `prepare` reads the same
    section, preset = PRESET_OF[recipe.stem]
    assert stack.train.task == ("vocoder" if section == "vocoder" else "text_to_mel")
    config = getattr(stack, section)
    expected = type(config).from_preset(preset)
    # Every field a preset sets; of the options the voice preset adds to tiny's sizes (a
    # recipe may set them otherwise: cpu-tiny's reduction factor), its own preset's only.
    options = set(ModelConfig.presets["tiny-voices"])
    sizes = (set().union(*type(config).presets.values()) - options) | set(config.presets[preset])
    assert {k: getattr(config, k) for k in sizes} == {k: getattr(expected, k) for k in sizes}


def test_one_cache_serves_every_recipe():
    """The recipes' headers say so: the same audio and feature settings, waveforms aside."""

    def features(recipe):
        stack = load_stack_config(recipe)
        return stack.audio.to_dict(), {**stack.data.cache_settings(), "keep_audio": None}

    assert all(features(recipe) == features(CPU_TINY) for recipe in RECIPES)


@pytest.mark.parametrize("recipe", [p for p in RECIPES if p.stem in HOST_GIB],
                         ids=lambda path: path.stem)  # fmt: skip
def test_text_to_mel_recipe_fits_its_host_at_ljspeech_lengths(recipe, host):
    stack = load_stack_config(recipe)
    host(HOST_GIB[recipe.stem])
    check_training_memory(stack.model, ljspeech_spec(stack))


def test_check_accepts_the_cpu_recipe(cache, features, capsys):
    code = main(["check", "--data", str(cache), "--config", str(CPU_TINY), "--repeats", "1",
                 *as_cli([*features, *TINY])])  # fmt: skip
    assert code == 0
    assert "ok: one trace per shape, no retrace" in capsys.readouterr().out


# `check` compiles every shape of the model: seconds for the tiny CPU recipe (above), but
# minutes for the small and base presets on a CPU, past what the suite can spend. So for
# the other recipes these run what check runs before its first compile: the config
# against the cache's settings, the cache opened with them (waveforms for the vocoder),
# the pipeline and its spec, the memory check, and the model and optimizer built under the
# recipe's precision. The text-to-mel memory check is run at LJSpeech's shapes
# (`ljspeech_spec`) on the host the recipe names.
@pytest.mark.parametrize("recipe", [p for p in RECIPES if p != CPU_TINY],
                         ids=lambda path: path.stem)  # fmt: skip
def test_what_check_runs_before_compiling_accepts_the_recipe(recipe, cache, features, host):
    stack = load_stack_config(recipe, features, cache=cache)
    opened = xd.FeatureCache.open(cache, audio=stack.audio, data=stack.data)
    model = dataclasses.replace(stack.model, vocab_size=opened.tokenizer.vocab_size)
    stack = dataclasses.replace(stack, model=model)
    pipeline = task_class(stack.train.task).pipeline(opened, stack.data, "train", repeat=True)
    spec = pipeline.spec
    if recipe.stem in HOST_GIB:
        host(HOST_GIB[recipe.stem])
        spec = ljspeech_spec(stack)
    with kept_dtype_policy():
        steps = build_steps(stack, spec)
    assert steps.traces == {}  # built, nothing compiled yet


@pytest.mark.slow  # a whole fit in its own process, as a user runs it: `hatch run test-slow`
def test_the_cpu_recipe_trains_a_few_steps(cache, features, tmp_path):
    # In its own process, as a user runs it; the programs it builds leave with it.
    done = train_cli("fit", "--data", str(cache), "--workdir", str(tmp_path / "run"),
                     "--config", str(CPU_TINY), "--quiet", *as_cli([*features, *TINY]))  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["steps"] == 3
    assert summary["retraces_after_warmup"] == 0
    assert np.isfinite(summary["final_loss"])
    run = load_stack_config(tmp_path / "run" / "config.yaml")
    assert (run.model.reduction_factor, run.data.trim_top_db) == (2, 40)  # the recipe's
