#!/usr/bin/env bash
# Colocation by shares against the fixed split a site would choose: for each pairing of a
# Slurm log with the Alibaba GPU pod log, each Slurm share (0.25, 0.5, 0.75) and each
# cooldown of docs/simulate.md's sweep (0, 30, 60, 120, 300, 600 s), `builtin` with
# `spec.colocation.shares` at that share (evictable pods: every pod of the log), beside
# `static` at the same split. Then the means over the cooldowns, per pairing and share.
#
#   cargo build --profile bench --bin slurmscale
#   sim/benches/shares-sweep.sh OUT [pairing...]     # curie-large, curie-hybrid; ~8 min
#   sim/benches/shares-sweep.sh --table OUT
#
# SLURMSCALE_BIN names the binary (default: the bench profile's, in CARGO_TARGET_DIR or
# target/). SHARES_EXTRA adds YAML lines under `shares:`; COOLDOWNS replaces the sweep's
# cooldowns.
set -uo pipefail
cd "$(dirname "$0")/../.."
if [ "${1:-}" = --table ]; then
  exec python3 - "$2" <<'EOF'
import json, pathlib, statistics, sys
out = pathlib.Path(sys.argv[1])
rows = {}
for f in sorted(out.glob("*/0.*-c*.json")):
    pairing, name = f.parent.name, f.stem
    share, cooldown = name.split("-c")
    for r in json.loads(f.read_text()):
        rows.setdefault((pairing, share, r["policy"]), []).append(r)
keys = ["stranded_node_hours", "slurm_wait_p95_s", "pod_wait_p95_s", "evictions", "pod_hours_lost", "jobs_killed", "jobs_requeued", "job_hours_lost", "starved_jobs"]
print("| pairing | share | policy | runs | " + " | ".join(keys) + " |")
print("|" + "---|" * (4 + len(keys)))
for (pairing, share, policy), rs in sorted(rows.items()):
    if policy.startswith("static") and len(rs) > 1:
        rs = rs[:1]
    mean = [statistics.fmean(float(r.get(k) or 0) for r in rs) for k in keys]
    print(f"| {pairing} | {share} | {policy} | {len(rs)} | " + " | ".join(f"{v:,.1f}" for v in mean) + " |")
EOF
fi
out=${1:?usage: shares-sweep.sh OUT [pairing...] | --table OUT}
shift
bin=${SLURMSCALE_BIN:-${CARGO_TARGET_DIR:-target}/release/slurmscale}
[ -x "$bin" ] || { echo "no binary at $bin: cargo build --profile bench --bin slurmscale" >&2; exit 1; }
only=" $* "
t=tests/traces
curie=$t/CEA-Curie-2011-2.1-cln.swf.gz
pods=(--pods $t/alibaba-gpu-2023/openb_pod_list_default.csv --pods-from 9900000)
pairing() {
  local name=$1 nodes=$2
  shift 2
  [ "$only" = "  " ] || [[ "$only" == *" $name "* ]] || return 0
  mkdir -p "$out/$name"
  for share in 0.25 0.5 0.75; do
    local slurm
    slurm=$(python3 -c "print(round($share * $nodes))")
    for cooldown in ${COOLDOWNS:-0 30 60 120 300 600}; do
      local spec=$out/$name/spec-$share-c$cooldown.yaml
      cat >"$spec" <<EOF
apiVersion: slurmscale.io/v1alpha1
kind: NodeSetAutoscaler
metadata: {name: shares}
spec:
  scaleTargetRef: {name: pool}
  maxReplicas: $nodes
  colocation:
    cooldownSeconds: $cooldown
    shares:
      slurm: $slurm
      evictablePods: {simulate.slurmscale.io/pod-log: replayed}
${SHARES_EXTRA:-}
EOF
      local policies=builtin
      [ "$cooldown" = "${COOLDOWNS:-0}" ] || [ "$cooldown" = 0 ] && policies=builtin,static
      "$bin" simulate "$@" "${pods[@]}" --max-nodes "$nodes" --split "$share" \
        --policies "$policies" --autoscaler "$spec" --json \
        >"$out/$name/$share-c$cooldown.json" 2>"$out/$name/$share-c$cooldown.txt"
      echo "$name share $share cooldown $cooldown: exit $?"
    done
  done
}
pairing curie-large 512 --trace $curie --partition large --node-cpus 32 --node-gpus 8 \
  --from 2012-03-08 --until 2012-04-07 --pods-scale 8
pairing curie-hybrid 96 --trace $curie --partition hybrid --node-cpus 16 --node-gpus 8 \
  --from 2012-03-08 --until 2012-04-07 --pods-scale 4
