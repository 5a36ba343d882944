#!/usr/bin/env bash
# Recovery time of `hyperpipe train --max-restarts` (README, reliability): FAULTS
# jobs (default 10), each with one fault at a random step; from the launcher
# seeing the failure to the restarted group's first step, as the restarted
# run's metrics line records it (recovery_s). Prints each, then the median and
# the worst. Run from the project root after scripts/build.sh.
#   bench/restart_recovery.sh [FAULTS] [extra train flags...]
# NODES=2: the same job as two launchers of one rank each (--nnodes 2, node 0
# on 127.0.0.2); FAULT=launcher (with NODES=2): node 1's launcher is killed
# with -9 instead of a rank and started again at once, as a supervisor would.
set -euo pipefail
faults=${1:-10}
shift || true
bin=${HYPERPIPE:-build/bin/hyperpipe}
nodes=${NODES:-1}
fault=${FAULT:-rank}
work=$(mktemp -d)
trap 'rm -rf "$work"; jobs -p | xargs -r kill -9 2>/dev/null || true' EXIT
model="--schedule 1f1b --layers 4 --hidden 64 --heads 2 --seq-len 32 --mb 4 --steps 12 --save-interval 2"
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.2", 0)); print(s.getsockname()[1])'; }
times=()
for ((i = 0; i < faults; ++i)); do
  step=$((3 + RANDOM % 8))
  rank=$((RANDOM % 2))
  job=(train $model --save "$work/ck$i" --metrics "$work/m$i.jsonl" --max-restarts 1 --log-interval 100 "$@")
  if ((nodes == 1)); then
    "$bin" "${job[@]}" --nproc 2 --inject-fault "$rank:$step:kill" >"$work/out$i.txt" 2>&1 ||
      { cat "$work/out$i.txt"; echo "restart_recovery: job $i failed" >&2; exit 1; }
    what="rank $rank killed at step $step"
  else
    node=(--nnodes 2 --nproc-per-node 1 --master-addr 127.0.0.2 --master-port "$(free_port)" --rendezvous-timeout 60)
    [[ $fault == rank ]] && node+=(--inject-fault "$rank:$step:kill")
    GLOO_SOCKET_IFNAME=lo "$bin" "${job[@]}" "${node[@]}" --node-rank 1 >"$work/node1-$i.txt" 2>&1 &
    n1=$!
    GLOO_SOCKET_IFNAME=lo "$bin" "${job[@]}" "${node[@]}" --node-rank 0 >"$work/out$i.txt" 2>&1 &
    n0=$!
    if [[ $fault == launcher ]]; then
      until [[ $(grep -c '"step"' "$work/m$i.jsonl" 2>/dev/null || true) -ge $step ]]; do sleep 0.02; done
      kill -9 "$n1"
      wait "$n1" 2>/dev/null || true
      GLOO_SOCKET_IFNAME=lo "$bin" "${job[@]}" "${node[@]}" --node-rank 1 >"$work/node1-$i.txt" 2>&1 &
      n1=$!
      what="node 1's launcher killed at step $step"
    else
      what="rank $rank (node $rank) killed at step $step"
    fi
    wait "$n0" && wait "$n1" || { cat "$work/out$i.txt" "$work/node1-$i.txt"; echo "restart_recovery: job $i failed" >&2; exit 1; }
  fi
  t=$(sed -nE 's/.*"recovery_s":([0-9.eE+-]+).*/\1/p' "$work/m$i.jsonl" | head -1)
  [[ -n $t ]] || { cat "$work/out$i.txt"; echo "restart_recovery: job $i recorded no recovery_s" >&2; exit 1; }
  echo "fault $((i + 1)): $what, recovered in $t s"
  times+=("$t")
done
printf '%s\n' "${times[@]}" | sort -g | awk '{ a[NR] = $1 } END {
  m = NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2
  printf "recovery over %d faults: median %.2f s, worst %.2f s\n", NR, m, a[NR] }'
