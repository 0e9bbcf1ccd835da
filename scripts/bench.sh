#!/usr/bin/env bash
# Builds Release and runs the whole benchmark suite: the workloads W1-W5 of shared/workloads.md,
# sched beside Boost.Asio's steady_timer (and libuv, Boost.Heap where the rows say so) in the same
# run, and the machine's floor for a timed wake-up. Then it rewrites the generated section of
# docs/performance.md (medians, ratios, targets, the machine it ran on) and draws docs/img/*.png
# with gnuplot. A few minutes on 2 cores.
#
#   ./scripts/bench.sh                  # 3 repetitions of every row, medians reported
#   REPETITIONS=5 ./scripts/bench.sh    # more repetitions
#   QUICK=1 ./scripts/bench.sh          # small sizes, one repetition: checks the pipeline only
#                                       # (the report says so; do not quote its figures)
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/deps.sh
# The report and the plots only: python3 reads Google Benchmark's JSON, gnuplot draws.
missing=()
command -v gnuplot >/dev/null || missing+=(gnuplot-nox)
command -v python3 >/dev/null || missing+=(python3)
if [ ${#missing[@]} -ne 0 ]; then
    sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
        "${missing[@]}"
fi

cmake --preset release >/dev/null
cmake --build --preset release --target \
    sched_bench_queue sched_bench_pool sched_asio_bench sched_bench_periodic sched_bench_floor

bin=build/release/bench
out=build/release/bench-results
rm -rf "$out"
mkdir -p "$out" docs/img

repetitions=${REPETITIONS:-3}
if [ -n "${QUICK:-}" ]; then
    repetitions=1
    queue_sizes=(--p=10k,100k --m=200k --n=100k --pop_p=100k)
    pool_sizes=(--p=10k,100k --p2=100k --m=200k --n=100k)
    asio_sizes=(--p=100k --m=200k --n=100k --resets=200k --steady_s=1 --timers=20k --window_ms=500
        --burst_timers=20k --burst_after_ms=200)
    periodic_sizes=(--items=1000 --seconds=1)
    floor_sizes=(--wakeups=2k)
else
    queue_sizes=(--p=10k,100k,1M,10M)
    pool_sizes=(--p=10k,100k,1M,10M --p2=100k)
    asio_sizes=()
    periodic_sizes=()
    floor_sizes=()
fi
# Every repetition goes to the JSON (the report takes the medians itself, and fails on any
# repetition that failed); the console shows the aggregates only.
common=(--benchmark_repetitions="$repetitions" --benchmark_enable_random_interleaving=true
    --benchmark_display_aggregates_only=true --benchmark_out_format=json)

run() { # name, then the executable's arguments
    local name=$1
    shift
    echo "== $name"
    "$@" "${common[@]}" --benchmark_out="$out/$name.json"
}
# The queue's W1 at 10M runs only the data structure's own cost (now_per_push:0).
run queue "$bin/sched_bench_queue" "${queue_sizes[@]}" \
    --benchmark_filter='^(W1_churn/.*now_per_push:0|W2|Pop|steady)'
# Asio's reused-timer row is for reference only; the suite runs the workload's baselines.
run pool "$bin/sched_bench_pool" "${pool_sizes[@]}" --benchmark_filter='-asio_reuse'
run asio "$bin/sched_asio_bench" "${asio_sizes[@]}" --lateness_out="$out"
run periodic "$bin/sched_bench_periodic" "${periodic_sizes[@]}" --lateness_out="$out"
run floor "$bin/sched_bench_floor" "${floor_sizes[@]}" --lateness_out="$out"

python3 scripts/bench_report.py --results "$out" --doc docs/performance.md --img docs/img \
    --repetitions "$repetitions" ${QUICK:+--quick}
