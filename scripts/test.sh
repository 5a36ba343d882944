#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite through CTest.
# Extra arguments go to ctest (e.g. -L unit, -L dist, -R Schedule).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
cd build
ctest --output-on-failure --no-tests=error -j "${JOBS:-2}" --timeout 600 "$@"
