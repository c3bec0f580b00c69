"""Run exported XLA programs (`xtts-bench hlo export`) under jaxlib's XLA, without TensorFlow.

A standalone file: it imports only NumPy and jax/jaxlib, so it travels with the protos to a
machine that has no TensorFlow (and no xtts) and runs there as

    python runner.py DIR [--steps N] [--warmup N] [--peak-tflops T] [--json]
    python runner.py DIR --check OUT   # one run of each program from its exported inputs

DIR holds `manifest.json` and one HloModuleProto per program. For each program the runner
converts the proto to StableHLO (`hlo_to_stablehlo`), compiles it for one device, builds
its parameters from the manifest's `fill` rules (or loads them: check mode), runs it step
after step feeding each output the header aliases to a parameter back into it (updated
weights, optimizer slots, seed states, step counter), and reports per program: compile
seconds, step ms (median and p90 after warm-up, each step waited for; for a decoding, the
frames its loop ran and the time per frame), XLA's own memory statistics and FLOP count,
and the achieved TFLOP/s (and MFU against `--peak-tflops`). `--steps 0` compiles only
(FLOPs and memory without a run); a program that fails (out of device memory) reports its
error and the next one runs.

Figures are "this program under this jaxlib's XLA on this device": the HLO was lowered by
TensorFlow for the exporting machine, and a newer XLA compiles it differently from
TensorFlow's own.

The manifest is written by `xtts_bench.hlo.export` (its `FORMAT`); this file is its only
reader, and `xtts-bench`'s tests check the two against each other.
"""

from __future__ import annotations

import argparse
import gzip
import json
import pathlib
import statistics
import sys
import time

import numpy as np

FORMAT = "xtts-hlo/1"


def _jax():
    """jax with 64-bit types on (the step counter and seed states are int64)."""
    import jax

    jax.config.update("jax_enable_x64", True)
    return jax


# -- inputs ------------------------------------------------------------------------------


def synthetic_inputs(parameters: list[dict], seed: int = 0) -> list[np.ndarray]:
    """A value per parameter from its `fill` rule, in parameter order.

    Rules (`fill["kind"]`): `values` (inline list), `normal` (mean, std), `uniform` (low,
    high), `integers` (low, high exclusive), `lengths` (ints in [high // 2, high], row 0 at
    `high`), `mask` (1.0 before the length in parameter `of`), `last` (1.0 at the last
    position within it), `zeros`, `ones`, `constant` (value).
    """
    rng = np.random.default_rng(seed)
    values: dict[str, np.ndarray] = {}
    ordered = sorted(parameters, key=lambda p: p["fill"]["kind"] in ("mask", "last"))
    for parameter in ordered:  # masks after the lengths they read
        values[parameter["name"]] = _fill(parameter, rng, values)
    return [values[p["name"]] for p in parameters]


def _fill(parameter: dict, rng: np.random.Generator, done: dict) -> np.ndarray:
    shape, dtype, fill = tuple(parameter["shape"]), parameter["dtype"], parameter["fill"]
    kind = fill["kind"]
    if kind == "values":
        return np.asarray(fill["values"], dtype).reshape(shape)
    if kind == "normal":
        return rng.normal(fill["mean"], fill["std"], shape).astype(dtype)
    if kind == "uniform":
        return rng.uniform(fill["low"], fill["high"], shape).astype(dtype)
    if kind == "integers":
        return rng.integers(fill["low"], fill["high"], shape).astype(dtype)
    if kind == "lengths":
        high = fill["high"]
        lengths = rng.integers(max(1, high // 2), high + 1, shape)
        lengths.reshape(-1)[:1] = high  # the padded length is used by a row
        return lengths.astype(dtype)
    if kind in ("mask", "last"):
        lengths = done[fill["of"]].reshape(-1, 1)
        positions = np.arange(shape[-1])[None]
        hit = positions < lengths if kind == "mask" else positions == lengths - 1
        return hit.astype(dtype).reshape(shape)
    if kind == "zeros":
        return np.zeros(shape, dtype)
    if kind == "ones":
        return np.ones(shape, dtype)
    if kind == "constant":
        return np.full(shape, fill["value"], dtype)
    raise ValueError(f"parameter {parameter['name']}: unknown fill kind {kind!r}")


def load_inputs(path: pathlib.Path, parameters: list[dict]) -> list[np.ndarray]:
    """The parameters from an .npz keyed `p<index>`, checked against the manifest."""
    with np.load(path) as stored:
        values = [stored[f"p{p['index']}"] for p in parameters]
    for parameter, value in zip(parameters, values, strict=True):
        expected = (tuple(parameter["shape"]), parameter["dtype"])
        if (value.shape, str(value.dtype)) != expected:
            raise ValueError(
                f"{path}: parameter {parameter['index']} ({parameter['name']}): "
                f"expected {expected}, received {(value.shape, str(value.dtype))}"
            )
    return values


# -- compiling and running ---------------------------------------------------------------


class Program:
    """One exported program compiled for one device.

    Args:
        folder: the export folder.
        entry: its manifest entry (`file`, `parameters`, `outputs`, `aliases`).
        device: a jax device; default the first.

    Attributes:
        compile_seconds: StableHLO conversion and XLA compile.
        executable: the loaded executable.
    """

    def __init__(self, folder: pathlib.Path, entry: dict, device=None) -> None:
        jax = _jax()
        from jax._src.lib import xla_client
        from jax.extend import backend

        self.entry, self.jax = entry, jax
        self.device = device or jax.devices()[0]
        proto = gzip.decompress((folder / entry["file"]).read_bytes())
        started = time.perf_counter()
        module = xla_client._xla.mlir.hlo_to_stablehlo(proto)
        client = backend.get_backend(self.device.platform)
        options = backend.get_compile_options(1, 1)
        self.executable = client.compile_and_load(module, [self.device], options)
        self.compile_seconds = time.perf_counter() - started
        # output index -> parameter index it updates
        self.feedback = {a["output"]: a["parameter"] for a in entry["aliases"]}

    def put(self, values: list[np.ndarray]) -> list:
        """The parameters on the device."""
        return [self.jax.device_put(v, self.device) for v in values]

    def step(self, arguments: list) -> list:
        """One run: the outputs (device arrays), in output order. Aliased arguments may be
        donated: use the outputs from here on (`advance`)."""
        results = self.executable.execute_sharded(arguments)
        return [shards[0] for shards in results.disassemble_into_single_device_arrays()]

    def advance(self, arguments: list, outputs: list) -> list:
        """The next step's arguments: each aliased output in place of its parameter."""
        arguments = list(arguments)
        for output, parameter in self.feedback.items():
            arguments[parameter] = outputs[output]
        return arguments

    def flops(self) -> float | None:
        """XLA's own FLOP count of the compiled program (its cost analysis), if any."""
        try:
            analysis = self.executable.cost_analysis()
        except Exception:  # not every backend or version offers it
            return None
        if isinstance(analysis, list | tuple):
            analysis = analysis[0] if analysis else {}
        value = analysis.get("flops") if isinstance(analysis, dict) else None
        return float(value) if value is not None and value > 0 else None

    def memory(self) -> dict:
        """XLA's memory statistics of the compiled program and the device's, in bytes."""
        found: dict = {}
        try:
            stats = self.executable.get_compiled_memory_stats()
            for name in ("argument_size_in_bytes", "output_size_in_bytes",
                         "alias_size_in_bytes", "temp_size_in_bytes",
                         "generated_code_size_in_bytes"):  # fmt: skip
                found[name.removesuffix("_in_bytes")] = int(getattr(stats, name))
        except Exception:  # not offered by every backend
            found = {}
        device = self.device.memory_stats() if hasattr(self.device, "memory_stats") else None
        if device:
            found["device_peak"] = int(device.get("peak_bytes_in_use", 0))
            found["device_limit"] = int(device.get("bytes_limit", 0))
        return found


def _block(outputs: list) -> None:
    for output in outputs:
        output.block_until_ready()


def time_program(program: Program, values: list[np.ndarray], *, steps: int,
                 warmup: int) -> dict:  # fmt: skip
    """Run `warmup` then `steps` steps, each waited for; returns the figures."""
    arguments = program.put(values)
    seconds = []
    for index in range(warmup + steps):
        started = time.perf_counter()
        outputs = program.step(arguments)
        _block(outputs)
        if index >= warmup:
            seconds.append(time.perf_counter() - started)
        arguments = program.advance(arguments, outputs)
    ms = sorted(1e3 * s for s in seconds)
    names = [o["name"] for o in program.entry["outputs"]]
    loss = float(np.asarray(outputs[names.index("loss")])) if "loss" in names else None
    found = {
        "step_ms_median": statistics.median(ms),
        "step_ms_p90": ms[min(len(ms) - 1, round(0.9 * (len(ms) - 1)))],
        "steps": steps,
        "last_loss": loss,  # synthetic inputs: a sanity check (finite), not a figure
    }
    if "lengths" in names:  # a decoding: the loop ran until its longest row stopped
        found["frames_run"] = int(np.asarray(outputs[names.index("lengths")]).max())
        found["ms_per_frame"] = found["step_ms_median"] / found["frames_run"]
    return found


def measure(folder: pathlib.Path, entry: dict, *, steps: int, warmup: int,
            peak_tflops: float | None, seed: int = 0) -> dict:  # fmt: skip
    """Compile one program, run it on synthetic inputs (not with `steps` 0), and report its
    figures; a program that fails (one too big for the device) reports its error."""
    result = {"name": entry["name"], "kind": entry.get("kind"), "shape": entry.get("shape")}
    try:
        program = Program(folder, entry)
        result["compile_s"] = program.compile_seconds
        result["flops"] = program.flops()
        result["memory_bytes"] = program.memory()
        if steps > 0:
            result.update(time_program(program, synthetic_inputs(entry["parameters"], seed),
                                       steps=steps, warmup=warmup))  # fmt: skip
            result["memory_bytes"] = program.memory()  # the device's peak, after running
    except Exception as error:  # out of device memory, above all: the next program runs
        result["error"] = f"{type(error).__name__}: {str(error)[:500]}"
        return result
    if result["flops"] is not None and steps > 0:
        result["tflops_per_s"] = result["flops"] / (result["step_ms_median"] * 1e-3) / 1e12
        if peak_tflops:
            result["mfu"] = result["tflops_per_s"] / peak_tflops
    return result


def check(folder: pathlib.Path, entry: dict, out: pathlib.Path) -> pathlib.Path:
    """One run of the program on its exported parameters (`entry["inputs"]`); its outputs
    into `out/<name>.outputs.npz` (`o<i>`), whose path it returns."""
    program = Program(folder, entry)
    results = program.step(program.put(load_inputs(folder / entry["inputs"],
                                                   entry["parameters"])))  # fmt: skip
    path = out / f"{entry['name']}.outputs.npz"
    np.savez(path, **{f"o{i}": np.asarray(value) for i, value in enumerate(results)})
    return path


# -- the command -------------------------------------------------------------------------


def read_manifest(folder: pathlib.Path) -> dict:
    manifest = json.loads((folder / "manifest.json").read_text())
    if manifest.get("format") != FORMAT:
        raise SystemExit(f"{folder}/manifest.json: expected format {FORMAT}, "
                         f"received {manifest.get('format')!r}")  # fmt: skip
    return manifest


def _table(results: list[dict], device: str) -> str:
    lines = [f"device: {device}",
             f"{'program':<24}{'compile s':>10}{'median ms':>11}{'p90 ms':>9}"
             f"{'GFLOP':>9}{'TFLOP/s':>9}{'MFU':>7}{'temp MiB':>10}{'ms/frame':>10}"]  # fmt: skip
    for r in results:
        if "error" in r:
            lines.append(f"{r['name']:<24}failed: {r['error'][:120]}")
            continue
        if "step_ms_median" not in r:  # compiled only
            r = {**r, "step_ms_median": float("nan"), "step_ms_p90": float("nan")}
        gflop = f"{r['flops'] / 1e9:>9.2f}" if r["flops"] else f"{'-':>9}"
        tflops = f"{r['tflops_per_s']:>9.3f}" if "tflops_per_s" in r else f"{'-':>9}"
        mfu = f"{r['mfu']:>7.1%}" if "mfu" in r else f"{'-':>7}"
        temp = r["memory_bytes"].get("temp_size")
        temp = f"{temp / 2**20:>10.1f}" if temp is not None else f"{'-':>10}"
        frame = f"{r['ms_per_frame']:>10.3f}" if "ms_per_frame" in r else f"{'-':>10}"
        lines.append(f"{r['name']:<24}{r['compile_s']:>10.1f}{r['step_ms_median']:>11.2f}"
                     f"{r['step_ms_p90']:>9.2f}{gflop}{tflops}{mfu}{temp}{frame}")  # fmt: skip
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("folder", type=pathlib.Path, help="an `xtts-bench hlo export` folder")
    p.add_argument("--program", action="append", default=[],
                   help="run only this program (repeatable; default: all)")  # fmt: skip
    p.add_argument("--steps", type=int, default=20,
                   help="timed steps (default: 20); 0: compile only (FLOPs, memory)")  # fmt: skip
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first (default: 3)")
    p.add_argument("--peak-tflops", type=float, default=None,
                   help="the device's peak TFLOP/s at the programs' precision: MFU")  # fmt: skip
    p.add_argument("--seed", type=int, default=0, help="synthetic inputs' seed")
    p.add_argument("--check", type=pathlib.Path, metavar="OUT",
                   help="check mode: run each program once on its exported inputs (export "
                   "--inputs) and write its outputs to OUT/<program>.outputs.npz")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    manifest = read_manifest(args.folder)
    entries = [e for e in manifest["programs"] if not args.program or e["name"] in args.program]
    if not entries:
        raise SystemExit(f"no program named {args.program} in {args.folder}/manifest.json")
    if args.check is not None:
        missing = [e["name"] for e in entries if "inputs" not in e]
        if missing:
            raise SystemExit(f"check mode: no exported inputs for {', '.join(missing)} "
                             f"(export with --inputs)")  # fmt: skip
        args.check.mkdir(parents=True, exist_ok=True)
        for entry in entries:
            check(args.folder, entry, args.check)
        return 0
    jax = _jax()
    results = [measure(args.folder, e, steps=args.steps, warmup=args.warmup,
                       peak_tflops=args.peak_tflops, seed=args.seed) for e in entries]  # fmt: skip
    device = jax.devices()[0]
    described = f"{device.platform} {device.device_kind}, jax {jax.__version__}"
    if args.json:
        print(json.dumps({"device": described, "jax": jax.__version__, "programs": results},
                         indent=1))  # fmt: skip
    else:
        print(_table(results, described))
    return 0


if __name__ == "__main__":
    sys.exit(main())
