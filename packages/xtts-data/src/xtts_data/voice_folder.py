"""The voice folder's manifest, `voice.json`: one owner for the file that
`xtts-train export --format onnx|litert` writes and `xtts_runtime` reads.

It names the format and its version, holds the settings a runtime needs, and lists every
other file of the folder with its SHA-256, so a folder from another version, or a file
changed or cut short since the export, is refused by name before anything runs. Its
`programs` key names the programs' format (`PROGRAMS`: ONNX or LiteRT flatbuffers) and
`program_file` the file of each. Without TensorFlow.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from xtts_data.errors import XttsDataError

__all__ = ["FORMAT", "MANIFEST", "PROGRAMS", "VERSION", "VoiceFolderError", "program_file",
           "read_manifest", "write_manifest"]  # fmt: skip

FORMAT = "xtts-voice"
VERSION = 1
MANIFEST = "voice.json"
# The programs' formats, by the name `export --format` takes, and their files' suffixes.
PROGRAMS = {"onnx": ".onnx", "litert": ".tflite"}


class VoiceFolderError(XttsDataError, ValueError):
    """A folder that is not a voice of this format and version, or whose files differ from
    its manifest's checksums."""


def write_manifest(folder: Path, settings: Mapping[str, Any]) -> Path:
    """Write `folder/voice.json`: the format, its version, `settings` and the SHA-256 of
    every other file in `folder` (written last, after them)."""
    files = {p.name: _sha256(p) for p in sorted(folder.iterdir()) if p.name != MANIFEST}
    manifest = {"format": FORMAT, "version": VERSION, **settings, "files": files}
    path = folder / MANIFEST
    path.write_text(json.dumps(manifest, indent=1) + "\n")
    return path


def program_file(manifest: Mapping[str, Any], name: str) -> str:
    """The file of the program `name` (`vocoder`, `step-0`) in a folder of `manifest`'s
    `programs` format (`read_manifest`'s)."""
    return name + PROGRAMS[manifest["programs"]]


def read_manifest(folder: str | Path) -> dict[str, Any]:
    """`folder/voice.json`, checked: its format and version, its programs' format (`onnx`
    where a folder written before LiteRT names none), and every file it lists present
    with its SHA-256.

    Raises:
        VoiceFolderError: not a folder with a readable voice.json, another format or
            version, or a file missing or changed (named, with how to mend it).
    """
    folder = Path(folder)
    path = folder / MANIFEST
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise VoiceFolderError(
            f"Expected a voice folder with {MANIFEST} (xtts-train export --format onnx|litert), "
            f"received: {folder} ({error})"
        ) from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        found = manifest.get("format") if isinstance(manifest, dict) else manifest
        raise VoiceFolderError(f"Expected {path} of format {FORMAT!r}, received: {found!r}")
    if manifest.get("version") != VERSION:
        raise VoiceFolderError(
            f"Expected a voice of version {VERSION}, received: version "
            f"{manifest.get('version')!r} in {path}; export the run again with this version"
        )
    manifest.setdefault("programs", "onnx")  # a folder written before LiteRT holds ONNX
    if manifest["programs"] not in PROGRAMS:
        raise VoiceFolderError(f"Expected programs of one of {sorted(PROGRAMS)} in {path}, "
                               f"received: {manifest['programs']!r}")  # fmt: skip
    for name, digest in manifest.get("files", {}).items():
        file = folder / name
        if not file.is_file():
            raise VoiceFolderError(f"Expected {file} (listed in {path}), received: no such "
                                   f"file; export the voice again")  # fmt: skip
        if _sha256(file) != digest:
            raise VoiceFolderError(f"Expected {file} as exported (SHA-256 {digest[:12]}…), "
                                   f"received: a changed file; export the voice again")  # fmt: skip
    return manifest


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
