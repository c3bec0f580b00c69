"""Text front end: cleaners, English number reading, tokenizer, configs and their errors."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import sys
import types

import pytest

from xtts_data import _numbers
from xtts_data.errors import ConfigError
from xtts_data.text import (
    DEFAULT_SYMBOLS,
    IPA_SYMBOLS,
    TextConfig,
    Tokenizer,
    normalize_text,
    text_to_ids,
)

# The built-in vocabularies (symbols=None); cleaning does not depend on the vocabulary.
ENGLISH = TextConfig(symbols=None)
BASIC = TextConfig(cleaners="basic", symbols=None)
NONE = TextConfig(cleaners="none", symbols=None)


def english(text: str) -> str:
    return normalize_text(text, ENGLISH)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Café naïve — “quoted” ‘text’", "cafe naive - \"quoted\" 'text'"),
        ("wait…", "wait..."),
        ("a – b ‐ c − d", "a - b - c - d"),
        ("«guillemets» „low“", '"guillemets" "low"'),
        ("ｆｕｌｌｗｉｄｔｈ ﬁne", "fullwidth fine"),
        ("emoji 😀 here ✓", "emoji here"),
        ("Straße Øre Łódź Æsop", "strasse ore lodz aesop"),
        ("zero\u200bwidth\ufeff bom\x00", "zerowidth bom"),
        ("non\u00a0breaking", "non breaking"),
    ],
)  # fmt: skip
def test_english_folds_unicode_to_ascii(text, expected):
    assert english(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("HeLLo World", "hello world"),
        ("  many   spaces\t\ttabs\nand\r\nlines  ", "many spaces tabs and lines"),
        ("", ""),
        (" \t\n ", ""),
    ],
)
def test_english_lowercases_and_cleans_whitespace(text, expected):
    assert english(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Dr. Smith", "doctor smith"),
        ("Mr. and Mrs. Jones", "mister and misess jones"),
        ("DRS. Who", "doctors who"),
        ("St. Louis", "saint louis"),
        ("Smith & Co. Ltd. and Jr.", "smith and company limited and junior."),
        ("Maj. Gen. Rev. Lt. Hon.", "major general reverend lieutenant honorable."),
        ("Sgt. Capt. Esq. Col. Ft. Worth", "sergeant captain esquire colonel fort worth"),
        ("drive the doctor", "drive the doctor"),
        ("1st. place", "first. place"),
    ],
)  # fmt: skip
def test_english_expands_abbreviations(text, expected):
    assert english(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", "zero"),
        ("7", "seven"),
        ("13", "thirteen"),
        ("42", "forty two"),
        ("100", "one hundred"),
        ("115", "one hundred fifteen"),
        ("999", "nine hundred ninety nine"),
        ("3000", "three thousand"),
        ("12345", "twelve thousand three hundred forty five"),
        ("1,000,000", "one million"),
        ("1,984", "one thousand nine hundred eighty four"),
        ("2,000,000,001", "two billion one"),
        ("1000000000000", "one trillion"),
        ("007", "zero zero seven"),
        ("3.14", "three point one four"),
        ("0.5", "zero point five"),
        (".5", "zero point five"),
        ("1,234.05", "one thousand two hundred thirty four point zero five"),
        ("-3", "minus three"),
        ("(-2.5)", "(minus two point five)"),
        ("pages 10-20", "pages ten-twenty"),
        ("50%", "fifty percent"),
        ("3.5%", "three point five percent"),
        ("mp3 player", "mp three player"),
    ],
)
def test_english_reads_cardinals_decimals_and_signs(text, expected):
    assert english(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1984", "nineteen eighty four"),
        ("2000", "two thousand"),
        ("2005", "two thousand five"),
        ("1900", "nineteen hundred"),
        ("1905", "nineteen oh five"),
        ("2010", "twenty ten"),
        ("1000", "one thousand"),
        ("in 1776.", "in seventeen seventy six."),
        ("the 1980s", "the nineteen eighties"),
        ("the 90's", "the nineties"),
        ("999", "nine hundred ninety nine"),
        ("3001", "three thousand one"),
    ],
)
def test_english_reads_standalone_four_digit_numbers_as_years(text, expected):
    assert english(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1st", "first"),
        ("2nd", "second"),
        ("3rd", "third"),
        ("5th", "fifth"),
        ("12th", "twelfth"),
        ("20th", "twentieth"),
        ("22nd", "twenty second"),
        ("103rd", "one hundred third"),
        ("1,000th", "one thousandth"),
        ("21ST", "twenty first"),
    ],
)
def test_english_reads_ordinals(text, expected):
    assert english(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("$5.50", "five dollars, fifty cents"),
        ("$1", "one dollar"),
        ("$0.01", "one cent"),
        ("$0", "zero dollars"),
        ("$1,000", "one thousand dollars"),
        ("$2.5", "two dollars, fifty cents"),
        ("$1.234", "one point two three four dollars"),
        ("$5 million", "five million dollars"),
        ("-$5", "minus five dollars"),
        ("£3", "three pounds"),
        ("£1.01", "one pound, one penny"),
        ("€2.5", "two euros, fifty cents"),
        ("¥100", "one hundred yen"),
        ("cost: $", "cost: dollars"),
    ],
)
def test_english_reads_money(text, expected):
    assert english(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("you & me", "you and me"),
        ("a@b", "a at b"),
        ("1 + 1 = 2", "one plus one equals two"),
        ("#1", "number one"),
        ("[aside] {x}", "(aside) (x)"),
        ("and/or *bold* a_b", "and or bold a b"),
    ],
)
def test_english_speaks_or_drops_other_symbols(text, expected):
    assert english(text) == expected


def test_english_output_stays_in_default_symbols():
    text = (
        "Dr. Smith paid $5.50 on 3/4/2021 — 50% off!\tIsn't it “great”? (1st of 22nd…) "
        "#1 & Co. 😀 naïve café; 1,000,000 people at -3°C [ok] 1990s ½ ~ ^ | < > "
        "Mr. Jones, age 42: «São Paulo», €2.5 £3 ¥7 3.14 50% 007 123456789012345678"
    )
    cleaned = english(text)
    assert set(cleaned) <= set(DEFAULT_SYMBOLS), sorted(set(cleaned) - set(DEFAULT_SYMBOLS))
    assert "doctor smith paid five dollars, fifty cents" in cleaned


@pytest.mark.parametrize(
    "text",
    ["", "1234567890", "!!!???...", "\ud800", "$", "-", "%", "1,", ",1", "1.", "$.5", "1..2",
     "\x00\x01\x7f", "1" * 400, "中文 العربية", "-0", "0th", "$0.00", "$-5"],
)  # fmt: skip
@pytest.mark.parametrize("cleaners", ["full", "basic", "none"])
def test_odd_strings_never_raise(text, cleaners):
    assert isinstance(normalize_text(text, TextConfig(cleaners=cleaners)), str)


def test_numbers_too_long_to_say_are_read_digit_by_digit():
    cleaned = english("123456789012345678901234567890")
    assert cleaned == " ".join(["one two three four five six seven eight nine zero"] * 3)


@pytest.mark.parametrize(
    ("n", "expected"),
    [
        (10**12, "one trillion"),
        (_numbers.MAX_CARDINAL, "nine hundred ninety nine trillion nine hundred ninety nine billion "
         "nine hundred ninety nine million nine hundred ninety nine thousand nine hundred ninety nine"),
        (_numbers.MAX_CARDINAL + 1, "one " + "zero " * 14 + "zero"),
        (-1_000_001, "minus one million one"),
    ],
)  # fmt: skip
def test_cardinal_range_and_fallback(n, expected):
    assert _numbers.cardinal(n) == expected


@pytest.mark.parametrize(
    ("config", "text", "expected"),
    [
        (BASIC, "  Café 1984 — “Dr.” $5 £3  ", 'cafe 1984 - "dr." $5 3'),
        (NONE, "  Café 1984 — “Dr.”  ", "Café 1984 — “Dr.”"),
        (TextConfig(lowercase=False), "Dr. Smith ÉTÉ 1984", "Doctor Smith ETE nineteen eighty four"),
        (TextConfig(ascii_fold=False), "Dr. Smith été — 1984", "doctor smith été - nineteen eighty four"),
        (TextConfig(cleaners="basic", lowercase=False, ascii_fold=False), " Été\tX ", "Été X"),
    ],
)  # fmt: skip
def test_cleaner_variants(config, text, expected):
    assert normalize_text(text, config) == expected


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (ENGLISH, DEFAULT_SYMBOLS),
        (BASIC, DEFAULT_SYMBOLS),
        (TextConfig(lowercase=False, symbols=None), DEFAULT_SYMBOLS + "ABCDEFGHIJKLMNOPQRSTUVWXYZ"),
        (NONE, DEFAULT_SYMBOLS + "ABCDEFGHIJKLMNOPQRSTUVWXYZ"),
        (TextConfig(symbols="abc"), "abc"),
    ],
)
def test_effective_symbols(config, expected):
    assert config.effective_symbols == expected
    assert Tokenizer.from_config(config).symbols == expected


@pytest.mark.parametrize("symbols", [DEFAULT_SYMBOLS, IPA_SYMBOLS])
def test_symbol_sets_are_distinct_characters(symbols):
    assert len(set(symbols)) == len(symbols)


def test_default_symbols_are_letters_space_and_punctuation():
    assert set(DEFAULT_SYMBOLS) == set("abcdefghijklmnopqrstuvwxyz !'(),-.:;?\"")
    assert set(" !'(),-.:;?\"ˈˌːəɪʊθðʃʒŋæɑɔɛɹ") <= set(IPA_SYMBOLS)


def test_tokenizer_reserves_pad_and_eos():
    tokenizer = Tokenizer("ab")
    assert (Tokenizer.PAD, Tokenizer.EOS, tokenizer.vocab_size) == (0, 1, 4)
    assert tokenizer.encode("ba") == ([3, 2, 1], {})
    assert tokenizer.encode("ba", add_eos=False)[0] == [3, 2]
    assert tokenizer.decode([0, 2, 3, 1, 0, 0]) == "ab"


@pytest.mark.parametrize("config", [ENGLISH, TextConfig(lowercase=False, symbols=None)])
def test_tokenizer_round_trips_normalised_text(config):
    tokenizer = Tokenizer.from_config(config)
    ids, text, oov = text_to_ids(
        "Dr. Smith paid $5.50 — “great”, isn't it? (1st!)", config, tokenizer
    )
    assert not oov
    assert ids[-1] == Tokenizer.EOS
    assert min(ids[:-1]) >= 2
    assert tokenizer.decode(ids) == text


def test_ids_follow_symbol_order():
    tokenizer = Tokenizer.from_config(ENGLISH)
    ids, _ = tokenizer.encode(DEFAULT_SYMBOLS, add_eos=False)
    assert ids == list(range(2, len(DEFAULT_SYMBOLS) + 2))


def test_out_of_vocabulary_characters_are_dropped_and_counted():
    ids, text, oov = text_to_ids("héllo é1", NONE, Tokenizer.from_config(NONE))
    assert text == "héllo é1"
    assert oov == {"é": 2, "1": 1}
    assert Tokenizer.from_config(NONE).decode(ids) == "hllo "


def test_decode_rejects_ids_from_another_vocabulary():
    with pytest.raises(ConfigError, match=r"expected ids in \[0, 4\), received: id=4"):
        Tokenizer("ab").decode([2, 4])


@pytest.mark.parametrize("symbols", [DEFAULT_SYMBOLS, IPA_SYMBOLS, "ab\"'\\é"])
def test_tokenizer_dict_round_trip_through_json(symbols):
    tokenizer = Tokenizer(symbols)
    restored = Tokenizer.from_dict(json.loads(json.dumps(tokenizer.to_dict())))
    assert restored == tokenizer
    assert restored.symbols == symbols
    assert restored.vocab_size == tokenizer.vocab_size


@pytest.mark.parametrize(
    ("values", "pattern"),
    [
        ({"symbols": "ab"}, r"expected keys \['languages', 'specials', 'symbols'\], received: \['symbols'\]"),
        ({"specials": ["<pad>", "<eos>"], "symbols": "ab", "x": 1}, r"received: \['specials', 'symbols', 'x'\]"),
        ({"specials": ["<eos>", "<pad>"], "symbols": "ab"}, r"expected specials .*received: specials=\['<eos>', '<pad>'\]"),
        ({"specials": ["<pad>", "<eos>"], "symbols": "aba"}, r"Tokenizer.symbols: expected distinct characters, received: repeated='a'"),
    ],
)  # fmt: skip
def test_tokenizer_from_dict_errors(values, pattern):
    with pytest.raises(ConfigError, match=pattern):
        Tokenizer.from_dict(values)


@pytest.mark.parametrize(
    "config",
    [ENGLISH, TextConfig(cleaners="none", lowercase=False, ascii_fold=False, symbols="xyz", language="de")],
)  # fmt: skip
def test_text_config_dict_round_trip(config):
    assert TextConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config


@pytest.mark.parametrize(
    ("fields", "pattern"),
    [
        ({"cleaners": "french"}, r"TextConfig.cleaners: expected one of \('full', 'basic', 'none'\), received: cleaners='french'"),
        ({"symbols": ""}, r"TextConfig.symbols: expected a non-empty str, received: symbols=''"),
        ({"symbols": "abca"}, r"TextConfig.symbols: expected distinct characters, received: repeated='a'"),
        ({"lowercase": "yes"}, r"TextConfig.lowercase: expected a bool, received: lowercase='yes'"),
        ({"language": ""}, r"TextConfig.language: expected a BCP-47 language code .*, received: language=''"),
    ],
)  # fmt: skip
def test_text_config_errors_name_the_field(fields, pattern):
    with pytest.raises(ConfigError, match=pattern):
        TextConfig(**fields)


def test_text_config_from_dict_names_unknown_keys():
    with pytest.raises(ConfigError, match=r"unknown field\(s\) \['clean', 'lang'\]"):
        TextConfig.from_dict({"clean": "english", "lang": "en", "lowercase": True})


def test_text_config_is_frozen_and_keyword_only():
    with pytest.raises(dataclasses.FrozenInstanceError):
        ENGLISH.cleaners = "none"  # type: ignore[misc]
    with pytest.raises(TypeError):
        TextConfig("english")  # type: ignore[misc]


def test_config_error_is_a_value_error():
    with pytest.raises(ValueError, match="cleaners"):
        TextConfig(cleaners="x")  # type: ignore[arg-type]


def test_phonemes_without_phonemizer_say_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "phonemizer", None)  # makes `import phonemizer` fail
    with pytest.raises(ConfigError, match=r'pip install "xtts-data\[phonemes\]".*espeak-ng'):
        TextConfig(phonemes=True)


def test_phonemes_call_espeak_after_cleaning(monkeypatch):
    calls = []

    def phonemize(text, **kwargs):
        calls.append((text, kwargs))
        return [" ˈhɛloʊ  wˈɜːld "] * len(text)

    monkeypatch.setitem(sys.modules, "phonemizer", types.SimpleNamespace(phonemize=phonemize))
    config = TextConfig(phonemes=True, language="en-gb", symbols=None)
    assert config.effective_symbols == IPA_SYMBOLS
    assert normalize_text("Hello,  World", config) == "ˈhɛloʊ wˈɜːld"
    text, kwargs = calls[0]
    assert text == ["hello, world"]
    assert kwargs["language"] == "en-gb"
    assert kwargs["backend"] == "espeak"
    assert kwargs["strip"]
    assert kwargs["preserve_punctuation"]
    assert normalize_text("", config) == ""
    assert len(calls) == 1


def test_phonemes_report_a_missing_espeak(monkeypatch):
    def phonemize(text, **kwargs):
        raise RuntimeError("espeak not installed on your system")

    monkeypatch.setitem(sys.modules, "phonemizer", types.SimpleNamespace(phonemize=phonemize))
    with pytest.raises(
        ConfigError, match=r"language='en' \(voice 'en-us': espeak not installed.*espeak-ng"
    ):
        normalize_text("hi", TextConfig(phonemes=True))


def test_real_phonemizer_output_is_mostly_in_ipa_symbols():
    pytest.importorskip("phonemizer")
    config = TextConfig(phonemes=True, symbols=None)
    try:
        ipa = normalize_text("Hello world, this is a test.", config)
    except ConfigError as err:
        pytest.skip(f"espeak-ng not usable: {err}")
    _, oov = Tokenizer.from_config(config).encode(ipa)
    assert ipa
    assert sum(oov.values()) <= len(ipa) // 10, oov


def test_phonemizing_from_many_threads_matches_one_thread():
    # prepare's reader threads phonemize at once; espeak-ng's global state once mixed
    # their outputs ("number of lines in input and output must be equal").
    pytest.importorskip("phonemizer")
    config = TextConfig(phonemes=True)
    texts = [f"In {1700 + i} the bridge, number {i}, was quiet." for i in range(24)]
    try:
        alone = [normalize_text(t, config) for t in texts]
    except ConfigError as err:
        pytest.skip(f"espeak-ng not usable: {err}")
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        together = list(pool.map(lambda t: normalize_text(t, config), texts * 3))
    assert together == alone * 3


@pytest.fixture
def espeak_choice(monkeypatch):
    """Set `XTTS_ESPEAK` for one test: phonemizer is pointed at the choice afresh."""
    from xtts_data import _espeak_library

    def choose(value: str | None) -> None:
        if value is None:
            monkeypatch.delenv(_espeak_library.ENV, raising=False)
        else:
            monkeypatch.setenv(_espeak_library.ENV, value)
        _espeak_library.forget_choice()

    yield choose
    _espeak_library.forget_choice()  # the next use picks the default again


def test_phonemes_come_from_the_wheel_with_no_system_espeak(espeak_choice):
    pytest.importorskip("phonemizer")
    pytest.importorskip("espeakng_loader")
    from xtts_data._espeak_library import phonemizer_library

    espeak_choice("wheel")
    config = TextConfig(phonemes=True, symbols=None)
    assert normalize_text("Hello world.", config) == "həlˈoʊ wˈɜːld."
    assert phonemizer_library().source == "wheel"
    persian = TextConfig(phonemes=True, symbols=None, language="fa")
    assert normalize_text("سلام دنیا", persian) == "salˈɑm dˈonjɑ"


def test_the_wheel_and_the_system_espeak_give_the_same_phonemes(espeak_choice):
    pytest.importorskip("phonemizer")
    pytest.importorskip("espeakng_loader")
    import ctypes.util

    if ctypes.util.find_library("espeak-ng") is None:
        pytest.skip("no system espeak-ng to compare with")
    texts = ["Hello world, this is a test.", "In 1776 the bridge was quiet."]
    heard = {}
    for choice in ("wheel", "system"):
        espeak_choice(choice)
        heard[choice] = [normalize_text(t, TextConfig(phonemes=True, symbols=None)) for t in texts]
    assert heard["wheel"] == heard["system"]


def test_an_espeak_choice_that_cannot_be_met_names_the_fix(espeak_choice, monkeypatch):
    pytest.importorskip("phonemizer")
    import ctypes.util

    espeak_choice("bundled")
    with pytest.raises(ConfigError, match=r"XTTS_ESPEAK: expected one of \('auto', 'system', "):
        normalize_text("hi", TextConfig(phonemes=True))
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None)
    monkeypatch.delenv("PHONEMIZER_ESPEAK_LIBRARY", raising=False)
    espeak_choice("system")
    with pytest.raises(ConfigError, match=r"XTTS_ESPEAK=system: .*found none; install espeak-ng"):
        normalize_text("hi", TextConfig(phonemes=True))
