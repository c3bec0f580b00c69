"""The trainer trains tasks: the vocoder task keeps the text-to-mel task's contract (one
program per static shape, retrace = error, the non-finite gate, exact resume, `check`,
metrics, TensorBoard, summary.json), with one segment shape per run."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tensorflow as tf
import yaml
from train_helpers import VOCODER, as_cli, vocoder_fit

import xtts_audio as xa
from xtts_data import SegmentShape, SegmentSpec, read_utterances
from xtts_train.cli import main
from xtts_train.config import TrainConfig, VocoderConfig, load_stack_config
from xtts_train.inference.vocoding import Vocoding, Waveforms
from xtts_train.models.vocoder.model import Vocoder
from xtts_train.runs.loading import load_run_config
from xtts_train.tasks.registry import task_class
from xtts_train.tasks.text_to_mel import TextToMelTask
from xtts_train.tasks.vocoder import VocoderTask
from xtts_train.training.optim import AdamW
from xtts_train.training.steps import CompiledSteps, RetraceError

AUDIO = xa.MelConfig.from_preset("xtts")
MICRO = VocoderConfig.from_preset("tiny", dim=32, intermediate=64, layers=1)
SPEC = SegmentSpec(shapes=(SegmentShape(batch_size=2, frames=8, samples=8 * 256),),
                   n_mels=80, hop_length=256)  # fmt: skip
KEY = (2, 8, 8 * 256)


def _segments(frames: int = 8, *, nan: bool = False) -> dict[str, tf.Tensor]:
    """Two segments of a 220 Hz tone and its features: a batch of the task's shape."""
    t = np.arange(frames * 256, dtype=np.float32) / AUDIO.sample_rate
    audio = np.stack([0.5 * np.sin(2 * np.pi * 220 * t), 0.3 * np.sin(2 * np.pi * 330 * t)])
    mel = xa.mel_features(tf.constant(audio), AUDIO)[:, :frames]  # (2, frames, 80)
    if nan:
        mel = tf.fill(mel.shape, float("nan"))
    return {"mel": tf.cast(mel, tf.float32), "audio": tf.constant(audio, tf.float32)}


@pytest.fixture(scope="module", params=["xla", "graph"])
def steps(request):
    """The vocoder's compiled steps at one segment shape, by each compiler."""
    model = Vocoder(MICRO)
    model(tf.zeros([1, 4, 80]))
    config = TrainConfig(max_nonfinite=2, compiler=request.param)
    compiled = CompiledSteps(VocoderTask(model, AUDIO, MICRO), AdamW(model.trainable_variables),
                             SPEC, config, eval_spec=SPEC)  # fmt: skip
    compiled.report = compiled.warm_up(workers=1)
    return compiled


def test_the_vocoder_compiles_its_one_shape_once_and_changes_no_weight(steps):
    assert steps.traces == {KEY: 1}
    assert steps.eval_traces == {KEY: 1}
    assert int(steps.optimizer.iterations) == 0
    assert [p.name for p in steps.report.programs] == ["train 2x8x2048", "eval 2x8x2048"]
    assert {p.compiler for p in steps.report.programs} == {steps.config.compiler}


def test_vocoder_steps_learn_and_never_retrace(steps):
    batch = _segments()
    first = float(steps.evaluate(batch)["loss"])
    for step in range(30):
        outputs = steps.train(batch, step=100 + step)  # past the warm-up: full rate
        assert bool(outputs["finite"])
    losses = steps.evaluate(batch)
    assert set(losses) >= {"loss", "mel_l1", "stft"}
    assert float(losses["loss"]) < 0.8 * first  # one batch, 30 updates: a wide margin
    assert steps.traces == {KEY: 1}
    assert steps.eval_traces == {KEY: 1}


def test_a_nan_segment_batch_is_skipped(steps):
    before = [v.numpy().copy() for v in steps.model.trainable_variables]
    skipped = int(steps.nonfinite)
    assert not bool(steps.train(_segments(nan=True), step=5)["finite"])
    assert int(steps.nonfinite) == skipped + 1
    for old, new in zip(before, steps.model.trainable_variables, strict=True):
        np.testing.assert_array_equal(old, new.numpy())


def test_a_segment_shape_outside_the_spec_is_a_retrace_error(steps):
    with pytest.raises(RetraceError, match=r"\(2, 16, 4096\) is not one of the 1 compiled"):
        steps.train(_segments(16), step=5)
    assert steps.traces == {KEY: 1}


@pytest.mark.parametrize(("task", "cls"), [("text_to_mel", TextToMelTask),
                                           ("vocoder", VocoderTask)])  # fmt: skip
def test_train_task_picks_the_task(task, cls):
    assert task_class(load_stack_config(None, [f"train.task={task}"]).train.task) is cls


def test_an_unknown_task_is_refused_naming_the_known_ones(cache, tmp_path, capsys):
    with pytest.raises(ValueError, match=r"TrainConfig.task: expected a task's name"):
        load_stack_config(None, ["train.task=hifi-gan"])
    with pytest.raises(
        ValueError,
        match=r"^Expected train.task one of \['text_to_mel', 'vocoder'\], received: 'hifigan'$",
    ):
        task_class("hifigan")
    assert main(["fit", "--data", str(cache), "--workdir", str(tmp_path / "run"),
                 "--task", "hifigan"]) == 2  # fmt: skip
    assert "received: 'hifigan'" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


# -- fit --task vocoder, on a cache that keeps its waveforms ----------------------------


def test_fit_trains_the_vocoder_with_one_program(vocoder_run):
    summary, workdir = vocoder_run
    assert summary["task"] == "vocoder"
    assert summary["steps"] == 20
    assert summary["traces"] == summary["compiled_shapes"] == summary["spec_shapes"] == 1
    assert summary["retraces_after_warmup"] == 0
    lines = [json.loads(x) for x in (workdir / "metrics.jsonl").read_text().splitlines()]
    logged = [line for line in lines if "loss" in line]
    assert {"mel_l1", "stft", "grad_norm", "lr"} <= set(logged[-1])
    assert all(np.isfinite(line["loss"]) for line in logged)
    assert not (workdir / "reference.npy").exists()  # a text-to-mel run's only
    tags = _tensorboard_tags(workdir / "tensorboard")
    assert {"vocoder/vocoded", "vocoder/recording", "vocoder/mel_recording_then_vocoded"} <= tags


def _tensorboard_tags(logdir) -> set[str]:
    tags = set()
    for path in logdir.glob("events.out.tfevents.*"):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            tags.update(value.tag for value in event.summary.value)
    return tags


def test_a_resumed_vocoder_run_computes_what_an_uninterrupted_one_does(
    audio_cache, vocoder_run, tmp_path
):
    _, straight = vocoder_run
    workdir = tmp_path / "resumed"
    assert vocoder_fit(audio_cache, workdir, 10)["steps"] == 10
    summary = vocoder_fit(audio_cache, workdir, 20)
    assert summary["steps_this_run"] == 10
    ours, theirs = (tf.train.load_checkpoint(str(w / "checkpoints" / "ckpt-20"))
                    for w in (workdir, straight))  # fmt: skip
    names = sorted(ours.get_variable_to_shape_map())
    assert names == sorted(theirs.get_variable_to_shape_map())
    names.remove("_CHECKPOINTABLE_OBJECT_GRAPH")  # names the layers as the process did
    assert len(names) > 20  # weights, optimizer slots, step, non-finite count
    for name in names:
        np.testing.assert_array_equal(ours.get_tensor(name), theirs.get_tensor(name), name)


def test_a_run_of_one_task_is_not_resumed_as_another(audio_cache, vocoder_run, capsys):
    _, workdir = vocoder_run
    code = main(["fit", "--data", str(audio_cache), "--workdir", str(workdir), "--quiet",
                 "--task", "text_to_mel", *as_cli(VOCODER)])  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err
    assert "holds a run of task vocoder, received: train.task=text_to_mel" in err


def test_check_runs_the_vocoder_step(audio_cache, capsys):
    # In this process: the micro vocoder's one shape, a compile of the size `vocoder_run`
    # already made here (test_cli runs `check` in processes of its own).
    assert main(["check", "--data", str(audio_cache), "--task", "vocoder",
                 *as_cli(VOCODER)]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "task: vocoder" in out
    assert "ok: one trace per shape, no retrace" in out


def test_a_cache_without_waveforms_says_how_to_rebuild_it(cache, tmp_path, capsys):
    settings = [o for o in VOCODER if "keep_audio" not in o]
    code = main(["fit", "--data", str(cache), "--workdir", str(tmp_path / "run"), "--quiet",
                 "--task", "vocoder", *as_cli(settings)])  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err
    assert "keep_audio" in err
    assert "prepare" in err
    assert not (tmp_path / "run" / "checkpoints").exists()


# -- vocode: copy synthesis --------------------------------------------------------------


@pytest.mark.parametrize("frames", [300, 40])  # longer than one window; shorter (padded)
def test_vocoding_any_length_equals_the_whole_mel_output(frames):
    model = Vocoder(MICRO)
    model(tf.zeros([1, 4, 80]))
    vocoding = Vocoding(model, chunk_frames=64, compiler="graph")
    mel = np.random.default_rng(0).normal(-5.0, 2.0, [frames, 80]).astype(np.float32)
    whole = model(mel[None])[0].numpy()
    ours = vocoding(mel, silence=-11.5)
    assert ours.shape == (frames * 256,)
    # Past the mel's end a short one is padded with silence: only its last receptive
    # field can hear that.
    exact = (frames - (model.receptive_frames if frames < vocoding.width else 0)) * 256
    np.testing.assert_allclose(ours[:exact], whole[:exact], atol=1e-4 * np.sqrt(np.mean(whole**2)))
    assert vocoding.traces == {"vocoder x1": 1}


def test_vocode_writes_copies_scored_beside_griffin_lim(audio_cache, vocoder_run, tmp_path,
                                                       capsys):  # fmt: skip
    _, workdir = vocoder_run
    out = tmp_path / "copies"
    code = main(["vocode", "--vocoder", str(workdir), "--data", str(audio_cache), "--out",
                 str(out), "--split", "all", "--n", "3", "--griffin-lim-iters", "4", "--json",
                 "--quiet"])  # fmt: skip
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["step"] == 20
    assert len(report["utterances"]) == 3
    for u in report["utterances"]:
        assert u["vocoder"] > 0
        assert u["griffin_lim"] > 0
        rate, samples = _wav_length(out / f"{u['id']}.wav")
        assert rate == 22050
        # F * hop samples, F = 1 + len // hop: len < F * hop <= len + hop (a trimmed
        # clip's length is often a whole number of hops: then exactly one hop more).
        assert 0 < samples - round(u["seconds"] * rate) <= 256
        assert (out / f"{u['id']}.gl.wav").is_file()
        assert _wav_length(out / f"{u['id']}.recording.wav") == (rate, samples)
    ratio = report["summary"]["vocoder_mean"] / report["summary"]["griffin_lim_mean"]
    assert report["summary"]["ratio"] == pytest.approx(ratio)
    assert report["summary"]["realtime"] > 1  # a micro vocoder: far faster than real time


def _wav_length(path) -> tuple[int, int]:
    audio, rate = tf.audio.decode_wav(tf.io.read_file(str(path)))
    return int(rate), int(audio.shape[0])


def test_vocode_refuses_a_text_to_mel_run(audio_cache, tmp_path, capsys):
    workdir = tmp_path / "text-to-mel"
    _write_run_config(workdir, [o for o in VOCODER if not o.startswith("train.task")])
    code = main(["vocode", "--vocoder", str(workdir), "--data", str(audio_cache), "--out",
                 str(tmp_path / "out"), "--split", "all"])  # fmt: skip
    assert code == 2
    assert "Expected a vocoder run, received: " in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_vocode_needs_the_waveforms(cache, vocoder_run, tmp_path, capsys):
    _, workdir = vocoder_run
    code = main(["vocode", "--vocoder", str(workdir), "--data", str(cache), "--out",
                 str(tmp_path), "--split", "all", "--n", "2"])  # fmt: skip
    assert code == 2
    assert "keep_audio=true" in capsys.readouterr().err


# -- synthesize --vocoder ----------------------------------------------------------------


def test_synthesize_speaks_through_a_vocoder_run(run, vocoder_run, tmp_path):
    _, text_to_mel = run
    _, vocoder = vocoder_run
    out = tmp_path / "hello.wav"
    code = main(["synthesize", "--run", str(text_to_mel), "--text", "Fine day.", "--out",
                 str(out), "--max-frames", "48", "--vocoder", str(vocoder)])  # fmt: skip
    assert code == 0
    rate, samples = _wav_length(out)
    assert rate == 22050
    assert samples % 256 == 0  # F * hop: the vocoder's samples, not Griffin-Lim's
    wave = tf.audio.decode_wav(tf.io.read_file(str(out)))[0].numpy()
    assert np.abs(wave).max() > 0


def _write_run_config(workdir, overrides: list[str]) -> None:
    """A run's config.yaml, as fit writes it first."""
    workdir.mkdir()
    stack = load_stack_config(None, overrides)
    (workdir / "config.yaml").write_text(yaml.safe_dump(stack.to_dict()))


@pytest.mark.parametrize("command", [
    ["synthesize", "--text", "Hi.", "--out", "{out}/x.wav"],
    ["evaluate", "--data", "{out}", "--split", "all", "--out", "{out}"],
])  # fmt: skip
def test_a_vocoder_of_other_audio_settings_is_refused_before_decoding(command, tmp_path, capsys):
    _write_run_config(tmp_path / "text-to-mel", [])
    _write_run_config(tmp_path / "vocoder", ["train.task=vocoder", "audio.n_mels=64"])
    out = tmp_path / "out"
    args = [a.format(out=out) for a in command]
    code = main([*args, "--run", str(tmp_path / "text-to-mel"), "--vocoder",
                 str(tmp_path / "vocoder")])  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err
    assert "audio.n_mels: vocoder 64, text-to-mel 80" in err
    assert not out.exists()


# -- evaluate --vocoder ------------------------------------------------------------------


def test_evaluate_writes_synthesis_and_truth_through_the_vocoder(run, vocoder_run, cache,
                                                                tmp_path):  # fmt: skip
    _, text_to_mel = run
    _, vocoder = vocoder_run
    out = tmp_path / "heard"
    code = main(["evaluate", "--run", str(text_to_mel), "--data", str(cache), "--split", "all",
                 "--n", "2", "--out", str(out), "--vocoder", str(vocoder), "--quiet"])  # fmt: skip
    assert code == 0
    stack = load_run_config(text_to_mel, "text_to_mel")
    waveforms = Waveforms(text_to_mel, stack, vocoder=vocoder)
    for u in read_utterances(cache, stack.data, "all", audio=stack.audio, limit=2):
        truth = tf.audio.decode_wav(tf.io.read_file(str(out / f"{u.id}.truth.wav")))[0]
        expected = waveforms(u.mel).numpy()
        assert truth.shape[0] == len(u.mel) * 256  # the vocoder's F * hop samples
        np.testing.assert_allclose(truth.numpy()[:, 0], expected, atol=1 / 32767)  # int16 WAV
        assert (out / f"{u.id}.wav").is_file()


def test_evaluate_with_a_vocoder_needs_an_out_folder(run, vocoder_run, cache, capsys):
    code = main(["evaluate", "--run", str(run[1]), "--data", str(cache), "--split", "all",
                 "--vocoder", str(vocoder_run[1])])  # fmt: skip
    assert code == 2
    assert "--vocoder writes the audio of --out" in capsys.readouterr().err
