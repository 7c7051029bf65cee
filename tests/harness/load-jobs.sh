#!/usr/bin/env bash
# Queue N jobs that stay pending in a harness Slurm started by slurm.sh, fast, in a mix a busy
# site would show: partitions cpu / gpu / elastic (and a few asking for two), 1-4 nodes (some
# a min-max range), some with --gres=gpu, memory per node or per CPU, a few held, a few with a
# --begin a day ahead, a few small arrays, names and comments.
#
#   load-jobs.sh FLAVOR N [PARALLEL]
#
# Uses only the cluster's own env (`slurm.sh FLAVOR env`: SLURM_CONF, SLURM_BIN) and the same
# SLURMSCALE_RUN / SLURMSCALE_PORT_BASE_* as the slurm.sh that started it; touches nothing else.
# Jobs are submitted as root over munge (no JWT), by PARALLEL sbatch loops (default 6).
#
# So the jobs stay pending (reason Priority / Resources, BeginTime for the --begin ones, held),
# the first step fills every cpu and gpu node with one exclusive blocker job of unlimited time
# (`sleep`); the elastic nodes are FUTURE (no slurmd), so nothing there runs either.
# Environment: LOAD_JOBS_BLOCKERS=0 skips the blockers (they are made once; a second load
# finds them running and keeps them); LOAD_JOBS_MIX=held submits one-CPU held jobs to cpu
# instead of the mix (a burst as fast as sbatch goes, which slurmdbd records behind).
# Prints the submission rate at the end. `slurm.sh FLAVOR stop` cancels everything.
set -euo pipefail
flavor=${1:?usage: load-jobs.sh FLAVOR N [PARALLEL]}
n=${2:?usage: load-jobs.sh FLAVOR N [PARALLEL]}
par=${3:-6}
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck disable=SC1090
source <("$here/slurm.sh" "$flavor" env | grep -v '^export SLURM_JWT=')
unset SLURM_JWT
export SLURM_CONF
sb="$SLURM_BIN/sbatch"
sq="$SLURM_BIN/squeue"

if [ "${LOAD_JOBS_BLOCKERS:-1}" = 1 ] && [ -z "$("$sq" -h -t running -n blocker -o %A)" ]; then
  for node in c1 c2 c3 c4; do
    "$sb" -Q -p cpu -w "$node" --exclusive -t INFINITE -J blocker -o /dev/null --wrap 'sleep 10000000'
  done
  for node in g1 g2; do
    "$sb" -Q -p gpu -w "$node" --exclusive -t INFINITE -J blocker -o /dev/null --wrap 'sleep 10000000'
  done
  for _ in $(seq 50); do
    [ "$("$sq" -h -t running -n blocker -o %A | wc -l)" -ge 6 ] && break
    sleep 0.2
  done
fi

# One loop: jobs k, k+par, k+2par, ... of 0..n-1. Every choice is a function of the index,
# so a load is the same mix every time.
submit_loop() {
  local k=$1 i args p
  if [ "${LOAD_JOBS_MIX:-site}" = held ]; then
    for ((i = k; i < n; i += par)); do
      "$sb" -Q -o /dev/null -H -p cpu -n 1 -J "held-$((i % 37))" --wrap true >/dev/null ||
        echo "sbatch failed for job $i" >&2
    done
    return
  fi
  for ((i = k; i < n; i += par)); do
    p=$((i % 20))
    args=(-Q -o /dev/null -J "load-$((i % 37))")
    case $p in
      0 | 1 | 2 | 3 | 4 | 5 | 6 | 7 | 8) args+=(-p cpu -N $((1 + i % 4)) --ntasks-per-node=$((1 + i % 8))) ;;
      9 | 10 | 11) args+=(-p gpu -N $((1 + i % 2)) --gres=gpu:$((1 + i % 4)) -c $((1 + i % 4))) ;;
      12) args+=(-p gpu -N 1 -n $((1 + i % 16))) ;;
      13 | 14 | 15) args+=(-p elastic -N $((1 + i % 4)) --gres=gpu:$((1 + i % 2))) ;;
      16) args+=(-p elastic -N "$((1 + i % 2))-$((3 + i % 2))" -n $((2 + i % 6))) ;;
      17) args+=(-p cpu,elastic -N 1 -c $((1 + i % 4))) ;;
      18) args+=(-p cpu -N 1 --mem=$((1000 * (1 + i % 8)))) ;;
      19) args+=(-p cpu -N 1 -n 2 --mem-per-cpu=$((256 * (1 + i % 4)))) ;;
    esac
    args+=(-t $((60 + i % 1380)))
    # ~5 % held, ~5 % begin a day ahead, ~1 % arrays of 10, ~10 % with a comment
    ((i % 19 == 3)) && args+=(-H)
    ((i % 23 == 5)) && args+=(--begin=now+1day)
    ((i % 97 == 7)) && args+=(--array=1-10)
    ((i % 10 == 1)) && args+=(--comment="load $i")
    "$sb" "${args[@]}" --wrap 'sleep 300' >/dev/null || echo "sbatch failed for job $i" >&2
  done
}

start=$(date +%s.%N)
for ((k = 0; k < par; k++)); do submit_loop "$k" & done
wait
end=$(date +%s.%N)
awk -v n="$n" -v s="$start" -v e="$end" -v p="$par" \
  'BEGIN { printf "[load-jobs] %d jobs in %.1f s (%.0f/s, %d parallel sbatch loops)\n", n, e - s, n / (e - s), p }' >&2
