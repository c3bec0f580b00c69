"""`xtts-bench learning` and `decode`: config checks, minutes bookkeeping, tables and picture
(the training and evaluation it drives are tested in xtts-train)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from xtts_bench.decode import format_decode_table
from xtts_bench.learning import (
    _training_minutes,
    blurred_truth_pairing,
    format_learning_table,
    plot_curve,
)
from xtts_bench.long_form import format_long_form, group_rows, slips
from xtts_bench.settings import LearningBenchConfig


@pytest.mark.parametrize(("fields", "match"), [
    (dict(steps=0), "steps"), (dict(every=0), "every"), (dict(n=True), "n"),
    (dict(steps=250, every=100), "multiple of every"),
    (dict(run="run"), "either data .* or run"), (dict(data=None), "either data .* or run"),
    (dict(data=None, run="run", overrides=("model.preset=tiny",)), "no overrides"),
    (dict(vocoder="voc"), "vocoder only with voices"),
])  # fmt: skip
def test_bad_settings_are_value_errors(tmp_path, fields, match):
    with pytest.raises(ValueError, match=match):
        LearningBenchConfig(**{"data": tmp_path, "held_out": tmp_path, "out": tmp_path, **fields})


def _stopped_run(root, steps):
    """A run folder as `fit` leaves it: summary, metrics and the given checkpoints."""
    (root / "checkpoints").mkdir(parents=True)
    for step in steps:
        (root / "checkpoints" / f"ckpt-{step}.index").write_bytes(b"")
    (root / "summary.json").write_text(
        json.dumps({"time_to_first_step_s": 60.0, "step_ms_median": 100.0})
    )
    lines = [{"step": s, "step_ms": 100.0} for s in range(50, 350, 50)]
    (root / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return root


def test_an_existing_run_is_scored_in_place_without_training(tmp_path, monkeypatch):
    from xtts_bench import learning

    run = _stopped_run(tmp_path / "run", (100, 200, 300))
    scored = []

    class Report:
        def __init__(self):
            self.summary = {"pairing_mean": 0.5, "distance_mean": 1.0, "alignment_mean": 0.5,
                            "duration_ratio_median": 1.0, "stopped_share": 1.0}  # fmt: skip

    def evaluate(path, data, *, split, n, step):
        scored.append((path, step))
        return Report()

    class Stack:
        data = audio = None

    def read_utterances(*args, **kwargs):
        mels = np.random.default_rng(0).normal(size=(3, 12, 4))
        return [type("Utterance", (), {"mel": mel})() for mel in mels]

    def fit(*args, **kwargs):
        raise AssertionError("a run given is not trained again")

    monkeypatch.setattr(learning, "fit", fit)
    monkeypatch.setattr(learning, "evaluate", evaluate)
    monkeypatch.setattr(learning, "load_run", lambda path: (Stack(), None, None))
    monkeypatch.setattr(learning.xd, "read_utterances", read_utterances)
    config = LearningBenchConfig(run=run, held_out=tmp_path, out=tmp_path / "out", steps=200,
                                 every=100)  # fmt: skip
    result = learning.run_learning_benchmark(config, progress=False)  # out made for it
    assert (tmp_path / "out" / "curve.json").is_file()
    assert scored == [(run, 100), (run, 200)]
    assert not (tmp_path / "out" / "run").exists()
    minutes = [p["minutes"] for p in result["points"]]
    assert minutes == pytest.approx([(60 + 10) / 60, (60 + 20) / 60])  # its own step times


def test_an_existing_run_must_keep_every_checkpoint_scored(tmp_path):
    from xtts_bench.learning import run_learning_benchmark
    from xtts_train import XttsTrainError

    run = _stopped_run(tmp_path / "run", (100, 300))
    config = LearningBenchConfig(run=run, held_out=tmp_path, out=tmp_path, steps=300, every=100)
    with pytest.raises(XttsTrainError, match=r"steps \[200\] missing \(kept: \[100, 300\]\)"):
        run_learning_benchmark(config, progress=False)
    (run / "summary.json").unlink()  # still running, or killed before it stopped
    with pytest.raises(XttsTrainError, match=r"summary\.json"):
        run_learning_benchmark(config, progress=False)


def test_voices_need_a_corpus_of_held_out_voices(tmp_path):
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "manifest.json").write_text("{}")
    for held_out, split in ((tmp_path / "cache", "all"), (tmp_path, "val")):
        with pytest.raises(ValueError, match="voices with a corpus of held-out voices"):
            LearningBenchConfig(data=tmp_path, held_out=held_out, out=tmp_path, split=split,
                                voices=True)  # fmt: skip


def _voice(pitch: float, seed: int) -> np.ndarray:
    """A second of a harmonic voice at `pitch` Hz (16 kHz)."""
    t = np.arange(16000) / 16000
    wobble = 1 + 0.03 * np.sin(2 * np.pi * (2 + seed) * t)
    phase = 2 * np.pi * np.cumsum(pitch * wobble) / 16000
    audio = sum(np.sin(k * phase) / k for k in range(1, 12))
    noise = 0.01 * np.random.default_rng(seed).standard_normal(t.size)
    return (0.3 * (audio + noise) / np.abs(audio).max()).astype(np.float32)


def test_a_checkpoint_s_voices_are_judged_with_both_clips(tmp_path, monkeypatch):
    import soundfile

    from xtts_bench import learning, speakers

    pitches = {"spk0": 110.0, "spk1": 260.0}
    corpus = tmp_path / "held-out"
    (corpus / "wavs").mkdir(parents=True)
    rows = [f"{v}-{i}|Some words.|Some words.|{v}" for v in pitches for i in range(3)]
    for v, pitch in pitches.items():
        for i in range(3):
            soundfile.write(corpus / "wavs" / f"{v}-{i}.wav", _voice(pitch, i), 16000)
    (corpus / "metadata.csv").write_text("\n".join(rows) + "\n")

    class Report:  # what `evaluate` returns: a model that always speaks spk0's voice
        def __init__(self, utterances):
            self.summary, self.utterances = {"pairing_mean": 0.5}, utterances

        def to_dict(self):
            return {"utterances": self.utterances}

    def evaluate(run, data, *, split, n, step, out, reference_from, vocoder):
        assert vocoder == tmp_path / "voc"
        out.mkdir(parents=True)
        other = reference_from == "other-speaker"
        utterances = []
        for i, v in enumerate(pitches):
            ref = (i + other) % 2
            utterances.append({"id": v, "speaker": i, "reference": f"spk{ref}-1",
                               "reference_speaker": ref})  # fmt: skip
            soundfile.write(out / f"{v}.wav", _voice(110.0, 7), 16000)
        return Report(utterances)

    monkeypatch.setattr(learning, "evaluate", evaluate)
    config = LearningBenchConfig(data=tmp_path, held_out=corpus, out=tmp_path / "out",
                                 voices=True, vocoder=tmp_path / "voc")  # fmt: skip
    report, figures = learning._voices(config, tmp_path, 100, speakers.read_voices(corpus))
    assert report.summary == {"pairing_mean": 0.5}
    assert figures["voice_top1"] == 0.5  # spk0's own clip: right; spk1's: wrong
    assert figures["voice_follows"] == 0.5  # swapped: spk1's clip ignored, spk0's followed
    assert figures["voice_truth_top1"] == 1.0
    assert figures["voice_chance"] == 0.5
    assert figures["voice_vocoded_likeness"] is None  # no recording through the vocoder


def test_minutes_add_the_start_up_and_each_interval(tmp_path):
    lines = [{"step": 10, "step_ms": 100.0}, {"step": 10, "val_loss": 1.0},
             {"step": 30, "step_ms": 300.0}]  # fmt: skip
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    minutes = _training_minutes(tmp_path, {"time_to_first_step_s": 60.0})
    assert minutes == pytest.approx({10: (60 + 1.0) / 60, 30: (60 + 1.0 + 6.0) / 60})


def test_the_table_and_picture_have_every_point(tmp_path):
    points = [
        {"step": s, "minutes": s / 100, "pairing_mean": 1 - s / 1000, "distance_mean": 1.0,
         "duration_ratio_median": 1.0, "alignment_mean": 0.5, "stopped_share": 1.0}
        for s in (100, 200, 300)
    ]  # fmt: skip
    table = format_learning_table({"points": points}).splitlines()
    assert len(table) == 4
    assert table[-1].split()[:3] == ["300", "3.0", "0.70"]
    plot_curve(points, tmp_path / "curve.png", {"2": 0.5})
    assert (tmp_path / "curve.png").read_bytes()[:4] == b"\x89PNG"
    table = format_learning_table({"points": points, "blurred_truth_pairing": {"2": 0.5}})
    assert table.splitlines()[-1].endswith("σ=2 0.50")
    voiced = [{**p, "voice_top1": 0.75, "voice_follows": 0.5, "voice_likeness": 0.9,
               "voice_truth_top1": 1.0, "voice_vocoded_top1": 1.0, "voice_chance": 0.25,
               "voice_vocoded_likeness": 0.7}
              for p in points]  # fmt: skip
    table = format_learning_table({"points": voiced}).splitlines()
    assert table[0].split()[-3:] == ["voice", "follows", "likeness"]
    assert table[3].split()[-3:] == ["75%", "50%", "0.90"]
    assert "through the same vocoder 100%, chance 25%" in table[-1]
    assert table[-1].endswith("a recording's likeness through the same vocoder 0.70)")


def test_blurring_the_truth_raises_its_pairing_towards_one():
    rng = np.random.default_rng(0)
    phones = rng.normal(size=(10, 16))  # "sentences": 8 of 10 spectra, 6 frames each
    mels = [np.repeat(phones[rng.integers(0, 10, size=8)], 6, axis=0) for _ in range(6)]
    scale = blurred_truth_pairing(mels, sigmas=(0.5, 2, 16))
    assert list(scale) == ["0.5", "2", "16"]
    assert scale["0.5"] < scale["2"] < scale["16"]
    assert scale["0.5"] < 0.5  # a light blur keeps each sentence closest to its own truth
    assert scale["16"] > 0.9  # a heavy one leaves nothing that tells them apart


def test_the_decode_table_has_a_row_per_run():
    runs = [{"run": f"run{r}", "reduction_factor": r, "frames": 256, "batch_size": 1,
             "wall_s": 2.0 / r, "rtf": 1.5 * r} for r in (1, 2)]  # fmt: skip
    rows = format_decode_table({"runs": runs}).splitlines()
    assert len(rows) == 3
    assert rows[2].split() == ["2", "256", "1", "1.00", "3.00", "run2"]


def _row(uid, text, ratio, stopped=True, pieces=1):
    return {"id": uid, "text": text, "duration_ratio": ratio, "alignment": 0.5,
            "pairing": 0.4, "stopped": stopped, "pieces": pieces}  # fmt: skip


HEARD = {  # the words read, the recogniser's of the synthesis and of the recording
    "a": ("one two", "one two", "one two"), "b": ("one two", "one", "one two"),
    "c": ("one two three", "one two three", "one two three"), "d": ("just one", "just", "just"),
}  # fmt: skip


def test_long_items_are_grouped_by_their_sentences_with_the_share_in_band():
    rows = [_row("a", "One. Two.", 1.0), _row("b", "One. Two.", 0.5, stopped=False),
            _row("c", "One. Two. Three.", 1.1, pieces=2), _row("d", "Just one", 0.9)]  # fmt: skip
    groups = group_rows(rows, HEARD)
    assert list(groups) == ["1", "2", "3", "all"]
    assert groups["2"]["n"] == 2
    assert groups["2"]["in_band"] == 0.5  # 0.5 is outside 0.85-1.15
    assert groups["2"]["stopped_share"] == 0.5
    assert groups["3"]["pieces_mean"] == 2
    assert groups["all"]["in_band"] == 0.75
    assert groups["all"]["ratio_median"] == pytest.approx(0.95)
    assert groups["2"]["wer"] == pytest.approx(1 / 4)  # "two" missed of four words
    assert groups["2"]["wer_truth"] == 0
    assert groups["1"]["wer"] == groups["1"]["wer_truth"] == pytest.approx(1 / 2)
    assert groups["3"]["wer"] == 0
    # "b" skipped "two" (its recording did not): the recogniser's floor is clean
    assert (groups["2"]["skipped"], groups["2"]["repeated"]) == (1, 0)
    assert groups["2"]["clean_share"] == 0.5
    assert (groups["2"]["skipped_truth"], groups["2"]["clean_share_truth"]) == (0, 1.0)
    assert groups["1"]["skipped"] == groups["1"]["skipped_truth"] == 1  # "d": "one" unheard
    assert (groups["all"]["skipped"], groups["all"]["clean_share"]) == (2, 0.5)


def test_skipped_and_repeated_words_are_the_alignments_deletions_and_insertions():
    read = ["a b c d e f", "x y", "p q r", "m n"]
    heard = ["a c d e f f f", "", "p q z", "m n"]  # skip b + f twice; all gone; z for r; clean
    assert slips(read, heard) == {"skipped": 1 + 2, "repeated": 2, "clean_share": 0.5}
    assert slips(["one two"], ["one one one two two"]) == {
        "skipped": 0, "repeated": 3, "clean_share": 0.0}  # fmt: skip
    assert slips(read, read)["clean_share"] == 1.0


def test_the_long_form_table_shows_skips_and_repeats_beside_the_recordings():
    rows = [_row("a", "One. Two.", 1.0), _row("b", "One. Two.", 0.5)]
    heard = {"a": ("one two", "one one two", "one two"), "b": ("one two", "one", "two")}
    groups = group_rows(rows, heard)
    assert {k: groups["2"][k] for k in ("skipped", "repeated", "clean_share")} == {
        "skipped": 1, "repeated": 1, "clean_share": 0.0}  # fmt: skip
    assert (groups["2"]["skipped_truth"], groups["2"]["clean_share_truth"]) == (1, 0.5)
    table = format_long_form({"long24": {"whole": {"groups": groups}}})
    head, row = table.splitlines()[:2]
    assert head.split()[-6:] == ["skip", "rep.", "clean", "t.skip", "t.rep", "t.clean"]
    assert row.split()[-6:] == ["1", "1", "0%", "1", "0", "50%"]
    assert "counts as a repeat" in table


def test_long_form_scores_each_corpus_split_and_whole(tmp_path, monkeypatch):
    from xtts_bench import long_form

    corpus = tmp_path / "long24"
    corpus.mkdir()
    calls = []

    def evaluate(run, corpus, *, split, n, step, out, progress, overrides):
        calls.append((corpus, split, n, step, tuple(overrides)))
        return SimpleNamespace(utterances=[_row("a", "One. Two.", 1.0), _row("d", "One.", 0.6)],
                               summary={"pairing_mean": 0.4})  # fmt: skip

    monkeypatch.setattr(long_form, "evaluate", evaluate)
    monkeypatch.setattr(long_form, "_heard", lambda corpus, rows, audio: HEARD)
    result = long_form.score_long_form(tmp_path, [corpus], n=24, step=300)
    assert calls == [
        (corpus, "all", 24, 300, ()),
        (corpus, "all", 24, 300, ("decode.split_symbols=0",)),
    ]
    modes = result[str(corpus)]
    assert set(modes) == {"split", "whole"}
    table = long_form.format_long_form(result)
    assert table.count("long24") == 2 * 3  # two modes x (1, 2, all)
    assert "in band" in table
    assert "WER" in table
    with pytest.raises(ValueError, match="long_form"):
        LearningBenchConfig(data=tmp_path, held_out=tmp_path, out=tmp_path,
                            long_form=(tmp_path / "x",))  # fmt: skip
