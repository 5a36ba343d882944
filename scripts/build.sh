#!/usr/bin/env bash
# Configures and builds hyperpipe into build/ (ccache, -j2 by default).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${JOBS:-2}
cmake -S . -B build -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} ${CMAKE_ARGS:-} >/dev/null
cmake --build build -j "$jobs"
