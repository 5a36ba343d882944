#!/usr/bin/env bash
# Installs hyperpipe into a temporary prefix, builds examples/custom_model
# against it out of tree, and runs it with 2 and 4 local ranks (1F1B and
# interleaved, MB < PP and MB not divisible by PP included). Each run must pass
# its step-1 check against the one-process model (loss and every gradient,
# 1e-10 relative, printed by every rank) and its loss must fall over 20 steps.
set -euo pipefail
build_dir=$1
example_dir=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }

cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
[[ -f $work/prefix/include/hyperpipe/runtime/pipeline.hpp ]] || fail "headers not installed"
! grep -rl '#include <torch/torch.h>' "$work/prefix/include/hyperpipe" || fail "an installed header includes <torch/torch.h>"
# Exactly the public API (cmake/public_headers.txt), closed under #include, each header opening with its contract.
include=$work/prefix/include/hyperpipe
diff <(grep -v '^#' "$example_dir/../../cmake/public_headers.txt" | sort) <(cd "$include" && find . -name '*.hpp' | sed 's|^\./||' | sort) ||
  fail "the installed headers are not exactly cmake/public_headers.txt"
for header in $(cd "$include" && find . -name '*.hpp'); do
  for used in $(sed -nE 's/^#include "([^"]+)"/\1/p' "$include/$header"); do
    [[ -f $include/$used ]] || fail "installed $header includes $used, which is not installed"
  done
  head -c 2 "$include/$header" | grep -q '//' || fail "installed $header does not open with its contract"
done
launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=)
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S "$example_dir" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" "${launcher[@]}" >/dev/null
cmake --build "$work/build" -j "${JOBS:-2}" >/dev/null || fail "the example does not build against the installed package"
hyperpipe=$work/prefix/bin/hyperpipe
[[ -x $hyperpipe ]] || fail "the hyperpipe binary was not installed"

run_case() {
  local nproc=$1; shift
  local out=$work/out.txt
  echo "== $nproc ranks: $*"
  local status=0
  "$hyperpipe" launch --nproc "$nproc" -- "$work/build/custom_model" --verify --steps 20 "$@" >"$out" 2>&1 || status=$?
  ((status == 0)) || { cat "$out"; fail "exit status $status with $nproc ranks: $*"; }
  local ok
  ok=$(grep -cE '^\[rank [0-9]+\] verify OK: ' "$out" || true)
  [[ $ok == "$nproc" ]] || { cat "$out"; fail "$ok of $nproc ranks verified step 1"; }
  grep -E '^\[rank 0\] verify OK' "$out"
  local first last
  first=$(sed -nE 's/^\[rank 0\] step 1 loss ([^ ]+)$/\1/p' "$out")
  last=$(sed -nE 's/^\[rank 0\] step 20 loss ([^ ]+)$/\1/p' "$out")
  [[ -n $first && -n $last ]] || { cat "$out"; fail "no loss of steps 1 and 20"; }
  echo "loss $first -> $last"
  awk -v f="$first" -v l="$last" 'BEGIN { exit !(l < 0.7 * f) }' || fail "the loss did not fall: $first -> $last"
}

run_case 2 --schedule 1f1b --mb 4
run_case 2 --schedule interleaved --vpp 2 --mb 3
run_case 4 --schedule 1f1b --mb 3
run_case 4 --schedule interleaved --vpp 2 --mb 6
echo "OK"
