"""`xtts_audio.startup`: lazy package exports, the TensorFlow noise filter, process age."""

from __future__ import annotations

import contextlib
import importlib
import os
import struct
import subprocess
import sys
import textwrap
import time

import pytest

import xtts_audio
from xtts_audio import startup

# Lines as TensorFlow writes them: TF 2.21 on this host, and (GPU builds, TensorFlow's own
# prefix) as reported from TF 2.14-2.19.
AOT = "E0000 00:00:1795470489.753655   11190 cpu_aot_loader.cc:220] Loading XLA:CPU AOT result. Target machine feature {feature} is not  supported on the host machine. Machine type used for XLA:CPU compilation doesn't match the machine type for execution. Compile machine features: [+64bit,+adx,+aes,+avx,+avx2,+avx512bf16,+avx512bitalg,+avx512bw,+avx512cd,+avx512dq,+avx512f,+avx512ifma,+avx512vbmi,+avx512vbmi2,+avx512vl,+avx512vnni,+avx512vpopcntdq,+bmi,+bmi2,+clflushopt,+clwb,+clzero,+cmov,+crc32,+cx16,+cx8,+f16c,+fma,+fsgsbase,+fxsr,+gfni,+invpcid,+lzcnt,+mmx,+movbe,+pclmul,+popcnt,+prfchw,+rdpid,+rdrnd,+rdseed,+sahf,+sha,+shstk,+sse,+sse2,+sse3,+sse4.1,+sse4.2,+sse4a,+ssse3,+vaes,+vpclmulqdq,+xsave,+xsavec,+xsaveopt,+xsaves,+prefer-no-scatter,+prefer-no-gather,-amx-avx512,-amx-bf16,-amx-complex,-amx-fp16,-amx-fp8,-amx-int8,-amx-movrs,-amx-tf32,-amx-tile,-avx10.1,-avx10.2,-avx512fp16,-avx512vp2intersect,-avxifma,-avxneconvert,-avxvnni,-avxvnniint16,-avxvnniint8,-ccmp,-cf,-cldemote,-cmpccxadd,-egpr,-enqcmd,-fma4,-hreset,-kl,-lwp,-movdir64b,-movdiri,-movrs,-mwaitx,-ndd,-nf,-pconfig,-pku,-ppx,-prefetchi,-ptwrite,-push2pop2,-raoint,-rdpru,-rtm,-serialize,-sgx,-sha512,-sm3,-sm4,-tbm,-tsxldtrk,-uintr,-usermsr,-waitpkg,-wbnoinvd,-widekl,-xop,-zu] vs host machine features: [prfchw,avx,aes,sahf,pclmul,crc32,xsaves,sse4.1,avx512ifma,xsave,sse4.2,invpcid,64bit,xsavec,avx512vpopcntdq,cmov,avx512cd,movbe,adx,avx2,vpclmulqdq,avx512vl,clflushopt,bmi,sse,gfni,xsaveopt,rdrnd,avx512f,avx512bf16,avx512vnni,cx8,avx512bw,sse3,fsgsbase,clzero,lzcnt,sha,ssse3,cx16,bmi2,fma,popcnt,f16c,avx512bitalg,clwb,mmx,sse2,rdseed,avx512vbmi2,rdpid,avx512vbmi,shstk,vaes,fxsr,avx512dq,sse4a]. This could lead to execution errors such as SIGILL."
NOISE = [
    "I0000 00:00:1795468178.755022    2507 port.cc:153] oneDNN custom operations are on. You may see slightly different numerical results due to floating-point round-off errors from different computation orders. To turn them off, set the environment variable `TF_ENABLE_ONEDNN_OPTS=0`.",
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "2023-09-03 11:03:40.093639: I tensorflow/core/platform/cpu_feature_guard.cc:182] This TensorFlow binary is optimized to use available CPU instructions in performance-critical operations.",
    "To enable the following instructions: SSE SSE2 SSE3 SSE4.1 SSE4.2 AVX AVX2 FMA, in other operations, rebuild TensorFlow with the appropriate compiler flags.",
    "E0000 00:00:1795468189.037893    2578 text_format.cc:378] Error parsing text-format tensorflow.XlaSerializedCacheEntry: 2:1: Expected identifier, got: 6",
    AOT.format(feature="+prefer-no-scatter"),
    AOT.format(feature="+prefer-no-gather"),
    "E0000 00:00:1751448150.986970   10148 cuda_dnn.cc:8579] Unable to register cuDNN factory: Attempting to register factory for plugin cuDNN when one has already been registered",
    "2023-10-09 13:36:23.355674: E tensorflow/compiler/xla/stream_executor/cuda/cuda_fft.cc:609] Unable to register cuFFT factory: Attempting to register factory for plugin cuFFT when one has already been registered",
    "E0000 00:00:1751448150.991431   10148 cuda_blas.cc:1407] Unable to register cuBLAS factory: Attempting to register factory for plugin cuBLAS when one has already been registered",
    "W0000 00:00:1751448151.003754   10148 computation_placer.cc:177] computation placer already registered. Please check linkage and avoid linking the same target more than once.",
    "I0000 00:00:1795471732.045076   21178 cpu_feature_guard.cc:227] This TensorFlow binary is optimized to use available CPU instructions in performance-critical operations.",
    "To enable the following instructions: AVX2 AVX512F AVX512_VNNI AVX512_BF16 FMA, in other operations, rebuild TensorFlow with the appropriate compiler flags.",
]
NOT_NOISE = [
    AOT.format(feature="+avx512f"),  # a real ISA mismatch: the program may die of SIGILL
    "Traceback (most recent call last):",
    "ValueError: MelConfig.n_fft: expected a positive int, received: n_fft=0",
    "\r 40%|####      | 4/10 [00:01<00:01,  3.90it/s]",
    "E0000 00:00:1795468189.037893    2578 text_format.cc:378] Error parsing text-format tensorflow.ConfigProto: 1:1: Expected identifier, got: 6",
    "W0000 00:00:1795469877.463362    7860 op_kernel.cc:1857] OP_REQUIRES failed at whole_file_read_ops.cc:116 : NOT_FOUND: x.wav; No such file or directory",
    "oneDNN custom operations are on.",  # the text alone, without TensorFlow's log prefix
    "To enable the following instructions: AVX2 FMA",  # cut short: not TensorFlow's line
]


@pytest.mark.parametrize("line", NOISE)
def test_each_documented_line_is_noise_with_or_without_its_newline(line):
    assert startup.is_noise(line.encode())
    assert startup.is_noise(line.encode() + b"\n")


@pytest.mark.parametrize("line", NOT_NOISE)
def test_real_output_is_not_noise(line):
    assert not startup.is_noise(line.encode())


def test_filter_passes_partial_lines_at_once_and_holds_only_possible_noise():
    stream = startup._Filter()
    assert stream.feed(b"\r 10%|#         | 1/10") == b"\r 10%|#         | 1/10"
    assert stream.feed(b"\r 20%|##        | 2/10") == b"\r 20%|##        | 2/10"
    # A noise line glued to the bar (no newline before it) goes; the bar's line goes on.
    assert stream.feed(NOISE[4].encode() + b"\n\r 30%") == b"\r 30%"
    assert stream.feed(b"\n") == b"\n"
    one_dnn = NOISE[0].encode() + b"\n"
    for cut in (1, 9, 40, 70, len(one_dnn) - 1):
        assert stream.feed(one_dnn[:cut]) == b""  # held: it could still be noise
        assert stream.feed(one_dnn[cut:]) == b""
    prefix = b"E0000 00:00:1795468189.037893    2578 "
    assert stream.feed(prefix + b"op_ker") == b""  # held: its prefix is not complete yet
    assert stream.feed(b"nel.cc:1857] OP_") == prefix + b"op_kernel.cc:1857] OP_"
    assert stream.feed(b"REQUIRES failed\n") == b"REQUIRES failed\n"
    assert stream.feed(b"Epoch 1") == b"Epoch 1"
    assert stream.feed(b" done\n") == b" done\n"
    assert stream.feed(b"WARNING: All log") == b""
    assert stream.close() == b"WARNING: All log"


def test_filter_output_does_not_depend_on_how_the_stream_is_cut():
    text = "\n".join([NOISE[1], "real 1", NOISE[0], "real 2", NOISE[5], NOISE[3], "tail"])
    whole = startup._Filter()
    expected = whole.feed(text.encode()) + whole.close()
    assert expected == b"real 1\nreal 2\ntail"
    for size in (1, 7, 100):
        stream, data = startup._Filter(), text.encode()
        pieces = [stream.feed(data[i : i + size]) for i in range(0, len(data), size)]
        assert b"".join(pieces) + stream.close() == expected


def _run_child(code: str, tmp_path, **kwargs) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          cwd=tmp_path, env=env, timeout=60, **kwargs)  # fmt: skip


def test_filter_process_drops_noise_and_outlives_an_abort(tmp_path):
    noise = [line.encode() + b"\n" for line in NOISE]
    code = f"""
        import os, sys
        from xtts_audio.startup import quiet_tensorflow
        quiet_tensorflow()
        print(os.environ["TF_CPP_MIN_LOG_LEVEL"], flush=True)
        noise = {noise!r}
        for line in noise[:3]:
            os.write(2, line)
        os.write(2, b"real error 1\\n")
        for line in noise[3:]:
            os.write(2, line)
        sys.stderr.write("real error 2\\n")
        sys.stderr.flush()
        os.write(2, b"\\r 50%|#####     | 5/10")
        os.abort()
    """
    done = _run_child(code, tmp_path)
    assert done.returncode == -6  # SIGABRT
    assert done.stdout == b"1\n"
    assert done.stderr == b"real error 1\nreal error 2\n\r 50%|#####     | 5/10"


def test_verbose_keeps_everything_and_a_second_call_changes_nothing(tmp_path):
    line = NOISE[0].encode() + b"\n"
    code = f"""
        import os
        from xtts_audio.startup import quiet_tensorflow
        quiet_tensorflow(verbose=True)
        quiet_tensorflow(verbose=True)
        print(os.environ["TF_CPP_MIN_LOG_LEVEL"])
        os.write(2, {line!r})
    """
    done = _run_child(code, tmp_path)
    assert (done.returncode, done.stdout) == (0, b"0\n")
    assert done.stderr == line


def test_filter_ignores_ctrl_c_and_sigterm_to_the_process_group(tmp_path):
    code = """
        import os, signal, time
        from xtts_audio.startup import quiet_tensorflow
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
        quiet_tensorflow()
        quiet_tensorflow()  # no second filter
        assert os.environ["TF_CPP_MIN_LOG_LEVEL"] == "3"  # the user's own setting stays
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        try:
            os.killpg(0, signal.SIGINT)
            time.sleep(5)
        except KeyboardInterrupt:
            pass
        os.killpg(0, signal.SIGTERM)
        time.sleep(0.2)
        os.write(2, b"after Ctrl-C and SIGTERM\\n")
    """
    done = _run_child(code, tmp_path, start_new_session=True)
    assert done.returncode == 0, done.stderr
    assert done.stderr == b"after Ctrl-C and SIGTERM\n"


def test_filter_does_not_hold_stdout_open(tmp_path):
    # A child process keeps stderr (the pipe) open after we exit, so the filter outlives
    # us; whoever reads our stdout must still see its end when we exit.
    code = """
        import subprocess
        from xtts_audio.startup import quiet_tensorflow
        quiet_tensorflow()
        sleeper = subprocess.Popen(["sleep", "20"], stdout=subprocess.DEVNULL)
        print(sleeper.pid, flush=True)
    """
    started = time.monotonic()
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], cwd=tmp_path,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        out = child.stdout.read()
        assert time.monotonic() - started < 10
    finally:
        child.wait(timeout=30)
        child.stdout.close()
        os.kill(int(out), 15)


def _run_on_terminal(code: str, tmp_path, *, columns: int) -> bytes:
    """Everything `code` writes to a terminal (a pty) `columns` wide, as that terminal shows it."""
    pty = pytest.importorskip("pty")
    fcntl, termios = pytest.importorskip("fcntl"), pytest.importorskip("termios")
    master, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], cwd=tmp_path,
                             stdout=terminal, stderr=terminal, env=env)  # fmt: skip
    os.close(terminal)
    shown = b""
    with contextlib.suppress(OSError):  # EIO: every writer has closed the terminal
        while data := os.read(master, 1 << 16):
            shown += data
    os.close(master)
    assert child.wait(timeout=60) == 0
    return shown


def test_on_a_terminal_the_command_still_sees_one_and_output_keeps_its_order(tmp_path):
    line = NOISE[0].encode() + b"\n"
    code = f"""
        import os, sys
        from xtts_audio.startup import quiet_tensorflow
        quiet_tensorflow()
        print(os.isatty(1), os.isatty(2), os.get_terminal_size(2).columns, flush=True)
        os.write(2, {line!r})
        sys.stderr.write("\\r100%|##########| 3/3\\n")
        sys.stderr.flush()
        print("summary", flush=True)
    """
    shown = _run_on_terminal(code, tmp_path, columns=93)
    # The terminal turns "\n" into "\r\n" once (the command's pty leaves it alone).
    assert shown == b"True True 93\r\n\r100%|##########| 3/3\r\nsummary\r\n"


def _write_package(root, name: str) -> None:
    package = root / name
    package.mkdir()
    init = """
        from xtts_audio.startup import lazy_exports

        __all__ = ["alpha", "same"]
        __getattr__, __dir__ = lazy_exports(__name__, {"alpha": "first", "same": "same"})
    """
    (package / "__init__.py").write_text(textwrap.dedent(init))
    (package / "first.py").write_text("alpha = 1\n")
    (package / "same.py").write_text("def same():\n    return 'the function'\n")


@pytest.fixture
def lazy_package(tmp_path, monkeypatch):
    _write_package(tmp_path, "lazy_demo_package")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield importlib.import_module("lazy_demo_package")
    for name in [n for n in sys.modules if n.partition(".")[0] == "lazy_demo_package"]:
        del sys.modules[name]


def test_lazy_exports_import_a_submodule_on_first_access(lazy_package):
    assert "lazy_demo_package.first" not in sys.modules
    assert lazy_package.alpha == 1
    assert "lazy_demo_package.first" in sys.modules
    from lazy_demo_package import alpha

    assert alpha == 1


def test_lazy_exports_dir_lists_all_and_unknown_names_raise(lazy_package):
    assert {"alpha", "same"} <= set(dir(lazy_package))
    with pytest.raises(AttributeError, match="module 'lazy_demo_package' has no attribute 'beta'"):
        _ = lazy_package.beta


def test_a_name_wins_over_the_submodule_it_shares(lazy_package):
    importlib.import_module("lazy_demo_package.same")  # the import system binds the module
    assert lazy_package.same() == "the function"


def test_xtts_audio_names_resolve_and_resample_stays_a_function():
    importlib.import_module("xtts_audio.resample")
    assert callable(xtts_audio.resample)
    assert callable(xtts_audio.griffin_lim)
    assert set(xtts_audio.__all__) <= set(dir(xtts_audio))


def test_process_age_is_seconds_since_start():
    age = startup.process_age_seconds()
    if sys.platform != "linux":
        assert age is None
        return
    assert 0 <= age < time.monotonic()  # this process started after the host booted
    child = subprocess.run(
        [sys.executable, "-c", "from xtts_audio.startup import process_age_seconds as a; "
         "import time; time.sleep(0.5); print(a())"],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    assert 0.4 <= float(child.stdout) < 30
