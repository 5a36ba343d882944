#!/usr/bin/env bash
# Configures and builds the hyperpipe binary into build/ (ccache, -j2 by
# default); TARGET=all (what scripts/test.sh asks for) builds the tests too.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${JOBS:-2}
# ccache hits across clones in other folders (CI builds a fresh clone).
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-true}
cmake -S . -B build -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-Release} ${CMAKE_ARGS:-} >/dev/null
cmake --build build -j "$jobs" --target "${TARGET:-hyperpipe}"
