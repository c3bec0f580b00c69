"""read_corpus: layouts, their detection, and a reported reason for every skipped row."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import soundfile

from xtts_data.corpus import Corpus, Row, Skipped, read_corpus
from xtts_data.errors import CorpusError

DUPLICATE = "duplicate id (the first row with it is kept)"


def write_audio(path: Path) -> Path:
    """10 ms of silence; the format follows the suffix (only existence matters here)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    soundfile.write(path, np.zeros(160, np.float32), 16000)
    return path


def write_lines(path: Path, lines: list[str | bytes]) -> Path:
    """`lines` joined by newlines; bytes are written as given (e.g. not UTF-8)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = [line if isinstance(line, bytes) else line.encode("utf-8") for line in lines]
    path.write_bytes(b"\n".join(raw) + b"\n")
    return path


def ljspeech(root: Path, lines: list[str | bytes], audio: tuple[str, ...] = ("a", "b")) -> Path:
    for name in audio:
        write_audio(root / "wavs" / (name if "." in name else f"{name}.wav"))
    write_lines(root / "metadata.csv", lines)
    return root


def speaker_folders(root: Path) -> Path:
    ljspeech(root / "bob", ["x|Hi bob.|hi bob|carol"], audio=("x",))
    ljspeech(root / "alice", ["x|Hello.", "y|Bye."], audio=("x", "y"))
    (root / "notes").mkdir()  # a folder without metadata.csv is not a speaker
    (root / "README.txt").write_text("not a corpus file")
    return root


def filelist(root: Path, lines: list[str | bytes], audio=("wavs/a.wav", "wavs/b.wav")) -> Path:
    for name in audio:
        write_audio(root / name)
    return write_lines(root / "list.txt", lines)


def summary(corpus: Corpus) -> list[tuple[str, str, str, str]]:
    """(id, audio relative to the root, text, speaker) of every row."""
    return [
        (r.id, r.audio.relative_to(corpus.root).as_posix(), r.text, r.speaker) for r in corpus.rows
    ]


def single_skip(corpus: Corpus) -> Skipped:
    assert len(corpus.skipped) == 1, corpus.skipped
    return corpus.skipped[0]


# --- LJSpeech ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "text", "speaker"),
    [
        ("a|Dr. Smith paid $5.", "Dr. Smith paid $5.", "default"),
        ("a|Dr. Smith paid $5.|Doctor Smith paid five dollars.", "Doctor Smith paid five dollars.", "default"),
        ("a|Dr. Smith paid $5.|", "Dr. Smith paid $5.", "default"),
        ("a|Dr. Smith paid $5.|  ", "Dr. Smith paid $5.", "default"),
        ("a|Dr. Smith paid $5.|Doctor Smith.|amy", "Doctor Smith.", "amy"),
        ("a|Dr. Smith paid $5.||amy", "Dr. Smith paid $5.", "amy"),
        ("a|Dr. Smith paid $5.|Doctor Smith.|", "Doctor Smith.", "default"),
        (" a | padded fields | ", "padded fields", "default"),
    ],
)  # fmt: skip
def test_ljspeech_columns(tmp_path, line, text, speaker):
    corpus = read_corpus(ljspeech(tmp_path, [line]))
    assert corpus.layout == "ljspeech"
    assert corpus.root == tmp_path
    assert corpus.rows == (Row("a", tmp_path / "wavs" / "a.wav", text, speaker),)
    assert corpus.skipped == ()


def test_ljspeech_speakers_are_sorted_and_rows_keep_file_order(tmp_path):
    lines = ["c|Three.|three|zed", "a|One.|one|amy", "b|Two.|two|mia", "d|Four."]
    corpus = read_corpus(ljspeech(tmp_path, lines, audio=("a", "b", "c", "d")))
    assert [row.id for row in corpus.rows] == ["c", "a", "b", "d"]
    assert corpus.speakers == ["amy", "default", "mia", "zed"]


def test_ljspeech_byte_order_mark_is_not_part_of_the_first_id(tmp_path):
    corpus = read_corpus(ljspeech(tmp_path, ["\ufeffa|With a BOM."]))
    assert [row.id for row in corpus.rows] == ["a"]


@pytest.mark.parametrize("suffix", [".flac", ".ogg"])
def test_ljspeech_finds_other_audio_formats(tmp_path, suffix):
    corpus = read_corpus(ljspeech(tmp_path, ["a|Hello."], audio=(f"a{suffix}",)))
    assert corpus.skipped == ()
    assert summary(corpus) == [("a", f"wavs/a{suffix}", "Hello.", "default")]


def test_ljspeech_prefers_wav_when_several_formats_exist(tmp_path):
    corpus = read_corpus(ljspeech(tmp_path, ["a|Hello."], audio=("a.ogg", "a.flac", "a.wav")))
    assert summary(corpus) == [("a", "wavs/a.wav", "Hello.", "default")]


@pytest.mark.parametrize(
    ("line", "uid", "reason"),
    [
        ("just-one-field", "metadata.csv:2", r"^malformed row: expected id\|text\|normalized_text\[\|speaker\[\|language\]\], received 1 field\(s\): 'just-one-field'$"),
        ("b|t|n|s|fa|extra", "metadata.csv:2", r"^malformed row: .*received 6 field\(s\): 'b\|t\|n\|s\|fa\|extra'$"),
        ("|text without an id", "metadata.csv:2", r"^malformed row: .*received 2 field\(s\): '\|text without an id'$"),
        (b"b|caf\xe9 in Latin-1", "metadata.csv:2", r"^malformed row: not UTF-8 text: 'b\|caf\ufffd in Latin-1'$"),
        ("b| |  ", "b", r"^empty text$"),
        ("b||", "b", r"^empty text$"),
        ("missing|No audio for this one.", "missing", r"^missing audio file: wavs/missing\.wav$"),
        ("../../etc/passwd|Escape the root.", "../../etc/passwd", r"^path outside the corpus root: "),
        ("/etc/passwd|Absolute id.", "/etc/passwd", r"^path outside the corpus root: "),
    ],
)  # fmt: skip
def test_ljspeech_skips_bad_rows_with_a_reason(tmp_path, line, uid, reason):
    corpus = read_corpus(ljspeech(tmp_path, ["a|Good row.", line]))
    assert [row.id for row in corpus.rows] == ["a"]
    skipped = single_skip(corpus)
    assert skipped.id == uid
    assert re.search(reason, skipped.reason), skipped.reason


def test_ljspeech_line_numbers_count_blank_lines(tmp_path):
    corpus = read_corpus(ljspeech(tmp_path, ["a|Good row.", "", "   ", "broken"]))
    assert single_skip(corpus).id == "metadata.csv:4"


def test_a_malformed_row_is_reported_by_line_and_its_first_40_characters(tmp_path):
    row = "a row someone forgot to split into fields, " + "and it goes on " * 5
    corpus = read_corpus(ljspeech(tmp_path, ["a|Good row.", "", row]))
    skipped = single_skip(corpus)
    assert skipped.id == "metadata.csv:3"
    assert skipped.reason.endswith(": 'a row someone forgot to split into field'...")


def test_ljspeech_duplicate_id_keeps_the_first_row(tmp_path):
    corpus = read_corpus(ljspeech(tmp_path, ["a|First.", "b|Other.", "a|Second."]))
    assert [(row.id, row.text) for row in corpus.rows] == [("a", "First."), ("b", "Other.")]
    assert corpus.skipped == (Skipped("a", DUPLICATE),)


# --- speaker folders -----------------------------------------------------------------


def test_speaker_folders_prefix_ids_and_take_the_folder_as_speaker(tmp_path):
    corpus = read_corpus(speaker_folders(tmp_path))
    assert corpus.layout == "speaker-folders"
    assert corpus.root == tmp_path
    assert summary(corpus) == [
        ("alice/x", "alice/wavs/x.wav", "Hello.", "alice"),
        ("alice/y", "alice/wavs/y.wav", "Bye.", "alice"),
        ("bob/x", "bob/wavs/x.wav", "hi bob", "bob"),  # the folder wins over column 4
    ]
    assert corpus.speakers == ["alice", "bob"]
    assert corpus.skipped == ()


def test_speaker_folders_report_skips_with_the_speaker_prefix(tmp_path):
    ljspeech(tmp_path / "amy", ["a|Fine.", "broken", "gone|Missing audio.", "a|Again."])
    corpus = read_corpus(tmp_path)
    assert [row.id for row in corpus.rows] == ["amy/a"]
    assert [s.id for s in corpus.skipped] == ["amy/metadata.csv:2", "amy/gone", "amy/a"]
    assert corpus.skipped[1].reason == "missing audio file: wavs/gone.wav"
    assert corpus.skipped[2].reason == DUPLICATE


# --- filelists -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("wavs/a.wav|Hello.", ("wavs/a", "wavs/a.wav", "Hello.", "default")),
        ("wavs/a.wav|Hello.|amy", ("wavs/a", "wavs/a.wav", "Hello.", "amy")),
        ("wavs/a.wav|Hello.|", ("wavs/a", "wavs/a.wav", "Hello.", "default")),
        ("./wavs/../wavs/a.wav|Hello.", ("wavs/a", "wavs/a.wav", "Hello.", "default")),
        ("wavs/c.flac|Flac.|bo", ("wavs/c", "wavs/c.flac", "Flac.", "bo")),
    ],
)
def test_filelist_rows_are_relative_to_its_folder(tmp_path, line, expected):
    root = tmp_path / "lists"
    path = filelist(root, [line], audio=("wavs/a.wav", "wavs/c.flac"))
    corpus = read_corpus(path)
    assert corpus.layout == "filelist"
    assert corpus.root == root
    assert corpus.skipped == ()
    assert summary(corpus) == [expected]


def test_filelist_speakers_are_sorted(tmp_path):
    corpus = read_corpus(filelist(tmp_path, ["wavs/a.wav|One.|zoe", "wavs/b.wav|Two.|al"]))
    assert corpus.speakers == ["al", "zoe"]


@pytest.mark.parametrize(
    ("line", "uid", "reason"),
    [
        ("wavs/b.wav", "list.txt:2", r"^malformed row: expected path\|text\[\|speaker\[\|language\]\], received 1 field\(s\): 'wavs/b\.wav'$"),
        ("wavs/b.wav|text|speaker|fa|extra", "list.txt:2", r"^malformed row: .*received 5 field\(s\): 'wavs/b\.wav\|text\|speaker\|fa\|extra'$"),
        ("wavs/b.wav|a|b|c|d", "list.txt:2", r"^malformed row: .*received 5 field\(s\): 'wavs/b\.wav\|a\|b\|c\|d'$"),
        (b"wavs/b.wav|caf\xe9", "list.txt:2", r"^malformed row: not UTF-8 text: 'wavs/b\.wav\|caf\ufffd'$"),
        ("wavs/b.wav|   ", "wavs/b", r"^empty text$"),
        ("wavs/missing.wav|Hello.", "wavs/missing", r"^missing audio file: wavs/missing\.wav$"),
        ("../../etc/passwd|Escape the root.", "../../etc/passwd", r"^path outside the corpus root: \.\./\.\./etc/passwd$"),
        ("wavs/../../x.wav|Escape the root.", "../x", r"^path outside the corpus root: "),
        ("/etc/passwd|Absolute path.", "/etc/passwd", r"^path outside the corpus root: /etc/passwd$"),
    ],
)  # fmt: skip
def test_filelist_skips_bad_rows_with_a_reason(tmp_path, line, uid, reason):
    corpus = read_corpus(filelist(tmp_path, ["wavs/a.wav|Good row.", line]))
    assert [row.id for row in corpus.rows] == ["wavs/a"]
    skipped = single_skip(corpus)
    assert skipped.id == uid
    assert re.search(reason, skipped.reason), skipped.reason


def test_filelist_duplicate_id_keeps_the_first_row(tmp_path):
    path = filelist(
        tmp_path, ["wavs/a.wav|First.", "wavs/a.flac|Second."], audio=("wavs/a.wav", "wavs/a.flac")
    )
    corpus = read_corpus(path)
    assert summary(corpus) == [("wavs/a", "wavs/a.wav", "First.", "default")]
    assert corpus.skipped == (Skipped("wavs/a", DUPLICATE),)


# --- detection and errors ------------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "layout"),
    [
        (lambda root: ljspeech(root, ["a|Hello.", "b|There."]), "ljspeech"),
        (speaker_folders, "speaker-folders"),
        (lambda root: filelist(root, ["wavs/a.wav|Hello."]), "filelist"),
    ],
    ids=["ljspeech", "speaker-folders", "filelist"],
)
def test_auto_detects_each_layout(tmp_path, build, layout):
    path = build(tmp_path / "corpus")
    auto = read_corpus(path)
    assert auto.layout == layout
    assert auto.rows  # the layout actually read rows
    assert auto == read_corpus(path, layout=layout)


def test_ljspeech_metadata_at_the_root_wins_over_speaker_folders(tmp_path):
    ljspeech(tmp_path, ["a|Root row."])
    ljspeech(tmp_path / "bob", ["x|Folder row."], audio=("x",))
    corpus = read_corpus(tmp_path)
    assert corpus.layout == "ljspeech"
    assert [row.id for row in corpus.rows] == ["a"]


@pytest.mark.parametrize(
    ("make", "layout", "match"),
    [
        (lambda root: root / "absent", "auto", r"received: .*absent \(not found\)"),
        (lambda root: root, "auto", r"metadata\.csv.*found none of them"),
        (lambda root: write_audio(root / "wavs" / "a.wav").parent.parent, "auto", r"found none of them"),
        (lambda root: root, "ljspeech", r"Cannot read .*metadata\.csv"),
        (lambda root: root, "vctk", r"received: layout='vctk'"),
    ],
    ids=["missing-path", "empty-folder", "wavs-without-metadata", "forced-ljspeech", "unknown-layout"],
)  # fmt: skip
def test_unreadable_corpus_raises(tmp_path, make, layout, match):
    with pytest.raises(CorpusError, match=match):
        read_corpus(make(tmp_path), layout=layout)


def test_rows_name_their_language_in_the_last_column(tmp_path):
    corpus = read_corpus(
        ljspeech(tmp_path, ["a|Hello.", "b|سلام||spk|fa", "c|Hi.|hi|spk|"], ("a", "b", "c"))
    )
    assert [(r.id, r.speaker, r.language) for r in corpus.rows] == [
        ("a", "default", None),
        ("b", "spk", "fa"),
        ("c", "spk", None),
    ]
    listed = tmp_path / "list.txt"
    listed.write_text("wavs/a.wav|Hello.|spk|en\nwavs/b.wav|سلام||fa\n", encoding="utf-8")
    rows = read_corpus(listed).rows
    assert [(r.speaker, r.language) for r in rows] == [("spk", "en"), ("default", "fa")]


def test_a_symlink_resolving_outside_the_root_is_skipped(tmp_path):
    outside = tmp_path / "secret.wav"
    write_audio(outside)
    root = ljspeech(tmp_path / "corpus", ["a|Good row.", "b|Escapes by a link."], audio=("a",))
    (root / "wavs" / "b.wav").symlink_to(outside)
    corpus = read_corpus(root)
    assert [row.id for row in corpus.rows] == ["a"]
    skipped = single_skip(corpus)
    assert skipped.id == "b"
    assert skipped.reason == f"path outside the corpus root: wavs/b.wav (resolves to {outside})"
    inside = ljspeech(tmp_path / "linked", ["a|Linked inside."], audio=())
    write_audio(inside / "takes" / "a.wav")
    (inside / "wavs").mkdir(exist_ok=True)
    (inside / "wavs" / "a.wav").symlink_to(inside / "takes" / "a.wav")
    assert [row.id for row in read_corpus(inside).rows] == ["a"]  # inside the root: kept
