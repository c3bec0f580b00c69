"""`xtts-bench hlo predict`: how busy a device stays, predicted from measured parts.

Two measurements, made apart, meet here:

- the device's step time for each bucket's train program (the runner's JSON: `python
  runner.py DIR --json` on the device), with each bucket's share of an epoch's batches
  (the export's manifest, `batch_share`);
- the input pipeline's CPU cost (`xtts-data doctor --json` on the host: CPU milliseconds
  per sample, real frames per sample, padding efficiency).

A batch of `B` x `F` frames costs the pipeline `cpu_ms_per_sample / frames_per_sample x
B x F x padding_efficiency` CPU-milliseconds (its cost per real frame, times the batch's
real frames), spread over `cores` cores that scale linearly. With a deep enough prefetch
buffer what matters is the totals over the bucket mix, so the device is busy

    busy = sum(share x step_ms) / max(sum(share x step_ms), sum(share x cost_ms) / cores)

and stays >= `target` busy from `ceil(target x sum(share x cost_ms) / sum(share x step_ms))`
cores on. It is a prediction: it leaves out the host-to-device copies, TensorFlow's
runtime overhead per step (dispatch, the retrace guard's lookup), the pipeline's own
startup and any contention between the pipeline's threads and the step's host work, and
it carries the doctor's per-frame cost from the corpus it measured to these buckets.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from xtts_bench.errors import SettingsError

__all__ = ["TARGET", "format_prediction", "predict_busy"]

TARGET = 0.95  # the busy fraction the cores are counted for


def _pipeline_cost(doctor: dict) -> tuple[float, float]:
    """(CPU-ms per real frame, padding efficiency) of the doctor's report."""
    needed = ("cpu_ms_per_sample", "frames_per_sample", "padding_efficiency")
    missing = [key for key in needed if not doctor.get(key)]
    if missing:
        raise SettingsError(f"Expected a doctor report (xtts-data doctor --json) with "
                            f"{', '.join(needed)}, received one without: "
                            f"{', '.join(missing)}")  # fmt: skip
    return doctor["cpu_ms_per_sample"] / doctor["frames_per_sample"], doctor["padding_efficiency"]


def _buckets(manifest: dict, results: dict) -> list[dict]:
    """Each train program measured: its batch, frames, share and step ms."""
    timed = {r["name"]: r for r in results.get("programs", []) if "step_ms_median" in r}
    buckets = []
    for entry in manifest["programs"]:
        if entry["kind"] != "train" or entry["name"] not in timed:
            continue
        if entry.get("batch_share") is None or entry.get("batch_frames") is None:
            raise SettingsError("Expected an export with each bucket's batch_share and "
                                "batch_frames (xtts-bench hlo export of this version), "
                                f"received {entry['name']} without")  # fmt: skip
        batch, frames = entry["batch_frames"]
        buckets.append({"name": entry["name"], "batch": batch, "frames": frames,
                        "share": entry["batch_share"],
                        "step_ms": timed[entry["name"]]["step_ms_median"]})  # fmt: skip
    if not buckets:
        raise SettingsError("Expected the runner's step times of the export's train programs "
                            "(python runner.py DIR --json), received none that match")  # fmt: skip
    return buckets


def predict_busy(
    manifest: dict,
    results: dict,
    doctor: dict,
    *,
    cores: Sequence[int] = (1, 2, 4, 8, 16),
    target: float = TARGET,
) -> dict:
    """The predicted device-busy fraction at each core count, and the cores for `target`.

    Args:
        manifest: the export's `manifest.json` (its train programs' shapes and shares).
        results: the runner's `--json` output on the device (their step times).
        doctor: `xtts-data doctor --json` of the pipeline on the host.
        cores: host cores to predict for.
        target: the busy fraction to count cores for.

    Returns:
        `buckets` (per train program: batch, frames, share, step ms, input CPU-ms, and the
        cores it needs alone for `target`), `busy` {cores: fraction} over the mix,
        `cores_for_target`, `target`, and the measured inputs it used.

    Raises:
        SettingsError: a report lacks what the prediction reads.
    """
    per_frame, efficiency = _pipeline_cost(doctor)
    buckets = _buckets(manifest, results)
    total = sum(b["share"] for b in buckets)  # the measured buckets' shares, renormalised
    for bucket in buckets:
        bucket["share"] /= total
        bucket["input_cpu_ms"] = per_frame * bucket["batch"] * bucket["frames"] * efficiency
        bucket["cores_for_target"] = math.ceil(target * bucket["input_cpu_ms"] / bucket["step_ms"])
    device = sum(b["share"] * b["step_ms"] for b in buckets)
    host = sum(b["share"] * b["input_cpu_ms"] for b in buckets)
    return {
        "buckets": buckets,
        "busy": {int(n): device / max(device, host / n) for n in cores},
        "cores_for_target": math.ceil(target * host / device),
        "target": target,
        "device": results.get("device"),
        "cpu_ms_per_frame": per_frame,
        "padding_efficiency": efficiency,
    }


def format_prediction(prediction: dict) -> str:
    """The prediction as a table per bucket and a line per core count."""
    target = prediction["target"]
    lines = [f"device: {prediction['device']} (step times); input pipeline: "
             f"{prediction['cpu_ms_per_frame'] * 1e3:.2f} CPU-us per real frame, padding "
             f"{prediction['padding_efficiency']:.1%} (doctor)",
             f"{'program':<24}{'share':>7}{'step ms':>10}{'input CPU-ms':>14}"
             f"{f'cores ({target:.0%})':>12}"]  # fmt: skip
    for b in prediction["buckets"]:
        lines.append(f"{b['name']:<24}{b['share']:>7.1%}{b['step_ms']:>10.1f}"
                     f"{b['input_cpu_ms']:>14.1f}{b['cores_for_target']:>12}")  # fmt: skip
    busy = ", ".join(f"{n} cores {f:.0%}" for n, f in prediction["busy"].items())
    lines.append(f"predicted device busy over the mix: {busy}")
    lines.append(f"cores for >= {target:.0%} busy: {prediction['cores_for_target']} "
                 f"(a prediction: host-device copies and TensorFlow's per-step overhead "
                 f"left out)")  # fmt: skip
    return "\n".join(lines)
