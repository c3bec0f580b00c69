"""`xtts-serve`: a text-to-mel run (and its vocoder) behind the OpenAI speech API, on
uvicorn.

User errors (not a run, a vocoder of other audio settings, a bad limit, a refused
`--voices` clip, a refused alias) print one line and exit 2 (`xtts_audio.cli_runner`).
Parsing (and `--help`) loads no TensorFlow, nor do the checks of the flags and of a
voices.yaml; whether an alias names a voice is checked once the voices load. The command
then turns on the persistent compile cache
(`--no-compile-cache` or `XTTS_COMPILE_CACHE=off` turn it off), loads the engine, and
serves while its programs compile (`GET /healthz` answers 503 until they are done).

`--runtime tf` needs xtts-train (xtts-serve's `tf` extra); without it, xtts-serve serves
exported voices (`--runtime onnx`) and says so in one line when asked for the other.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from xtts_audio.cli_runner import run_command
from xtts_audio.errors import XttsAudioError
from xtts_audio.startup import start_cli, verbose_flag
from xtts_data.errors import XttsDataError
from xtts_runtime import XttsRuntimeError
from xtts_serve.config import (
    ENV_API_KEY,
    RUNTIMES,
    VOCODER_BATCHING,
    VOICES_FILE,
    EngineConfig,
    ServerConfig,
    voice_aliases,
)
from xtts_serve.errors import ConfigError, XttsServeError
from xtts_serve.openai_names import OPENAI_MODELS, OPENAI_VOICES

try:  # --runtime tf: the `tf` extra (xtts-train, TensorFlow); neither loads TensorFlow here
    from xtts_train import XttsTrainError
    from xtts_train.compile import compile_cache

    _TRAIN_ERRORS: tuple[type[Exception], ...] = (XttsTrainError,)
except ImportError:  # an install that serves exported voices alone
    compile_cache, _TRAIN_ERRORS = None, ()

__all__ = ["NO_TF", "SHUTDOWN_SECONDS", "main"]

_USER_ERRORS = (XttsServeError, *_TRAIN_ERRORS, XttsRuntimeError, XttsDataError, XttsAudioError)
NO_TF = (
    "Expected xtts-train for --runtime tf, received: not installed (this xtts-serve serves "
    "exported voices: --runtime onnx); pip install 'xtts-serve[tf]'"
)
SHUTDOWN_SECONDS = 30  # after SIGTERM, requests in flight may take this long to finish
_DEFAULTS = EngineConfig(run=Path("."))
_SERVER = ServerConfig()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="xtts-serve", parents=[verbose_flag()],
        description="Serve a text-to-mel run with the OpenAI speech API (POST "
        "/v1/audio/speech, whole or streamed), voices from uploaded clips (POST /v1/voices), "
        "GET /healthz, GET /metrics and a web page at GET /. Every decoding program is "
        "compiled at start-up; GET /healthz answers 503 until then. One thread decodes: "
        "up to --slots requests side by side, each joining at the next decoder step; the "
        "others wait in a bounded queue. Uploaded voices live in "
        "memory: a restart forgets them. On SIGTERM, requests in flight get up to "
        f"{SHUTDOWN_SECONDS} s to finish.",
    )  # fmt: skip
    parser.add_argument("--run", type=Path, required=True,
                        help="the text-to-mel training run (xtts-train fit); with --runtime "
                        "onnx, a voice folder (xtts-train export --format onnx)")  # fmt: skip
    parser.add_argument(
        "--runtime", choices=RUNTIMES, default=_DEFAULTS.runtime,
        help="tf: TensorFlow's programs, compiled at start-up, on a run; onnx: an exported "
        "voice in onnxruntime (its own vocoder and decoding settings; no --vocoder, --set "
        "or --vocoder-batching), which starts in about a second (default: "
        f"{_DEFAULTS.runtime})",
    )  # fmt: skip
    parser.add_argument(
        "--threads", type=int, metavar="N",
        help="--runtime onnx: threads of its large programs (vocoder, finish, prefill; a "
        "decoder step runs on one) (default: every core this process may use)",
    )  # fmt: skip
    parser.add_argument("--vocoder", type=Path, metavar="RUN",
                        help="a vocoder run trained on the run's audio settings; without it, "
                        "Griffin-Lim, and stream requests are refused (400)")  # fmt: skip
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default: 127.0.0.1, this machine only)",
    )
    parser.add_argument("--port", type=int, default=8000, help="port (default: 8000)")
    parser.add_argument(
        "--slots", type=int, default=_DEFAULTS.slots, metavar="N",
        help="requests decoded side by side, each in a row of one batch compiled at "
        "start-up; each hears what it would alone. A decoding that cannot stream (a "
        "postfilter that needs the whole utterance) needs 1: one request at a time "
        f"(default: {_DEFAULTS.slots})",
    )  # fmt: skip
    parser.add_argument(
        "--vocoder-batching", choices=VOCODER_BATCHING, default=_DEFAULTS.vocoder_batching,
        help="on: the streams' vocoder windows of a decoder step run as one batch (a lone "
        "one at 2, so it rounds as beside others); off: each window alone; auto: on with "
        "a GPU, off on a CPU, where batching saved little and slowed a lone stream "
        f"(default: {_DEFAULTS.vocoder_batching})",
    )  # fmt: skip
    parser.add_argument(
        "--max-queue", type=int, default=_SERVER.max_queue, metavar="N",
        help="requests waiting for a free slot besides those decoding; one more is "
        f"answered 503 with Retry-After (default: {_SERVER.max_queue})",
    )  # fmt: skip
    parser.add_argument(
        "--max-chars", type=int, default=_DEFAULTS.max_chars, metavar="N",
        help="the longest text of a request, in characters; longer is refused (400), and "
        "a JSON body may hold 16 KiB + 6 bytes per character (413 past it) "
        f"(default: {_DEFAULTS.max_chars})",
    )  # fmt: skip
    parser.add_argument(
        "--voices", type=Path, metavar="DIR",
        help="a folder of .wav/.flac/.ogg clips, each a voice named by its file's stem, "
        f"checked and conditioned on at start-up; a {VOICES_FILE} in it maps more names to "
        "voices (NAME: VOICE, as --voice-alias)",
    )  # fmt: skip
    parser.add_argument(
        "--voice-alias", action="append", default=[], metavar="NAME=VOICE",
        help="a name a request may give for the voice VOICE: the run's own (run) or a "
        f"--voices clip's stem (repeatable; over the same name in {VOICES_FILE}). OpenAI's "
        f"voice names ({', '.join(OPENAI_VOICES)}) speak in the run's own voice unless "
        "aliased. An alias to no voice, or named as a voice, is refused",
    )  # fmt: skip
    parser.add_argument(
        "--model-alias", action="append", default=[], metavar="NAME",
        help="another name the request's model field may give for the run (repeatable), "
        "besides the run folder's name, xtts and OpenAI's "
        f"{', '.join(OPENAI_MODELS)}; any other is refused (400)",
    )  # fmt: skip
    parser.add_argument(
        "--max-voices", type=int, default=_DEFAULTS.max_voices, metavar="N",
        help="uploaded voices kept in memory; past it the least recently used is forgotten "
        f"(default: {_DEFAULTS.max_voices})",
    )  # fmt: skip
    parser.add_argument(
        "--max-clip-seconds", type=float, default=_DEFAULTS.max_clip_seconds, metavar="S",
        help="the longest clip a voice is made from; a longer upload is refused (400) "
        f"(default: {_DEFAULTS.max_clip_seconds:g})",
    )  # fmt: skip
    parser.add_argument(
        "--max-upload-mb", type=float, default=_SERVER.max_upload_mb, metavar="MB",
        help=f"the largest upload body, in MiB; past it: 413 (default: {_SERVER.max_upload_mb:g})",
    )  # fmt: skip
    parser.add_argument(
        "--api-key", metavar="KEY",
        help="require Authorization: Bearer KEY on every request but GET / and GET /healthz "
        f"(401 without it); default: ${ENV_API_KEY} if set, else no key. The variable keeps the "
        "key out of the process list",
    )  # fmt: skip
    parser.add_argument(
        "--set", action="append", default=[], metavar="decode.KEY=VALUE",
        help="a decoding setting of the run, as xtts-train synthesize --set (repeatable)",
    )  # fmt: skip
    parser.add_argument(
        "--no-compile-cache", action="store_true",
        help="compile every program instead of loading it from the persistent compile cache "
        f"({_cache_root()})",
    )  # fmt: skip
    return parser


def _cache_root() -> str:
    """Where --runtime tf keeps its compiled programs, for --help."""
    if compile_cache is None:
        return "--runtime tf, with the tf extra"
    return compile_cache.default_root() or "off: " + compile_cache.ENV


def _serve(args: argparse.Namespace) -> int:
    key = args.api_key if args.api_key is not None else os.environ.get(ENV_API_KEY) or None
    server = ServerConfig(max_queue=args.max_queue, max_upload_mb=args.max_upload_mb,
                          api_key=key, model_aliases=tuple(args.model_alias))  # fmt: skip
    config = EngineConfig(run=args.run, vocoder=args.vocoder, max_chars=args.max_chars,
                          voices=args.voices, max_voices=args.max_voices,
                          max_clip_seconds=args.max_clip_seconds, slots=args.slots,
                          vocoder_batching=args.vocoder_batching, overrides=tuple(args.set),
                          voice_aliases=tuple(args.voice_alias), runtime=args.runtime,
                          threads=args.threads)  # fmt: skip
    voice_aliases(config)  # a malformed voices.yaml, too, is refused before TensorFlow
    if config.runtime == "onnx" and args.no_compile_cache:
        raise ConfigError("Expected --no-compile-cache with --runtime tf, received: it with "
                          "--runtime onnx, which compiles nothing")  # fmt: skip
    if config.runtime == "tf" and compile_cache is None:
        raise ConfigError(NO_TF)
    # Imported once the flags are checked: a bad one is refused before TensorFlow loads
    # (seconds), and `--help` never loads it. Not a cycle.
    import uvicorn

    from xtts_serve.app import create_app

    if config.runtime == "onnx":
        from xtts_serve.onnx_engine import OnnxEngine as Engine
    else:
        from xtts_serve.engine import Engine

    engine = Engine(config)
    uvicorn.run(create_app(engine, server), host=args.host, port=args.port,
                timeout_graceful_shutdown=SHUTDOWN_SECONDS,
                log_level="info" if args.verbose else "warning")  # fmt: skip
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `xtts-serve` console script (`argv` None); tests pass `argv`."""
    args = _parser().parse_args(argv)
    args.command = "serve"  # named in a user error's line
    start_cli(verbose=args.verbose, console=argv is None)
    if argv is None and not args.no_compile_cache and args.runtime == "tf" and compile_cache:
        compile_cache.enable()  # before TensorFlow's first compile
    return run_command(_serve, args, prog="xtts-serve", user_errors=_USER_ERRORS)


if __name__ == "__main__":
    sys.exit(main())
