"""What the demo corpus says: the English demo language's words, and built-in sentences.

English (both engines) is drawn word by word from small tables, about 20% of texts holding
one token a text normaliser must expand; only written forms are here (the demo speaks the
normaliser's reading of them, `_demo_espeak.spoken_words`). Besides sentences, English has
the other kinds of `TEXT_KINDS` (`words(texts=...)`): run-on sentences, texts that repeat
and short phrases, inputs a text-to-mel model is tested on alone. Every other language is spoken
by espeak-ng from `SENTENCES`: short everyday sentences, about a quarter holding a number in
digits (a cardinal, a year, a percentage, a decimal), written as people write them in that
language.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: the CLI reads LANGUAGES without importing numpy
    import numpy as np

__all__ = ["LANGUAGES", "SENTENCES", "TEXT_KINDS", "join_sentences", "join_words", "words"]

_SPECIAL_SHARE = 0.2  # utterances holding one token a text normaliser must expand

# fmt: off
_FUNCTION_WORDS = (
    "the", "of", "and", "to", "in", "a", "was", "that", "with", "by", "for", "on", "at", "from",
    "his", "her", "it", "as", "is", "be", "had", "not", "which", "they", "were", "this", "but",
    "have", "an", "or", "their", "into",
)
_CONTENT_WORDS = (
    "house", "river", "morning", "letter", "garden", "window", "people", "market", "printer",
    "court", "prisoner", "city", "evening", "paper", "street", "family", "journey", "silver",
    "stone", "water", "winter", "summer", "doctor", "mother", "village", "station", "harbour",
    "question", "answer", "number", "voice", "light", "forest", "island", "teacher", "captain",
    "kitchen", "church", "bridge", "engine", "castle", "meadow", "lantern", "ribbon", "thunder",
    "walked", "spoke", "carried", "opened", "wrote", "found", "remembered", "watched", "followed",
    "turned", "waited", "listened", "returned", "believed", "promised", "gathered", "painted",
    "wandered", "decided", "reached", "quiet", "early", "gentle", "narrow", "heavy", "bright",
    "simple", "ancient", "modern", "careful", "distant", "golden", "sudden", "silent", "famous",
    "common", "certain", "little", "great", "small", "long", "old", "young", "new", "good",
    "slowly", "never", "always", "often", "later", "again", "together", "almost", "perhaps",
    "quickly",
)
_NAMES = ("Hale", "Brown", "Gray", "Jones", "Carter", "Ellis")
# fmt: on
# Written forms a text normaliser must expand; `{}` takes a name. Their spoken forms are
# not kept here: the demo speaks what xtts_data's normaliser makes of them
# (`_demo_espeak.spoken_words`), the text a model trained on the demo reads.
_SPECIAL = (
    "in 1984",
    "in 1776",
    "for $5.50",
    "$12",
    "the 3rd",
    "the 21st",
    "Dr. {}",
    "Mr. {}",
    "Mrs. {}",
    "50%",
    "1,500",
    "42",
)
_ENDINGS = (".", "?", "!")
# What a demo text is (`words(texts=...)`); "sentences" is every language's, the others English.
TEXT_KINDS = ("sentences", "run-on", "repeated", "short")
# Run-on texts: the special tokens with no punctuation in them, and the plain words that join
# clauses where a sentence would end (glued to the next clause's first word, so a text cut
# after any word never ends on one).
_PLAIN_SPECIAL = tuple(t for t in _SPECIAL if all(c.isalnum() or c == " " for c in t))
_JOINS = ("and", "then", "while", "so", "but", "and then", "until", "because", "where", "as")
# fmt: off
_SHORT = (
    "Yes.", "No.", "Go.", "Stop.", "Wait.", "Hello.", "Thanks.", "Okay.", "Sure.", "Why?",
    "Really?", "Come in.", "No way.", "Thank you.", "Good night.", "Not now.", "Of course.",
    "Hold on.", "Well done.", "See you.", "Me too.", "Go away.", "Sit down.", "Look out!",
)
# fmt: on


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _pick(rng: np.random.Generator, items: tuple):
    return items[int(rng.integers(len(items)))]


def words(rng: np.random.Generator, *, one_sentence: bool = False,
          texts: str = "sentences") -> Iterator[str]:  # fmt: skip
    """Endless written English words of sentences, punctuation attached (a number or
    abbreviation with what follows it counts as one word). With `one_sentence`, every
    sentence ends in a comma instead: the words run on as clauses of one sentence (the
    same draws, so the same words).

    `texts` other than "sentences" (`TEXT_KINDS`) draws other words: "run-on" (one
    sentence with no punctuation inside, `_run_on`), "repeated" (a text that repeats,
    `_repeated`) or "short" (one phrase of one or two words, then nothing: `_short`);
    `one_sentence` does not apply to them.

    Sentence starts are not capitalised here: words that do not fit an utterance are
    skipped, so `join_words` capitalises the words actually kept.
    """
    if texts != "sentences":
        yield from _KINDS[texts](rng)
        return
    special_at = int(rng.integers(4)) if rng.random() < _SPECIAL_SHARE else -1
    count = itertools.count()
    while True:
        length = int(rng.integers(4, 13))
        for i in range(length):
            if next(count) == special_at:
                name = _pick(rng, _NAMES)
                raw = _pick(rng, _SPECIAL).format(name)
            else:
                raw = _pick(rng, _FUNCTION_WORDS if rng.random() < 0.4 else _CONTENT_WORDS)
            if i == length - 1:
                mark = _ENDINGS[int(rng.choice(3, p=[0.85, 0.1, 0.05]))]
                mark = "," if one_sentence else mark
            else:
                mark = "," if rng.random() < 0.1 else ""
            yield raw + mark


def _run_on(rng: np.random.Generator) -> Iterator[str]:
    """Endless words of one sentence with no punctuation inside: clauses of 4-12 words as
    `words` draws them, without commas or tokens holding punctuation ("Dr.", "$5.50"), each
    after the first starting with a joining word ("and house", "while the")."""
    special_at = int(rng.integers(4)) if rng.random() < _SPECIAL_SHARE else -1
    count, join = itertools.count(), ""
    while True:
        for i in range(int(rng.integers(4, 13))):
            if next(count) == special_at:
                word = _pick(rng, _PLAIN_SPECIAL)
            else:
                word = _pick(rng, _FUNCTION_WORDS if rng.random() < 0.4 else _CONTENT_WORDS)
            yield f"{join} {word}" if i == 0 and join else word
        join = _pick(rng, _JOINS)


def _repeated(rng: np.random.Generator) -> Iterator[str]:
    """Endless words of one of three texts that repeat, drawn by `rng`: one word over and
    over ("the the the"), distinct common words with no commas ("house river the morning";
    they repeat only past all 132 of them) or whole numbers 1-99 in digits ("4 7 12 30")."""
    table = _FUNCTION_WORDS + _CONTENT_WORDS
    kind = int(rng.integers(3))
    if kind == 0:
        yield from itertools.repeat(_pick(rng, table))
    elif kind == 1:
        while True:
            yield from (table[int(i)] for i in rng.permutation(len(table)))
    else:
        while True:
            yield str(int(rng.integers(1, 100)))


def _short(rng: np.random.Generator) -> Iterator[str]:
    """One phrase of one or two words ("Yes.", "Thank you."), as a single word."""
    yield _pick(rng, _SHORT)


_KINDS = {"run-on": _run_on, "repeated": _repeated, "short": _short}


def join_words(words: list[str]) -> str:
    """Join words, capitalise sentence starts and end the text with a sentence mark."""
    text = [_capital(words[0])]
    for word in words[1:]:
        text.append(_capital(word) if text[-1][-1] in _ENDINGS else word)
    body = " ".join(text).rstrip(",;:.?!")
    return body + (text[-1][-1] if text[-1][-1] in _ENDINGS else ".")


def join_sentences(sentences: list[str], language: str) -> str:
    """Sentences of `language` as one text: Chinese runs them together, others space them."""
    return ("" if language == "zh" else " ").join(sentences)


# Persian: Persian digits (and ٪, the decimal mark ٫) in some sentences, ASCII in others, as
# both are written; U+200C (zero width non-joiner) inside words such as "می‌خواهم".
_FA = (
    "صبح بخیر، حالت چطور است؟",
    "امروز هوا خیلی خوب است.",
    "من هر روز صبح یک فنجان چای می‌نوشم.",
    "خواهرم در یک شهر کوچک زندگی می‌کند.",
    "لطفاً نمک را به من بده.",
    "آخر هفته به پارک می‌رویم.",
    "کتاب روی میز است.",
    "بچه‌ها در حیاط بازی می‌کنند.",
    "امروز وقت ندارم.",
    "در زمستان هوا زود تاریک می‌شود.",
    "او دوست دارد سر صبحانه روزنامه بخواند.",
    "نزدیک‌ترین ایستگاه مترو کجاست؟",
    "غذا خیلی خوشمزه بود.",
    "لطفاً پنجره را ببند، هوا سرد است.",
    "او سال‌هاست که پزشک است.",
    "فردا به دیدن پدربزرگ و مادربزرگ می‌رویم.",
    "سگ جلوی در خوابیده است.",
    "هر روز چند کلمه‌ی جدید یاد می‌گیرم.",
    "سوپ هنوز خیلی داغ است.",
    "کلیدهایم را ندیدی؟",
    "کتاب‌ها را روی قفسه گذاشتم.",
    "می‌خواهم فردا زودتر بیدار شوم.",
    "این مدل را روی یک GPU آموزش دادیم.",
    "قطار ساعت ۸ صبح حرکت می‌کند.",
    "من ۳ برادر و یک خواهر دارم.",
    "این خانه در سال ۱۳۷۷ ساخته شد.",
    "قیمت‌ها ۲۵٪ بالا رفته‌اند.",
    "طول این مسیر ۲٫۵ کیلومتر است.",
    "کلاس ما 24 دانش‌آموز دارد.",
    "قیمت بلیت 50 هزار تومان است.",
    "حدود 25% مردم این شهر دوچرخه دارند.",
    "مادربزرگم هفته‌ی بعد 80 ساله می‌شود.",
    "در سال 2020 به شیراز رفتیم.",
)
# Arabic (Modern Standard): Arabic-Indic digits (and ٪) in some sentences, ASCII in others.
_AR = (
    "صباح الخير، كيف حالك؟",
    "الطقس جميل جدًا اليوم.",
    "أشرب فنجان قهوة كل صباح.",
    "تسكن أختي في مدينة صغيرة.",
    "هل يمكنك أن تعطيني الملح من فضلك؟",
    "سنذهب إلى الحديقة في نهاية الأسبوع.",
    "الكتاب على الطاولة.",
    "يلعب الأطفال في الحديقة.",
    "ليس لدي وقت اليوم.",
    "في الشتاء يحل الظلام مبكرًا.",
    "يحب قراءة الجريدة أثناء الفطور.",
    "أين أقرب محطة قطار؟",
    "كان الطعام لذيذًا جدًا.",
    "أغلق النافذة من فضلك، الجو بارد.",
    "تعمل طبيبة منذ سنوات.",
    "سنزور جدي وجدتي غدًا.",
    "ينام الكلب أمام الباب.",
    "أتعلم بعض الكلمات الجديدة كل يوم.",
    "ما زال الحساء ساخنًا جدًا.",
    "هل رأيت مفاتيحي؟",
    "يغلق المتجر في الساعة السادسة.",
    "نحب المشي على شاطئ البحر في المساء.",
    "يغادر القطار في الساعة 8 صباحًا.",
    "لدي ٣ إخوة وأخت واحدة.",
    "بني هذا البيت عام 1998.",
    "ارتفعت الأسعار بنسبة ١٢٪.",
    "طول الطريق 2.5 كيلومتر.",
    "في صفنا ٢٤ طالبًا.",
    "ثمن التذكرة 15 دولارًا.",
    "ستبلغ جدتي 80 عامًا الأسبوع المقبل.",
)
_RU = (
    "Доброе утро, как дела?",
    "Сегодня очень хорошая погода.",
    "Каждое утро я пью чашку кофе.",
    "Моя сестра живёт в маленьком городе.",
    "Передай мне, пожалуйста, соль.",
    "В выходные мы пойдём в парк.",
    "Книга лежит на столе.",
    "Дети играют во дворе.",
    "Сегодня у меня нет времени.",
    "Зимой рано темнеет.",
    "За завтраком он любит читать газету.",
    "Где ближайшая станция метро?",
    "Обед был очень вкусный.",
    "Закрой, пожалуйста, окно, холодно.",
    "Она уже много лет работает врачом.",
    "Завтра мы поедем к бабушке и дедушке.",
    "Собака спит у двери.",
    "Каждый день я учу несколько новых слов.",
    "Суп ещё слишком горячий.",
    "Ты не видел мои ключи?",
    "Магазин закрывается в шесть часов.",
    "Летом мы часто ездим на дачу.",
    "Поезд отправляется в 8 утра.",
    "У меня 3 брата и одна сестра.",
    "Этот дом построили в 1998 году.",
    "Цены выросли на 12 %.",
    "Длина дороги 2,5 километра.",
    "В нашем классе 24 ученика.",
    "Билет стоит 15 рублей.",
    "На следующей неделе бабушке исполнится 80 лет.",
)
_DE = (
    "Guten Morgen, wie geht es dir?",
    "Das Wetter ist heute sehr schön.",
    "Ich trinke jeden Morgen eine Tasse Kaffee.",
    "Meine Schwester wohnt in einer kleinen Stadt.",
    "Kannst du mir bitte das Salz geben?",
    "Am Wochenende gehen wir in den Park.",
    "Das Buch liegt auf dem Tisch.",
    "Die Kinder spielen im Garten.",
    "Ich habe heute keine Zeit.",
    "Im Winter wird es früh dunkel.",
    "Beim Frühstück liest er gern Zeitung.",
    "Wo ist der nächste Bahnhof?",
    "Das Essen hat sehr gut geschmeckt.",
    "Mach bitte das Fenster zu, es ist kalt.",
    "Sie arbeitet seit Jahren als Ärztin.",
    "Morgen besuchen wir unsere Großeltern.",
    "Der Hund schläft vor der Tür.",
    "Ich lerne jeden Tag ein paar neue Wörter.",
    "Die Suppe ist noch zu heiß.",
    "Hast du meinen Schlüssel gesehen?",
    "Der Laden schließt um sechs.",
    "Im Sommer fahren wir oft an den See.",
    "Der Zug fährt um 8 Uhr ab.",
    "Ich habe 3 Brüder und eine Schwester.",
    "Das Haus wurde 1998 gebaut.",
    "Die Preise sind um 12 % gestiegen.",
    "Der Weg ist 2,5 Kilometer lang.",
    "In unserer Klasse sind 24 Schüler.",
    "Die Karte kostet 15 Euro.",
    "Meine Oma wird nächste Woche 80 Jahre alt.",
)
_FR = (
    "Bonjour, comment allez-vous ?",
    "Il fait très beau aujourd'hui.",
    "Je bois un café tous les matins.",
    "Ma sœur habite dans une petite ville.",
    "Tu peux me passer le sel, s'il te plaît ?",
    "Ce week-end, nous allons au parc.",
    "Le livre est sur la table.",
    "Les enfants jouent dans le jardin.",
    "Je n'ai pas le temps aujourd'hui.",
    "En hiver, il fait nuit très tôt.",
    "Il aime lire le journal au petit déjeuner.",
    "Où est la gare la plus proche ?",
    "Le repas était délicieux.",
    "Ferme la fenêtre, s'il te plaît, il fait froid.",
    "Elle est médecin depuis des années.",
    "Demain, nous allons voir nos grands-parents.",
    "Le chien dort devant la porte.",
    "J'apprends quelques mots nouveaux chaque jour.",
    "La soupe est encore trop chaude.",
    "As-tu vu mes clés ?",
    "Le magasin ferme à six heures.",
    "En été, nous allons souvent à la mer.",
    "Le train part à 8 heures.",
    "J'ai 3 frères et une sœur.",
    "Cette maison a été construite en 1998.",
    "Les prix ont augmenté de 12 %.",
    "Le chemin fait 2,5 kilomètres.",
    "Il y a 24 élèves dans notre classe.",
    "Le billet coûte 15 euros.",
    "Ma grand-mère aura 80 ans la semaine prochaine.",
)
_ES = (
    "Buenos días, ¿cómo estás?",
    "Hoy hace muy buen tiempo.",
    "Tomo un café todas las mañanas.",
    "Mi hermana vive en un pueblo pequeño.",
    "¿Me pasas la sal, por favor?",
    "Este fin de semana vamos al parque.",
    "El libro está encima de la mesa.",
    "Los niños juegan en el jardín.",
    "Hoy no tengo tiempo.",
    "En invierno oscurece muy temprano.",
    "Le gusta leer el periódico durante el desayuno.",
    "¿Dónde está la estación más cercana?",
    "La comida estaba riquísima.",
    "Cierra la ventana, por favor, que hace frío.",
    "Ella trabaja de médica desde hace años.",
    "Mañana vamos a ver a nuestros abuelos.",
    "El perro duerme delante de la puerta.",
    "Aprendo unas cuantas palabras nuevas cada día.",
    "La sopa todavía está demasiado caliente.",
    "¿Has visto mis llaves?",
    "La tienda cierra a las seis.",
    "En verano vamos mucho a la playa.",
    "El tren sale a las 8 de la mañana.",
    "Tengo 3 hermanos y una hermana.",
    "Esta casa se construyó en 1998.",
    "Los precios han subido un 12 %.",
    "El camino mide 2,5 kilómetros.",
    "En nuestra clase hay 24 alumnos.",
    "La entrada cuesta 15 euros.",
    "Mi abuela cumple 80 años la semana que viene.",
)
# Mandarin, simplified characters.
_ZH = (
    "早上好，你今天怎么样？",
    "今天天气很好。",
    "我每天早上喝一杯咖啡。",
    "我姐姐住在一个小城市。",
    "请把盐递给我。",
    "这个周末我们去公园。",
    "书在桌子上。",
    "孩子们在院子里玩。",
    "我今天没有时间。",
    "冬天天黑得很早。",
    "他喜欢一边吃早饭一边看报纸。",
    "最近的地铁站在哪里？",
    "这顿饭非常好吃。",
    "请把窗户关上，外面很冷。",
    "她当医生已经很多年了。",
    "明天我们去看爷爷奶奶。",
    "小狗在门口睡觉。",
    "我每天学几个新词。",
    "汤还太烫了。",
    "你看见我的钥匙了吗？",
    "商店六点关门。",
    "夏天我们常常去海边。",
    "火车早上8点出发。",
    "我有3个哥哥和一个妹妹。",
    "这座房子是1998年建的。",
    "价格上涨了12%。",
    "这条路长2.5公里。",
    "我们班有24个学生。",
    "这张票15块钱。",
    "我奶奶下个星期就80岁了。",
)

SENTENCES: dict[str, tuple[str, ...]] = {
    "fa": _FA,
    "ar": _AR,
    "ru": _RU,
    "de": _DE,
    "fr": _FR,
    "es": _ES,
    "zh": _ZH,
}
# Every language the demo corpus speaks: English (its word tables) and those of SENTENCES.
LANGUAGES = ("en", *SENTENCES)
