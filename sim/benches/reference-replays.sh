#!/usr/bin/env bash
# Reference replays, for telling a move from a change of behaviour: each run's JSON rows,
# timelines, SVGs and stderr (and a demo transcript, where faketime is installed) into OUT,
# a few minutes in all on a bench-profile binary. Run it before and after a change and
# compare the two folders: a pure move leaves every file byte-identical.
#
#   cargo build --profile bench --bin slurmscale
#   sim/benches/reference-replays.sh /tmp/before        # (on the old commit)
#   sim/benches/reference-replays.sh /tmp/after
#   sim/benches/reference-replays.sh --compare /tmp/before /tmp/after
#
# SLURMSCALE_BIN names the binary (default: the bench profile's, in CARGO_TARGET_DIR or
# target/). Extra arguments after OUT run only the named replays (curie, nasa, shared, …).
set -uo pipefail
cd "$(dirname "$0")/../.."
if [ "${1:-}" = --compare ]; then
  bad=0 n=0
  for f in $(cd "$2" && find . -type f | sort); do
    n=$((n + 1))
    cmp -s "$2/$f" "$3/$f" || { echo "differs: $f"; bad=1; }
  done
  echo "$n files compared"
  exit $bad
fi
out=${1:?usage: reference-replays.sh OUT [name...] | --compare A B}
shift
bin=${SLURMSCALE_BIN:-${CARGO_TARGET_DIR:-target}/release/slurmscale}
[ -x "$bin" ] || { echo "no binary at $bin: cargo build --profile bench --bin slurmscale" >&2; exit 1; }
only=" $* "
t=tests/traces
curie=$t/CEA-Curie-2011-2.1-cln.swf.gz
run() {
  local name=$1
  shift
  [ "$only" = "  " ] || [[ "$only" == *" $name "* ]] || return 0
  mkdir -p "$out/$name"
  "$bin" simulate "$@" --json --out "$out/$name" >"$out/$name/stdout.json" 2>"$out/$name/stderr.txt"
  echo "$name: exit $?"
}
run curie --trace $curie --from 2012-03-08 --limit-jobs 20000
run curie-thin --trace $curie --from 2012-03-08 --partition standard --max-nodes 5040 --node-cpus 16 --limit-jobs 20000
run curie-fat --trace $curie --from 2012-03-08 --partition large --max-nodes 360 --node-cpus 32 --limit-jobs 20000
run curie-nodesets --trace $curie --from 2012-03-08 --limit-jobs 5000 \
  --nodeset fat,cpus=32,nodes=360,weight=10,partition=large \
  --nodeset thin,cpus=16,nodes=5040,weight=1,partition=standard
run nasa --trace $t/NASA-iPSC-1993-3.1-cln.swf.gz
run nasa-3days --trace $t/NASA-iPSC-1993-3.1-cln.swf.gz --from 1993-10-04 --until 1993-10-07
run kth --trace $t/KTH-SP2-1996-2.1-cln.swf.gz
run workload-demo --workload demo
run workload-demo-7 --workload demo --seed 7 --duration 2d
pool=(--trace $curie --partition large --max-nodes 512 --node-cpus 32 --node-gpus 8
  --from 2012-03-08 --until 2012-04-07
  --pods $t/alibaba-gpu-2023/openb_pod_list_default.csv --pods-from 9900000 --pods-scale 8)
run shared "${pool[@]}"
run shared-packed "${pool[@]}" --kube-scoring most-allocated
if [ "$only" = "  " ] || [[ "$only" == *" demo "* ]]; then
  if command -v faketime >/dev/null; then
    # The demo's backfill grid is in unix time: a fixed start makes it reproducible.
    mkdir -p "$out/demo"
    FAKETIME_DONT_FAKE_MONOTONIC=1 faketime '2026-01-01 00:00:00' "$bin" demo --duration 9s \
      --speed 100 --listen 127.0.0.1:0 2>/dev/null | grep -v '^metrics: ' >"$out/demo/stdout.txt"
    echo "demo: exit $?"
  else
    echo "demo: skipped (no faketime; apt install faketime)"
  fi
fi
