"""OpenAI's speech model and voice names, as the `openai` package lists them (3.57:
`openai.types.audio.SpeechModel` and `openai.types.audio.speech_create_params.Voice`;
`tests/test_openai_names.py` checks them against the installed one).

An app set up for OpenAI's speech API (Open WebUI, Home Assistant, SillyTavern) sends
these by default: every server answers to each model name (they all name its one run,
`speech_request.model_names`), and each voice name speaks in its default voice unless an
alias names it (`VoiceStore`).

Standard library only: the console script's `--help` lists them before TensorFlow loads.
"""

from __future__ import annotations

__all__ = ["OPENAI_MODELS", "OPENAI_VOICES"]

OPENAI_MODELS = ("tts-1", "tts-1-hd", "gpt-4o-mini-tts", "gpt-4o-mini-tts-2025-12-15")
OPENAI_VOICES = ("alloy", "ash", "ballad", "coral", "echo", "fable", "onyx", "nova", "sage",
                 "shimmer", "verse", "marin", "cedar")  # fmt: skip
