"""OpenAI's default names (issue 65): an app set up for OpenAI (here its own `openai`
client) asks for `tts-1` in `alloy` and hears the run's own voice, the bytes of `xtts` in
`run`; more names by `--model-alias` and `--voice-alias` (over a voices folder's
voices.yaml); unknown names a 400 naming the accepted ones; bad aliases refused at
start-up; and the names are those the installed `openai` package lists."""

from __future__ import annotations

import dataclasses
import functools
import re
import typing

import openai
import pytest
from openai.types.audio import SpeechModel
from openai.types.audio.speech_create_params import Voice as OpenAIVoice
from starlette.testclient import TestClient

from xtts_serve import ConfigError, EngineConfig, ServerConfig, create_app
from xtts_serve.openai_names import OPENAI_MODELS, OPENAI_VOICES
from xtts_serve.voices import load_voices

TEXT = "Fine day."
MODEL_ALIAS = "house-tts"  # the app's --model-alias


@pytest.fixture(scope="module")
def http(engine):
    """A running app on the session's engine, with one more model name."""
    with TestClient(create_app(engine, ServerConfig(model_aliases=(MODEL_ALIAS,)))) as http:
        yield http


def _openai(http: TestClient) -> openai.OpenAI:
    """OpenAI's client, pointed at the app in-process."""
    return openai.OpenAI(base_url="http://testserver/v1", api_key="x", http_client=http,
                         max_retries=0)  # fmt: skip


@pytest.fixture(scope="module")
def client(http) -> openai.OpenAI:
    return _openai(http)


def _speak(client: openai.OpenAI, *, model: str, voice: str) -> bytes:
    return client.audio.speech.create(model=model, voice=voice, input=TEXT).content


@pytest.fixture(scope="module")
def own(client) -> bytes:
    """The audio asked for by the run's own names."""
    return _speak(client, model="xtts", voice="run")


def test_the_names_are_those_the_openai_package_lists():
    # Each name is one the installed client lists (none made up), and the names the apps
    # send by default are all there; a name OpenAI adds later is for the lists' next update.
    (literal,) = [a for a in typing.get_args(OpenAIVoice) if typing.get_origin(a) is typing.Literal]
    assert set(OPENAI_VOICES) <= set(typing.get_args(literal))
    assert set(OPENAI_MODELS) <= set(typing.get_args(SpeechModel))
    assert {"alloy", "echo", "fable", "onyx", "nova", "shimmer"} <= set(OPENAI_VOICES)
    assert {"tts-1", "tts-1-hd", "gpt-4o-mini-tts"} <= set(OPENAI_MODELS)


OPENAI_NAMES = [
    *[(model, "alloy") for model in (*OPENAI_MODELS, MODEL_ALIAS)],
    *[("tts-1", voice) for voice in OPENAI_VOICES[1:]],
]


@pytest.mark.parametrize(("model", "voice"), OPENAI_NAMES)
def test_openais_default_names_speak_in_the_runs_own_voice(client, own, model, voice):
    assert own[:4] == b"RIFF"
    assert _speak(client, model=model, voice=voice) == own


def test_the_voices_list_names_the_aliases(http):
    listed = http.get("/v1/audio/voices").json()
    assert listed["aliases"] == dict.fromkeys(OPENAI_VOICES, "run")
    assert listed["default"] == "run"


@pytest.mark.parametrize(
    ("model", "voice", "message"),
    [
        ("gpt-5", "alloy", f"Expected model one of {['run', 'xtts', *OPENAI_MODELS, MODEL_ALIAS]}, received: 'gpt-5'"),
        ("tts-1", "nobody", f"Expected voice one of ['run'], an alias ({sorted(OPENAI_VOICES)}) or an uploaded voice's id"),
    ],
)  # fmt: skip
def test_unknown_names_are_a_400_naming_the_accepted_ones(client, model, voice, message):
    with pytest.raises(openai.BadRequestError) as caught:
        _speak(client, model=model, voice=voice)
    assert caught.value.status_code == 400
    assert message in caught.value.body["message"]
    assert caught.value.body["type"] == "invalid_request_error"


@pytest.fixture
def folder(tmp_path, tone_clip):
    """A voices folder: the clip `tone`, and a voices.yaml of two aliases."""
    (tmp_path / "tone.wav").write_bytes(tone_clip(1.5))
    (tmp_path / "voices.yaml").write_text("alloy: run\nnarrator: tone\n")
    return tmp_path


def test_voice_aliases_name_a_folders_voice_the_flag_over_voices_yaml(engine, folder,
                                                                      monkeypatch):  # fmt: skip
    """`--voice-alias alloy=tone` over the yaml's `alloy: run`: the store the engine would
    load, put on the session's engine (no new one); the routes, the list and `prepare`
    read it alike."""
    config = dataclasses.replace(engine.config, voices=folder, voice_aliases=("alloy=tone",))
    voices = load_voices(config, own=engine.own_voice, read=engine.read_clip)
    monkeypatch.setattr(engine, "voices", voices)
    assert engine.prepare(TEXT, voice="alloy").voice == "tone"
    with TestClient(create_app(engine)) as http:
        client = _openai(http)
        heard = {voice: _speak(client, model="tts-1", voice=voice)
                 for voice in ("run", "tone", "alloy", "narrator", "echo")}  # fmt: skip
        listed = http.get("/v1/audio/voices").json()
    assert heard["tone"] != heard["run"]
    assert heard["alloy"] == heard["narrator"] == heard["tone"]
    assert heard["echo"] == heard["run"]
    assert listed["aliases"] == {**dict.fromkeys(OPENAI_VOICES, "run"), "alloy": "tone",
                                 "narrator": "tone"}  # fmt: skip
    assert [v["id"] for v in listed["voices"]] == ["run", "tone"]


@pytest.mark.parametrize(
    ("yaml", "aliases", "message"),
    [
        (None, ("alloy=nobody",), "Expected voice aliases to voices the server starts with ['run', 'tone'], received: {'alloy': 'nobody'}"),
        (None, ("tone=run",), "Expected voice aliases named other than the voices ['run', 'tone'], received: ['tone'], which would hide them"),
        ("run: tone\n", (), "received: ['run'], which would hide them"),
        ("- alloy\n", (), "voices.yaml a YAML mapping of voice names to voice ids (alloy: amy), received: a YAML list"),
        ("alloy: [run]\n", (), "each side 1 to 64 printable characters, received: the entry 'alloy': ['run']"),
        ("1: run\n", (), "received: the entry 1: 'run'"),
        ("alloy: run\n narrator: tone\n", (), "received: malformed YAML (mapping values are not allowed here at line 2, column 10)"),
    ],
)  # fmt: skip
def test_a_bad_alias_is_refused_when_the_voices_load(engine, folder, yaml, aliases, message):
    if yaml is not None:
        (folder / "voices.yaml").write_text(yaml)
    config = dataclasses.replace(engine.config, voices=folder, voice_aliases=aliases)
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_voices(config, own=engine.own_voice, read=engine.read_clip)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"voice_aliases": ("alloy",)}, "Expected a voice alias NAME=VOICE (--voice-alias), each side 1 to 64 printable characters, no space at either end, received: 'alloy'"),
        ({"voice_aliases": ("=run",)}, "received: '=run'"),
        ({"voice_aliases": ("alloy= run",)}, "received: 'alloy= run'"),
        ({"voice_aliases": (f"{'a' * 65}=run",)}, f"received: '{'a' * 65}=run'"),
        ({"voice_aliases": "alloy=run"}, "Expected voice_aliases a sequence of strings, received: the string 'alloy=run'"),
        ({"voice_aliases": ("a=run", "b=run", "a=tone")}, "Expected each voice alias (--voice-alias) named once, received: ['a'] more than once"),
        ({"model_aliases": ("tts\n",)}, "Expected a model alias (--model-alias) of 1 to 64 printable characters, no space at either end, received: 'tts\\n'"),
        ({"model_aliases": "tts"}, "Expected model_aliases a sequence of strings, received: the string 'tts'"),
    ],
)  # fmt: skip
def test_a_malformed_alias_is_refused_by_its_config(settings, message):
    make = ServerConfig if "model_aliases" in settings else functools.partial(EngineConfig, run="r")
    with pytest.raises(ConfigError, match=re.escape(message)):
        make(**settings)
