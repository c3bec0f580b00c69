"""xtts_serve: a speech server for xtts runs. `Engine` loads a text-to-mel run and its
vocoder once, compiles every decoding program before the first request and speaks (whole
or streamed) what `xtts-train synthesize` writes, requests decoded together in decoder
slots (`SlotScheduler`), each exactly as it would be alone; `create_app` puts the OpenAI
speech API, voice uploads, a health check and Prometheus metrics on it (Starlette, run by
uvicorn: the `xtts-serve` console script).

Names load on first use (`xtts_audio.startup.lazy_exports`): `import xtts_serve` does not
import TensorFlow; `xtts_serve.Engine` does.
"""

from typing import TYPE_CHECKING

from xtts_audio.startup import lazy_exports

if TYPE_CHECKING:
    from xtts_serve.app import create_app
    from xtts_serve.config import EngineConfig, ServerConfig
    from xtts_serve.engine import Engine
    from xtts_serve.errors import (
        AuthError,
        BusyError,
        ConfigError,
        RequestError,
        TooLargeError,
        UnknownVoiceError,
        XttsServeError,
    )
    from xtts_serve.onnx_engine import OnnxEngine
    from xtts_serve.scheduling import Utterance
    from xtts_serve.speech import SerialScheduler, SlotScheduler, Speech
    from xtts_serve.voices import Voice, VoiceStore
    from xtts_serve.worker import DecodeWorker

__all__ = [
    "AuthError",
    "BusyError",
    "ConfigError",
    "DecodeWorker",
    "Engine",
    "EngineConfig",
    "OnnxEngine",
    "RequestError",
    "SerialScheduler",
    "ServerConfig",
    "SlotScheduler",
    "Speech",
    "TooLargeError",
    "UnknownVoiceError",
    "Utterance",
    "Voice",
    "VoiceStore",
    "XttsServeError",
    "create_app",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "create_app": "app",
        **dict.fromkeys(["EngineConfig", "ServerConfig"], "config"),
        "Engine": "engine",
        "OnnxEngine": "onnx_engine",
        "Utterance": "scheduling",
        **dict.fromkeys(
            ["AuthError", "BusyError", "ConfigError", "RequestError", "TooLargeError",
             "UnknownVoiceError", "XttsServeError"],
            "errors",
        ),
        **dict.fromkeys(["SerialScheduler", "SlotScheduler", "Speech"], "speech"),
        **dict.fromkeys(["Voice", "VoiceStore"], "voices"),
        "DecodeWorker": "worker",
    },
)  # fmt: skip
