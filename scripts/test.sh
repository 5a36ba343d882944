#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite through CTest.
# Extra arguments go to ctest (e.g. -L unit, -L dist, -R Schedule).
# Fails when any test did not run: GoogleTest marks the tests of a suite whose
# SetUpTestSuite() failed as skipped, and ctest alone passes skipped tests.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
TARGET=all scripts/build.sh
cd build
log=$(mktemp)
trap 'rm -f "$log"' EXIT
rc=0
ctest --output-on-failure --no-tests=error -j "${JOBS:-2}" --timeout 600 "$@" | tee "$log" || rc=$?
if ((rc == 0)) && grep -q "The following tests did not run:" "$log"; then
  echo "test.sh: tests were skipped or not run (listed above); a skipped test is a failure here" >&2
  rc=1
fi
exit "$rc"
