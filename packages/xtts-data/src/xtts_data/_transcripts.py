"""The text side of a corpus: every row cleaned in its language and tokenised, once.

`prepare`, the on-the-fly pipeline and `read_utterances` all read transcripts here, so a
row means the same ids everywhere, and what cleaning dropped is reported, never silent.
"""

from __future__ import annotations

import collections
import dataclasses
import time
from collections.abc import Sequence

from xtts_data.corpus import Row, Skipped
from xtts_data.errors import ConfigError, CorpusError
from xtts_data.text import TextConfig, Tokenizer, normalize_texts

__all__ = ["Transcripts", "read_transcripts"]


@dataclasses.dataclass(frozen=True)
class Transcripts:
    """The usable rows' token ids, and what was dropped on the way.

    Attributes:
        tokenizer: the vocabulary (built from the cleaned texts with `symbols: auto`).
        tokens: kept row id → token ids (ending with `<eos>`).
        languages: kept row id → its canonical language tag.
        skipped: rows whose text cleaning emptied or stripped of too many letters.
        dropped: characters cleaning removed, over all rows (kept or not).
        oov: characters of kept rows' cleaned text missing from a fixed vocabulary.
        rows_per_second: cleaning and tokenising speed.
    """

    tokenizer: Tokenizer
    tokens: dict[str, list[int]]
    languages: dict[str, str]
    skipped: tuple[Skipped, ...]
    dropped: collections.Counter[str]
    oov: collections.Counter[str]
    rows_per_second: float


def _row_languages(rows: Sequence[Row], config: TextConfig) -> list[str]:
    tags = []
    for row in rows:
        try:
            tags.append(config.row_language(row.language))
        except ConfigError as error:
            raise ConfigError(f"row {row.id}: {error}") from None
    return tags


def _shown(counter: collections.Counter[str], most: int = 4) -> str:
    return ", ".join(f"{c!r} x{n}" for c, n in counter.most_common(most))


def read_transcripts(
    rows: Sequence[Row], config: TextConfig, *, tokenizer: Tokenizer | None = None
) -> Transcripts:
    """Clean and tokenise every row's text.

    Args:
        rows: the corpus rows.
        config: the text settings.
        tokenizer: encode with this vocabulary (e.g. a trained run's); `None` builds one
            from the rows (`symbols: auto`) or the config's fixed symbols.

    Raises:
        ConfigError: a row names a language not in the config (the row id is named).
        CorpusError: no row has speakable text.
    """
    started = time.perf_counter()
    tags = _row_languages(rows, config)
    cleaned = normalize_texts([row.text for row in rows], config, tags)
    dropped: collections.Counter[str] = collections.Counter()
    kept, skipped = [], []
    for row, tag, clean in zip(rows, tags, cleaned, strict=True):
        dropped.update(clean.dropped)
        limit = config.max_letter_loss
        if limit is not None and clean.lost_letters > limit:
            reason = (
                f"text cleaning dropped {clean.lost_letters:.0%} of its letters (more than "
                f"data.text.max_letter_loss={limit}): {_shown(clean.dropped)}"
            )
            skipped.append(Skipped(row.id, reason))
        elif not clean.text:
            skipped.append(Skipped(row.id, "no speakable text left after text cleaning"))
        else:
            kept.append((row, tag, clean.text))
    if not kept:
        reasons = "; ".join(f"{s.id}: {s.reason}" for s in skipped[:3])
        raise CorpusError(f"no row has speakable text ({len(skipped)} skipped: {reasons})")
    if tokenizer is None:
        present = [t for t in config.all_languages if t in {tag for _, tag, _ in kept}]
        tokenizer = Tokenizer.from_texts(config, [text for _, _, text in kept], present)
    least = 3 if tokenizer.language_tokens else 2  # a symbol, eos (and a language id)
    tokens, languages, oov = {}, {}, collections.Counter()
    for row, tag, text in kept:
        ids, row_oov = tokenizer.encode(text, language=tag)
        oov.update(row_oov)
        if len(ids) < least:
            skipped.append(Skipped(row.id, "no known symbols left after text normalisation"))
            continue
        tokens[row.id], languages[row.id] = ids, tag
    seconds = max(time.perf_counter() - started, 1e-9)
    return Transcripts(tokenizer, tokens, languages, tuple(skipped), dropped, oov,
                       len(rows) / seconds)  # fmt: skip
