#!/usr/bin/env bash
# The one script to run on the GPU machine, from the repository root, with $OUT set:
#
#     bash benchmarks/device_run.sh [BUDGET_S] [extra benchmarks.run arguments...]
#     SUITE=models bash benchmarks/device_run.sh [BUDGET_S] [extra arguments...]
#     SUITE=breadth bash benchmarks/device_run.sh [BUDGET_S] [extra arguments...]
#     SUITE=distributed bash benchmarks/device_run.sh [BUDGET_S] [--world-size N ...]
#
# SUITE (default "workloads") picks the suite: `workloads` is the workload suite
# (steps 1-5 below); `models` (python -m benchmarks.models) and `breadth` (python -m
# benchmarks.breadth) write into $OUT/results/<gpu>/<suite>/ and are measured over
# several runs of this same command: each run resumes from the committed
# benchmarks/results/<gpu>/<suite>/results.json when there is one (what it measured is
# kept, only the pending rows and systems run), starts nothing new after its budget, and
# writes the merged record. Copy $OUT/results/<gpu>/<suite>/ over
# benchmarks/results/<gpu>/<suite>/ and rerun until the run prints "0 (instance, system)
# pair(s) still pending". These two suites skip the GPU tests unless SKIP_GPU_TESTS=0.
# `distributed` (python -m benchmarks.distributed, on every GPU of the machine with
# --world-size) merges into a copy of the committed benchmarks/results/<gpu>/distributed/
# record, writes after every cell and stops its ranks when the budget is spent.
#
# BUDGET_S (default 500) is the wall-clock budget of the whole script, install included;
# the default finishes under 9 minutes. It:
#   1. installs xDSL and its two dependencies from the carried .whl/ folder, then
#      fuseopt itself (editable, no build isolation: nothing can be fetched there);
#   2. prints the versions (GPU, driver, Python, torch, Triton, xDSL, fuseopt commit);
#   3. runs the GPU pytest files that exist (tests/test_*gpu*.py), at most a third of
#      the budget, output in $OUT/gpu_tests.log (SKIP_GPU_TESTS=1 skips them);
#   4. runs `python -m benchmarks.run` for every system (eager, torch.compile default
#      and max-autotune-no-cudagraphs, fuseopt per available backend and its autotuned
#      mode) into $OUT/results/<gpu>/, with time budgets so it ends in time: after the
#      budget the compiled systems of the remaining instances are recorded as
#      "skipped (time budget ... spent)" and only eager runs; max-autotune and the
#      fuseopt autotuned mode get a shorter budget (GEMM autotuning: 25-50 s a shape, H100).
#      the baseline rows run first, then memory-bound, then GEMM work;
#   5. when results for this GPU are committed in benchmarks/results/<gpu>/, also
#      writes them merged with this run into $OUT/results/<gpu>-merged/ (a later
#      instance replaces an earlier one unless it timed fewer systems).
# Everything printed is also in $OUT/run.log. Set FUSEOPT_GIT_COMMIT to record the
# commit (the device copy of the tree has no .git). COMPILED_PCT / AUTOTUNE_PCT (75 / 55)
# set the two budgets as percentages of the benchmark's share; SYSTEM_TIMEOUT_S (150)
# stops one system on one instance (a hung compile never eats the run); SKIP_INSTALL=1 and
# SKIP_GPU_TESTS=1 skip steps 1 and 3.
set -u -o pipefail

BUDGET_S=${1:-500}
shift || true
SUITE=${SUITE:-workloads}
case $SUITE in
    workloads) ;;
    models | breadth | distributed) SKIP_GPU_TESTS=${SKIP_GPU_TESTS:-1} ;;
    *) echo "error: SUITE must be workloads, models, breadth or distributed, not '$SUITE'"
       exit 2 ;;
esac
START=$(date +%s)
: "${OUT:?set OUT to the output folder}"
mkdir -p "$OUT/results"
exec > >(tee -a "$OUT/run.log") 2>&1
export PYTHONUNBUFFERED=1

left() { echo $((BUDGET_S - ($(date +%s) - START))); }

if [[ ${SKIP_INSTALL:-0} == 1 ]]; then
    echo "== install: skipped (SKIP_INSTALL=1; fuseopt and xDSL already installed)"
else
    echo "== install ($(date -u +%H:%M:%S) UTC, budget ${BUDGET_S}s)"
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl \
        || { echo "error: cannot install the carried wheels (.whl/)"; exit 1; }
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
    python3 -m pip install -q --no-deps --no-build-isolation -e . \
        || { echo "error: cannot install fuseopt"; exit 1; }
fi

echo "== versions"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv \
    || echo "nvidia-smi failed"
python3 - <<'EOF'
import platform, torch, triton, xdsl, fuseopt
from fuseopt.api import available_backends
print("python", platform.python_version(), "| torch", torch.__version__,
      "| cuda", torch.version.cuda, "| triton", triton.__version__)
print("xdsl", getattr(xdsl, "__version__", "?"), "| fuseopt backends:", available_backends())
print("device:", torch.cuda.get_device_name() if torch.cuda.is_available() else "NO CUDA")
EOF
echo "fuseopt commit: ${FUSEOPT_GIT_COMMIT:-unknown (set FUSEOPT_GIT_COMMIT)}"

shopt -s nullglob
GPU_TESTS=(tests/test_*gpu*.py)
if [[ ${SKIP_GPU_TESTS:-0} == 1 ]]; then
    echo "== GPU tests: skipped (SKIP_GPU_TESTS=1)"
elif ((${#GPU_TESTS[@]})); then
    TEST_S=$(($(left) / 3))
    echo "== GPU tests (${GPU_TESTS[*]}), at most ${TEST_S}s"
    timeout -k 10 "$TEST_S" python3 -m pytest -q -rs "${GPU_TESTS[@]}" 2>&1 \
        | tee "$OUT/gpu_tests.log"
    echo "GPU tests exit status: ${PIPESTATUS[0]} (124: cut at ${TEST_S}s)"
else
    echo "== GPU tests: none (no tests/test_*gpu*.py)"
fi

SLUG=$(python3 -c "
import torch
from benchmarks.machine import describe_environment
print(describe_environment(torch.device('cuda')).device_slug)")
[[ -n $SLUG ]] || { echo "error: no CUDA device: the benchmarks need a GPU"; exit 1; }
DEST="$OUT/results/$SLUG"
BENCH_S=$(($(left) - 25))
if ((BENCH_S < 60)); then
    echo "== benchmarks: not run, only ${BENCH_S}s of the budget left"
    exit 1
fi

if [[ $SUITE == distributed ]]; then
    DEST="$DEST/distributed"
    COMMITTED="benchmarks/results/$SLUG/distributed"
    mkdir -p "$DEST"
    MERGING=""
    if [[ -f "$COMMITTED/results.json" ]]; then
        cp "$COMMITTED/results.json" "$DEST/"
        MERGING=" (merging into the committed record)"
    fi
    echo "== distributed into $DEST: ${BENCH_S}s in all$MERGING"
    timeout -k 10 "$BENCH_S" python3 -m benchmarks.distributed --out "$DEST" \
        --timeout-s $((BENCH_S - 10)) "$@"
    echo "benchmarks.distributed exit status $? (124: cut at ${BENCH_S}s)"
    echo "== done in $(($(date +%s) - START))s; copy $DEST/ over $COMMITTED/"
    exit 0
fi
if [[ $SUITE != workloads ]]; then
    DEST="$DEST/$SUITE"
    COMMITTED="benchmarks/results/$SLUG/$SUITE/results.json"
    RESUME=()
    [[ -f "$COMMITTED" ]] && RESUME=(--resume "$COMMITTED")
    TIMEOUT_S=${SYSTEM_TIMEOUT_S:-150}
    # a system started at the budget may run for TIMEOUT_S more; leave it that and 30 s
    START_S=$((BENCH_S - TIMEOUT_S - 30))
    ((START_S > 0)) || START_S=0
    echo "== $SUITE into $DEST: ${BENCH_S}s in all; rows and systems start until" \
        "${START_S}s (each stopped after ${TIMEOUT_S}s)${RESUME:+; resuming from $COMMITTED}"
    timeout -k 10 "$BENCH_S" python3 -m "benchmarks.$SUITE" --out "$DEST" \
        --budget-s "$START_S" --system-timeout-s "$TIMEOUT_S" "${RESUME[@]}" "$@"
    STATUS=$?
    if ((STATUS != 0)); then
        echo "benchmarks.$SUITE exit status $STATUS (124: cut at ${BENCH_S}s); re-rendering"
        [[ -f "$DEST/results.json" ]] && python3 -m benchmarks.report "$DEST/results.json"
    fi
    echo "== done in $(($(date +%s) - START))s; copy $DEST/ over benchmarks/results/$SLUG/$SUITE/" \
        "and rerun this command while pairs are pending"
    exit 0
fi
COMPILED_S=$((BENCH_S * ${COMPILED_PCT:-75} / 100))
AUTOTUNE_S=$((BENCH_S * ${AUTOTUNE_PCT:-55} / 100))
echo "== benchmarks into $DEST: ${BENCH_S}s in all; compiled systems start until" \
    "${COMPILED_S}s, autotuning ones until ${AUTOTUNE_S}s; later instances: eager only"
timeout -k 10 "$BENCH_S" python3 -m benchmarks.run --out "$DEST" \
    --budget-s "$COMPILED_S" --autotune-budget-s "$AUTOTUNE_S" \
    --system-timeout-s "${SYSTEM_TIMEOUT_S:-150}" "$@"
STATUS=$?
if ((STATUS != 0)); then
    echo "benchmarks.run exit status $STATUS (124: cut at ${BENCH_S}s); re-rendering what it wrote"
    [[ -f "$DEST/results.json" ]] && python3 -m benchmarks.report "$DEST/results.json"
fi

COMMITTED="benchmarks/results/$SLUG/results.json"
if [[ -f "$COMMITTED" && -f "$DEST/results.json" ]]; then
    echo "== merged with the committed $COMMITTED into $DEST-merged"
    python3 -m benchmarks.report "$COMMITTED" "$DEST/results.json" --out "$DEST-merged"
fi
echo "== done in $(($(date +%s) - START))s"
