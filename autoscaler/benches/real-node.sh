#!/usr/bin/env bash
# A job at zero nodes → running in Slinky's own slurmd pod on the harness's real node, N times
# (default 5): the real slurm-operator, a kubelet, containerd and runc, Slurm 26.05 and the
# built-in autoscaler, as tests/real_node.rs drives them (each run is that test: submit, the
# autoscaler's /scale 1, the operator's pod Ready, slurmd registered, the job RUNNING; then
# idle, back to zero through the operator's preStop). Prints each run's figures and their
# medians.
#
# Needs the harness with the operator and the node (as root, in the repository):
#   tests/harness/up.sh && tests/harness/kube.sh operator-start && tests/harness/kube.sh node-start
#   autoscaler/benches/real-node.sh [N]
set -euo pipefail
cd "$(dirname "$0")/../.."
n=${1:-5}
PATH="$(tests/harness/tools.sh):$PATH"
export PATH
cargo test --locked --test real_node --no-run --quiet 2>/dev/null
out=$(mktemp)
for i in $(seq 1 "$n"); do
  cargo test --locked --quiet --test real_node a_job_at_zero -- --nocapture 2>&1 |
    grep '^real node' | tee -a "$out"
done
median() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
for what in "/scale 1 in" "pod Ready in" "job running in" "pod gone at 0 in"; do
  printf '%-18s p50 %ss of %s runs\n' "$what" \
    "$(grep -o "$what [0-9.]*s" "$out" | grep -o '[0-9.]*s$' | tr -d s | median)" "$(wc -l <"$out")"
done
rm -f "$out"
