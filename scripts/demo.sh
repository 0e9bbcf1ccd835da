#!/usr/bin/env bash
# Quick start, part one: installs what is missing, builds Release and runs the demo: a TCP server
# with idle deadlines, heartbeats and request deadlines under a load client, all timed by sched
# (example/heartbeat_server/). Flags go to the demo: --connections N, --seconds S, --quiet...
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target sched_example_heartbeat_server
# Each side needs a file descriptor per connection: raise the soft limit as far as allowed.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
exec ./build/release/example/sched_example_heartbeat_server "$@"
