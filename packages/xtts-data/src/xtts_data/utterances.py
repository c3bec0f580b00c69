"""Whole utterances of a cache or corpus, one by one: for evaluation, not for training.

`read_utterances` gives each utterance unpadded, with its id, as a NumPy record, so an
evaluation can name files after ids and compare a synthesis with its own ground truth;
training reads the batched `make_dataset` instead.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import numpy as np

from xtts_audio import MelConfig, mel_features
from xtts_data._audio_io import BadAudioError, load_audio
from xtts_data._source import open_source
from xtts_data._transcripts import read_transcripts
from xtts_data.config import DataConfig
from xtts_data.corpus import read_corpus
from xtts_data.errors import ConfigError, CorpusError
from xtts_data.manifest import FeatureCache
from xtts_data.pipeline import is_validation
from xtts_data.text import Tokenizer

__all__ = ["Utterance", "read_utterances"]

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Utterance:
    """One utterance as the cache holds it.

    Attributes:
        id: the corpus id.
        speaker: index into the source's speakers.
        tokens: int32 [T] token ids, ending with `<eos>`.
        mel: float32 [frames, n_mels] features.
        text: the tokens decoded back to text (normalised, as the model reads it).
        audio: float32 [samples], the waveform the mel was computed from (resampled and
            trimmed), when read `with_audio`; else None.
    """

    id: str
    speaker: int
    tokens: np.ndarray
    mel: np.ndarray
    text: str
    audio: np.ndarray | None = None


def read_utterances(source, config: DataConfig, split: str = "val", *,
                    audio: MelConfig | None = None, tokenizer: Tokenizer | None = None,
                    limit: int | None = None, with_audio: bool = False,
                    ) -> list[Utterance]:  # fmt: skip
    """The utterances of a split, in id order.

    Args:
        source: a cache folder, an opened `FeatureCache`, or a corpus (features computed
            here as `prepare` computes them, with `audio` and `config.trim_top_db`).
        config: the data settings (the split comes from `config.val_fraction`; a cache
            built with other feature settings is an error).
        split: `"val"` (the held-out ids, as `make_dataset` splits them) or `"all"`.
        audio: the mel recipe; checked against a cache's, required for a corpus.
        tokenizer: when given, a cache's token ids must come from the same symbols (a
            corpus is tokenised with it; characters it lacks are logged and dropped).
        limit: the first `limit` utterances only (None: all).
        with_audio: each utterance's waveform too (`Utterance.audio`): a cache must have
            been built with `data.keep_audio`.

    Raises:
        ConfigError: a bad split or limit, more utterances asked for than the split has,
            or a source tokenised with other symbols than `tokenizer`.
        CacheError: a damaged cache, one built with other settings, or (`with_audio`) one
            without waveforms (the message names the command that rebuilds it).
        CorpusError: no usable corpus rows, or an unreadable audio file.
    """
    if split not in ("val", "all"):
        raise ConfigError(f"Expected split 'val' or 'all', received: split={split!r}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ConfigError(f"Expected limit an int >= 1 or None, received: limit={limit!r}")
    if isinstance(source, FeatureCache) or FeatureCache.is_cache(source):
        found = _from_cache(source, config, audio, with_audio)
    else:
        found = _from_corpus(Path(source), config, audio, tokenizer, with_audio)
    path, src_tokenizer, ids, speakers, load = found
    if tokenizer is not None and src_tokenizer != tokenizer:
        raise ConfigError(
            f"{path} is tokenised with another symbol table ({src_tokenizer!r}) than "
            f"expected ({tokenizer!r}); rebuild it with the same text settings"
        )
    chosen = np.ones(len(ids), bool)
    if split == "val":
        chosen = is_validation(ids, config.val_fraction).numpy()
    indices = np.flatnonzero(chosen)
    indices = indices[np.argsort(ids[indices], kind="stable")]
    if limit is not None and limit > len(indices):
        raise ConfigError(
            f"{path}: {limit} utterances asked for, split {split!r} has {len(indices)} "
            f"(data.val_fraction={config.val_fraction})"
        )
    indices = indices[:limit]
    return [
        Utterance(str(ids[i]), int(speakers[i]), fields["tokens"], fields["mel"],
                  src_tokenizer.decode(fields["tokens"]), fields.get("audio"))
        for i, fields in zip(indices, load(indices), strict=True)
    ]  # fmt: skip


def _from_cache(source, config: DataConfig, audio: MelConfig | None, with_audio: bool):
    """(path, tokenizer, ids, speakers, load) of a feature cache."""
    src = open_source(source, config, audio, with_audio=with_audio)
    return src.path, src.tokenizer, src.ids.astype(str), src.speakers, src.load


def _from_corpus(path: Path, config: DataConfig, audio: MelConfig | None,
                 tokenizer: Tokenizer | None, with_audio: bool):  # fmt: skip
    """(path, tokenizer, ids, speakers, load) of a corpus, read as `prepare` reads it:
    any audio format, trimmed with `config.trim_top_db`, tokenised with `tokenizer` (e.g.
    a trained run's) when given; unusable rows are logged."""
    if audio is None:
        raise ConfigError(f"{path} is not a feature cache: pass audio=MelConfig(...) to read it")
    corpus = read_corpus(path)
    transcripts = read_transcripts(corpus.rows, config.text, tokenizer=tokenizer)
    tokenizer = transcripts.tokenizer
    speakers = {name: i for i, name in enumerate(corpus.speakers)}
    for skipped in transcripts.skipped:
        logger.warning("skipped %s: %s", skipped.id, skipped.reason)
    if transcripts.oov:
        logger.warning("%s: characters not in the symbol table dropped: %s", corpus.root,
                       dict(transcripts.oov.most_common(8)))  # fmt: skip
    rows = [(row, np.asarray(transcripts.tokens[row.id], np.int32))
            for row in corpus.rows if row.id in transcripts.tokens]  # fmt: skip

    def load(indices: np.ndarray) -> list[dict[str, np.ndarray]]:
        out = []
        for i in indices:
            row, tokens = rows[i]
            try:
                wave = load_audio(row.audio, audio, trim_top_db=config.trim_top_db)
            except BadAudioError as error:
                raise CorpusError(f"{row.audio}: {error}") from None
            fields = {"mel": mel_features(wave, audio).numpy(), "tokens": tokens}
            out.append({**fields, "audio": np.asarray(wave, np.float32)} if with_audio else fields)
        return out

    ids = np.array([row.id for row, _ in rows], dtype=str)
    return corpus.root, tokenizer, ids, [speakers[row.speaker] for row, _ in rows], load
