"""Text front end: `TextConfig`, `normalize_text` and the character/phoneme `Tokenizer`.

Training and inference share this one path: raw text → `normalize_text` (the row
language's cleaners, `_cleaners`; then IPA when phonemes are on) → `Tokenizer.encode`.
The English cleaner follows Keith Ito's tacotron `english_cleaners`; numbers are read in
the row's language through num2words (`_numbers`).
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import string
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from xtts_audio.frozen_config import FrozenConfig
from xtts_data._cleaners import (
    KEPT_PUNCTUATION,
    LANGUAGES,
    Cleaned,
    canonical_language,
    clean,
    collapse_whitespace,
    espeak_voice,
    is_known_language,
)
from xtts_data._espeak_library import phonemizer_library
from xtts_data.errors import ConfigError

__all__ = [
    "DEFAULT_SYMBOLS",
    "IPA_SYMBOLS",
    "Cleaned",
    "TextConfig",
    "Tokenizer",
    "normalize_text",
    "normalize_texts",
    "text_to_ids",
]

Cleaners = Literal["full", "basic", "none"]
_CLEANERS = ("full", "basic", "none")
AUTO = "auto"

_PUNCTUATION = KEPT_PUNCTUATION
DEFAULT_SYMBOLS = _PUNCTUATION + string.ascii_lowercase
_IPA_GROUPS = (
    "iyɨʉɯuɪʏʊeøɘəɵɤoɛœɜɞʌɔæɐaɶɑɒᵻɚ",  # vowels
    "pbtdʈɖcɟkgɡqɢʔɴŋɲɳnɱmʙrʀⱱɾɽɸβfvθðszʃʒʂʐçʝxɣχʁħʕhɦɬɮʋɹɻjɰlɭʎʟɫ",  # pulmonic consonants
    "ʘɓǀɗǃʄǂɠǁʛ",  # non-pulmonic consonants
    "ʍwɥʜʢʡɕʑɺɧ",  # other consonants
    "ˈˌːˑʲ˞\u0329",  # stress, length, palatalisation, rhoticity, syllabic
)
IPA_SYMBOLS = _PUNCTUATION + "".join(_IPA_GROUPS)

_PAD, _EOS = "<pad>", "<eos>"
_PHONEMES_HINT = (
    'pip install "xtts-data[phonemes]" (phonemizer, and espeak-ng in the espeakng-loader '
    "wheel; a system espeak-ng is used where present: XTTS_ESPEAK=auto|system|wheel)"
)


def _check_symbols(owner: str, symbols: Any) -> None:
    """Symbols must be a non-empty string of distinct characters (their order is the ids)."""
    if not isinstance(symbols, str) or not symbols:
        raise ConfigError(
            f"{owner}.symbols: expected a non-empty str, received: symbols={symbols!r}"
        )
    counts = collections.Counter(symbols)
    repeated = "".join(c for c, n in counts.items() if n > 1)
    if repeated:
        raise ConfigError(
            f"{owner}.symbols: expected distinct characters, received: repeated={repeated!r}"
        )


def _import_phonemizer():
    """The `phonemizer` module, or a ConfigError that says how to install it."""
    try:
        import phonemizer  # optional extra: only phoneme configs need it
    except ImportError as err:
        raise ConfigError(
            "TextConfig.phonemes: expected the `phonemizer` package to be importable, "
            f"received: phonemes=True ({err}); to fix: {_PHONEMES_HINT}"
        ) from err
    return phonemizer


def _language_tag(field: str, value: Any) -> str:
    if not isinstance(value, str) or not is_known_language(canonical_language(value)):
        TextConfig._fail(field, value, "a BCP-47 language code with cleaners here (e.g. 'en', "
                         f"'fa', 'de-at'; languages: {', '.join(sorted(LANGUAGES))})")  # fmt: skip
    return canonical_language(value)


@dataclasses.dataclass(frozen=True, kw_only=True)
class TextConfig(FrozenConfig):
    """How raw transcripts become model input text.

    Attributes:
        language: BCP-47 code of the corpus (e.g. `"en"`, `"fa"`, `"de-at"`), for rows
            that name none; it chooses the cleaners, the number words and the espeak
            voice. One setting is all a corpus in one language needs.
        languages: further languages rows may name in their `language` column (a
            multilingual corpus); a row naming another is an error.
        cleaners: how the text is cleaned: `"full"` (Unicode, punctuation, numbers and
            abbreviations made speakable), `"basic"` (the same without the expansions) or
            `"none"` (only stripped). Full: Unicode NFKC, controls and format characters
            dropped (the ZERO WIDTH NON-JOINER kept in Persian), punctuation in ASCII
            (Arabic ، ؟, «», CJK 。), Persian letter unification and digits, lower-casing
            where the script has case, numbers, percent and money in the row's language,
            English abbreviations ("dr." → "doctor") and spoken symbols ("&" → "and"),
            anything unspeakable dropped. Basic: the same without expansions or the final
            drop. None: the text as given, only stripped.
        lowercase: lower-case the text (full/basic).
        ascii_fold: strip accents ("é" → "e") and drop characters with no ASCII form
            (full/basic); `None`: on for English, off for every other language.
        phonemes: after cleaning, convert to IPA with `phonemizer`'s espeak backend, in
            the row language's voice (optional extra: `pip install "xtts-data[phonemes]"`,
            espeak-ng included; `XTTS_ESPEAK=auto|system|wheel` picks the library).
        symbols: the vocabulary, one character per symbol, ids in string order;
            `"auto"` builds it at `prepare` from the cleaned training text (stored with
            the cache and the run, then frozen); `None` picks `IPA_SYMBOLS` with
            phonemes, else `DEFAULT_SYMBOLS` (plus A–Z when capitals are kept).
        max_letter_loss: a row whose cleaning drops more than this share of its letters
            (e.g. Persian words in an English row folded to ASCII) is skipped and
            reported; `None` keeps every row.

    `from_dict` takes `languages` as a list; `to_dict` writes it as one.
    """

    error_type = ConfigError

    language: str = "en"
    languages: tuple[str, ...] = ()
    cleaners: Cleaners = "full"
    lowercase: bool = True
    ascii_fold: bool | None = None
    phonemes: bool = False
    symbols: str | None = AUTO
    max_letter_loss: float | None = 0.2

    def __post_init__(self) -> None:
        if self.cleaners not in _CLEANERS:
            self._fail("cleaners", self.cleaners, f"one of {_CLEANERS}")
        for name in ("lowercase", "phonemes"):
            if not isinstance(getattr(self, name), bool):
                self._fail(name, getattr(self, name), "a bool")
        if self.ascii_fold is not None and not isinstance(self.ascii_fold, bool):
            self._fail("ascii_fold", self.ascii_fold, "a bool or None (per language)")
        object.__setattr__(self, "language", _language_tag("language", self.language))
        if isinstance(self.languages, str) or not isinstance(self.languages, Sequence):
            self._fail("languages", self.languages, "a list of language codes")
        tags = tuple(_language_tag("languages", tag) for tag in self.languages)
        object.__setattr__(self, "languages", tuple(dict.fromkeys(tags)))
        if self.symbols is not None and self.symbols != AUTO:
            _check_symbols("TextConfig", self.symbols)
        loss = self.max_letter_loss
        if loss is not None and not (isinstance(loss, int | float) and not isinstance(loss, bool)
                                     and 0.0 <= loss <= 1.0):  # fmt: skip
            self._fail("max_letter_loss", loss, "a share in [0, 1] or None")
        if self.phonemes:
            _import_phonemizer()

    @property
    def all_languages(self) -> tuple[str, ...]:
        """`language`, then `languages`: every language a row may be in."""
        return tuple(dict.fromkeys((self.language, *self.languages)))

    def row_language(self, tag: str | None) -> str:
        """The canonical language of a row that names `tag` (`None`: `language`).

        Raises:
            ConfigError: `tag` is not one of `all_languages`.
        """
        if tag is None or not tag.strip():
            return self.language
        language = canonical_language(tag)
        if language not in self.all_languages:
            raise ConfigError(
                f"Expected a row language in data.text.language/languages "
                f"{list(self.all_languages)}, received: language={tag!r}; to fix: add it to "
                f"data.text.languages (e.g. --set data.text.languages=[{language}])"
            )
        return language

    @property
    def effective_symbols(self) -> str | None:
        """`symbols`, the built-in set when `None`, or `None` for `"auto"` (the
        vocabulary then comes from the corpus: `Tokenizer.from_texts`)."""
        if self.symbols == AUTO:
            return None
        if self.symbols is not None:
            return self.symbols
        if self.phonemes:
            return IPA_SYMBOLS
        keeps_capitals = self.cleaners == "none" or not self.lowercase
        return DEFAULT_SYMBOLS + (string.ascii_uppercase if keeps_capitals else "")


# espeak-ng is one C library with global state: phonemizing from `prepare`'s reader
# threads at once interleaves their outputs ("number of lines in input and output must be
# equal"), so calls take turns.
_ESPEAK_LOCK = threading.Lock()
# phonemizer warns on every line whose word count changes (e.g. "1776" -> four words);
# the cleaned text is what the tokenizer reports, so those warnings are noise.
_PHONEMIZER_LOG = logging.getLogger("xtts_data.phonemizer")
_PHONEMIZER_LOG.setLevel(logging.ERROR)


def _phonemize(texts: list[str], language: str) -> list[str]:
    """IPA for each of `texts` from espeak in `language`'s voice, punctuation kept,
    stress marked (one espeak session for all of them)."""
    phonemizer = _import_phonemizer()
    phonemizer_library()  # the system's espeak-ng, or the wheel's (`XTTS_ESPEAK`)
    voice = espeak_voice(language)
    spoken = [i for i, text in enumerate(texts) if text]
    if not spoken:
        return list(texts)
    try:
        with _ESPEAK_LOCK:
            ipa = phonemizer.phonemize(
                [texts[i] for i in spoken],
                language=voice,
                backend="espeak",
                strip=True,
                preserve_punctuation=True,
                with_stress=True,
                logger=_PHONEMIZER_LOG,
            )
    except RuntimeError as err:  # espeak-ng missing, or it does not know `language`
        raise ConfigError(
            f"TextConfig.language: expected a language espeak can phonemize, received: "
            f"language={language!r} (voice {voice!r}: {err}); to fix: {_PHONEMES_HINT}"
        ) from err
    out = list(texts)
    for i, text in zip(spoken, ipa, strict=True):
        out[i] = collapse_whitespace(text)
    return out


def _clean(text: str, config: TextConfig, language: str) -> Cleaned:
    if not isinstance(text, str):
        raise TypeError(f"normalize_text: expected text of type str, received: {type(text)}")
    if config.cleaners == "none":
        return Cleaned(text.strip(), collections.Counter(), 0)
    fold = config.ascii_fold if config.ascii_fold is not None else language.startswith("en")
    full = config.cleaners == "full"
    return clean(text, language=language, full=full, fold=fold, lowercase=config.lowercase)


def normalize_texts(
    texts: Sequence[str], config: TextConfig, languages: Sequence[str | None] | None = None
) -> list[Cleaned]:
    """`normalize_text` of many rows, with what cleaning dropped from each.

    Phonemes are made in one espeak session per language, far faster than row by row.

    Args:
        texts: raw transcripts.
        config: the text settings.
        languages: each row's language tag (`None`: `config.language`); default all `None`.

    Raises:
        TypeError: a text is not a str.
        ConfigError: a row language not in the config, or phonemes espeak cannot make.
    """
    tags = [config.row_language(t) for t in (languages or [None] * len(texts))]
    cleaned = [_clean(text, config, tag) for text, tag in zip(texts, tags, strict=True)]
    if not config.phonemes:
        return cleaned
    for tag in dict.fromkeys(tags):
        rows = [i for i, t in enumerate(tags) if t == tag]
        ipa = _phonemize([cleaned[i].text for i in rows], tag)
        for i, text in zip(rows, ipa, strict=True):
            cleaned[i] = dataclasses.replace(cleaned[i], text=text)
    return cleaned


def normalize_text(text: str, config: TextConfig, *, language: str | None = None) -> str:
    """Clean `text` with `config.cleaners` in its language, then convert to IPA when
    `config.phonemes`.

    Never raises for a `str` with the full/basic/none cleaners (unspeakable characters
    are dropped, numbers too long to say are read digit by digit).

    Args:
        text: a raw transcript.
        config: the text settings.
        language: the text's language tag (`None`: `config.language`).

    Returns:
        The text the tokenizer encodes; empty if nothing speakable is left.

    Raises:
        TypeError: `text` is not a str.
        ConfigError: `language` is not in the config, or phonemes are on and espeak
            cannot phonemize (not installed, unknown language).
    """
    return normalize_texts([text], config, [language])[0].text


class Tokenizer:
    """Characters ↔ integer ids: 0 is `<pad>`, 1 is `<eos>`, then one language token per
    language when there are several (XTTS conditions on a language token: it is the
    first id of every encoded text, and its embedding is learned with the others), then
    the symbols in order.

    Args:
        symbols: the vocabulary, distinct characters in id order.
        languages: the canonical language tags of the corpus (`()` when unknown, from a
            cache made before languages were recorded); tokens only when more than one.

    Raises:
        ConfigError: `symbols` is empty, not a str, or repeats a character.
    """

    PAD = 0
    EOS = 1

    def __init__(self, symbols: str, languages: Sequence[str] = ()) -> None:
        _check_symbols("Tokenizer", symbols)
        self._symbols = symbols
        self._languages = tuple(languages)
        tokens = self._languages if len(self._languages) > 1 else ()
        self._language_ids = {tag: i + 2 for i, tag in enumerate(tokens)}
        offset = 2 + len(tokens)
        self._ids = {c: i + offset for i, c in enumerate(symbols)}

    @classmethod
    def from_config(cls, config: TextConfig, languages: Sequence[str] = ()) -> Tokenizer:
        """The tokenizer for a fixed vocabulary (`config.symbols` not `"auto"`).

        Raises:
            ConfigError: `symbols` is `"auto"`: use `from_texts` on the cleaned corpus.
        """
        if config.effective_symbols is None:
            raise ConfigError(
                "TextConfig.symbols: 'auto' builds the vocabulary from the corpus; use "
                "Tokenizer.from_texts(config, cleaned_texts), or `xtts-data prepare`"
            )
        return cls(config.effective_symbols, languages)

    @classmethod
    def from_texts(
        cls, config: TextConfig, texts: Iterable[str], languages: Sequence[str] = ()
    ) -> Tokenizer:
        """The tokenizer of a corpus: with `symbols: auto`, every character of its cleaned
        `texts` in code point order; otherwise `from_config`."""
        if config.effective_symbols is not None:
            return cls.from_config(config, languages)
        found = sorted(set().union(*map(set, texts)) - {""})
        if not found:
            raise ConfigError("Tokenizer.from_texts: no characters in the cleaned texts")
        return cls("".join(found), languages)

    @property
    def symbols(self) -> str:
        """The vocabulary in id order (without the reserved and language ids)."""
        return self._symbols

    @property
    def languages(self) -> tuple[str, ...]:
        """The corpus languages; each has a token when there are several."""
        return self._languages

    @property
    def language_tokens(self) -> tuple[str, ...]:
        """The languages with a token (in id order): all of them when there are several,
        none for one; an encoded text then starts with its language's token."""
        return tuple(self._language_ids)

    @property
    def vocab_size(self) -> int:
        """Number of ids: pad, eos, the language tokens and the symbols."""
        return 2 + len(self._language_ids) + len(self._symbols)

    def encode(
        self, text: str, *, language: str | None = None, add_eos: bool = True
    ) -> tuple[list[int], collections.Counter[str]]:
        """Ids of the characters of normalised `text`.

        Args:
            text: text already passed through `normalize_text`.
            language: the text's language tag; with language tokens, its token is the
                first id (`None`: the first language).
            add_eos: append `EOS`.

        Returns:
            `(ids, oov)`: the ids of in-vocabulary characters (others are dropped) and a
            Counter of the dropped characters.

        Raises:
            ConfigError: `language` is not one of a known `languages`.
        """
        ids: list[int] = []
        if self._language_ids:
            ids.append(self.language_id(language or self._languages[0]))
        elif language is not None and self._languages:
            self.language_id(language)  # a known language, though it has no token
        oov: collections.Counter[str] = collections.Counter()
        for char in text:
            if char in self._ids:
                ids.append(self._ids[char])
            else:
                oov[char] += 1
        if add_eos:
            ids.append(self.EOS)
        return ids, oov

    def language_id(self, language: str) -> int:
        """The id of `language`'s token (-1 in a single-language vocabulary).

        Raises:
            ConfigError: `language` is not one of `languages`.
        """
        tag = canonical_language(language)
        if tag not in self._languages:
            raise ConfigError(
                f"Expected a language this vocabulary was built for "
                f"{list(self._languages)}, received: language={language!r}"
            )
        return self._language_ids.get(tag, -1)

    def decode(self, ids: Iterable[int]) -> str:
        """The text of `ids` (ints or an int array), skipping pad, eos and language ids.

        Raises:
            ConfigError: an id outside `[0, vocab_size)`: the ids come from another
                vocabulary.
        """
        chars, offset = [], 2 + len(self._language_ids)
        for raw in ids:
            index = int(raw)
            if not 0 <= index < self.vocab_size:
                raise ConfigError(
                    f"Tokenizer.decode: expected ids in [0, {self.vocab_size}), received: "
                    f"id={index} (ids made with another vocabulary?)"
                )
            if index >= offset:
                chars.append(self._symbols[index - offset])
        return "".join(chars)

    def token_ids(self) -> dict[str, int]:
        """Every token's id by name: `<pad>`, `<eos>`, `<lang:TAG>` for each language
        token, and each symbol (one character, so no name is another's). Two vocabularies
        share a token where they share its name (how a run's embeddings carry over to a
        grown vocabulary)."""
        ids = {_PAD: self.PAD, _EOS: self.EOS}
        ids.update({f"<lang:{tag}>": i for tag, i in self._language_ids.items()})
        return ids | self._ids

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready description (reserved tokens, languages, symbols): round-trips
        `from_dict`."""
        return {"specials": [_PAD, _EOS], "languages": list(self._languages),
                "symbols": self._symbols}  # fmt: skip

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> Tokenizer:
        """Rebuild from `to_dict` output (`languages` may be absent: older caches).

        Raises:
            ConfigError: unknown or missing keys, other reserved tokens, invalid symbols.
        """
        keys = sorted(values)
        if keys not in (["specials", "symbols"], ["languages", "specials", "symbols"]):
            raise ConfigError(
                f"Tokenizer.from_dict: expected keys ['languages', 'specials', 'symbols'], "
                f"received: {keys}"
            )
        specials = list(values["specials"])
        if specials != [_PAD, _EOS]:
            raise ConfigError(
                f"Tokenizer.from_dict: expected specials {[_PAD, _EOS]}, received: "
                f"specials={specials!r}"
            )
        return cls(values["symbols"], tuple(values.get("languages", ())))

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Tokenizer) and other._symbols == self._symbols
                and other._languages == self._languages)  # fmt: skip

    def __hash__(self) -> int:
        return hash((self._symbols, self._languages))

    def __repr__(self) -> str:
        return f"Tokenizer(symbols={self._symbols!r}, languages={self._languages!r})"


def text_to_ids(
    text: str, config: TextConfig, tokenizer: Tokenizer, *, language: str | None = None
) -> tuple[list[int], str, collections.Counter[str]]:
    """Normalise `text` in its language and encode it (with `EOS`).

    Args:
        language: the text's language tag (`None`: `config.language`).

    Returns:
        `(ids, normalised_text, oov)`, as `normalize_text` and `Tokenizer.encode` give them.
    """
    tag = config.row_language(language)
    normalised = normalize_text(text, config, language=tag)
    ids, oov = tokenizer.encode(normalised, language=tag)
    return ids, normalised, oov
