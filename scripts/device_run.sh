#!/usr/bin/env bash
# The course's GPU checks in one command, for a GPU lent for a few minutes (docs/gpu-check.md,
# "A GPU lent for minutes"). From the repository root, with the wheels in wheels/:
#
#     OUT=/some/folder BUDGET_S=390 bash scripts/device_run.sh
#
# In this order, each step started only while the budget allows, everything written under $OUT
# as it happens (a run cut short still leaves its logs):
#   1. no GPU (a CPU-only build, or no driver): says so in $OUT/summary.txt and exits 0 at once;
#   2. the environment beside the machine's PyTorch (scripts/gpu_check.py env, from wheels/);
#   3. pytest -m gpu on the test files that mark GPU tests            -> $OUT/pytest-gpu.log
#   4. benchmarks/overhead.py                                          -> $OUT/overhead.log
#   5. the lessons on CUDA, lesson 08 first, then 00-07 in order (LESSONS), each skipped if its
#      published run is fresh, none started that its last run's time would carry past the budget
#                                                  -> $OUT/lessons.log, $OUT/reference-runs/
#   6. benchmarks/gpu_summary.py, only if 120 s are left               -> $OUT/gpu-summary.log
# $OUT/summary.txt: one line per step (exit status, seconds) and the lessons left; everything else
# in $OUT/results.tar.gz (unpack it: tar xzf results.tar.gz). Exit status:
# 0 when every step that ran passed (or there is no GPU), else 1.
# AGAIN="04" runs those lessons even if their published run is fresh (their code cells match,
# but the package they call changed); AGAIN=all runs every lesson. WITHOUT_GPU=1 runs every step even without a GPU (each GPU part then says "no GPU"), in the
# environment GPU_CHECK_ENV (default .gpu-check-env; one holding .ready is kept): a rehearsal.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/device-out}
BUDGET_S=${BUDGET_S:-390}
PY=${GPU_PYTHON:-python3}
LESSONS=${LESSONS:-"08 00 01 02 03 04 05 06 07"}
ENV_DIR=${GPU_CHECK_ENV:-.gpu-check-env}
mkdir -p "$OUT"
SUMMARY="$OUT/summary.txt"
# The device tool brings back only a few files from $OUT (the H200 run of 27 November lost five
# of nine reference runs to that count): on exit, whatever ran or was cut short, everything but
# summary.txt is packed into one archive, $OUT/results.tar.gz.
pack() {
    (cd "$OUT" && find . -mindepth 1 -maxdepth 1 ! -name summary.txt ! -name results.tar.gz \
        -print0 | tar czf results.tar.gz --null -T - --remove-files) 2>/dev/null || true
}
trap pack EXIT
: > "$SUMMARY"
failed=0
skipped=""
note() { echo "device_run [$SECONDS s] $*" | tee -a "$SUMMARY"; }
left() { echo $((BUDGET_S - SECONDS)); }
step() {  # step NAME LOG LIMIT_S COMMAND...: run with a time limit, log its status
    local name=$1 log=$2 limit=$3 rc
    shift 3
    if [ "$limit" -lt 20 ]; then note "$name: not started, $limit s left"; skipped+=" $name"
        return 1; fi
    timeout --kill-after=10 "$limit" "$@" > "$log" 2>&1
    rc=$?
    [ "$rc" -eq 0 ] || failed=1
    note "$name: exit $rc$([ "$rc" -eq 124 ] && echo " (stopped after $limit s)") -> $(basename "$log")"
    tail -n 3 "$log" | sed 's/^/    /' | tee -a "$SUMMARY"
}

note "budget $BUDGET_S s; python $($PY -c 'import sys; print(sys.version.split()[0])'); \
checkout $(git rev-parse --short HEAD 2>/dev/null || echo "without git")"
gpu=$($PY -c 'import torch
if torch.cuda.is_available(): print(torch.cuda.get_device_name(0), torch.__version__)
else: print("no GPU:", "CPU-only build" if torch.version.cuda is None else "no driver/device")' 2>&1)
note "machine: $gpu"
case "$gpu" in "no GPU"* | *Error*)
    [ "${WITHOUT_GPU:-0}" = 1 ] || { note "no GPU: nothing to run"; exit 0; } ;; esac
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1

step env "$OUT/env.log" "$(left)" $PY scripts/gpu_check.py env --machine-python "$PY" \
    --env "$ENV_DIR" --reuse
ENV_PY=$ENV_DIR/bin/python
[ -x "$ENV_PY" ] || { note "no environment: see env.log"; exit 1; }

tests=$(grep -rl --include="test_*.py" "pytest.mark.gpu" tests | sort)
step "pytest -m gpu" "$OUT/pytest-gpu.log" $(($(left) < 150 ? $(left) : 150)) \
    "$ENV_PY" -m pytest -m gpu -p no:cacheprovider -rA --junitxml="$OUT/pytest-gpu.xml" $tests
step overhead.py "$OUT/overhead.log" $(($(left) < 120 ? $(left) : 120)) \
    "$ENV_PY" benchmarks/overhead.py

# The lessons: gpu_check.py itself starts none it expects to overrun --deadline-s.
deadline=$(($(left) - 15))
# shellcheck disable=SC2086
step lessons "$OUT/lessons.log" "$(($(left) - 5))" $PY scripts/gpu_check.py check \
    --reuse-env --env "$ENV_DIR" --machine-python "$PY" --skip tests --skip benchmarks \
    --lessons $LESSONS --deadline-s "$deadline" --out "$OUT/reference-runs" \
    ${AGAIN:+--again} $([ "${AGAIN:-all}" = all ] || echo "$AGAIN") &&
    grep -E "^  [0-9]{2}_|^notebooks on CUDA" "$OUT/lessons.log" | tee -a "$SUMMARY"

if [ "$(left)" -ge 120 ]; then
    step gpu_summary.py "$OUT/gpu-summary.log" "$(left)" "$ENV_PY" benchmarks/gpu_summary.py
fi
[ -z "$skipped" ] || note "not run for lack of time:$skipped (lessons: $LESSONS)"
note "done: $([ $failed -eq 0 ] && echo "every step that ran passed" || echo "something FAILED")"
exit $failed
