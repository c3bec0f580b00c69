"""`export --format onnx|litert` and `xtts_runtime`: the exported programs, looped in
numpy, say what TensorFlow's decoding says (mel, stop step, samples) in both formats, and
a voice folder from another version or with a changed file is refused by name."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile
import tensorflow as tf
from train_helpers import ONE_SHAPE, as_cli, train_cli

from xtts_data.pieces import text_pieces
from xtts_runtime import InputError, Slots, Voice, VoiceError
from xtts_runtime.cli import main as runtime_main
from xtts_train.cli import main
from xtts_train.models.text_to_mel.decoding import TEXT_BUCKET, text_buffer_frames
from xtts_train.models.text_to_mel.postfilters import decode_frames
from xtts_train.runs.loading import load_reference, load_run, load_vocoder
from xtts_train.runs.media import decoded_frames, silence_feature

pytest.importorskip("tf2onnx")


TEXT = "A short test, then a longer one that the run cuts into two pieces."


@pytest.fixture(scope="module")
def voice_folder(run, vocoder_run, tmp_path_factory):
    out = tmp_path_factory.mktemp("onnx") / "voice"
    assert main(["export", "--format", "onnx", "--run", str(run[1]), "--vocoder",
                 str(vocoder_run[1]), "--out", str(out)]) == 0  # fmt: skip
    return out


@pytest.fixture(scope="module")
def litert_folder(run, vocoder_run, tmp_path_factory):
    pytest.importorskip("ai_edge_litert")
    out = tmp_path_factory.mktemp("litert") / "voice"
    assert main(["export", "--format", "litert", "--run", str(run[1]), "--vocoder",
                 str(vocoder_run[1]), "--out", str(out)]) == 0  # fmt: skip
    return out


@pytest.fixture(params=["onnx", "litert"])
def exported(request):
    """The run's voice folder in each format."""
    return request.getfixturevalue(
        {"onnx": "voice_folder", "litert": "litert_folder"}[request.param]
    )


@pytest.fixture(scope="module")
def tf_said(run, vocoder_run, voice_folder):
    """TensorFlow's decoding of `TEXT`'s pieces (`_tf_piece`), once for both formats."""
    stack, model, tokenizer = load_run(run[1])
    _, vocoder = load_vocoder(vocoder_run[1])
    reference = np.load(voice_folder / "reference.npy")
    pieces = text_pieces(TEXT, stack.data.text, tokenizer, name="t",
                         max_symbols=stack.decode.split_symbols)  # fmt: skip
    return stack, [_tf_piece(model, stack, vocoder, piece.ids, reference) for piece in pieces]


def _tf_piece(model, stack, vocoder, ids, reference):
    """TensorFlow's decoding of one piece as the runtime cuts it: T a multiple of
    TEXT_BUCKET, the text's own buffer; its vocoder over the buffer, silence after the
    frames voiced (the SavedModel export's)."""
    count, buffer = len(ids), text_buffer_frames(len(ids), stack)
    text = -(-count // TEXT_BUCKET) * TEXT_BUCKET
    tokens = np.zeros([1, text], np.int32)
    tokens[0, :count] = ids
    cond_frames = stack.reference_frames
    cond = np.zeros([1, cond_frames, stack.model.n_mels], np.float32)
    used = min(len(reference), cond_frames)
    cond[0, :used] = reference[:used]
    decode = tf.function(lambda *a: decode_frames(model, stack.decode, *a, max_frames=buffer))
    result = decode(tokens, (tokens != 0).astype(np.float32), cond, np.array([used], np.int32))
    length = int(result["lengths"][0])
    voiced = int(decoded_frames(length, count, buffer, stack.audio))
    mel = result["mel"][0].numpy()
    heard = np.where(np.arange(buffer)[:, None] < voiced, mel, silence_feature(stack.audio))
    audio = vocoder(heard[None].astype(np.float32))[0].numpy()[: voiced * stack.audio.hop_length]
    return mel[:length], length, np.clip(audio, -1.0, 1.0)


def test_the_runtime_says_what_tensorflow_says(exported, tf_said):
    stack, pieces = tf_said
    speech = Voice(exported).speak(TEXT)
    assert len(speech.pieces) == len(pieces) >= 1
    for (mel, length, audio), said in zip(pieces, speech.pieces, strict=True):
        assert said.length == length
        np.testing.assert_allclose(said.mel, mel, atol=1e-4)
        assert said.audio.shape == audio.shape
        np.testing.assert_allclose(said.audio, audio, atol=1e-4)
    assert speech.sample_rate == stack.audio.sample_rate
    assert np.abs(speech.audio).max() > 0


def test_the_runtime_streams_in_chunks_what_it_speaks_whole(exported):
    """`Voice.chunks`: chunks as the decoder steps, the first of 32 frames (the `window`
    program's mel, vocoder windows with their context: TensorFlow's streams' rules),
    joined the audio `speak` gives, and each piece's pause after it."""
    voice = Voice(exported)
    whole = voice.speak(TEXT).audio
    chunks = list(voice.chunks(TEXT))
    assert voice.manifest["chunk_frames"] == 32
    assert len(chunks[0]) == 32 * voice.audio.hop_length
    joined = np.concatenate(chunks)
    assert joined.shape == whole.shape
    np.testing.assert_allclose(joined, whole, atol=1e-4)


@pytest.mark.parametrize("rate", [None, 16000, 44100])
def test_a_reference_clip_reads_as_tensorflow_reads_it(exported, run, cache, tmp_path, rate):
    """The clip programs (resampling, trimming, features) give `load_reference`'s mel of a
    clip at the run's rate and at two others."""
    import xtts_audio as xa

    stack = load_run(run[1])[0]
    clip = sorted((cache.parent / "corpus").rglob("*.wav"))[0]
    if rate is not None:
        wave, own = soundfile.read(clip, dtype="float32")
        wave = xa.resample(wave, orig_sr=own, target_sr=rate).numpy()
        clip = tmp_path / "clip.wav"
        soundfile.write(clip, wave, rate, subtype="FLOAT")
    want = load_reference(run[1], stack, clip)
    got = Voice(exported).clip(clip)
    assert got.shape == want.shape
    # Log features: float32 rounding of a near-silent bin grows by the log's slope.
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_a_reference_that_is_not_audio_or_gives_no_voice_is_refused(voice_folder, tmp_path,
                                                                     capsys):  # fmt: skip
    voice = Voice(voice_folder)
    text = tmp_path / "notes.wav"
    text.write_text("not a clip")
    silent = tmp_path / "silent.wav"
    soundfile.write(silent, np.zeros(voice.sample_rate, np.float32), voice.sample_rate)
    odd = tmp_path / "odd.wav"
    soundfile.write(odd, np.ones(12345, np.float32) * 0.1, 12345)
    for clip, words in ((text, "does not decode"), (silent, "silent"), (odd, "12345 Hz")):
        with pytest.raises(InputError, match=words):
            voice.clip(clip)
    out = tmp_path / "a.wav"
    assert runtime_main(["speak", str(voice_folder), "--text", "Hi.", "--out", str(out),
                         "--reference", str(text)]) == 2  # fmt: skip
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert not out.exists()


def test_the_folder_lists_every_file_with_its_checksum(voice_folder):
    manifest = json.loads((voice_folder / "voice.json").read_text())
    assert set(manifest["files"]) == {p.name for p in voice_folder.iterdir()} - {"voice.json"}
    assert {"conditioning.onnx", "prefill.onnx", "step-0.onnx", "finish.onnx", "vocoder.onnx",
            "tokenizer.json", "reference.npy", "features.onnx",
            *(f"clip-{rate}.onnx" for rate in manifest["clip_rates"])} <= set(manifest["files"])  # fmt: skip
    assert manifest["audio"]["sample_rate"] in manifest["clip_rates"]
    assert len(manifest["buffers"]) == manifest["text_len"] == manifest["bucket_text"][-1]


def test_the_onnx_programs_store_each_large_weight_once_in_weights_bin(voice_folder):
    """Every weight of 4 KB or more is in weights.bin, once however many programs hold it
    (the decoder's: every step and slots program's)."""
    import collections

    import onnx

    holders = collections.defaultdict(set)  # an offset in weights.bin → programs
    for path in voice_folder.glob("*.onnx"):
        for tensor in onnx.load(path, load_external_data=False).graph.initializer:
            if tensor.data_location == onnx.TensorProto.EXTERNAL:
                entries = {entry.key: entry.value for entry in tensor.external_data}
                assert entries["location"] == "weights.bin"
                holders[int(entries["offset"])].add(path.stem)
            else:
                assert len(tensor.raw_data) < 4096, (path.name, tensor.name)
    decoders = {p.stem for p in voice_folder.glob("s*-*.onnx")}  # step-{i}, slots-{b}
    assert len(decoders) == 7
    assert any(programs >= decoders for programs in holders.values())


def test_a_litert_folder_holds_flatbuffers_named_outputs_and_no_slots(litert_folder, run,
                                                                       vocoder_run, tmp_path,
                                                                       capsys):  # fmt: skip
    manifest = json.loads((litert_folder / "voice.json").read_text())
    assert manifest["programs"] == "litert"
    assert manifest["slots"] == []
    programs = {p.stem for p in litert_folder.glob("*.tflite")}
    assert not list(litert_folder.glob("*.onnx"))
    assert set(manifest["outputs"]) == programs >= {"prefill", "step-0", "vocoder", "window"}
    assert manifest["outputs"]["vocoder"] == ["audio"]
    with pytest.raises(VoiceError, match="ONNX voice folder for decoder slots"):
        Slots(Voice(litert_folder), rows=1)
    out = str(tmp_path / "v")
    assert main(["export", "--format", "litert", "--run", str(run[1]), "--vocoder",
                 str(vocoder_run[1]), "--out", out, "--slots", "2"]) == 2  # fmt: skip
    assert "no decoder slots with litert" in capsys.readouterr().err
    assert not Path(out).exists()


def test_a_litert_folder_without_litert_installed_is_refused_by_name(litert_folder,
                                                                     monkeypatch):  # fmt: skip
    monkeypatch.setitem(sys.modules, "ai_edge_litert", None)
    monkeypatch.setitem(sys.modules, "ai_edge_litert.interpreter", None)
    with pytest.raises(VoiceError, match=r"xtts-runtime\[litert\]"):
        Voice(litert_folder)


def test_an_int8_vocoder_changes_the_samples_a_little_and_nothing_else(litert_folder, run,
                                                                       vocoder_run, tmp_path):  # fmt: skip
    """`--int8-vocoder` (LiteRT's, end to end): the same decoding (mel, stop step), the
    vocoder's samples near the float voice's and not equal to them, int8 weights in its
    program, and voice.json saying so."""
    out = tmp_path / "int8"
    assert main(["export", "--format", "litert", "--run", str(run[1]), "--vocoder",
                 str(vocoder_run[1]), "--out", str(out), "--int8-vocoder"]) == 0  # fmt: skip
    assert json.loads((out / "voice.json").read_text())["int8_vocoder"] is True
    assert _int8_weights(out, "litert") > 0
    assert _int8_weights(litert_folder, "litert") == 0
    exact, near = Voice(litert_folder).speak(TEXT), Voice(out).speak(TEXT)
    for want, got in zip(exact.pieces, near.pieces, strict=True):
        assert got.length == want.length
        np.testing.assert_array_equal(got.mel, want.mel)
    _near(near.audio, exact.audio)


def test_the_onnx_int8_vocoder_keeps_its_samples_near(voice_folder, tmp_path):
    """The ONNX `--int8-vocoder` quantization (`_int8`, what the export runs on the vocoder
    it converts) on the folder's float vocoder: int8 weights, samples near and not equal
    (the flag's plumbing is the LiteRT test's)."""
    import onnx
    import onnxruntime as ort

    from xtts_train.export_voice import _int8

    path = voice_folder / "vocoder.onnx"
    (tmp_path / "vocoder.onnx").write_bytes(_int8(onnx.load(path)).SerializeToString())
    assert _int8_weights(tmp_path, "onnx") > 0
    assert _int8_weights(voice_folder, "onnx") == 0
    mel = {"mel": Voice(voice_folder).speak(TEXT).pieces[0].mel[None]}
    exact, near = (
        ort.InferenceSession(str(p)).run(None, mel)[0] for p in (path, tmp_path / "vocoder.onnx")
    )
    _near(near, exact)


def _near(near: np.ndarray, exact: np.ndarray) -> None:
    """Samples that differ, by less than 20 dB under the signal."""
    error = near - exact
    assert np.abs(error).max() > 0
    assert 10 * np.log10(np.mean(exact**2) / np.mean(error**2)) > 20  # dB


def _int8_weights(folder: Path, programs: str) -> int:
    """The int8 weights of the folder's vocoder program."""
    if programs == "onnx":
        import onnx

        graph = onnx.load(folder / "vocoder.onnx").graph
        return sum(t.data_type == onnx.TensorProto.INT8 for t in graph.initializer)
    from ai_edge_litert.interpreter import Interpreter

    details = Interpreter(model_path=str(folder / "vocoder.tflite")).get_tensor_details()
    return sum(d["dtype"] == np.int8 for d in details)


def test_every_layer_norm_of_the_step_is_fused(voice_folder):
    """`onnx_fusion` leaves no unfused layer norm in the step, whose speed is its node
    count: each mean feeds one LayerNormalization (of the centred input), and none of
    the variance's square roots is left (the runtime's equality above runs these)."""
    import onnx

    ops = [node.op_type for node in onnx.load(voice_folder / "step-0.onnx").graph.node]
    assert ops.count("LayerNormalization") > 0
    assert ops.count("LayerNormalization") == ops.count("GlobalAveragePool") + ops.count(
        "ReduceMean")  # fmt: skip
    assert "Reciprocal" not in ops


def test_a_changed_file_or_another_version_is_refused_by_name(voice_folder, tmp_path, capsys):
    import shutil

    changed = shutil.copytree(voice_folder, tmp_path / "changed")
    with (changed / "vocoder.onnx").open("ab") as file:
        file.write(b"\0")
    with pytest.raises(VoiceError, match=r"vocoder\.onnx"):
        Voice(changed)
    other = shutil.copytree(voice_folder, tmp_path / "other")
    manifest = json.loads((other / "voice.json").read_text())
    (other / "voice.json").write_text(json.dumps(manifest | {"version": 99}))
    assert (
        runtime_main(["speak", str(other), "--text", "hi", "--out", str(tmp_path / "a.wav")]) == 2
    )
    err = capsys.readouterr().err.strip()
    assert "version 99" in err
    assert len(err.splitlines()) == 1
    (other / "voice.json").write_text(json.dumps(manifest | {"programs": "tensorrt"}))
    with pytest.raises(VoiceError, match="'tensorrt'"):
        Voice(other)
    with pytest.raises(VoiceError, match=r"voice\.json"):
        Voice(tmp_path)


def test_a_text_with_nothing_to_say_is_a_one_line_error(voice_folder, tmp_path, capsys):
    with pytest.raises(InputError, match="nothing to say"):
        Voice(voice_folder).speak(". , .")
    out = tmp_path / "a.wav"
    assert runtime_main(["speak", str(voice_folder), "--text", "...", "--out", str(out)]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert not out.exists()


def test_onnx_export_needs_a_vocoder_and_sizes_its_own_buffers(run, tmp_path, capsys):
    out = str(tmp_path / "v")
    assert main(["export", "--format", "onnx", "--run", str(run[1]), "--out", out]) == 2
    assert "no --vocoder" in capsys.readouterr().err
    assert main(["export", "--format", "onnx", "--run", str(run[1]), "--out", out,
                 "--vocoder", out, "--max-frames", "9"]) == 2  # fmt: skip
    assert "--max-frames" in capsys.readouterr().err
    for flag in (["--int8-vocoder"], ["--slots", "2"], ["--set", "decode.split_symbols=9"]):
        assert main(["export", "--run", str(run[1]), "--out", out, *flag]) == 2  # savedmodel
        assert f"Expected {flag[0]} with --format onnx" in capsys.readouterr().err
    assert not Path(out).exists()


def test_the_runtime_benchmark_times_the_exported_voice_in_its_own_process(voice_folder,
                                                                          litert_folder, run,
                                                                          vocoder_run):  # fmt: skip
    """`xtts-bench runtime`'s worker protocol end to end, on onnxruntime and LiteRT: a cold
    start and per-text figures that add up."""
    from xtts_bench.runtime import TEXTS, run_runtime_benchmark

    result = run_runtime_benchmark(run[1], vocoder_run[1], voice=voice_folder,
                                   lite_voice=litert_folder, threads=(1,),
                                   runtimes=("onnx", "litert"), repeats=1, progress=False)  # fmt: skip
    assert [figures["runtime"] for figures in result["runs"]] == ["onnx", "litert"]
    for figures in result["runs"]:
        assert 0 < figures["cold_start_s"] < 300
        assert [t["text"] for t in figures["texts"]] == list(TEXTS)
        for text in figures["texts"]:
            assert text["audio_s"] > 0
            assert 0 < text["first_audio_s"] <= text["wall_s"]
            assert text["rtf"] == pytest.approx(text["wall_s"] / text["audio_s"])
        assert figures["peak_rss_mb"] > 0
    assert result["venv_mb"]["tensorflow"] > 0


@pytest.mark.slow
@pytest.mark.parametrize("preset", ["tiny", "small"])
def test_the_presets_exported_say_what_tensorflow_says(preset, cache, vocoder_run, tmp_path):
    """The issue's presets at their own sizes (a 2-step fit: the numerics, not the
    learning): both formats' stop step, mel and samples those of TensorFlow, each piece
    decoding past its first steps, and the stream's chunks joined the whole."""
    run = tmp_path / "run"
    done = train_cli("fit", "--data", str(cache), "--workdir", str(run), "--quiet", "--steps",
                     "2", *as_cli([*ONE_SHAPE, f"model.preset={preset}"]))  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    stack, model, tokenizer = load_run(run)
    _, vocoder = load_vocoder(vocoder_run[1])
    reference = load_reference(run, stack)
    pieces = text_pieces(TEXT, stack.data.text, tokenizer, name="t",
                         max_symbols=stack.decode.split_symbols)  # fmt: skip
    want = [_tf_piece(model, stack, vocoder, piece.ids, reference) for piece in pieces]
    for programs in ("onnx", "litert"):
        out = tmp_path / programs
        slots = ["--slots", "1"] if programs == "onnx" else []  # the test's one step
        assert main(["export", "--format", programs, "--run", str(run), "--vocoder",
                     str(vocoder_run[1]), "--out", str(out), *slots]) == 0  # fmt: skip
        voice = Voice(out)
        speech = voice.speak(TEXT)
        for (mel, length, audio), said in zip(want, speech.pieces, strict=True):
            assert said.length == length > 8 * stack.model.reduction_factor
            np.testing.assert_allclose(said.mel, mel, atol=1e-4)
            np.testing.assert_allclose(said.audio, audio, atol=1e-4)
        np.testing.assert_allclose(np.concatenate(list(voice.chunks(TEXT))), speech.audio,
                                   atol=1e-4)  # fmt: skip


_SPEAK_WITHOUT_TENSORFLOW = """
import sys
sys.modules["tensorflow"] = None  # any import of it fails
from xtts_runtime.cli import main
code = main(sys.argv[1:])
loaded = [name for name, module in sys.modules.items() if module is not None]
assert not any(name.startswith(("tensorflow", "xtts_train")) for name in loaded)
raise SystemExit(code)
"""


def test_the_runtime_speaks_without_tensorflow(exported, cache, tmp_path):
    out = tmp_path / "hello.wav"
    clip = sorted((cache.parent / "corpus").rglob("*.wav"))[-1]
    done = subprocess.run([sys.executable, "-c", _SPEAK_WITHOUT_TENSORFLOW, "speak",
                           str(exported), "--text", "Hello there.", "--out", str(out),
                           "--reference", str(clip)],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert out.stat().st_size > 1000


@pytest.mark.slow
def test_the_runtime_installs_alone_in_one_pip_line_and_speaks(voice_folder, tmp_path):
    """An empty venv, the runtime's README line (pip install of the three local packages,
    the phonemes extra): TensorFlow and xtts-train are not there, and the console script
    speaks the exported voice."""
    import venv

    root = Path(__file__).resolve().parents[3]
    venv.create(tmp_path / "venv", with_pip=True)
    python = tmp_path / "venv" / "bin" / "python"
    done = subprocess.run([python, "-m", "pip", "install", "-q", "--no-compile",
                           "./packages/xtts-audio", "./packages/xtts-data",
                           "./packages/xtts-runtime[phonemes]"],
                          cwd=root, capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    listed = subprocess.run([python, "-m", "pip", "list", "--format=freeze"],
                            capture_output=True, text=True, check=True).stdout.lower()  # fmt: skip
    assert "tensorflow" not in listed, listed
    assert "xtts-train" not in listed, listed
    environment = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "PYTHONHOME"}}
    probe = subprocess.run([python, "-c", "import tensorflow"], capture_output=True,
                           env=environment)  # fmt: skip
    assert probe.returncode != 0
    out = tmp_path / "hello.wav"
    spoken = subprocess.run([tmp_path / "venv" / "bin" / "xtts-runtime", "speak",
                             str(voice_folder), "--text", "Hello there.", "--out", str(out)],
                            capture_output=True, text=True, env=environment, cwd=tmp_path)  # fmt: skip
    assert spoken.returncode == 0, spoken.stderr[-2000:]
    wave, rate = soundfile.read(out)
    assert rate == json.loads((voice_folder / "voice.json").read_text())["audio"]["sample_rate"]
    assert np.abs(wave).max() > 0
