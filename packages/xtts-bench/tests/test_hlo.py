"""`xtts-bench hlo export` and its runner: the exported train step of the tiny preset, run
by jaxlib's XLA in a process without TensorFlow, updates the weights as TensorFlow's own
XLA run of the same step from the same state does; the manifest describes every
parameter; a bad cache is one line and exit code 2."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import xtts_data as xd
from xtts_bench.cli import main
from xtts_bench.errors import SettingsError
from xtts_bench.hlo import (
    ROLES,
    ExportConfig,
    build_programs,
    ljspeech_spec,
    load_parameters,
    parameter_values,
    runner,
    write_programs,
)
from xtts_data.config import load_config
from xtts_train import kept_dtype_policy, load_stack_config

RECIPE = Path(__file__).resolve().parents[3] / "recipes" / "cpu-tiny.yaml"
# The tiny preset at one small shape: one compile on each side. Letters, not phonemes:
# the export does not depend on the text's symbols.
OVERRIDES = ("data.text.phonemes=false", "data.batch_size=4", "data.num_buckets=1",
             "data.cond_frames=16")  # fmt: skip
UPDATED = ("variable", "optimizer_slot", "step_counter", "seed", "other")


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    """24 demo clips of 0.4-1 s prepared with the CPU recipe (letters)."""
    root = tmp_path_factory.mktemp("hlo")
    xd.write_demo_corpus(root / "corpus", n=24, min_seconds=0.4, max_seconds=1.0, seed=3)
    audio, data = load_config(RECIPE, list(OVERRIDES))
    xd.prepare(root / "corpus", root / "cache", audio=audio, data=data)
    return root / "cache"


@pytest.fixture(scope="module")
def exported(cache, tmp_path_factory):
    """The export folder and manifest, the TensorFlow outputs of one step from the exported
    state (by output name; the variables after it by parameter index), and the state
    before it."""
    out = tmp_path_factory.mktemp("export")
    config = ExportConfig(out=out, config=RECIPE, overrides=OVERRIDES, data=cache, inputs=True)
    with kept_dtype_policy():
        stack, steps, programs = build_programs(config)
        manifest = write_programs(config, stack, steps, programs)
        program, entry = programs[0], manifest["programs"][0]
        with np.load(out / entry["inputs"]) as stored:
            before = [stored[f"p{i}"] for i in range(len(entry["parameters"]))]
        inputs = load_parameters(program, steps, before)
        outputs = {k: v.numpy() for k, v in program.function(*inputs).items()}
        after = parameter_values(program, steps)
    return out, manifest, outputs, before, after


def test_runner_step_matches_tensorflow_xla(exported, tmp_path):
    pytest.importorskip("jax")
    out, manifest, tf_outputs, before, tf_after = exported
    entry = manifest["programs"][0]
    # jax in its own process: it and TensorFlow each bring an XLA.
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    done = subprocess.run(
        [sys.executable, str(out / "runner.py"), str(out), "--program", entry["name"],
         "--inputs", str(out / entry["inputs"]), "--outputs", str(tmp_path / "jax.npz")],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    with np.load(tmp_path / "jax.npz") as stored:
        jax_outputs = [stored[f"o{o['index']}"] for o in entry["outputs"]]
    names = [o["name"] for o in entry["outputs"]]
    assert bool(tf_outputs["finite"])
    assert bool(jax_outputs[names.index("finite")])
    np.testing.assert_allclose(jax_outputs[names.index("loss")], tf_outputs["loss"], rtol=2e-6)
    changed = 0
    for alias in entry["aliases"]:
        parameter = entry["parameters"][alias["parameter"]]
        got, want = jax_outputs[alias["output"]], tf_after[alias["parameter"]]
        if parameter["dtype"].startswith(("int", "uint", "bool")):  # seeds, the counter
            np.testing.assert_array_equal(got, want, err_msg=parameter["name"])
        else:
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6, err_msg=parameter["name"])
        changed += not np.array_equal(want, before[alias["parameter"]])
    assert changed > len(entry["aliases"]) // 2  # the step updated the weights


def test_manifest_describes_every_parameter(exported):
    out, manifest, *_ = exported
    assert json.loads((out / "manifest.json").read_text()) == manifest
    assert manifest["format"] == runner.FORMAT
    (entry,) = manifest["programs"]
    parameters = entry["parameters"]
    assert [p["index"] for p in parameters] == list(range(len(parameters)))
    assert all(p["role"] in ROLES for p in parameters)
    roles = {role: sum(p["role"] == role for p in parameters) for role in ROLES}
    assert sum(roles.values()) == len(parameters)
    assert (roles["batch"], roles["flag"], roles["step_counter"]) == (10, 1, 1)
    assert roles["optimizer_slot"] == 2
    assert min(roles["seed"], roles["variable"]) > 0
    aliased = {a["parameter"] for a in entry["aliases"]}
    assert all(parameters[i]["role"] in UPDATED for i in aliased)
    assert {i for i, p in enumerate(parameters) if p["role"] in UPDATED} == aliased
    assert entry["flops"] is None
    assert "no XLA cost analysis" in manifest["flops_note"]
    assert len(gzip.decompress((out / entry["file"]).read_bytes())) == entry["hlo_bytes"]
    assert (out / "runner.py").read_text() == Path(runner.__file__).read_text()


def test_synthetic_inputs_follow_the_fill_rules(exported):
    _, manifest, *_ = exported
    parameters = manifest["programs"][0]["parameters"]
    values = dict(zip([p["name"] for p in parameters], runner.synthetic_inputs(parameters),
                      strict=True))  # fmt: skip
    for parameter in parameters:
        value = values[parameter["name"]]
        assert (list(value.shape), str(value.dtype)) == (parameter["shape"], parameter["dtype"])
    tokens, lengths = values["batch/tokens"], values["batch/token_lengths"]
    assert tokens.min() >= 1
    assert tokens.max() < manifest["model"]["vocab_size"]
    assert lengths.min() >= 1
    assert lengths.max() == tokens.shape[1]
    np.testing.assert_array_equal(values["batch/token_mask"].sum(axis=1), lengths)
    mel_lengths, stop = values["batch/mel_lengths"], values["batch/stop_targets"]
    np.testing.assert_array_equal(stop.argmax(axis=1), mel_lengths - 1)
    assert values["velocity"].min() > 0


def test_ljspeech_shapes_are_planned_without_a_cache():
    stack = load_stack_config(RECIPE, ["data.text.phonemes=false"])
    spec = ljspeech_spec(stack)
    assert len(spec.shapes) == stack.data.num_buckets
    assert max(s.frames for s in spec.shapes) > 800  # LJSpeech's 10 s clips


@pytest.mark.parametrize("kwargs", [{}, {"data": Path("cache"), "ljspeech": True},
                                    {"ljspeech": True, "inputs": True}])  # fmt: skip
def test_export_config_needs_one_source_of_shapes(kwargs, tmp_path):
    with pytest.raises(SettingsError, match="Expected"):
        ExportConfig(out=tmp_path, **kwargs)


def test_a_missing_cache_is_one_line_and_exit_2(tmp_path, capsys):
    code = main(["hlo", "export", "--data", str(tmp_path / "missing"), "--config", str(RECIPE),
                 "--out", str(tmp_path / "out")])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1
    assert err.startswith("xtts-bench hlo: error:")


def test_export_builds_programs_for_a_machine_bigger_than_this_one(monkeypatch, tmp_path):
    """The programs run elsewhere: the host's memory check, which `fit` runs, is off."""
    from xtts_train.compile import memory

    monkeypatch.setattr(memory, "physical_memory", lambda: 2**20)  # 1 MiB here
    config = ExportConfig(out=tmp_path, config=RECIPE, ljspeech=True, buckets=(-1,),
                          overrides=("data.text.phonemes=false", "model.vocab_size=40"))  # fmt: skip
    with kept_dtype_policy():
        stack, steps, programs = build_programs(config)
    assert [p.key for p in programs] == [ljspeech_spec(stack).shapes[-1].key]
    assert steps.traces == {}  # built, nothing traced
