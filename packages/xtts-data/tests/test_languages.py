"""Any language: cleaners per script, numbers in the row's language, language tags, the
corpus vocabulary, language tokens, and what cleaning drops (counted, never silent)."""

from __future__ import annotations

import json

import pytest
import soundfile
from data_helpers import AUDIO, _tone, espeak_speaks

from xtts_data import (
    ConfigError,
    DataConfig,
    FeatureCache,
    Row,
    TextConfig,
    Tokenizer,
    _numbers,
    format_summary,
    normalize_text,
    normalize_texts,
    prepare,
    read_corpus,
    read_transcripts,
    text_to_ids,
    write_demo_corpus,
)

ZWNJ = "\u200c"


def cleaned(text: str, language: str) -> str:
    return normalize_text(text, TextConfig(language=language))


@pytest.mark.parametrize(
    ("language", "text", "expected"),
    [
        ("fa", "مصرف GPU در این آزمایش ۲۵٪ بود", "مصرف gpu در این آزمایش بیست و پنج درصد بود"),
        ("fa", "مصرف GPU در این آزمایش 25% بود", "مصرف gpu در این آزمایش بیست و پنج درصد بود"),
        ("fa", "GPU بین batchها در حالت idle قرار میگیرد", "gpu بین batchها در حالت idle قرار میگیرد"),
        ("fa", "۲٪ تا ۴۰٪", "دو درصد تا چهل درصد"),
        ("fa", f"من می{ZWNJ}خواهم كتاب{ZWNJ}هاي جديد را بخوانم، باشه؟",
         f"من می{ZWNJ}خواهم کتاب{ZWNJ}های جدید را بخوانم, باشه?"),
        ("fa", "سـلام «دوست» من ۳٫۵ و ٢٠ و ۱۳۹۹", 'سلام "دوست" من سه و نیم و بیست و هزار و سیصد و نود و نه'),
        ("ar", "في عام ١٩٨٤، كان ٢٥٪ من الناس؟",
         "في عام ألف و تسعمائة و أربعة و ثمانون, كان خمسة و عشرون بالمئة من الناس?"),
        ("ar", "ذهبتُ إلى المدرسة", "ذهبتُ إلى المدرسة"),
        ("ar", "٣.١٤", "ثلاثة فاصلة واحد أربعة"),
        ("ru", "Ровно 25% людей — «все». Цена 3,5 рубля!",
         'ровно двадцать пять процентов людей - "все". цена три целых пять десятых рубля!'),
        ("ru", "2% и 21 % и 1 000", "два процента и двадцать один процент и одна тысяча"),
        ("de", "Straße: 1.000 Äpfel für 3,50 € — 25% im Jahr 1984.",
         "straße: eintausend äpfel für drei euro und fünfzig cent - fünfundzwanzig prozent im "
         "jahr neunzehnhundertvierundachtzig."),
        ("zh", "我有25%的把握，1984年，价格3.5元。", "我有百分之二十五的把握,一九八四年,价格三点五元."),
        ("zh", "一共1005个，还有100010个", "一共一千零五个,还有十万零一十个"),
    ],
)  # fmt: skip
def test_samples_are_cleaned_in_their_language(language, text, expected):
    assert cleaned(text, language) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # English regression table: today's behaviour, through num2words now.
        ("Dr. Smith paid $5.50 on the 22nd.", "doctor smith paid five dollars, fifty cents on the twenty second."),
        ("In 1984, 1,500 people (50%) met Mrs. Hale.", "in nineteen eighty four, one thousand five hundred people (fifty percent) met misess hale."),
        ("Café naïve — “quoted” 😀", 'cafe naive - "quoted"'),
        ("the 1980s & 3.14", "the nineteen eighties and three point one four"),
    ],
)  # fmt: skip
def test_english_regression(text, expected):
    assert cleaned(text, "en") == expected


def test_zwnj_is_kept_between_letters_only():
    text = f"{ZWNJ}کتاب{ZWNJ}{ZWNJ}ها {ZWNJ}و"
    assert cleaned(text, "fa") == f"کتاب{ZWNJ}ها و"
    assert ZWNJ not in cleaned(f"a{ZWNJ}b", "en")  # a format character elsewhere


def test_cleaning_counts_what_it_removes():
    (english,) = normalize_texts(["emoji 😀 here, zero\u200bwidth"], TextConfig())
    assert english.text == "emoji here, zerowidth"
    assert english.dropped == {"😀": 1, "\u200b": 1}
    assert english.lost_letters == 0
    (persian,) = normalize_texts(["سـلام"], TextConfig(language="fa"))
    assert (persian.text, persian.dropped, persian.lost_letters) == ("سلام", {"ـ": 1}, 0)


def test_a_row_losing_its_letters_is_skipped_and_reported(tmp_path):
    rows = [Row("ok", tmp_path / "a.wav", "Hello there.", "s"),
            Row("fa", tmp_path / "b.wav", "GPU بین batchها در حالت idle قرار میگیرد", "s")]  # fmt: skip
    found = read_transcripts(rows, TextConfig())
    assert list(found.tokens) == ["ok"]
    (skip,) = found.skipped
    assert skip.id == "fa"
    assert "dropped 64% of its letters" in skip.reason
    assert "max_letter_loss=0.2" in skip.reason
    assert found.dropped["ر"] == 4
    kept = read_transcripts(rows, TextConfig(max_letter_loss=None))
    assert list(kept.tokens) == ["ok", "fa"]


@pytest.mark.parametrize("language", ["klingon", "xx", "", "en_US!", 7])
def test_an_unknown_language_code_is_an_error_naming_it(language):
    with pytest.raises(
        ConfigError, match=rf"TextConfig.language: expected a BCP-47 .*language={language!r}"
    ):
        TextConfig(language=language)


def test_language_tags_are_canonical():
    config = TextConfig(language="EN_gb", languages=["FA", "fa"])
    assert (config.language, config.languages) == ("en-gb", ("fa",))
    assert config.row_language(None) == "en-gb"
    assert config.row_language("Fa") == "fa"
    with pytest.raises(ConfigError, match=r"received: language='de'.*data.text.languages"):
        config.row_language("de")
    assert TextConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config


def test_a_row_language_not_in_the_config_names_the_row(tmp_path):
    rows = [Row("r1", tmp_path / "a.wav", "سلام", "s", "fa")]
    with pytest.raises(ConfigError, match=r"row r1: .*\['en'\], received: language='fa'"):
        read_transcripts(rows, TextConfig())


def test_auto_symbols_are_the_cleaned_corpus_characters():
    config = TextConfig(language="fa")
    texts = [c.text for c in normalize_texts(["سلام ۲", "باد"], config)]
    tokenizer = Tokenizer.from_texts(config, texts)
    assert tokenizer.symbols == "".join(sorted(set("".join(texts))))
    with pytest.raises(ConfigError, match="'auto' builds the vocabulary from the corpus"):
        Tokenizer.from_config(config)


def test_language_tokens_come_first_and_only_with_several_languages():
    two = Tokenizer("ab", ["en", "fa"])
    assert two.vocab_size == 6
    assert two.encode("ba", language="fa") == ([3, 5, 4, 1], {})
    assert two.encode("ba")[0] == [2, 5, 4, 1]  # the first language by default
    assert two.decode([3, 5, 4, 1]) == "ba"
    assert (two.language_id("EN"), Tokenizer("ab", ["fa"]).language_id("fa")) == (2, -1)
    with pytest.raises(ConfigError, match=r"\['en', 'fa'\], received: language='de'"):
        two.encode("a", language="de")
    one = Tokenizer("ab", ["fa"])
    assert one.encode("ba", language="fa") == ([3, 2, 1], {})
    assert Tokenizer.from_dict(json.loads(json.dumps(two.to_dict()))) == two
    assert Tokenizer.from_dict({"specials": ["<pad>", "<eos>"], "symbols": "ab"}).languages == ()


def test_text_to_ids_reads_a_row_in_its_language():
    config = TextConfig(language="en", languages=["fa"])
    tokenizer = Tokenizer.from_texts(config, ["abc", "سلام"], ["en", "fa"])
    ids, text, oov = text_to_ids("سلام", config, tokenizer, language="fa")
    assert (ids[0], text, oov) == (3, "سلام", {})


@pytest.mark.parametrize(
    ("n", "language", "expected"),
    [(21, "ru", "двадцать один процент"), (3, "ru", "три процента"), (11, "ru", "одиннадцать процентов"),
     (25, "de", "fünfundzwanzig Prozent"), (25, "tr", "yüzde yirmibeş"), (25, "zh", "百分之二十五")],
)  # fmt: skip
def test_percent_is_said_as_the_language_says_it(n, language, expected):
    assert _numbers.expand_numbers(f"{n}%", language) == expected


def write_mixed_corpus(root):
    root.mkdir()
    lines = []
    for i, (text, language) in enumerate(
        [("Hello there.", "en"), ("A fine day.", "en"), ("سلام دوست من", "fa"),
         ("مصرف ۲۵٪ بود", "fa"), ("Good night.", ""), ("Only بین حالت قرار میگیرد", "en")]
    ):  # fmt: skip
        soundfile.write(root / f"u{i}.wav", _tone(0.4 + 0.05 * i, 22050), 22050)
        lines.append(f"u{i}.wav|{text}|spk|{language}")
    (root / "list.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root / "list.txt"


def test_a_mixed_filelist_prepares_with_counts_per_language(tmp_path):
    corpus = write_mixed_corpus(tmp_path / "mixed")
    data = DataConfig(text=TextConfig(language="en", languages=["fa"]), shard_size=4)
    result = prepare(corpus, tmp_path / "cache", audio=AUDIO, data=data)
    assert (result.ok, result.languages) == (5, {"en": 3, "fa": 2})
    assert [s.id for s in result.skipped] == ["u5"]  # lost 13 of its 17 letters
    report = json.loads((tmp_path / "cache" / "report.json").read_text())
    assert report["languages"] == {"en": 3, "fa": 2}
    assert report["dropped"]["ی"] == 3
    assert report["oov"] == {}
    cache = FeatureCache.open(tmp_path / "cache")
    assert cache.languages == ["en", "fa"] == list(cache.tokenizer.languages)
    samples = cache.manifest.samples
    by_id = dict(zip(samples.id, samples.language, strict=True))
    assert by_id == {"u0": 0, "u1": 0, "u2": 1, "u3": 1, "u4": 0}
    assert cache.manifest.counts.languages == {"en": 3, "fa": 2}
    summary = format_summary(result)
    assert "languages  en 3, fa 2" in summary
    assert "cleaning" in summary
    with pytest.raises(ConfigError, match=r"row u2: .*received: language='fa'"):
        prepare(corpus, tmp_path / "other", audio=AUDIO, data=DataConfig())


def test_a_filelist_row_language_is_read(tmp_path):
    corpus = read_corpus(write_mixed_corpus(tmp_path / "mixed"))
    assert [r.language for r in corpus.rows] == ["en", "en", "fa", "fa", None, "en"]


def test_prepare_takes_the_language_on_the_command_line(tmp_path, capsys):
    from xtts_data.cli import main

    root = tmp_path / "fa"
    root.mkdir()
    for i, text in enumerate(["سلام دوست من", "مصرف ۲۵٪ بود"]):
        soundfile.write(root / f"u{i}.wav", _tone(0.5, 22050), 22050)
        (root / "list.txt").open("a", encoding="utf-8").write(f"u{i}.wav|{text}\n")
    assert main(["prepare", str(root / "list.txt"), "--out", str(tmp_path / "c"),
                 "--language", "fa", "--quiet"]) == 0  # fmt: skip
    assert "2 ok, 0 skipped" in capsys.readouterr().out
    assert FeatureCache.open(tmp_path / "c").languages == ["fa"]
    assert main(["prepare", str(root / "list.txt"), "--out", str(tmp_path / "d"),
                 "--language", "klingon"]) == 2  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "language='klingon'" in err[0]


@pytest.mark.skipif(not espeak_speaks(), reason="no espeak-ng, program or library")
def test_an_espeak_persian_corpus_prepares_with_nothing_skipped_or_unknown(tmp_path):
    corpus = write_demo_corpus(tmp_path / "fa", n=4, engine="espeak", language="fa",
                               min_seconds=0.5, max_seconds=4.0).path  # fmt: skip
    data = DataConfig(text=TextConfig(language="fa"))
    result = prepare(corpus, tmp_path / "cache", audio=AUDIO, data=data)
    assert (result.ok, result.skipped, result.oov, result.dropped) == (4, (), {}, {})
    raw = (corpus / "metadata.csv").read_text(encoding="utf-8")
    assert any(c in raw for c in "۰۱۲۳۴۵۶۷۸۹0123456789")  # numbers were read, not dropped


def test_phonemes_use_the_row_languages_voice():
    pytest.importorskip("phonemizer")
    config = TextConfig(language="fa", phonemes=True, symbols=None)
    try:
        ipa = normalize_text("سلام ۲۵٪", config)
    except ConfigError as err:
        pytest.skip(f"espeak-ng not usable: {err}")
    assert ipa
    assert not set(ipa) & set("سلامبیستوپنجدرصد")  # IPA, not the Persian letters
    assert ipa != normalize_text("salam", TextConfig(phonemes=True, symbols=None))
