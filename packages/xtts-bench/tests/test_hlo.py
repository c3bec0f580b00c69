"""`xtts-bench hlo export` and its runner: the exported train step of the tiny preset, run
by jaxlib's XLA in a process without TensorFlow, updates the weights as TensorFlow's own
XLA run of the same step from the same state does (the eval step and the decoding
likewise, in the slow tier); the manifest describes every parameter; a bad cache is one
line and exit code 2."""

from __future__ import annotations

import gzip
import json
import os
import shutil
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
    STOP_BIAS,
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

RECIPES = Path(__file__).resolve().parents[3] / "recipes"
RECIPE = RECIPES / "cpu-tiny.yaml"
# The tiny preset at one small shape: one compile on each side. Letters, not phonemes:
# the export does not depend on the text's symbols. (Not train_helpers' MICRO model: on it
# Adam's update of a weight with no gradient, rounding alone, came out of the runner
# check's tolerance once in two runs.)
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
    """The export folder and manifest, and per program name (on first use: each costs an
    XLA compile) the TensorFlow outputs of one run from the exported state (by output
    name), the parameters after it and the state before it. The decoding's state has the
    stop head's bias set low (as its fill rule does), so that it runs its whole buffer."""
    out = tmp_path_factory.mktemp("export")
    config = ExportConfig(out=out, config=RECIPE, overrides=OVERRIDES, data=cache, inputs=True)
    with kept_dtype_policy():
        stack, steps, programs = build_programs(config)
        manifest = write_programs(config, stack, steps, programs)
    _never_stop(out, _program(manifest, "decode"))
    return out, manifest, _TensorFlowRuns(out, manifest, steps, programs)


class _TensorFlowRuns(dict):
    """{program name: (outputs, parameters before, parameters after)} of one TensorFlow
    (XLA) run from the exported inputs, each run when first read: the default tier reads
    the train step's alone."""

    def __init__(self, out: Path, manifest: dict, steps, programs) -> None:
        super().__init__()
        self.out, self.steps = out, steps
        self.programs = dict(zip([e["name"] for e in manifest["programs"]],
                                 zip(programs, manifest["programs"], strict=True),
                                 strict=True))  # fmt: skip

    def __missing__(self, name: str) -> tuple:
        program, entry = self.programs[name]
        with np.load(self.out / entry["inputs"]) as stored:
            before = [stored[f"p{i}"] for i in range(len(entry["parameters"]))]
        with kept_dtype_policy():
            inputs = load_parameters(program, self.steps, before)
            outputs = {k: v.numpy() for k, v in program.function(*inputs).items()}
            self[name] = (outputs, before, parameter_values(program, self.steps))
        return self[name]


@pytest.fixture(scope="module")
def checked(exported, tmp_path_factory) -> dict:
    """{program name: the runner's outputs (in output order) of one run of it from its
    exported state}, in a process with jax and without TensorFlow, one process for the
    programs first asked for together (`_Checked.of`)."""
    pytest.importorskip("jax")
    out, manifest, _ = exported
    return _Checked(out, manifest, tmp_path_factory.mktemp("jax"))


class _Checked(dict):
    def __init__(self, out: Path, manifest: dict, result: Path) -> None:
        super().__init__()
        self.out, self.manifest, self.result = out, manifest, result

    def of(self, *kinds: str) -> dict:
        """Run the programs of `kinds` not run yet (one runner process); returns self."""
        names = [_program(self.manifest, kind)["name"] for kind in kinds]
        wanted = [name for name in names if name not in self]
        if wanted:
            # jax in its own process: it and TensorFlow each bring an XLA.
            env = {**os.environ, "JAX_PLATFORMS": "cpu"}
            chosen = [arg for name in wanted for arg in ("--program", name)]
            done = subprocess.run([sys.executable, str(self.out / "runner.py"), str(self.out),
                                   "--check", str(self.result), *chosen], capture_output=True,
                                  text=True, env=env, timeout=600)  # fmt: skip
            assert done.returncode == 0, done.stderr[-3000:]
        for entry in self.manifest["programs"]:
            if entry["name"] in wanted:
                with np.load(self.result / f"{entry['name']}.outputs.npz") as stored:
                    self[entry["name"]] = [stored[f"o{o['index']}"] for o in entry["outputs"]]
        return self


def _never_stop(out: Path, entry: dict) -> None:
    """Set the stop head's bias in the decoding's exported inputs to its fill's value."""
    path = out / entry["inputs"]
    with np.load(path) as stored:
        values = dict(stored)
    for parameter in entry["parameters"]:
        if parameter["fill"].get("value") == STOP_BIAS:
            key = f"p{parameter['index']}"
            values[key] = np.full_like(values[key], STOP_BIAS)
    np.savez_compressed(path, **values)


def _program(manifest: dict, kind: str) -> dict:
    (entry,) = [e for e in manifest["programs"] if e["kind"] == kind]
    return entry


def _by_name(entry: dict, values: list) -> dict:
    return {o["name"]: v for o, v in zip(entry["outputs"], values, strict=True)}


def test_exported_programs_are_the_runs_train_eval_and_decoding(exported):
    _, manifest, _ = exported
    (shape,) = {tuple(e["shape"]) for e in manifest["programs"] if e["kind"] != "decode"}
    names = [e["name"] for e in manifest["programs"]]
    decode = _program(manifest, "decode")
    rows, text, reference, buffer = decode["shape"]
    assert names == [f"train_{'x'.join(map(str, shape))}", f"eval_{'x'.join(map(str, shape))}",
                     f"decode_{rows}x{text}x{reference}x{buffer}"]  # fmt: skip
    assert (rows, decode["frames"]) == (8, buffer)
    assert text >= shape[1]  # the longest bucket's text,
    assert text % 32 == 0  # bucketed
    assert buffer == 2 * shape[2] + (-2 * shape[2] % 32)  # room for twice its frames
    evaluation = _program(manifest, "eval")
    updated = [evaluation["parameters"][a["parameter"]] for a in evaluation["aliases"]]
    assert {p["role"] for p in updated} <= {"seed"}  # no weight, no optimizer state


def test_runner_step_matches_tensorflow_xla(exported, checked):
    _, manifest, runs = exported
    checked = checked.of("train")
    entry = _program(manifest, "train")
    tf_outputs, before, tf_after = runs[entry["name"]]
    jax_outputs = _by_name(entry, checked[entry["name"]])
    assert bool(tf_outputs["finite"])
    assert bool(jax_outputs["finite"])
    np.testing.assert_allclose(jax_outputs["loss"], tf_outputs["loss"], rtol=2e-6)
    changed = 0
    for alias in entry["aliases"]:
        parameter = entry["parameters"][alias["parameter"]]
        got, want = checked[entry["name"]][alias["output"]], tf_after[alias["parameter"]]
        if parameter["dtype"].startswith(("int", "uint", "bool")):  # seeds, the counter
            np.testing.assert_array_equal(got, want, err_msg=parameter["name"])
        else:  # Adam scales a near-zero gradient up to a whole step, and its rounding with
            # it (seen: one of 3,328 embedding weights 6.8e-6 apart on one host): each
            # element within 2% of the parameter's largest update
            update = np.abs(want - before[alias["parameter"]]).max()
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6 + 0.02 * update,
                                       err_msg=parameter["name"])  # fmt: skip
        changed += not np.array_equal(want, before[alias["parameter"]])
    assert changed > len(entry["aliases"]) // 2  # the step updated the weights


# Two more XLA compiles on each side: the runner's check of the train step (above) stays in
# the default tier, this one in `hatch run test-slow`.
@pytest.mark.slow
def test_runner_eval_and_decoding_match_tensorflow_xla(exported, checked):
    _, manifest, runs = exported
    checked = checked.of("eval", "decode")
    evaluation = _program(manifest, "eval")
    tf_eval = runs[evaluation["name"]][0]
    jax_eval = _by_name(evaluation, checked[evaluation["name"]])
    assert set(tf_eval) <= set(jax_eval)  # and the updated seed state
    for name, value in tf_eval.items():
        np.testing.assert_allclose(jax_eval[name], value, rtol=2e-6, err_msg=name)
    decode = _program(manifest, "decode")
    tf_decode = runs[decode["name"]][0]
    jax_decode = _by_name(decode, checked[decode["name"]])
    np.testing.assert_array_equal(tf_decode["lengths"], decode["frames"])  # never stopped
    np.testing.assert_array_equal(jax_decode["lengths"], tf_decode["lengths"])
    for name in ("mel", "mel_before", "stop_probs", "attention"):
        np.testing.assert_allclose(jax_decode[name], tf_decode[name], rtol=1e-3, atol=1e-4,
                                   err_msg=name)  # fmt: skip


def test_manifest_describes_every_parameter(exported):
    out, manifest, *_ = exported
    assert json.loads((out / "manifest.json").read_text()) == manifest
    assert manifest["format"] == runner.FORMAT
    entry = _program(manifest, "train")
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
    assert (manifest["task"], entry["batch_share"]) == ("text_to_mel", 1.0)  # one bucket
    assert entry["batch_frames"] == [entry["shape"][0], entry["shape"][2]]  # rows, frames
    assert "no XLA cost analysis" in manifest["flops_note"]
    assert len(gzip.decompress((out / entry["file"]).read_bytes())) == entry["hlo_bytes"]
    assert (out / "runner.py").read_text() == Path(runner.__file__).read_text()
    decode = _program(manifest, "decode")
    roles = [p["role"] for p in decode["parameters"]]
    assert roles[:4] == ["batch"] * 4
    assert set(roles[4:]) <= {"variable", "other"}  # the weights, read and not updated
    assert decode["aliases"] == []


def test_synthetic_inputs_follow_the_fill_rules(exported):
    _, manifest, *_ = exported
    parameters = _program(manifest, "train")["parameters"]
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


def test_synthetic_decoding_fill_rules_never_stop(exported):
    """Filled by the manifest, no row stops (the GPU script's test runs it: every frame of
    its buffer)."""
    _, manifest, _ = exported
    decode = _program(manifest, "decode")
    parameters = decode["parameters"]
    values = dict(zip([p["name"] for p in parameters], runner.synthetic_inputs(parameters),
                      strict=True))  # fmt: skip
    assert values["batch/token_mask"].min() == 1.0
    assert values["batch/tokens"].min() >= 1
    assert values["batch/cond_lengths"].max() == decode["shape"][2]  # the reference's frames
    (bias,) = [p["name"] for p in parameters if p["fill"].get("value") == STOP_BIAS]
    assert "stop_head" in bias
    np.testing.assert_array_equal(values[bias], STOP_BIAS)


@pytest.mark.parametrize("recipe", [RECIPE, RECIPES / "gpu-small.yaml", RECIPES / "gpu-base.yaml"])
def test_ljspeech_shapes_are_planned_without_a_cache(recipe):
    stack = load_stack_config(recipe, ["data.text.phonemes=false"])
    spec = ljspeech_spec(stack)
    assert len(spec.shapes) == stack.data.num_buckets  # benchmarks/hlo_gpu.sh counts on 8
    assert max(s.frames for s in spec.shapes) > 800  # LJSpeech's 10 s clips


@pytest.mark.slow  # the shell script and its runner processes: `hatch run test-slow`
def test_the_gpu_script_runs_every_program_of_an_export(exported, tmp_path):
    """benchmarks/hlo_gpu.sh's `run`, here on jaxlib's CPU: one JSON line per program."""
    pytest.importorskip("jax")
    out, manifest, _ = exported
    shutil.copytree(out, tmp_path / "1-small")
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "STEPS": "1", "WARMUP": "0"}
    env.pop("OUT", None)
    done = subprocess.run(["bash", str(RECIPES.parent / "benchmarks" / "hlo_gpu.sh"), "run",
                           str(tmp_path)], capture_output=True, text=True, env=env,
                          timeout=900)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert [r["name"] for r in lines] == [e["name"] for e in manifest["programs"]]
    assert all(r["device"].startswith("cpu") and r["step_ms_median"] > 0 for r in lines)
    decoding = lines[-1]  # on the manifest's synthetic values: no row stopped
    assert decoding["frames_run"] == manifest["programs"][-1]["frames"]
    assert decoding["ms_per_frame"] == pytest.approx(
        decoding["step_ms_median"] / decoding["frames_run"]
    )
    assert "CpuDevice" in (tmp_path / "device.txt").read_text()  # jax's devices, named


@pytest.mark.parametrize("kwargs", [{}, {"data": Path("cache"), "ljspeech": True},
                                    {"ljspeech": True, "inputs": True}])  # fmt: skip
def test_export_config_needs_one_source_of_shapes(kwargs, tmp_path):
    with pytest.raises(SettingsError, match="Expected"):
        ExportConfig(out=tmp_path, **kwargs)


@pytest.mark.parametrize(("extra", "said"), [
    (["--data", "missing"], "missing"),
    (["--ljspeech", "--program", "vocode"], "received: vocode"),
    (["--ljspeech", "--decode-batch", "0"], "--decode-batch >= 1"),
    (["--ljspeech", "--program", "decode", "--set", "train.task=vocoder"], "no decoding"),
])  # fmt: skip
def test_a_bad_export_is_one_line_and_exit_2(extra, said, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = main(["hlo", "export", "--config", str(RECIPE), "--out", str(tmp_path / "out"),
                 *extra])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1
    assert said in err
    assert err.startswith("xtts-bench hlo: error:")


def test_export_builds_programs_for_a_machine_bigger_than_this_one(monkeypatch, tmp_path):
    """The programs run elsewhere: the host's memory check, which `fit` runs, is off."""
    from xtts_train.compile import memory

    monkeypatch.setattr(memory, "physical_memory", lambda: 2**20)  # 1 MiB here
    config = ExportConfig(out=tmp_path, config=RECIPE, ljspeech=True, buckets=(-1,),
                          overrides=("data.text.phonemes=false", "model.vocab_size=40"))  # fmt: skip
    with kept_dtype_policy():
        stack, steps, programs = build_programs(config)
    longest = ljspeech_spec(stack).shapes[-1].key
    assert [(p.kind, p.key[:3]) for p in programs] == [
        ("train", longest),
        ("eval", longest),
        ("decode", (8, 192, stack.reference_frames)),
    ]
    assert 0 < programs[0].share == programs[1].share < 1  # LJSpeech's longest bucket
    assert programs[-1].frames == 2 * longest[2] + (-2 * longest[2] % 32)
    assert steps.traces == {}  # built, nothing traced
