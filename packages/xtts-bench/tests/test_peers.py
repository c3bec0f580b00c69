"""`xtts-bench peers` without its extra: the settings, the one-line missing-extra error, the
scorer on synthetic mels and WAVs, the choice of scored checkpoints, and the launcher's
pinning, thread settings, checkpoint clock and stop (on a stand-in trainer). Nothing
here needs torch, except the peers' processes' tests at the end (Matcha-TTS's, and in the
slow tier each peer trained until SIGTERM and heard), which skip where their extras are not
installed."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import xtts_data as xd
from xtts_bench import cli
from xtts_bench.errors import MissingExtraError, SettingsError
from xtts_bench.peers import (
    format_peers_table,
    read_checkpoint_minutes,
    require_peers_extra,
    score_mels,
    score_wavs,
    scored_checkpoints,
    wav_mels,
)
from xtts_bench.peers.bench import plot_peers
from xtts_bench.peers.launch import ONE_THREAD, Trainer, run_side_by_side
from xtts_bench.settings import PeersBenchConfig
from xtts_train import ConfigError

PATHS = dict(corpus=Path("corpus"), held_out=Path("held-out"), out=Path("out"))


def _truth(n: int = 6, seed: int = 0) -> list[np.ndarray]:
    """n smooth, distinct [frames, 16] "mels" of different lengths."""
    rng = np.random.default_rng(seed)
    mels = []
    for i in range(n):
        frames = 30 + 7 * i
        steps = rng.normal(size=(frames, 16)) * 0.3
        mels.append(np.cumsum(steps, axis=0) + rng.normal(size=16))
    return mels


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"n": 1}, "at least 2 sentences"),
        ({"n": 2.5}, "n: expected an int >= 1"),
        ({"minutes": 0}, "minutes: expected a number > 0"),
        ({"every_minutes": True}, "every_minutes: expected a number > 0"),
        ({"minutes": 3.0, "every_minutes": 5.0}, "every_minutes <= minutes"),
        ({"glow_hidden": 63}, "glow_hidden: expected an even int"),
        ({"glow_flows": 0}, "glow_flows: expected an int >= 1"),
        ({"glow_learning_rate": -1e-3}, "glow_learning_rate"),
        ({"cores": (0, 0)}, "2 different core numbers"),
        ({"cores": (0,)}, "2 different core numbers"),
        ({"cores": (0, -1)}, "2 different core numbers"),
        ({"cores": 1}, "2 different core numbers"),
        ({"peers": ("glow_tts", "matcha")}, r"3 different core numbers \(xtts, glow_tts, matcha"),
        ({"peers": ("vits",)}, "peers: expected one or more of glow_tts, matcha"),
        ({"peers": ()}, "peers: expected one or more"),
        ({"peers": ("matcha", "matcha"), "cores": (0, 1, 2)}, "each once"),
        ({"peers": "matcha"}, "peers: expected"),
        ({"matcha_hidden": 60}, "matcha_hidden: expected a multiple of 8"),
        ({"matcha_batch_size": 0}, "matcha_batch_size: expected an int >= 1"),
        ({"matcha_learning_rate": 0}, "matcha_learning_rate: expected a number > 0"),
        ({"overrides": "train.steps=5"}, "a tuple of 'section.key=value'"),
    ],
)
def test_settings_reject_bad_values(change, match):
    with pytest.raises(SettingsError, match=match):
        PeersBenchConfig(**PATHS, **change)


def test_settings_check_xtts_overrides_with_their_owner():
    with pytest.raises(ConfigError, match="no_such_key"):
        PeersBenchConfig(**PATHS, overrides=("train.no_such_key=1",))


def test_user_overrides_come_after_the_benchs_own():
    config = PeersBenchConfig(**PATHS, overrides=("train.steps=3000",), xtts_checkpoint_every=50)
    assert config.xtts_settings()[-1] == "train.steps=3000"
    assert config.stack().train.steps == 3000
    assert config.stack().train.checkpoint_every == 50
    assert config.stack().train.eval_every == 0


def test_defaults_are_the_reference_setup():
    config = PeersBenchConfig(**PATHS)
    assert (config.minutes, config.glow_hidden, config.glow_flows, config.glow_encoder_layers,
            config.glow_batch_size, config.glow_warmup_steps) == (45.0, 64, 8, 3, 16, 500)  # fmt: skip


def _hide_torch(monkeypatch, **installed: bool):
    """torch not installed, coqui-tts and matcha-tts installed, whatever this environment
    holds; `installed` overrides any of them by module name."""
    real = importlib.util.find_spec
    fake = {"torch": None, "TTS": real("json"), "matcha": real("json")}
    fake |= {module: real("json") if there else None for module, there in installed.items()}
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: fake[name] if name in fake else real(name, *a))  # fmt: skip


def test_missing_extra_names_the_extra_and_the_fix(monkeypatch):
    _hide_torch(monkeypatch)
    with pytest.raises(
        MissingExtraError, match=r"peers extra \(torch not installed\).*hatch run peers:"
    ):
        require_peers_extra()


def test_matcha_needs_its_own_extra_only_when_it_is_a_peer(monkeypatch):
    _hide_torch(monkeypatch, torch=True, matcha=False)
    require_peers_extra(("glow_tts",))  # Glow-TTS alone needs no matcha-tts
    with pytest.raises(MissingExtraError, match=r"matcha extra \(matcha-tts not installed\)"):
        require_peers_extra(("glow_tts", "matcha"))
    _hide_torch(monkeypatch, torch=True, TTS=False, matcha=False)
    with pytest.raises(MissingExtraError, match=r"peers and matcha extras \(coqui-tts, matcha"):
        require_peers_extra(("glow_tts", "matcha"))
    with pytest.raises(MissingExtraError, match=r"the matcha extra \(matcha-tts not"):
        require_peers_extra(("matcha",))  # coqui-tts is not needed without Glow-TTS


def test_cli_prints_the_missing_extra_as_one_line(monkeypatch, tmp_path, capsys):
    _hide_torch(monkeypatch)
    argv = ["peers", "--corpus", str(tmp_path), "--held-out", str(tmp_path),
            "--out", str(tmp_path / "out")]  # fmt: skip
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith("xtts-bench peers: error: expected the peers extra")
    assert "hatch run peers:bench-peers" in err
    assert not (tmp_path / "out").exists()  # nothing was done


def test_the_truth_itself_pairs_at_zero_and_is_always_identified():
    truth = _truth()
    scores = score_mels(truth, truth)
    assert scores["pairing_mean"] == pytest.approx(0.0)
    assert scores["distance_mean"] == pytest.approx(0.0)
    assert scores["top1"] == 1.0
    assert scores["nearest"] == list(range(len(truth)))


def test_a_slower_truth_is_still_its_own_sentence():
    truth = _truth()
    slower = [np.repeat(mel, 2, axis=0) for mel in truth]  # twice as long: DTW aligns it
    scores = score_mels(slower, truth)
    assert scores["top1"] == 1.0
    assert scores["pairing_mean"] < 0.1


def test_one_mel_for_every_sentence_scores_chance():
    truth = _truth()
    same = [np.mean([m.mean(axis=0) for m in truth], axis=0)[None].repeat(40, axis=0)] * 6
    scores = score_mels(same, truth)
    assert scores["top1"] == pytest.approx(1 / len(truth)) == scores["chance_top1"]
    assert scores["pairing_mean"] == pytest.approx(1.0, abs=0.15)


@pytest.mark.parametrize(("synthesised", "truth"), [([np.zeros((3, 4))], [np.zeros((3, 4))]),
                                                    ([np.zeros((3, 4))] * 2, [np.zeros((3, 4))] * 3)])  # fmt: skip
def test_score_mels_wants_one_synthesis_per_sentence_and_two_sentences(synthesised, truth):
    with pytest.raises(SettingsError, match="one synthesis per sentence"):
        score_mels(synthesised, truth)


def test_wavs_are_scored_through_the_xtts_preset(tmp_path):
    import soundfile

    from xtts_audio import MelConfig

    audio = MelConfig.from_preset("xtts")
    paths = []
    for i, hz in enumerate((220, 330, 495, 740)):
        t = np.arange(int(0.5 * 16000)) / 16000  # 16 kHz files: resampled like the recordings
        paths.append(tmp_path / f"{i}.wav")
        soundfile.write(paths[-1], 0.5 * np.sin(2 * np.pi * hz * t * (1 + t)), 16000)
    truth = wav_mels(paths, audio, trim_top_db=None)
    assert truth[0].shape[1] == audio.n_mels
    scores = score_wavs(paths, truth, audio, trim_top_db=None)
    assert (scores["top1"], scores["pairing_mean"]) == (1.0, pytest.approx(0.0))
    assert score_wavs(paths[::-1], truth, audio, trim_top_db=None)["top1"] == 0.0


def test_scored_checkpoints_are_the_nearest_to_each_mark_and_the_last():
    found = {100: 1.1, 200: 2.3, 300: 3.4, 400: 4.5, 450: 5.2}
    assert scored_checkpoints(found, every=2.0, last=5.0) == [200, 400, 450]
    at_marks = {10: 1.0, 20: 2.0, 30: 3.0, 31: 3.05}  # the budget is a mark: its last only
    assert scored_checkpoints(at_marks, every=1.0, last=3.0) == [10, 20, 31]
    assert scored_checkpoints({7: 0.2}, every=2.0, last=5.0) == [7]
    assert scored_checkpoints({}, every=2.0, last=5.0) == []


def _result() -> dict:
    point = {"step": 10, "minutes": 1.0, "pairing_mean": 0.9, "distance_mean": 2.0, "top1": 0.25}
    system = {"points": [point, {**point, "step": 20, "minutes": 2.0, "pairing_mean": 0.5}],
              "ceiling": {"pairing_mean": 0.1, "distance_mean": 0.5, "top1": 1.0},
              "steps": 21, "time_to_first_step_s": 12.0, "step_ms_median": 800.0}  # fmt: skip
    return {"sentences": ["a", "b", "c", "d"], "chance_top1": 0.25,
            "systems": {"xtts": system, "glow_tts": system, "matcha": system}}  # fmt: skip


def test_table_and_plot(tmp_path):
    table = format_peers_table(_result())
    lines = table.splitlines()
    for name in ("xtts", "glow_tts", "matcha"):  # 2 points, its Griffin-Lim, its figures
        assert sum(line.split()[0].rstrip(":") == name for line in lines) == 4
    assert "chance top-1 25%" in table
    assert lines[1].split()[-1] == "-"  # no recogniser: no WER
    heard = _result()
    heard["systems"]["xtts"] = {**heard["systems"]["xtts"], "ceiling": {
        **heard["systems"]["xtts"]["ceiling"], "wer": 0.25}}  # fmt: skip
    heard["systems"]["xtts"]["points"] = [
        {**p, "wer": 0.5} for p in heard["systems"]["xtts"]["points"]
    ]
    rows = format_peers_table(heard).splitlines()
    assert [row.split()[-1] for row in rows[1:4]] == ["0.50", "0.50", "0.25"]
    plot_peers(_result(), tmp_path / "peers.png")
    assert (tmp_path / "peers.png").stat().st_size > 1000


# A stand-in trainer: a checkpoint file every 0.2 s until SIGTERM, then a last one; it
# records the CPUs it may use and its thread settings.
_FAKE = """
import json, os, signal, sys, time
out = sys.argv[1]
stop = []
signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
json.dump({"cpus": sorted(os.sched_getaffinity(0)), "intra": os.environ["TF_NUM_INTRAOP_THREADS"],
           "omp": os.environ["OMP_NUM_THREADS"]}, open(os.path.join(out, "env.json"), "w"))
os.makedirs(os.path.join(out, "ckpt"), exist_ok=True)
step = 0
while not stop:
    time.sleep(0.2)
    step += 1
    open(os.path.join(out, "ckpt", f"step-{step}.pt"), "w").close()
open(os.path.join(out, "ckpt", f"step-{step + 1000}.pt"), "w").close()
"""


def test_trainers_run_pinned_with_one_thread_and_stop_at_the_budget(tmp_path):
    core = min(os.sched_getaffinity(0))
    trainer = Trainer("fake", ["-c", _FAKE, str(tmp_path)], core, tmp_path / "ckpt",
                      r"step-(\d+)\.pt", tmp_path / "fake.log")  # fmt: skip
    run_side_by_side([trainer], minutes=2.0 / 60, poll_s=0.1, progress=False)
    env = json.loads((tmp_path / "env.json").read_text())
    assert env == {"cpus": [core], "intra": "1", "omp": "1"}
    assert trainer.process.returncode == 0
    last = max(trainer.found)
    assert last > 1000  # the checkpoint written on SIGTERM was recorded
    assert 2.0 / 60 <= trainer.found[last] < 6.0 / 60
    minutes = [trainer.found[s] for s in sorted(trainer.found)]
    assert minutes == sorted(minutes)
    assert len(minutes) >= 5


def test_a_trainer_that_fails_is_reported_with_its_log(tmp_path):
    trainer = Trainer("broken", ["-c", "import sys; print('no data'); sys.exit(3)"],
                      min(os.sched_getaffinity(0)), tmp_path / "ckpt", r"step-(\d+)\.pt",
                      tmp_path / "broken.log")  # fmt: skip
    with pytest.raises(RuntimeError, match=r"broken exited with 3(.|\n)*no data"):
        run_side_by_side([trainer], minutes=1.0, poll_s=0.1, progress=False)


def test_settings_fields_are_the_cli_options():
    parser = cli._parser()
    args = parser.parse_args(["peers", "--corpus", "c", "--held-out", "h", "--out", "o"])
    defaults = PeersBenchConfig(**PATHS)
    for field in dataclasses.fields(PeersBenchConfig):
        if field.name not in ("corpus", "held_out", "out", "peers", "cores", "overrides",
                              "long_form"):  # fmt: skip
            assert getattr(args, field.name) == getattr(defaults, field.name), field.name
    assert (args.peers, args.cores) == ("glow_tts", "0,1")
    assert (args.long_form, defaults.long_form) == ([], ())


def test_score_only_reads_the_checkpoint_minutes_a_training_wrote(tmp_path):
    with pytest.raises(SettingsError, match="finished side-by-side training"):
        read_checkpoint_minutes(tmp_path)
    found = {"xtts": {200: 1.5, 400: 2.75}, "glow_tts": {695: 5.0}}
    (tmp_path / "trainers.json").write_text(json.dumps(found))  # JSON keys are strings
    assert read_checkpoint_minutes(tmp_path) == found
    with pytest.raises(SettingsError, match=r"to hold matcha .*received: xtts, glow_tts"):
        read_checkpoint_minutes(tmp_path, ("glow_tts", "matcha"))


def test_score_only_is_a_flag_of_the_settings():
    parser = cli._parser()
    argv = ["peers", "--corpus", "c", "--held-out", "h", "--out", "o"]
    assert parser.parse_args([*argv, "--score-only"]).score_only is True
    with pytest.raises(SettingsError, match="score_only: expected True or False"):
        PeersBenchConfig(**PATHS, score_only="yes")


def _chirps(folder: Path, seconds: dict[str, float]) -> list[Path]:
    """One 16 kHz chirp WAV per id, of the given length, each of its own pitch."""
    import soundfile

    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for k, (uid, length) in enumerate(seconds.items()):
        t = np.arange(int(length * 16000)) / 16000
        paths.append(folder / f"{uid}.wav")
        soundfile.write(paths[-1], 0.5 * np.sin(2 * np.pi * (220 + 150 * k) * t * (1 + t)), 16000)
    return paths


def test_long_items_of_both_systems_are_scored_by_one_scorer(tmp_path):
    from xtts_audio import MelConfig
    from xtts_bench.long_form import format_long_form, group_rows, scored_rows

    audio = MelConfig.from_preset("xtts")
    texts = {"a": "One. Two.", "b": "One two. Three.", "c": "One long sentence.", "d": "Four."}
    corpus = tmp_path / "long"
    recordings = _chirps(corpus / "wavs", dict.fromkeys(texts, 1.0))
    (corpus / "metadata.csv").write_text("".join(f"{i}|{t}|{t}\n" for i, t in texts.items()))
    truth = wav_mels(recordings, audio, trim_top_db=None)
    said = _chirps(tmp_path / "said", {"a": 1.0, "b": 1.0, "c": 1.0, "d": 0.5})  # d: half
    rows = scored_rows(corpus, list(texts), said, truth, audio, trim_top_db=None)
    assert [row["text"] for row in rows] == list(texts.values())  # the corpus's words
    assert [row["duration_ratio"] for row in rows[:3]] == [1.0, 1.0, 1.0]
    assert rows[3]["duration_ratio"] == pytest.approx(0.5, abs=0.05)
    assert [row["identified"] for row in rows[:3]] == [True] * 3
    assert rows[0]["pairing"] == pytest.approx(0.0)
    heard = {i: ("w", "w", "w") for i in texts}
    groups = group_rows(rows, heard)
    assert (groups["2"]["n"], groups["2"]["in_band"], groups["1"]["in_band"]) == (2, 1.0, 0.5)
    assert "alignment_mean" not in groups["all"]  # a system without attention
    table = format_long_form({str(corpus): {"glow_tts": {"groups": groups}}})
    row = next(line for line in table.splitlines() if line.split()[:3] == ["long", "glow_tts", "2"])
    assert row.split()[7] == "-"  # no alignment score
    assert row.split()[9] == "100%"  # top-1


def test_each_peer_reads_each_corpus_own_audio_when_ids_repeat(tmp_path, monkeypatch):
    """Every demo corpus counts from DEMO001-0001: a held-out or long-form id must not
    find the training clip of the same name (nor the other way round)."""
    from types import SimpleNamespace

    from xtts_bench.peers import bench

    folders = {name: tmp_path / name for name in ("corpus", "held-out", "long")}
    for folder in folders.values():
        _chirps(folder / "wavs", {"a": 0.3, "b": 0.3})
        (folder / "metadata.csv").write_text("a|One.|One.\nb|Two.|Two.\n")

    def read_utterances(source, data, split, *, audio, tokenizer=None, limit=None):
        return [SimpleNamespace(id=i, tokens=np.array([3, 4, xd.Tokenizer.EOS])) for i in "ab"]

    monkeypatch.setattr(xd, "read_utterances", read_utterances)
    monkeypatch.setattr(bench, "_open_cache", lambda config, stack: SimpleNamespace(
        tokenizer=SimpleNamespace(vocab_size=10)))  # fmt: skip
    monkeypatch.chdir(tmp_path)  # the corpora given relative, as on a command line
    config = PeersBenchConfig(corpus=Path("corpus"), held_out=Path("held-out"),
                              long_form=(Path("long"),), out=tmp_path / "out",
                              peers=("glow_tts", "matcha"), cores=(0, 1, 2))  # fmt: skip
    stack = SimpleNamespace(data=None, audio=None)
    assert [u.id for u in bench._write_peer_manifests(config, stack)] == ["a", "b"]
    for peer in ("glow", "matcha"):
        manifest = json.loads((tmp_path / "out" / peer / "manifest.json").read_text())
        sets = {"corpus": manifest["train"], "held-out": manifest["held_out"],
                "long": manifest["long_form"][0]}  # fmt: skip
        for name, rows in sets.items():
            assert [row["audio"] for row in rows] == [
                str(folders[name] / "wavs" / f"{i}.wav") for i in "ab"]  # fmt: skip
            assert [row["tokens"] for row in rows] == [[3, 4], [3, 4]]  # without <eos>


def test_long_form_corpora_are_checked_before_any_training(tmp_path):
    with pytest.raises(SettingsError, match="long_form"):
        PeersBenchConfig(**PATHS, long_form=(tmp_path / "nowhere",))
    parser = cli._parser()
    argv = ["peers", "--corpus", "c", "--held-out", "h", "--out", "o"]
    args = parser.parse_args([*argv, "--long-form", "x", "--long-form", "y"])
    assert args.long_form == [Path("x"), Path("y")]


def test_each_systems_last_checkpoint_speaks_the_long_items(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from xtts_audio import MelConfig
    from xtts_bench.peers import bench

    texts = {"a": "One. Two.", "b": "Three."}
    corpus = tmp_path / "long"
    recordings = _chirps(corpus / "wavs", dict.fromkeys(texts, 0.6))
    (corpus / "metadata.csv").write_text("".join(f"{i}|{t}|{t}\n" for i, t in texts.items()))
    stack = SimpleNamespace(
        audio=MelConfig.from_preset("xtts"), data=SimpleNamespace(trim_top_db=None)
    )
    mels = wav_mels(recordings, stack.audio, trim_top_db=None)
    items = [SimpleNamespace(id=i, mel=m) for i, m in zip(texts, mels, strict=True)]
    calls = []

    def peer(name, command, out, *extra):  # Glow-TTS says each item at a third of its
        calls.append((name, command, *extra))  # length, Matcha-TTS whole
        wavs = out / bench.PEER_FOLDERS[name] / "wavs" / "long-0"
        _chirps(wavs / f"step-{extra[1]}", dict.fromkeys(texts, 0.2 if name == "glow_tts" else 0.6))
        _chirps(wavs / "truth", dict.fromkeys(texts, 0.6))

    def evaluate(run, data, *, split, n, step, out, overrides):  # xtts says them whole
        calls.append(("xtts", step, tuple(overrides)))
        _chirps(out, dict.fromkeys(texts, 0.6))
        _chirps(out, {f"{i}.truth": 0.6 for i in texts})
        rows = [{"id": i, "alignment": 0.5, "stopped": True, "pieces": 2} for i in texts]
        return SimpleNamespace(utterances=rows)

    monkeypatch.setattr(bench, "_peer", peer)
    monkeypatch.setattr(bench, "evaluate", evaluate)
    monkeypatch.setattr(bench, "_open_cache", lambda config, stack: None)
    monkeypatch.setattr(bench, "_long_items", lambda config, stack, cache, corpus: items)
    monkeypatch.setattr(bench, "hear", lambda corpus, ids, said, truth, scratch: {
        i: ("w", "w", "w") for i in ids})  # fmt: skip
    config = PeersBenchConfig(**{**PATHS, "out": tmp_path / "out"}, n=2, long_form=(corpus,),
                              peers=("glow_tts", "matcha"), cores=(0, 1, 2))  # fmt: skip
    found = {"xtts": {200: 40.0, 400: 45.0}, "glow_tts": {50: 40.0, 90: 45.0},
             "matcha": {30: 45.0}}  # fmt: skip
    result = dict(bench._score_long_form(config, stack, found))[str(corpus)]
    assert calls == [("glow_tts", "synthesize", "--steps", "90", "--truth", "--long-form"),
                     ("matcha", "synthesize", "--steps", "30", "--truth", "--long-form"),
                     ("xtts", 400, ()), ("xtts", 400, ("decode.split_symbols=0",))]  # fmt: skip
    assert list(result) == ["xtts split", "xtts whole", "glow_tts", "matcha"]
    xtts, glow = result["xtts split"]["groups"]["all"], result["glow_tts"]["groups"]["all"]
    assert (xtts["in_band"], xtts["alignment_mean"], xtts["pieces_mean"]) == (1.0, 0.5, 2)
    assert glow["ratio_median"] == pytest.approx(1 / 3, abs=0.05)
    assert (glow["in_band"], "alignment_mean" in glow) == (0.0, False)
    matcha = result["matcha"]["groups"]["all"]
    assert (result["matcha"]["step"], matcha["in_band"]) == (30, 1.0)


def test_an_interrupted_scoring_keeps_what_it_had_scored(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from xtts_bench.peers import bench

    monkeypatch.setattr(bench, "require_peers_extra", lambda peers: None)
    monkeypatch.setattr(bench, "read_checkpoint_minutes",
                        lambda out, peers: {"xtts": {1: 1.0}, "glow_tts": {1: 1.0}})  # fmt: skip
    monkeypatch.setattr(bench, "_write_peer_manifests",
                        lambda config, stack: [SimpleNamespace(id=i) for i in "ab"])  # fmt: skip
    monkeypatch.setattr(bench, "held_out_wer",
                        lambda config, truth: contextlib.nullcontext(lambda wavs: None))  # fmt: skip
    monkeypatch.setattr(bench, "_score_xtts", lambda *args: {"points": ["xtts scored"]})

    def glow(*args):
        raise KeyboardInterrupt  # the scoring is stopped while Glow-TTS is scored

    monkeypatch.setattr(bench, "_score_peer", glow)
    config = PeersBenchConfig(**{**PATHS, "out": tmp_path}, score_only=True)
    monkeypatch.setattr(PeersBenchConfig, "stack", lambda self: None)
    with pytest.raises(KeyboardInterrupt):
        bench.run_peers_benchmark(config)
    kept = json.loads((tmp_path / "peers.json").read_text())
    assert kept["complete"] is False
    assert kept["systems"] == {"xtts": {"points": ["xtts scored"]}}
    assert kept["sentences"] == ["a", "b"]


# The Matcha-TTS side (`xtts_bench.peers.matcha`), on a tiny model and chirps, where
# matcha-tts is installed. Always in processes of its own, as the bench runs it: torch's
# triton, which Matcha's imports load, segfaults where TensorFlow was loaded first (as it is
# here), while TensorFlow after it is fine (its `synthesize` vocodes so).
_MATCHA = [sys.executable, "-m", "xtts_bench.peers.matcha"]
# Each peer process's tiny settings and the module its extra installs (found, not imported).
_TINY = {
    "matcha": ({"hidden": 16, "encoder_layers": 1, "decoder_channels": 16, "batch_size": 2,
                "learning_rate": 1e-3, "every_minutes": 0.001, "seed": 0}, "matcha"),
    "glow": ({"hidden": 16, "flows": 2, "encoder_layers": 1, "batch_size": 2,
              "learning_rate": 1e-3, "warmup_steps": 10, "every_minutes": 0.001, "seed": 0},
             "TTS"),
}  # fmt: skip
# The model at the recipe's size and the bench's, a batch, 30 steps on it: as JSON.
_MATCHA_PROBE = """
import json, sys
from pathlib import Path
import numpy as np, torch
from xtts_bench.peers import matcha
work = Path(sys.argv[1])
torch.manual_seed(0)
manifest, config = matcha._read(work)
recipe = {**manifest["settings"], "hidden": 192, "encoder_layers": 6, "decoder_channels": 256}
big = matcha.MatchaTTS(**matcha.model_config(recipe, 178, config["data_statistics"]))
batch = matcha._Batches(work / "features.npz", batch_size=4, seed=0).next()
model = matcha.MatchaTTS(**config)
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
losses = [matcha._update(model, optimizer, batch) for _ in range(30)]
raw = matcha._mel(manifest["train"][0]["audio"]).T
json.dump({"recipe_parameters": sum(p.numel() for p in big.parameters()),
           "encoder": dict(config["encoder"].encoder_params),
           "decoder_channels": list(config["decoder"].channels),
           "x": batch["x"].tolist(), "x_lengths": batch["x_lengths"].tolist(),
           "y_shape": list(batch["y"].shape), "y_lengths": batch["y_lengths"].tolist(),
           "losses": losses, "raw_mel": raw.tolist()}, sys.stdout)
"""


def _matcha_run(*argv: str, timeout: float = 300) -> str:
    """A Matcha process to completion with one thread per framework; its stdout."""
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **ONE_THREAD})  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _peer_work(tmp_path_factory, peer: str) -> Path:
    """A prepared work folder of `peer` (`glow` or `matcha`): its manifest over 16 kHz
    chirps (4 to train on, 2 held out, one long-form item), token ids 2..11 of a
    12-symbol vocabulary."""
    settings, module = _TINY[peer]
    if importlib.util.find_spec(module) is None:  # found without importing it (see above)
        pytest.skip(f"{module} (the {peer} peer's extra) is not installed")
    folder = tmp_path_factory.mktemp(peer)
    ids = ["a", "b", "c", "d", "e", "f"]
    paths = _chirps(folder / "wavs", dict(zip(ids, (0.6, 0.7, 0.5, 0.8, 0.6, 0.5), strict=True)))
    rows = [{"id": i, "audio": str(p), "tokens": [2 + (k + j) % 10 for j in range(4 + k)]}
            for k, (i, p) in enumerate(zip(ids, paths, strict=True))]  # fmt: skip
    work = folder / "work"
    work.mkdir()
    manifest = {"settings": settings, "vocab_size": 12, "train": rows[:4],
                "held_out": rows[4:], "long_form": [rows[5:]]}  # fmt: skip
    (work / "manifest.json").write_text(json.dumps(manifest))
    _matcha_run(sys.executable, "-m", f"xtts_bench.peers.{peer}", "prepare", "--work", str(work))
    return work


@pytest.fixture(scope="module")
def matcha_work(tmp_path_factory) -> Path:
    return _peer_work(tmp_path_factory, "matcha")


@pytest.fixture(scope="module")
def matcha_probe(matcha_work) -> dict:
    return json.loads(_matcha_run(sys.executable, "-c", _MATCHA_PROBE, str(matcha_work)))


def test_matcha_is_the_recipe_at_the_benchs_size(matcha_probe):
    # LJSpeech's 178 symbols at the recipe's size: the paper's 18.2M parameters.
    assert round(matcha_probe["recipe_parameters"] / 1e6, 1) == 18.2
    encoder = matcha_probe["encoder"]
    assert (encoder["n_channels"], encoder["filter_channels"], encoder["n_layers"]) == (16, 64, 1)
    assert (encoder["filter_channels_dp"], encoder["n_heads"]) == (256, 2)  # the recipe's
    assert matcha_probe["decoder_channels"] == [16, 16]


def test_matcha_mels_are_its_recipes_normalised_by_the_corpus(matcha_work, matcha_probe):
    data = np.load(matcha_work / "features.npz")
    # Matcha's framing at 22.05 kHz: one frame per 256 samples.
    assert list(data["mel_lengths"]) == [round(s * 22050) // 256 for s in (0.6, 0.7, 0.5, 0.8)]
    assert data["mels"].shape[1] == 80
    assert (data["mels"].mean(), data["mels"].std()) == (pytest.approx(0, abs=1e-4),
                                                         pytest.approx(1, abs=1e-4))  # fmt: skip
    first = data["mels"][: data["mel_lengths"][0]]  # Matcha's natural-log mel, normalised
    np.testing.assert_allclose(first * data["mel_std"] + data["mel_mean"],
                               matcha_probe["raw_mel"], atol=1e-4)  # fmt: skip
    assert list(data["token_lengths"]) == [4, 5, 6, 7]


def test_matcha_batches_carry_the_recipes_blanks_and_pad_mels_for_its_unet(matcha_probe):
    lengths = matcha_probe["x_lengths"]
    assert sorted(lengths) == [9, 11, 13, 15]  # 2 * tokens + 1: all four, once each
    for row, n in zip(matcha_probe["x"], lengths, strict=True):
        assert row[:n:2] == [0] * (n // 2 + 1)  # the blanks
        assert 0 not in row[1:n:2]  # the tokens
        assert set(row[n:]) <= {0}  # the padding
    batch, n_mels, frames = matcha_probe["y_shape"]
    assert (batch, n_mels, frames % 4) == (4, 80, 0)  # the U-Net's two halvings
    assert 0 <= frames - max(matcha_probe["y_lengths"]) < 4


def test_matcha_loss_falls_on_a_repeated_batch(matcha_probe):
    losses = matcha_probe["losses"]
    assert set(losses[0]) == {"loss", "dur", "prior", "diff"}
    assert all(x["loss"] == pytest.approx(x["dur"] + x["prior"] + x["diff"]) for x in losses)
    first = np.mean([x["loss"] for x in losses[:5]])
    last = np.mean([x["loss"] for x in losses[-5:]])
    assert last < 0.8 * first, (first, last)


@pytest.mark.slow  # a whole training process stopped by SIGTERM, and synthesis processes
@pytest.mark.parametrize("peer", ["glow", "matcha"])
def test_a_peer_trains_until_sigterm_and_speaks_each_checkpoint(peer, tmp_path_factory,
                                                                 tmp_path):  # fmt: skip
    import signal
    import time

    import soundfile

    work = _peer_work(tmp_path_factory, peer)
    command = [sys.executable, "-m", f"xtts_bench.peers.{peer}"]
    first = 12 if peer == "glow" else 3  # Glow-TTS's first 10 steps initialise its act-norms
    with (tmp_path / "train.log").open("wb") as log:
        process = subprocess.Popen([*command, "train", "--work", str(work)], stdout=log,
                                   stderr=subprocess.STDOUT,
                                   env={**os.environ, **ONE_THREAD})  # fmt: skip
    deadline = time.monotonic() + 240
    while not (work / "checkpoints" / f"step-{first}.pt").exists() and process.poll() is None:
        assert time.monotonic() < deadline, (tmp_path / "train.log").read_text()[-2000:]
        time.sleep(0.5)
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=120) == 0, (tmp_path / "train.log").read_text()[-2000:]
    summary = json.loads((work / "summary.json").read_text())
    assert (summary["steps"] >= 3, summary["threads"]) == (True, 1)
    assert (np.isfinite(summary["final_loss"]), summary["step_ms_median"] > 0) == (True, True)
    last = summary["steps"]
    assert (work / "checkpoints" / f"step-{last}.pt").is_file()  # written on SIGTERM
    assert not list((work / "checkpoints").glob(".*partial"))
    _matcha_run(*command, "synthesize", "--work", str(work), "--steps", f"{first},{last}",
                "--truth")  # fmt: skip
    _matcha_run(*command, "synthesize", "--work", str(work), "--steps", f"{first},{last}",
                "--truth", "--long-form")  # fmt: skip
    wavs = work / "wavs"
    for folder in (f"step-{first}", f"step-{last}", "truth"):
        assert sorted(p.name for p in (wavs / folder).iterdir()) == ["e.wav", "f.wav"]
    for folder in (f"step-{first}", f"step-{last}", "truth"):
        assert [p.name for p in (wavs / "long-0" / folder).iterdir()] == ["f.wav"]
    truth, rate = soundfile.read(wavs / "truth" / "e.wav")
    assert (rate, len(truth) / rate) == (22050, pytest.approx(0.6, abs=0.05))
    if peer == "matcha":  # its noise is seeded per sentence: f held out and f long-form agree
        held, _ = soundfile.read(wavs / f"step-{first}" / "f.wav")
        spoken, _ = soundfile.read(wavs / "long-0" / f"step-{first}" / "f.wav")
        assert np.array_equal(spoken, held)


def test_each_scored_checkpoint_is_heard_by_one_recogniser(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from xtts_bench.peers import bench

    corpus = tmp_path / "held-out"
    _chirps(corpus / "wavs", {"a": 0.3, "b": 0.3})
    (corpus / "metadata.csv").write_text("a|One two three.|One two three.\nb|Four.|Four.\n")
    said = {tmp_path / "a.wav": "one two three", tmp_path / "b.wav": ""}  # b: nothing heard
    built = []
    monkeypatch.setattr(
        bench, "make_recogniser", lambda references, scratch: built.append(references) or references
    )
    monkeypatch.setattr(bench, "transcribe", lambda recogniser, path: said[path])
    monkeypatch.setattr(bench, "asr_available", lambda: True)
    config = PeersBenchConfig(**{**PATHS, "held_out": corpus})
    truth = [SimpleNamespace(id="a"), SimpleNamespace(id="b")]
    with bench.held_out_wer(config, truth) as wer:
        rates = [wer(list(said)), wer(list(said)[::-1])]
    assert rates == [pytest.approx(1 / 4), pytest.approx(6 / 4)]  # 1 missed; 3 + 1 + 2 inserted
    assert built == [["one two three", "four"]]  # built once, for both checkpoints
    monkeypatch.setattr(bench, "asr_available", lambda: False)
    with bench.held_out_wer(config, truth) as wer:
        assert wer(list(said)) is None
