#!/usr/bin/env bash
# Quick start, part one: installs what is missing, builds Release and runs the demo.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target sched_example_demo
./build/release/example/sched_example_demo "$@"
