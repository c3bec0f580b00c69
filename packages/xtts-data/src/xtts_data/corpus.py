"""Read a TTS corpus into rows, with a reason for every row that cannot be used.

Layouts (detected by `read_corpus`, or named with `layout=`):
    ljspeech: `ROOT/metadata.csv` with `id|text|normalized_text` rows (also `id|text`,
        `id|text|normalized_text|speaker` for several speakers and
        `id|text|normalized_text|speaker|language` for several languages; an empty field
        takes the default); audio in `ROOT/wavs/<id>.wav` (or `.flac` / `.ogg`).
    speaker-folders: one LJSpeech-layout folder per speaker, `ROOT/<speaker>/metadata.csv`;
        ids become `<speaker>/<id>`.
    filelist: a text file of `path|text`, `path|text|speaker` or
        `path|text|speaker|language` rows (Coqui / VITS filelists); paths are relative to
        the file's folder; ids are paths without suffix.

A row's language is a BCP-47 tag (`fa`, `en-gb`); rows without one are in
`data.text.language`.

Rows are checked here for what needs no decoding (format, empty text, audio file present,
paths inside the corpus root); the cache builder reports audio it cannot decode. A
malformed row is skipped as `FILE:LINE` (e.g. `metadata.csv:12`), its reason quoting the
row's first 40 characters.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Literal

from xtts_data.errors import CorpusError

__all__ = ["AUDIO_SUFFIXES", "Corpus", "Row", "Skipped", "read_corpus"]

Layout = Literal["auto", "ljspeech", "speaker-folders", "filelist"]
AUDIO_SUFFIXES = (".wav", ".flac", ".ogg")
DEFAULT_SPEAKER = "default"
EXCERPT_CHARS = 40  # of a malformed row, quoted in its reason


@dataclasses.dataclass(frozen=True)
class Row:
    """One usable corpus row: utterance id, audio file, raw text, speaker name and the
    language the row names (`None`: the config's default)."""

    id: str
    audio: Path
    text: str
    speaker: str
    language: str | None = None


@dataclasses.dataclass(frozen=True)
class Skipped:
    """A row left out, and why (reported in `report.json`, never dropped silently)."""

    id: str
    reason: str


@dataclasses.dataclass(frozen=True)
class Corpus:
    """The rows of a corpus and the rows skipped while reading it."""

    root: Path
    layout: str
    rows: tuple[Row, ...]
    skipped: tuple[Skipped, ...]

    @property
    def speakers(self) -> list[str]:
        """Speaker names, sorted: a speaker's index in this list is its id."""
        return sorted({row.speaker for row in self.rows})


def read_corpus(path: str | Path, *, layout: Layout = "auto") -> Corpus:
    """Read the rows of the corpus at `path` (a folder, or a filelist file).

    Raises:
        CorpusError: the path does not exist or matches no known layout.
    """
    path = Path(path)
    if not path.exists():
        raise CorpusError(f"Expected a corpus folder or filelist, received: {path} (not found)")
    layout = _detect(path) if layout == "auto" else layout
    if layout == "ljspeech":
        rows, skipped = _read_ljspeech(path, prefix="", speaker=None, top=path)
    elif layout == "speaker-folders":
        rows, skipped = _read_speaker_folders(path)
    elif layout == "filelist":
        rows, skipped = _read_filelist(path)
        path = path.parent
    else:
        raise CorpusError(
            f"Expected layout 'auto', 'ljspeech', 'speaker-folders' or 'filelist', "
            f"received: layout={layout!r}"
        )
    rows, duplicates = _drop_duplicates(rows)
    return Corpus(path, layout, tuple(rows), tuple(skipped + duplicates))


def _detect(path: Path) -> str:
    if path.is_file():
        return "filelist"
    if (path / "metadata.csv").is_file():
        return "ljspeech"
    if any((sub / "metadata.csv").is_file() for sub in path.iterdir() if sub.is_dir()):
        return "speaker-folders"
    raise CorpusError(
        f"Expected {path}/metadata.csv (LJSpeech layout), speaker folders each with a "
        f"metadata.csv, or a filelist file; found none of them"
    )


def _lines(path: Path) -> list[tuple[int, str, bool]]:
    """(line number, text, whether it is UTF-8) for every non-blank line; a line that is
    not UTF-8 is decoded with U+FFFD for what is not, to be quoted, never read."""
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise CorpusError(f"Cannot read {path}: {error.strerror}") from error
    lines = []
    for number, line in enumerate(raw.splitlines(), start=1):
        try:
            text = line.decode("utf-8-sig" if number == 1 else "utf-8")
        except UnicodeDecodeError:
            lines.append((number, line.decode("utf-8", "replace"), False))
            continue
        if text.strip():
            lines.append((number, text, True))
    return lines


def _read_ljspeech(root: Path, *, prefix: str, speaker: str | None, top: Path):
    rows, skipped = [], []
    metadata = root / "metadata.csv"
    for number, line, utf8 in _lines(metadata):
        where = f"{metadata.name}:{number}"
        fields = [f.strip() for f in line.split("|")]
        if not utf8 or not 2 <= len(fields) <= 5 or not fields[0]:
            expected = "id|text|normalized_text[|speaker[|language]]"
            skipped.append(Skipped(prefix + where, _malformed(line, utf8, expected)))
            continue
        fields += [""] * (5 - len(fields))
        uid = fields[0]
        text = fields[2] or fields[1]
        row_speaker = speaker or fields[3] or DEFAULT_SPEAKER
        audio = _find_audio(root, os.path.join("wavs", uid))
        result = _check(prefix + uid, root, audio, text, row_speaker, fields[4] or None, top)
        (rows if isinstance(result, Row) else skipped).append(result)
    return rows, skipped


def _read_speaker_folders(root: Path):
    rows, skipped = [], []
    for folder in sorted(p for p in root.iterdir() if (p / "metadata.csv").is_file()):
        found, bad = _read_ljspeech(folder, prefix=f"{folder.name}/", speaker=folder.name,
                                    top=root)  # fmt: skip
        rows += found
        skipped += bad
    return rows, skipped


def _read_filelist(filelist: Path):
    rows, skipped = [], []
    root = filelist.parent
    for number, line, utf8 in _lines(filelist):
        fields = [f.strip() for f in line.split("|")]
        if not utf8 or not 2 <= len(fields) <= 4 or not fields[0]:
            where = f"{filelist.name}:{number}"
            expected = "path|text[|speaker[|language]]"
            skipped.append(Skipped(where, _malformed(line, utf8, expected)))
            continue
        fields += [""] * (4 - len(fields))
        uid = os.path.splitext(os.path.normpath(fields[0]))[0].replace(os.sep, "/")
        speaker = fields[2] or DEFAULT_SPEAKER
        result = _check(uid, root, fields[0], fields[1], speaker, fields[3] or None, root)
        (rows if isinstance(result, Row) else skipped).append(result)
    return rows, skipped


def _malformed(line: str, utf8: bool, expected: str) -> str:
    """Why a row is malformed, quoting its start (the skip's id is `file:line`)."""
    quoted = repr(line[:EXCERPT_CHARS]) + ("..." if len(line) > EXCERPT_CHARS else "")
    if not utf8:
        return f"malformed row: not UTF-8 text: {quoted}"
    return f"malformed row: expected {expected}, received {line.count('|') + 1} field(s): {quoted}"


def _find_audio(root: Path, stem: str) -> str:
    """`stem` plus the first audio suffix that exists (`.wav` when none does)."""
    for suffix in AUDIO_SUFFIXES:
        if os.path.isfile(os.path.join(root, stem + suffix)):
            return stem + suffix
    return stem + ".wav"


def _check(uid: str, root: Path, relative: str, text: str, speaker: str,
           language: str | None, top: Path) -> Row | Skipped:  # fmt: skip
    """A row, or why it is skipped; `top` is the corpus root its audio must resolve into
    (symlinks and `..` followed), `root` the folder its path is relative to."""
    normalized = os.path.normpath(relative)
    if os.path.isabs(relative) or normalized == ".." or normalized.startswith(".." + os.sep):
        return Skipped(uid, f"path outside the corpus root: {relative}")
    if not text.strip():
        return Skipped(uid, "empty text")
    audio = root / normalized
    resolved = audio.resolve()
    if not resolved.is_relative_to(top.resolve()):
        return Skipped(uid, f"path outside the corpus root: {normalized} (resolves to {resolved})")
    if not audio.is_file():
        return Skipped(uid, f"missing audio file: {normalized}")
    return Row(uid, audio, text, speaker, language)


def _drop_duplicates(rows: list[Row]) -> tuple[list[Row], list[Skipped]]:
    seen: set[str] = set()
    kept, duplicates = [], []
    for row in rows:
        if row.id in seen:
            duplicates.append(Skipped(row.id, "duplicate id (the first row with it is kept)"))
        else:
            seen.add(row.id)
            kept.append(row)
    return kept, duplicates
