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
# A fresh build has no timings of earlier runs, so ctest would start the tests
# in file order and leave the longest to the end, one core idle; the committed
# timings (tests/ctest_costs.txt, "name runs seconds" as ctest keeps them)
# start the longest first. ctest updates its own copy after each run.
if [[ ! -s Testing/Temporary/CTestCostData.txt ]]; then
  mkdir -p Testing/Temporary
  cp ../tests/ctest_costs.txt Testing/Temporary/CTestCostData.txt
fi
# ctest runs JOBS tests at once, and each test's job sizes its OpenMP pool as if
# it had the machine (the launcher: cores / nproc per rank, so a one-rank job
# takes every core). Each test gets cores / JOBS threads instead: with OpenBLAS
# the spare threads spun on cores the other test was using (the suite took 6%
# longer and 8% more CPU with 2 threads than with 1 on 2 cores).
jobs=${JOBS:-2}
cores=$(nproc)
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$((cores / jobs > 0 ? cores / jobs : 1))}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
rc=0
ctest --output-on-failure --no-tests=error -j "$jobs" --timeout 600 "$@" | tee "$log" || rc=$?
if ((rc == 0)) && grep -q "The following tests did not run:" "$log"; then
  echo "test.sh: tests were skipped or not run (listed above); a skipped test is a failure here" >&2
  rc=1
fi
exit "$rc"
