"""`xtts-train gta`: a text-to-mel run's teacher-forced frames of a cache, as a cache whose
waveforms are the source's, byte for byte, and whose frames are the model's prediction of
the recorded ones (every dropout off), whatever the padding of the compiled program."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tensorflow as tf
from train_helpers import VOCODER

import xtts_data as xd
from xtts_train.cli import main
from xtts_train.config import load_stack_config
from xtts_train.inference.aligned import padded_length
from xtts_train.runs.loading import load_run
from xtts_train.vocode import vocode


@pytest.fixture(scope="module")
def gta(run, audio_cache, tmp_path_factory):
    _, workdir = run
    out = tmp_path_factory.mktemp("gta") / "cache"
    assert main(["gta", "--run", str(workdir), "--data", str(audio_cache), "--out", str(out),
                 "--quiet"]) == 0  # fmt: skip
    return out


def _by_id(cache) -> dict[str, xd.Utterance]:
    data = xd.DataConfig(keep_audio=True)
    return {u.id: u for u in xd.read_utterances(cache, data, "all", with_audio=True)}


def test_the_frames_are_the_model_s_teacher_forced_prediction_unpadded(run, audio_cache, gta):
    _, workdir = run
    stack, model, _ = load_run(workdir)
    source, derived = _by_id(audio_cache), _by_id(gta)
    assert sorted(derived) == sorted(source)
    for uid in sorted(source)[:3]:
        u = source[uid]
        start = max((len(u.mel) - stack.data.cond_frames) // 2, 0)
        clip = u.mel[start : start + stack.data.cond_frames]
        batch = {"tokens": u.tokens[None], "token_mask": np.ones([1, len(u.tokens)], np.float32),
                 "mel": u.mel[None], "mel_mask": np.ones([1, len(u.mel)], np.float32),
                 "cond_mel": clip[None],
                 "cond_lengths": np.array([len(clip)], np.int32)}  # fmt: skip
        expected = model({k: tf.constant(v) for k, v in batch.items()},
                         prenet_dropout=False)["mel_after"][0].numpy()  # fmt: skip
        np.testing.assert_allclose(derived[uid].mel, expected, atol=2e-4, err_msg=uid)
        assert np.abs(derived[uid].mel - u.mel).mean() > 1e-3  # the model's, not the recording's
        np.testing.assert_array_equal(derived[uid].audio, u.audio)  # sample for sample
    assert xd.verify_cache(gta) == []


def test_a_vocoder_fine_tunes_on_the_frames(gta):
    pipeline = xd.make_segment_dataset(gta, xd.DataConfig(keep_audio=True, batch_size=2,
                                                          segment_frames=8, seed=0), "all")  # fmt: skip
    batch = next(iter(pipeline.dataset))
    assert batch["mel"].shape == (2, 8, 80)
    assert batch["audio"].shape == (2, 8 * 256)


@pytest.mark.parametrize(("n", "expected"), [(1, 64), (64, 64), (65, 96), (91, 96), (97, 128),
                                             (300, 368), (1000, 1024)])  # fmt: skip
def test_padded_lengths_step_by_about_root_two(n, expected):
    assert padded_length(n, floor=64) == expected


def test_a_vocoder_run_is_refused_in_one_line(vocoder_run, audio_cache, tmp_path, capsys):
    _, workdir = vocoder_run
    assert main(["gta", "--run", str(workdir), "--data", str(audio_cache), "--out",
                 str(tmp_path / "out"), "--quiet"]) == 2  # fmt: skip
    assert "vocoder" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # nothing written


def test_vocode_reads_a_cache_of_other_text_settings_through_its_frames(
    vocoder_run, audio_cache, gta, tmp_path
):
    """A vocoder reads no text: a held-out cache spelled with the run's symbols (other
    `data.text` settings than the vocoder's) copy-synthesises, and a `gta` cache's frames,
    not its recordings' mels, are what the vocoder hears."""
    _, vocoder = vocoder_run
    symbols = xd.FeatureCache.open(audio_cache).tokenizer.to_dict()["symbols"]
    stack = load_stack_config(None, [*VOCODER, f"data.text.symbols={json.dumps(symbols)}"])
    spelled = tmp_path / "spelled"
    xd.prepare(audio_cache.parent / "corpus", spelled, audio=stack.audio, data=stack.data)
    distances = {}
    for name, data in (("spelled", spelled), ("recorded", audio_cache), ("gta", gta)):
        # One Griffin-Lim iteration: its baseline is no part of this test, and 60 of them
        # (the default), run eagerly, were two thirds of its time.
        report = vocode(vocoder, data, tmp_path / name, split="all", n=2, griffin_lim_iters=1)
        distances[name] = report.summary["vocoder_mean"]
    assert distances["spelled"] == pytest.approx(distances["recorded"], rel=1e-5)
    assert abs(distances["gta"] - distances["recorded"]) > 1e-3
