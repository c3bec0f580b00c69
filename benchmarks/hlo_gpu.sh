#!/usr/bin/env bash
# Issue 51's GPU figures as one prepared command (docs/bench/hlo.md, "On a GPU").
#
#   benchmarks/hlo_gpu.sh export [DIR]   here, with xtts-bench: the programs into DIR
#                                        (default hlo-gpu/, git-ignored; 19 min on one core here,
#                                        17 GB at its peak, 39 MB written)
#   benchmarks/hlo_gpu.sh run [DIR]      on the GPU machine (Python with jax, no xtts):
#                                        every program timed, one JSON line each
#
# `export` writes one folder per group, in the order `run` measures them, so that the
# figures that matter most come back first if the machine's time runs out:
#   1-3 small, base, xtts: LJSpeech's longest bucket, gpu-*.yaml's batching (train step)
#   4-5 small, base: the eval step and the decoding (8 rows) of that bucket
#   6-7 small, base: the train step of every other bucket (the prediction's mix)
#   8-9 base, xtts: the longest bucket at 2x and 4x the frames per batch, compiled only
#       (XLA's memory figures: the largest batch that fits 80 GB)
# `run` gives each program at most PROGRAM_S seconds and stops starting new ones after
# DEADLINE_S; each result is one line of `$OUT/results.jsonl` (`$OUT` is the device
# tool's output folder; DIR/results.jsonl without one), the device's name first.
set -euo pipefail
cd "$(dirname "$0")/.."
MODE=${1:?usage: benchmarks/hlo_gpu.sh export|run [DIR]}
DIR=${2:-hlo-gpu}
PROGRAM_S=${PROGRAM_S:-240}
DEADLINE_S=${DEADLINE_S:-480}
STEPS=${STEPS:-20}
WARMUP=${WARMUP:-3}
PEAK_TFLOPS=${PEAK_TFLOPS:-989}  # H100/H200 SXM, dense float16/bfloat16 tensor cores

LJ=(--ljspeech --set model.vocab_size=64)  # the phoneme vocabulary's size, about
GROUPS_IN_ORDER=(1-small 2-base 3-xtts 4-small-decode 5-base-decode 6-small-buckets
                 7-base-buckets 8-base-fit 9-xtts-fit)

export_group() {  # $1: the group's folder name
  local out="$DIR/$1" small=(--config recipes/gpu-small.yaml)
  local base=(--config recipes/gpu-base.yaml) xtts=(--config recipes/gpu-base.yaml
              --set model.preset=xtts)
  case $1 in
    1-small) set -- "${small[@]}" --bucket -1 --program train ;;
    2-base) set -- "${base[@]}" --bucket -1 --program train ;;
    3-xtts) set -- "${xtts[@]}" --bucket -1 --program train ;;
    4-small-decode) set -- "${small[@]}" --bucket -1 --program eval --program decode ;;
    5-base-decode) set -- "${base[@]}" --bucket -1 --program eval --program decode ;;
    # gpu-*.yaml plan 8 buckets on LJSpeech's lengths (num_buckets: 8): 0-6 below the longest
    6-small-buckets) set -- "${small[@]}" --bucket 0 --bucket 1 --bucket 2 --bucket 3 \
                       --bucket 4 --bucket 5 --bucket 6 --program train ;;
    7-base-buckets) set -- "${base[@]}" --bucket 0 --bucket 1 --bucket 2 --bucket 3 \
                      --bucket 4 --bucket 5 --bucket 6 --program train ;;
    8-base-fit) for budget in 65536 131072; do
                  xtts-bench hlo export "${LJ[@]}" "${base[@]}" --bucket -1 --program train \
                    --set data.frame_budget=$budget --out "$out/$budget"
                done; return ;;
    9-xtts-fit) for budget in 65536 131072; do
                  xtts-bench hlo export "${LJ[@]}" "${xtts[@]}" --bucket -1 --program train \
                    --set data.frame_budget=$budget --out "$out/$budget"
                done; return ;;
  esac
  xtts-bench hlo export "${LJ[@]}" "$@" --out "$out"
}

run_folder() {  # $1: an export folder; appends one JSON line per program
  local folder=$1 steps=$STEPS name
  [[ $folder == *-fit/* ]] && steps=0  # compiled only: memory, no run
  for name in $(python3 -c "import json, sys; print(' '.join(p['name'] for p in
      json.load(open(sys.argv[1] + '/manifest.json'))['programs']))" "$folder"); do
    if (( SECONDS > DEADLINE_S )); then
      echo "{\"folder\": \"$folder\", \"name\": \"$name\", \"error\": \"past the deadline\"}"
      continue
    fi
    timeout "$PROGRAM_S" python3 "$folder/runner.py" "$folder" --program "$name" \
      --steps "$steps" --warmup "$WARMUP" --peak-tflops "$PEAK_TFLOPS" --json \
      | python3 -c "import json, sys; d = json.load(sys.stdin); [print(json.dumps({'folder':
          sys.argv[1], 'device': d['device'], **p})) for p in d['programs']]" "$folder" \
      || echo "{\"folder\": \"$folder\", \"name\": \"$name\", \"error\": \"failed or past ${PROGRAM_S} s\"}"
  done
}

case $MODE in
  export)
    for group in "${GROUPS_IN_ORDER[@]}"; do
      [[ -f $DIR/$group/manifest.json || -d $DIR/$group/65536 ]] && continue  # done before
      echo "== $group ($(date +%T))"; export_group "$group"
    done
    du -sh "$DIR" ;;
  run)
    results=${OUT:-$DIR}/results.jsonl
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader \
      > "${OUT:-$DIR}/device.txt" 2>&1 || true
    python3 -c "import jax; print(jax.__version__, jax.devices())" >> "${OUT:-$DIR}/device.txt"
    for group in "${GROUPS_IN_ORDER[@]}"; do
      for folder in "$DIR/$group" "$DIR/$group"/*/; do
        folder=${folder%/}
        [[ -f $folder/manifest.json ]] && run_folder "$folder" >> "$results"
      done
    done
    cat "$results" ;;
  *) echo "usage: benchmarks/hlo_gpu.sh export|run [DIR]" >&2; exit 2 ;;
esac
