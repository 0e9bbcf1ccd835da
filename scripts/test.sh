#!/usr/bin/env bash
# Quick start, part two: installs what is missing, checks formatting, then builds and runs the
# whole suite with ctest three times: Release (plus a check that every public header compiles on
# its own), ASan+UBSan (a debug build, so the heap's invariant checks run too) and TSan. Any
# failure stops the script with a non-zero exit.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/deps.sh

echo "== format check (clang-format $(clang-format --version | grep -o '[0-9][0-9.]*' | head -1))"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files -z -- '*.hpp' '*.cpp'
else
    find include src test example bench -name '*.[hc]pp' -print0
fi | xargs -0 clang-format --dry-run -Werror

for preset in release asan tsan; do
    echo "== $preset: configure, build, test"
    cmake --preset "$preset" >/dev/null
    cmake --build --preset "$preset"
    if [ "$preset" = release ]; then
        # Every public header compiles on its own.
        cmake --build --preset release --target all_verify_interface_header_sets
    fi
    ctest --preset "$preset"
done
echo "== all suites passed: release, asan, tsan"
