#!/usr/bin/env bash
# Latency from sbatch to the job being visible in slurmdb through slurmrestd:
#   dblag.sh FLAVOR [COUNT]   (uses slurm.sh's env; submits COUNT held jobs to cpu and cancels them)
# A job not visible within DBLAG_TIMEOUT seconds (default 60: slurm.sh dbd-hold) is said so.
set -euo pipefail
flavor=$1 count=${2:-3}
here="$(cd "$(dirname "$0")" && pwd)"
source <("$here/slurm.sh" "$flavor" env)
v=v0.0.38; [ "$flavor" != 22.05 ] && v=v0.0.42
timeout=${DBLAG_TIMEOUT:-60}
for _ in $(seq "$count"); do
  t0=$(date +%s.%N)
  id=$("$SLURM_BIN/sbatch" --parsable -H -p cpu -J dblag -o /dev/null --wrap 'sleep 1')
  t1=$(date +%s.%N)
  while :; do
    n=$(curl -s -H "X-SLURM-USER-NAME: $SLURM_USER" -H "X-SLURM-USER-TOKEN: $SLURMSCALE_JWT" "$SLURM_REST_URL/slurmdb/$v/job/$id" |
      python3 -c 'import json,sys
try: print(len(json.load(sys.stdin).get("jobs") or []))
except Exception: print(0)')
    [ "$n" -ge 1 ] && break
    if awk -v a="$t1" -v t="$timeout" -v now="$(date +%s.%N)" 'BEGIN { exit !(now - a > t) }'; then
      "$SLURM_BIN/scancel" "$id"
      echo "job $id: not visible in slurmdb within ${timeout} s"
      continue 2
    fi
    sleep 0.2
  done
  t2=$(date +%s.%N)
  "$SLURM_BIN/scancel" "$id"
  awk -v a="$t0" -v b="$t1" -v c="$t2" -v id="$id" 'BEGIN { printf "job %s: sbatch %.2f s, visible in slurmdb %.2f s after sbatch returned\n", id, b - a, c - b }'
done
