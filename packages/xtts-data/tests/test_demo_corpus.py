"""Tests of the offline demo corpus: layout, bounds, determinism, speech-likeness, errors."""

from __future__ import annotations

import itertools
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile
from data_helpers import espeak_speaks

import xtts_audio as xa
from xtts_data import _demo_espeak, demo_corpus
from xtts_data._demo_sentences import _SPECIAL, SENTENCES, join_sentences, join_words
from xtts_data.cli import main
from xtts_data.corpus import read_corpus
from xtts_data.demo_corpus import DemoCorpus, speak_demo, write_demo_corpus
from xtts_data.errors import ConfigError, XttsDataError
from xtts_data.text import TextConfig, Tokenizer, normalize_text

SHORT = {"min_seconds": 0.5, "max_seconds": 2.0}  # keeps every corpus here fast
SENTENCE_BOUNDS = {"min_seconds": 1.0, "max_seconds": 4.0}  # one or two short sentences
needs_espeak = pytest.mark.skipif(not espeak_speaks(), reason="no espeak-ng, program or library")


def _rows(root: Path) -> list[list[str]]:
    lines = (root / "metadata.csv").read_text(encoding="utf-8").splitlines()
    return [line.split("|") for line in lines]


def _files(root: Path) -> dict[str, bytes]:
    paths = [root / "metadata.csv", *sorted((root / "wavs").iterdir())]
    return {path.name: path.read_bytes() for path in paths}


def _frame_analysis(audio: np.ndarray, sr: int, size: int = 1024, hop: int = 256):
    """Per frame: energy dB, autocorrelation pitch (80–400 Hz), its strength, low-band share."""
    frames = np.lib.stride_tricks.sliding_window_view(audio, size)[::hop] * np.hanning(size)
    power = np.abs(np.fft.rfft(frames, 2 * size)) ** 2  # (frames, size + 1)
    correlation = np.fft.irfft(power)[:, :size]
    correlation /= correlation[:, :1] + 1e-12
    lags = np.arange(sr // 400, sr // 80 + 1)
    best = lags[np.argmax(correlation[:, lags], axis=1)]
    strength = correlation[np.arange(len(frames)), best]
    freqs = np.fft.rfftfreq(2 * size, 1.0 / sr)
    low_share = power[:, (freqs >= 80) & (freqs <= 400)].sum(1) / (power.sum(1) + 1e-12)
    energy_db = 10 * np.log10(np.mean(frames**2, axis=1) + 1e-12)
    return energy_db, sr / best, strength, low_share


def _voiced_pitch(root: Path, speaker: str) -> np.ndarray:
    pitches = []
    for uid, *_, name in _rows(root):
        if name == speaker:
            audio, sr = soundfile.read(root / "wavs" / f"{uid}.wav")
            energy_db, f0, strength, _ = _frame_analysis(audio, sr)
            pitches.append(f0[(energy_db > energy_db.max() - 20) & (strength > 0.5)])
    return np.concatenate(pitches)


@pytest.fixture(scope="module")
def two_speakers(tmp_path_factory: pytest.TempPathFactory) -> DemoCorpus:
    return write_demo_corpus(tmp_path_factory.mktemp("demo") / "c", n=8, speakers=2, **SHORT)


def test_public_surface():
    assert demo_corpus.__all__ == [
        "DEMO_SENTENCES", "DemoCorpus", "speak_demo", "write_demo_corpus",
    ]  # fmt: skip


def test_the_demo_sentences_are_spoken_within_the_corpus_lengths():
    # Eval sentences of the demo language: every letter known, and spoken (silence
    # trimmed, as the demo trims) no longer than the demo's longest utterances, 1.6 s.
    config = TextConfig(symbols=None)  # the built-in vocabulary, not one built from a corpus
    tokenizer = Tokenizer.from_config(config)
    for text in demo_corpus.DEMO_SENTENCES:
        spoken = normalize_text(text, config)
        _, unknown = tokenizer.encode(spoken)
        assert not unknown, text
        wave = speak_demo(spoken, seed=0).astype(np.float32) / 32768
        seconds = int(xa.trim_silence(wave, top_db=40).shape[0]) / 22050
        assert 0.4 <= seconds <= 1.6, (text, seconds)


@pytest.mark.parametrize(("speakers", "progress"), [(1, False), (3, True)])
def test_layout_and_rows(tmp_path, capsys, speakers, progress):
    result = write_demo_corpus(tmp_path / "c", n=3, speakers=speakers, progress=progress, **SHORT)
    bar = re.search(r"demo corpus: 100%.*\| 3/3 \[.*(utt/s|s/utt)\]", capsys.readouterr().err)
    assert (bar is not None) == progress  # a bar of the utterances, when asked for

    rows = _rows(tmp_path / "c")
    assert result == DemoCorpus(tmp_path / "c", 3, result.total_seconds, speakers)
    assert [row[0] for row in rows] == ["DEMO001-0001", "DEMO001-0002", "DEMO001-0003"]
    assert {len(row) for row in rows} == {3 if speakers == 1 else 4}
    if speakers > 1:
        assert [row[3] for row in rows] == ["spk0", "spk1", "spk2"]
    assert sorted(p.name for p in (tmp_path / "c" / "wavs").iterdir()) == [
        f"{row[0]}.wav" for row in rows
    ]
    for _, text, normalized, *_ in rows:
        assert re.fullmatch(r"[A-Z0-9$].*[.?!]", text), text
        assert re.fullmatch(r"[A-Z][a-z ,.?!A-Z]*[.?!]", normalized), normalized


@pytest.mark.parametrize("sample_rate", [16000, 22050])
def test_wavs_are_pcm16_mono_within_bounds(tmp_path, sample_rate):
    result = write_demo_corpus(tmp_path / "c", n=4, sample_rate=sample_rate, **SHORT)

    durations = []
    for path in sorted((tmp_path / "c" / "wavs").iterdir()):
        info = soundfile.info(path)
        assert (info.samplerate, info.channels, info.subtype) == (sample_rate, 1, "PCM_16")
        assert SHORT["min_seconds"] <= info.duration <= SHORT["max_seconds"]
        durations.append(info.duration)
    assert result.total_seconds == pytest.approx(sum(durations))


def test_texts_hold_tokens_to_normalise(tmp_path):
    write_demo_corpus(tmp_path / "c", n=40, **SHORT)

    rows = _rows(tmp_path / "c")
    special = [(text, normalized) for _, text, normalized in rows if text != normalized]
    assert 2 <= len(special) <= 20  # about 20% of utterances
    assert all(re.search(r"\d|Dr\.|Mr\.|Mrs\.", text) for text, _ in special)
    assert not any(re.search(r"[\d$%]", normalized) for _, normalized in special)
    config = TextConfig()  # what the corpus reader and `synthesize` make of either column
    assert all(normalize_text(n, config) == normalize_text(t, config) for _, t, n in rows)


def test_every_demo_text_normalises_to_its_spoken_form():
    # One owner of the spoken form: the demo speaks (and writes as normalized_text) what
    # the text normaliser makes of the written text, so a demo model reads at synthesis
    # ("Mrs. Hale" -> "misess hale") the text it was trained on.
    config = TextConfig()
    special = set()
    for seed in range(1000):
        drawn = list(itertools.islice(_demo_espeak.spoken_words(np.random.default_rng(seed)), 12))
        raw, spoken = (join_words([word[i] for word in drawn]) for i in (0, 1))
        assert normalize_text(spoken, config) == normalize_text(raw, config), (raw, spoken)
        special |= {written for written, said in drawn if written != said}
    for form in _SPECIAL:  # every written form was drawn, so checked above
        pattern = re.escape(form).replace(r"\{\}", r"[A-Z][a-z]+") + r"[,.?!]?"
        assert any(re.fullmatch(pattern, word) for word in special), form


def test_same_arguments_give_identical_bytes(tmp_path):
    first = write_demo_corpus(tmp_path / "a", n=3, speakers=2, **SHORT)
    write_demo_corpus(tmp_path / "b", n=3, speakers=2, **SHORT)
    write_demo_corpus(tmp_path / "seed", n=3, speakers=2, seed=1, **SHORT)
    write_demo_corpus(tmp_path / "prefix", n=2, speakers=2, **SHORT)

    files = _files(first.path)
    assert _files(tmp_path / "b") == files
    seeded = _files(tmp_path / "seed")
    assert all(seeded[name] != files[name] for name in files)
    prefix = _files(tmp_path / "prefix")  # utterance i does not depend on n
    assert all(prefix[name] == files[name] for name in prefix if name.endswith(".wav"))


@pytest.mark.parametrize(("low", "high", "mean"), [(1.0, 10.0, 6.5), (0.5, 2.0, 1.42)])
def test_target_durations_are_ljspeech_like(low, high, mean):
    durations = demo_corpus._target_durations(20_000, np.random.default_rng(0), low, high)

    assert durations.shape == (20_000,)
    assert durations.min() >= low
    assert durations.max() <= high
    assert durations.mean() == pytest.approx(mean, abs=0.02 * (high - low))


def test_audio_is_speech_like(two_speakers):
    audio, sr = soundfile.read(two_speakers.path / "wavs" / "DEMO001-0001.wav")
    energy_db, _, strength, low_share = _frame_analysis(audio, sr)

    loud = energy_db > energy_db.max() - 20
    voiced = loud & (strength > 0.5)
    assert voiced.sum() >= 0.5 * loud.sum()  # harmonic (periodic) sounds dominate
    assert np.median(low_share[voiced]) > 0.1  # pitch and low harmonics carry energy
    assert np.mean(energy_db < energy_db.max() - 30) > 0.05  # real pauses between words
    assert np.abs(audio).max() < 0.99  # no clipping


def test_speakers_differ_in_pitch(two_speakers):
    low, high = sorted(np.median(_voiced_pitch(two_speakers.path, s)) for s in ("spk0", "spk1"))

    assert high > 1.3 * low


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n": 0}, r"Expected n >= 1, received: n=0"),
        ({"n": 2, "speakers": 0}, r"Expected speakers >= 1, received: speakers=0"),
        ({"n": 2, "speakers": 3}, r"Expected speakers <= n .*received: speakers=3, n=2"),
        ({"seed": -1}, r"Expected seed >= 0, received: seed=-1"),
        ({"engine": "festival"}, r"received: engine='festival'"),
        ({"sample_rate": 4000}, r"Expected sample_rate >= 8000, received: sample_rate=4000"),
        ({"min_seconds": 0.0}, r"Expected min_seconds > 0, received: min_seconds=0.0"),
        ({"min_seconds": 3.0, "max_seconds": 2.0}, r"received: max_seconds=2.0, min_seconds=3.0"),
        (
            {"engine": "espeak", "sample_rate": 16000},
            r"sample_rate=22050 with engine='espeak'.*received: sample_rate=16000",
        ),
    ],
)
def test_bad_arguments_raise_config_error(tmp_path, kwargs, match):
    with pytest.raises(ConfigError, match=match):
        write_demo_corpus(tmp_path / "c", **kwargs)
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize("existing", ["file_inside", "is_a_file"])
def test_refuses_a_non_empty_output(tmp_path, existing):
    out = tmp_path / "c"
    if existing == "file_inside":
        out.mkdir()
        (out / "notes.txt").write_text("keep me")
    else:
        out.write_text("keep me")

    with pytest.raises(XttsDataError, match="Choose an empty directory"):
        write_demo_corpus(out, n=1, **SHORT)
    kept = out / "notes.txt" if existing == "file_inside" else out
    assert kept.read_text() == "keep me"


def test_accepts_an_existing_empty_directory(tmp_path):
    assert write_demo_corpus(tmp_path, n=1, **SHORT).num_utterances == 1


def test_espeak_missing_says_how_to_fix(tmp_path, monkeypatch):
    import ctypes.util

    monkeypatch.setattr(shutil, "which", lambda name: None)  # no program,
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None)  # no system library,
    monkeypatch.setenv("XTTS_ESPEAK", "system")  # and the wheel's not wanted
    monkeypatch.delenv("PHONEMIZER_ESPEAK_LIBRARY", raising=False)
    _demo_espeak._speech_library.cache_clear()

    with pytest.raises(XttsDataError, match=r"apt-get install espeak-ng.*engine='synth'"):
        write_demo_corpus(tmp_path / "c", n=1, engine="espeak")
    assert not (tmp_path / "c").exists()


@needs_espeak
def test_espeak_engine(tmp_path):
    bounds = {"min_seconds": 1.0, "max_seconds": 3.0}
    result = write_demo_corpus(tmp_path / "c", n=2, speakers=2, engine="espeak", **bounds)

    rows = _rows(result.path)
    assert [len(row) for row in rows] == [4, 4]
    for uid, *_ in rows:
        info = soundfile.info(result.path / "wavs" / f"{uid}.wav")
        assert (info.samplerate, info.channels, info.subtype) == (22050, 1, "PCM_16")
        assert bounds["min_seconds"] <= info.duration <= bounds["max_seconds"]


def test_speak_demo_renders_any_text_like_the_corpus():
    one = speak_demo("a quiet river.", seed=1)
    assert one.dtype == np.int16
    np.testing.assert_array_equal(one, speak_demo("a quiet river.", seed=1))  # reproducible
    assert not np.array_equal(one[: len(one) // 2], speak_demo("a quiet river.", seed=2)[
        : len(one) // 2])  # fmt: skip
    longer = speak_demo("a quiet river, then a long and narrow bridge.", seed=1)
    assert len(longer) > 2 * len(one) * 0.8
    assert 0.3 < np.abs(one).max() / 32767 < 0.6  # peak-normalised as the corpus is
    assert np.abs(one[:1000]).max() / 32767 < 0.01  # the leading silence


@pytest.mark.parametrize(("kwargs", "match"), [
    (dict(text=" "), "non-empty text"), (dict(text="a", speaker=1), "speaker"),
    (dict(text="a", sample_rate=100), "sample_rate"),
])  # fmt: skip
def test_speak_demo_bad_arguments(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        speak_demo(**kwargs)


def _sentences_of(text: str, language: str) -> list[str]:
    """The built-in sentences `text` joins, in order; fails on any other text."""
    found, rest = [], text
    while rest:
        matches = [s for s in SENTENCES[language] if rest.startswith(s)]
        assert matches, f"not a built-in {language} sentence: {rest!r}"
        found.append(max(matches, key=len))
        rest = rest[len(found[-1]) :].lstrip(" ")
    assert join_sentences(found, language) == text
    return found


def _check_language_wavs(root: Path, rows: list[list[str]], bounds: dict) -> None:
    """Every row's wav: 22050 Hz mono 16-bit, within the bounds, and not silence."""
    for uid, *_ in rows:
        audio, sr = soundfile.read(root / "wavs" / f"{uid}.wav")
        info = soundfile.info(root / "wavs" / f"{uid}.wav")
        assert (sr, info.channels, info.subtype) == (22050, 1, "PCM_16")
        assert bounds["min_seconds"] <= len(audio) / sr <= bounds["max_seconds"]
        assert np.sqrt(np.mean(audio**2)) > 0.01, uid  # speech, not padding alone


@pytest.mark.parametrize("language", sorted(SENTENCES))
def test_built_in_sentences(language):
    table = SENTENCES[language]
    with_digits = [s for s in table if re.search(r"\d", s)]

    assert 25 <= len(table) <= 40
    assert len(set(table)) == len(table)
    assert 0.2 <= len(with_digits) / len(table) <= 0.35  # about a quarter hold a number
    assert any(re.search(r"\d{4}", s) for s in with_digits)  # a year
    assert any(re.search(r"[%٪]", s) for s in with_digits)  # a percentage
    assert any(re.search(r"\d[.,٫]\d", s) for s in with_digits)  # a decimal
    assert all(re.search(r"[.?!。？؟]$", s) and "|" not in s for s in table)


def test_persian_sentences_hold_what_a_persian_normaliser_must_handle():
    table = SENTENCES["fa"]

    assert any(re.search(r"[۰-۹]", s) and "٪" in s for s in table)  # "۲۵٪"
    assert any(re.search(r"[0-9]", s) and "%" in s for s in table)  # "25%"
    assert any("\u200c" in s for s in table)  # ZERO WIDTH NON-JOINER: "می‌خواهم"
    assert any(re.search(r"[A-Za-z]", s) for s in table)  # "GPU"


@needs_espeak
@pytest.mark.parametrize("speakers", [1, 2])
def test_persian_corpus(tmp_path, speakers):
    out = tmp_path / "c"
    result = write_demo_corpus(
        out, n=3, speakers=speakers, engine="espeak", language="fa", **SENTENCE_BOUNDS
    )

    rows = _rows(out)
    assert result == DemoCorpus(out, 3, result.total_seconds, speakers)
    assert [row[0] for row in rows] == ["DEMO001-0001", "DEMO001-0002", "DEMO001-0003"]
    if speakers == 1:
        assert {len(row) for row in rows} == {2}  # id|text: the reader normalises text
    else:
        assert [row[2:] for row in rows] == [["", "spk0"], ["", "spk1"], ["", "spk0"]]
    for row in rows:
        _sentences_of(row[1], "fa")
    _check_language_wavs(out, rows, SENTENCE_BOUNDS)
    read = read_corpus(out)
    assert [(r.text, r.speaker) for r in read.rows] == [
        (row[1], row[3] if speakers > 1 else "default") for row in rows
    ]


@needs_espeak
@pytest.mark.parametrize("language", ["ar", "ru", "de", "fr", "es", "zh"])
def test_other_languages_speak_their_sentences(tmp_path, language):
    result = write_demo_corpus(
        tmp_path / "c", n=1, engine="espeak", language=language, **SENTENCE_BOUNDS
    )

    rows = _rows(result.path)
    assert [len(row) for row in rows] == [2]
    _sentences_of(rows[0][1], language)
    _check_language_wavs(result.path, rows, SENTENCE_BOUNDS)


@needs_espeak
def test_language_corpus_is_deterministic(tmp_path):
    args = {"engine": "espeak", "language": "fa", "speakers": 2, **SENTENCE_BOUNDS}
    write_demo_corpus(tmp_path / "a", n=2, **args)
    write_demo_corpus(tmp_path / "b", n=2, **args)
    write_demo_corpus(tmp_path / "prefix", n=1, **{**args, "speakers": 1})

    files = _files(tmp_path / "a")
    assert _files(tmp_path / "b") == files
    prefix = _files(tmp_path / "prefix")  # utterance 0 (spk0 either way) ignores n
    assert prefix["DEMO001-0001.wav"] == files["DEMO001-0001.wav"]


@pytest.mark.parametrize(
    ("engine", "language", "match"),
    [
        ("synth", "fa", r"engine='synth' .*use engine='espeak'.*received: language='fa'"),
        ("espeak", "xx", r"one of en, fa, ar, ru, de, fr, es, zh, received: language='xx'"),
        ("espeak", "it", r"built-in sentences.*received: language='it'"),  # espeak has "it"
        ("synth", "", r"received: language=''"),
    ],
)
def test_language_errors_need_no_espeak(tmp_path, monkeypatch, engine, language, match):
    monkeypatch.setattr(shutil, "which", lambda name: None)  # checked before espeak-ng

    with pytest.raises(ConfigError, match=match):
        write_demo_corpus(tmp_path / "c", n=1, engine=engine, language=language)
    assert not (tmp_path / "c").exists()


def test_one_sentence_is_english_only(tmp_path, monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)  # checked before espeak-ng
    with pytest.raises(ConfigError, match=r"one_sentence.*received: language='fa'"):
        write_demo_corpus(tmp_path / "c", n=1, engine="espeak", language="fa", one_sentence=True)
    assert not (tmp_path / "c").exists()


@needs_espeak
def test_a_voice_espeak_lacks_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(_demo_espeak, "espeak_voice", lambda language: "zz-none")

    with pytest.raises(XttsDataError, match=r"voice 'zz-none' for language='fa'"):
        write_demo_corpus(tmp_path / "c", n=1, engine="espeak", language="fa")
    assert not (tmp_path / "c").exists()


def test_cli_language_error_is_one_line(tmp_path, capsys):
    assert main(["demo-corpus", str(tmp_path / "c"), "--language", "fa"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "language='fa'" in err[0]


def test_cli_language_help_lists_the_languages(capsys):
    with pytest.raises(SystemExit):
        main(["demo-corpus", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "en, fa, ar, ru, de, fr, es, zh" in help_text
    assert "needs --engine espeak" in help_text


@needs_espeak
def test_cli_writes_a_persian_corpus(tmp_path, capsys):
    out = tmp_path / "c"
    args = ["demo-corpus", str(out), "--engine", "espeak", "--language", "fa", "--n", "1"]
    assert main([*args, "--min-seconds", "1", "--max-seconds", "3"]) == 0
    assert "wrote 1 utterances" in capsys.readouterr().out
    _sentences_of(_rows(out)[0][1], "fa")


def test_held_out_voices_are_a_corpus_of_their_own(tmp_path):
    corpus = write_demo_corpus(tmp_path / "c", n=8, speakers=4, held_out_speakers=1,
                               min_seconds=0.3, max_seconds=0.5)  # fmt: skip
    assert corpus.held_out == ("spk3",)
    trained, held = read_corpus(tmp_path / "c"), read_corpus(tmp_path / "c" / "held-out")
    assert trained.layout == held.layout == "ljspeech"
    assert {r.speaker for r in trained.rows} == {"spk0", "spk1", "spk2"}
    assert {r.speaker for r in held.rows} == {"spk3"}
    assert len(trained.rows) + len(held.rows) == 8
    assert {r.audio.parent for r in held.rows} == {tmp_path / "c" / "held-out" / "wavs"}


@pytest.mark.parametrize("held_out", [-1, 4])
def test_held_out_voices_leave_one_to_train_on(tmp_path, held_out):
    with pytest.raises(ConfigError, match="held_out_speakers"):
        write_demo_corpus(tmp_path / "c", n=8, speakers=4, held_out_speakers=held_out)
    assert not (tmp_path / "c").exists()


def test_cli_names_the_held_out_voices(tmp_path, capsys):
    args = ["demo-corpus", str(tmp_path / "c"), "--n", "6", "--speakers", "3",
            "--held-out-speakers", "2", "--min-seconds", "0.3", "--max-seconds", "0.5"]  # fmt: skip
    assert main(args) == 0
    assert "voices spk1, spk2 held out, in" in capsys.readouterr().out
    assert (tmp_path / "c" / "held-out" / "metadata.csv").is_file()


# Texts written before `texts` existed (seed 11, 2-4 s, synth): the default kind keeps them.
SEED_11_TEXTS = ["And have in is this be letter or.", "Captain common her question which.",
                 "Certain Mrs. Hale winter morning that.",
                 "At famous her street voice light often."]  # fmt: skip


@pytest.mark.parametrize("options", [{}, {"texts": "sentences"}, {"one_sentence": True}])
def test_sentences_are_the_texts_they_always_were(tmp_path, options):
    write_demo_corpus(tmp_path / "c", n=4, seed=11, min_seconds=2.0, max_seconds=4.0, **options)
    assert [row[1] for row in _rows(tmp_path / "c")] == SEED_11_TEXTS


def _durations(root: Path) -> list[float]:
    return [soundfile.info(root / "wavs" / f"{row[0]}.wav").duration for row in _rows(root)]


def test_run_on_texts_are_one_sentence_with_no_punctuation_inside(tmp_path):
    from xtts_data.sentences import sentences

    write_demo_corpus(tmp_path / "c", n=6, seed=3, min_seconds=4.0, max_seconds=6.0,
                      texts="run-on")  # fmt: skip
    rows = _rows(tmp_path / "c")
    joined = set()
    for _, raw, spoken in rows:
        for text in (raw, spoken):
            assert re.fullmatch(r"[A-Z0-9][a-z0-9 ]+[a-z0-9]\.", text), text  # one final period
            assert len(sentences(text)) == 1
        assert not re.search(r"\d", spoken)  # "the 21st" is read "the twenty first"
        assert normalize_text(spoken, TextConfig()) == normalize_text(raw, TextConfig())
        joined |= set(raw.lower().split()) & {"and", "then", "while", "so", "but", "until"}
    assert joined  # clauses joined by plain words
    assert min(len(raw.split()) for _, raw, _ in rows) > 8  # longer than a 4-12-word sentence
    assert all(4.0 <= seconds <= 6.0 for seconds in _durations(tmp_path / "c"))


def _repeat_kind(raw: str) -> str:
    """Which text that repeats `raw` is: "word", "distinct" or "numbers"."""
    tokens = raw.rstrip(".").lower().split()
    if all(token.isdigit() for token in tokens):
        return "numbers"
    if len(set(tokens)) == 1:
        return "word"
    assert len(set(tokens)) == len(tokens), raw  # distinct words, no commas
    assert re.fullmatch(r"[a-z ]+", " ".join(tokens)), raw
    return "distinct"


def test_repeated_texts_repeat_a_word_list_words_or_numbers():
    config = TextConfig()
    kinds = {}
    for seed in range(30):
        drawn = list(itertools.islice(_demo_espeak.spoken_words(
            np.random.default_rng(seed), texts="repeated"), 8))  # fmt: skip
        raw, spoken = (join_words([word[i] for word in drawn]) for i in (0, 1))
        kinds.setdefault(_repeat_kind(raw), []).append((raw, spoken))
        assert normalize_text(spoken, config) == normalize_text(raw, config), (raw, spoken)
    assert set(kinds) == {"word", "distinct", "numbers"}  # each drawn by the seed
    assert all(len(raw.split()) == 8 for raw, _ in kinds["word"])  # "The the the ..."
    for raw, spoken in kinds["numbers"]:  # digits, spelled out in what is said
        assert re.fullmatch(r"(\d{1,2} )+\d{1,2}\.", raw), raw
        assert re.fullmatch(r"[A-Z][a-z ]+\.", spoken), spoken


def test_a_repeated_corpus_fills_its_bounds(tmp_path):
    write_demo_corpus(tmp_path / "c", n=6, seed=5, min_seconds=2.0, max_seconds=4.0,
                      texts="repeated")  # fmt: skip
    rows = _rows(tmp_path / "c")
    assert all(_repeat_kind(raw) for _, raw, _ in rows)
    assert any(_repeat_kind(raw) == "word" and len(raw.split()) > 2 for _, raw, _ in rows)
    assert all(2.0 <= seconds <= 4.0 for seconds in _durations(tmp_path / "c"))


@pytest.mark.parametrize(("min_seconds", "shortest"), [(0.1, 0.2), (1.0, 1.0)])
def test_short_texts_are_one_or_two_words_padded_only_to_the_minimum(tmp_path, min_seconds,
                                                                     shortest):  # fmt: skip
    write_demo_corpus(tmp_path / "c", n=8, seed=1, min_seconds=min_seconds, max_seconds=10.0,
                      texts="short")  # fmt: skip
    rows = _rows(tmp_path / "c")
    assert all(1 <= len(raw.split()) <= 2 for _, raw, _ in rows)
    assert all(re.fullmatch(r"[A-Z][a-z]*( [a-z]+)?[.?!]", raw) for _, raw, _ in rows)
    assert len({raw for _, raw, _ in rows}) > 3  # drawn by the seed
    seconds = _durations(tmp_path / "c")
    # A phrase fills no target of the 10 s bound: it is as long as it is, or the minimum.
    assert shortest <= min(seconds)
    assert max(seconds) < max(min_seconds, 1.5)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"texts": "poems"},
         r"texts one of sentences, run-on, repeated, short, received: texts='poems'"),
        ({"texts": "run-on", "one_sentence": True},
         r"one of one_sentence and texts='run-on'.*received: one_sentence=True, texts='run-on'"),
        ({"texts": "short", "max_seconds": 1.5},
         r"max_seconds >= 2.0 with texts='short'.*received: max_seconds=1.5"),
        ({"texts": "repeated", "engine": "espeak", "language": "de"},
         r"language='en' with texts='repeated'.*received: language='de'"),
    ],
)  # fmt: skip
def test_bad_text_kinds_are_refused_by_name(tmp_path, monkeypatch, kwargs, match):
    monkeypatch.setattr(shutil, "which", lambda name: None)  # checked before espeak-ng
    with pytest.raises(ConfigError, match=match):
        write_demo_corpus(tmp_path / "c", n=1, **kwargs)
    assert not (tmp_path / "c").exists()


def test_cli_writes_each_text_kind(tmp_path, capsys):
    for kind in ("run-on", "repeated", "short"):
        out = tmp_path / kind
        args = ["demo-corpus", str(out), "--n", "2", "--texts", kind]
        assert main([*args, "--min-seconds", "0.1", "--max-seconds", "2"]) == 0
        assert len(_rows(out)) == 2
    capsys.readouterr()  # the progress bars
    assert main(["demo-corpus", str(tmp_path / "x"), "--texts", "short", "--one-sentence"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "one_sentence=True, texts='short'" in err[0]
    with pytest.raises(SystemExit):  # an unknown kind: argparse names the choices
        main(["demo-corpus", str(tmp_path / "y"), "--texts", "poems"])
    assert "run-on" in capsys.readouterr().err
