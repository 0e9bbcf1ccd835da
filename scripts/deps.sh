#!/usr/bin/env bash
# Installs what sched needs to build, test and benchmark, from Debian bookworm's packages, when it
# is missing. Safe to run again: it does nothing when everything is there.
set -euo pipefail

packages=(
    cmake ninja-build g++ clang-format
    libboost1.81-dev libboost-test1.81-dev # Asio, Heap, Test
    libboost-context1.81-dev               # asio::spawn in test/unit/scheduler_tokens.cpp
    libbenchmark-dev                       # bench/
    libuv1-dev                             # bench/: libuv is a baseline, not a dependency
)

missing=()
for package in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$package")
    fi
done
if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi

echo "deps: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
    sudo="sudo"
fi
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
