#!/usr/bin/env bash
# Recovery time of `hyperpipe train --max-restarts` (README, reliability): FAULTS
# jobs (default 10), each with one rank killed (SIGKILL) at a random step; from
# the launcher seeing the failure to the restarted group's first step, as the
# restarted run's metrics line records it (recovery_s). Prints each, then the
# median and the worst. Run from the project root after scripts/build.sh.
#   bench/restart_recovery.sh [FAULTS] [extra train flags...]
set -euo pipefail
faults=${1:-10}
shift || true
bin=${HYPERPIPE:-build/bin/hyperpipe}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
model="--nproc 2 --schedule 1f1b --layers 4 --hidden 64 --heads 2 --seq-len 32 --mb 4 --steps 12 --save-interval 2"
times=()
for ((i = 0; i < faults; ++i)); do
  step=$((3 + RANDOM % 8))
  rank=$((RANDOM % 2))
  "$bin" train $model --save "$work/ck$i" --metrics "$work/m$i.jsonl" --max-restarts 1 \
    --inject-fault "$rank:$step:kill" --log-interval 100 "$@" >"$work/out$i.txt" 2>&1 ||
    { cat "$work/out$i.txt"; echo "restart_recovery: job $i failed" >&2; exit 1; }
  t=$(sed -nE 's/.*"recovery_s":([0-9.eE+-]+).*/\1/p' "$work/m$i.jsonl" | head -1)
  [[ -n $t ]] || { cat "$work/out$i.txt"; echo "restart_recovery: job $i recorded no recovery_s" >&2; exit 1; }
  echo "fault $((i + 1)): rank $rank killed at step $step, recovered in $t s"
  times+=("$t")
done
printf '%s\n' "${times[@]}" | sort -g | awk '{ a[NR] = $1 } END {
  m = NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2
  printf "recovery over %d faults: median %.2f s, worst %.2f s\n", NR, m, a[NR] }'
