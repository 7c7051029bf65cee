#!/usr/bin/env bash
# What one /partitions request costs slurmrestd and slurmctld, a full answer against an
# "unchanged" one (update_time an hour ahead), on the harness's real Slurm FLAVOR (22.05 or
# 24.11) spoken to in API VERSION: blocks of 50 requests interleaved, 4 rounds of each, CPU
# from /proc. Start the harness first (tests/harness/up.sh). Figures: README.md beside this.
#
#   exporter/benches/partitions-cost.sh 22.05 v0.0.38
#   exporter/benches/partitions-cost.sh 24.11 v0.0.42
set -euo pipefail
flavor=${1:?flavor: 22.05 or 24.11} version=${2:?API version, e.g. v0.0.42}
here=$(cd "$(dirname "$0")/../.." && pwd)
source <("$here/tests/harness/slurm.sh" "$flavor" env)
dir=$(dirname "$(dirname "$SLURM_CONF")")
restd=$(cat "$dir/pids/slurmrestd") ctld=$(cat "$dir/pids/slurmctld")
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
auth=(-H "X-SLURM-USER-NAME: $SLURM_USER" -H "X-SLURM-USER-TOKEN: $(cat "$HARNESS_JWT_FILE")")
ahead=$(($(date +%s) + 3600))
declare -A r c n code
for _ in 1 2 3 4; do
  for mode in full unchanged; do
    url="$SLURM_REST_URL/slurm/$version/partitions"
    [ "$mode" = unchanged ] && url="$url?update_time=$ahead"
    r0=$(ticks "$restd") c0=$(ticks "$ctld")
    for _ in $(seq 50); do code[$mode]=$(curl -s -o /dev/null -w '%{http_code}' "${auth[@]}" "$url"); done
    r[$mode]=$((${r[$mode]:-0} + $(ticks "$restd") - r0))
    c[$mode]=$((${c[$mode]:-0} + $(ticks "$ctld") - c0))
    n[$mode]=$((${n[$mode]:-0} + 50))
  done
done
tick_ms=$((1000 / $(getconf CLK_TCK)))
for mode in full unchanged; do
  printf '%s %s %-9s HTTP %s: slurmrestd %s ms, slurmctld %s ms per request (%s requests)\n' \
    "$flavor" "$version" "$mode" "${code[$mode]}" \
    "$(echo "scale=2; ${r[$mode]} * $tick_ms / ${n[$mode]}" | bc)" \
    "$(echo "scale=2; ${c[$mode]} * $tick_ms / ${n[$mode]}" | bc)" "${n[$mode]}"
done
