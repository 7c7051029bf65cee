#!/usr/bin/env bash
# Records real slurmrestd answers for the golden tests: sets up a known workload on a running
# harness Slurm, saves ping/diag/jobs/nodes/partitions for every REST version it serves into
# exporter/tests/golden/<version>/, then cancels the workload.
#
#   record-golden.sh 22.05|24.11|26.05
#
# 22.05's and 24.11's go to exporter/tests/golden/<version>/, 26.05's (v0.0.42-v0.0.45, beside
# the hand-written v0.0.43-45 fixtures there) to exporter/tests/golden/slurm-26.05/<version>/.
#
# The workload: a running 2-node CPU job, a running GPU job (2 GPUs), a pending 2-node GPU job
# (8 GPUs), a running job submitted to two partitions, a pending 3-node job and a pending
# throttled array (1-20%5) on the elastic partition (no elastic node is up), a held job, a job
# waiting on a dependency, one waiting on a begin time, and a drained node with a reason.
source "$(dirname "$0")/common.sh"
need_root
unset SLURM_JWT

flavor=${1:?usage: record-golden.sh 22.05|24.11|26.05}
repo="$(cd "$HARNESS_DIR/../.." && pwd)"
"$HARNESS_DIR/slurm.sh" "$flavor" status >/dev/null || die "Slurm $flavor is not running: run tests/harness/up.sh"
eval "$("$HARNESS_DIR/slurm.sh" "$flavor" env | grep -v SLURM_JWT=)"
work="$SLURMSCALE_RUN/slurm-$flavor"
s() { (cd "$work" && "$SLURM_BIN/$1" "${@:2}"); }

s scancel --user=root 2>/dev/null || true
sleep 1
run=$(s sbatch --parsable -J cpu-2node -p cpu -N 2 -n 4 --wrap 'sleep 900')
s sbatch --parsable -J gpu-2 -p gpu --gres=gpu:2 -c 3 --mem=2000 --wrap 'sleep 900' >/dev/null
s sbatch --parsable -J multi-part -p cpu,gpu -c 2 --wrap 'sleep 900' >/dev/null
sleep 2 # let those start before the queue fills up
s sbatch --parsable -J gpu-wide -p gpu -N 2 --gres=gpu:4 --wrap 'sleep 900' >/dev/null
s sbatch --parsable -J elastic-3 -p elastic -N 3 -c 2 --mem-per-cpu=1000 --wrap 'sleep 900' >/dev/null
s sbatch --parsable -J elastic-array -p elastic --array=1-20%5 --wrap 'sleep 900' >/dev/null
s sbatch --parsable -J held -p cpu --hold --wrap 'sleep 900' >/dev/null
s sbatch --parsable -J after -p cpu --dependency=afterok:"$run" --wrap 'sleep 900' >/dev/null
s sbatch --parsable -J later -p cpu --begin=now+3600 --wrap 'sleep 900' >/dev/null
s scontrol update nodename=c4 state=drain reason="golden: disk check"
sleep 3

token=$(cat "$HARNESS_JWT_FILE")
for version in $SLURM_API_VERSIONS; do
  out="$repo/exporter/tests/golden/$version"
  [ "$flavor" = 26.05 ] && out="$repo/exporter/tests/golden/slurm-26.05/$version"
  mkdir -p "$out"
  for endpoint in ping diag jobs nodes partitions; do
    curl -sf -H "X-SLURM-USER-NAME: $SLURM_USER" -H "X-SLURM-USER-TOKEN: $token" \
      "$SLURM_REST_URL/slurm/$version/$endpoint" | jq . >"$out/$endpoint.json" ||
      die "GET $version/$endpoint failed"
  done
  say "recorded $out"
done
s squeue -h -o '%i %P %T %r %D' >"$work/squeue.txt"
s scontrol update nodename=c4 state=resume
s scancel --user=root
