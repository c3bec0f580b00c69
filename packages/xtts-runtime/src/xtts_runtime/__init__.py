"""xtts_runtime: speak a voice exported by `xtts-train export --format onnx|litert`
with onnxruntime or LiteRT and numpy alone.

A voice is a folder (ONNX or LiteRT programs, `voice.json`, the tokenizer); `Voice` loads and
checks it once, and `Voice.speak` turns a text into samples: the text front end of
xtts-data (cleaners, numbers, phonemes, sentence splitting, the tokenizer), then for
each piece the conditioning, prefill, a loop of decoder steps, finish and the vocoder.
`Slots` decodes several pieces side by side (a server's decoder slots). No TensorFlow and
no xtts-train is imported.
"""

from xtts_runtime.errors import InputError, VoiceError, XttsRuntimeError
from xtts_runtime.slots import Row, Slots
from xtts_runtime.voice import FORMAT, VERSION, Speech, Spoken, Voice, read_manifest

__all__ = [
    "FORMAT",
    "VERSION",
    "InputError",
    "Row",
    "Slots",
    "Speech",
    "Spoken",
    "Voice",
    "VoiceError",
    "XttsRuntimeError",
    "read_manifest",
]
