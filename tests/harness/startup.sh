#!/usr/bin/env bash
# Startup figures (README.md, "Container image"): the median of 11 runs of `--version`, and
# of 5 launches of `slurmscale exporter --no-kubernetes` against the harness's real
# slurmrestd, the time from launch to the first /metrics answer and to the first one holding
# Slurm's partitions. Of a binary on the host, or of the image under podman run as
# tests/image.rs runs it (UID 65532, read-only, no capabilities, host network). Needs the
# harness up (tests/harness/up.sh).
#
#   tests/harness/startup.sh binary PATH [22.05|24.11]
#   tests/harness/startup.sh image [22.05|24.11]
source "$(dirname "$0")/common.sh"
cd "$HARNESS_DIR/../.."

mode=${1:-}
case $mode in
  binary) bin=${2:?usage: $0 binary PATH [flavor]}; flavor=${3:-22.05} ;;
  image) image=$("$HARNESS_DIR/image.sh" name); flavor=${2:-22.05} ;;
  *) die "usage: $0 binary PATH [22.05|24.11] | $0 image [22.05|24.11]" ;;
esac
envfile=$SLURMSCALE_RUN/slurm-$flavor/env
[ -s "$envfile" ] || die "the harness's Slurm $flavor is not running: tests/harness/up.sh"
# shellcheck disable=SC1090
source "$envfile"
export CONTAINERS_CONF=$HARNESS_DIR/containers.conf

tmp=$(mktemp -d) && chmod 0711 "$tmp" # UID 65532 reads the key in it
trap 'rm -rf "$tmp"' EXIT
# The key, readable by UID 65532 only, as the chart mounts it.
install -o 65532 -g 65532 -m 0400 "$HARNESS_JWT_KEY_FILE" "$tmp/key"

now() { date +%s%N; }
ms() { echo "scale=1; ($2 - $1) / 1000000" | bc; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
locked=(--user 65532:65532 --read-only --read-only-tmpfs=false --cap-drop ALL --security-opt no-new-privileges)

version_once() {
  local t0; t0=$(now)
  if [ "$mode" = binary ]; then "$bin" --version >/dev/null
  else podman run --rm --network none "${locked[@]}" "$image" --version >/dev/null; fi
  ms "$t0" "$(now)"
}
for _ in $(seq 11); do version_once; done | median >"$tmp/version"

exporter_once() {
  local port t0 first="" data="" body name=startup-$$-$RANDOM
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  t0=$(now)
  if [ "$mode" = binary ]; then
    env -i SLURM_REST_URL="$SLURM_REST_URL" SLURM_USER="$SLURM_USER" SLURM_CLUSTER="$SLURM_CLUSTER" \
      SLURM_JWT_KEY_FILE="$tmp/key" setpriv --reuid 65532 --regid 65532 --clear-groups \
      "$bin" exporter --no-kubernetes --interval 1s --listen "127.0.0.1:$port" 2>"$tmp/log" &
    echo $! >"$tmp/pid"
  else
    podman run --rm --name "$name" --network host "${locked[@]}" \
      -v "$tmp/key:/var/run/secrets/slurm/jwt_hs256.key:ro" \
      -e SLURM_REST_URL="$SLURM_REST_URL" -e SLURM_USER="$SLURM_USER" -e SLURM_CLUSTER="$SLURM_CLUSTER" \
      -e SLURM_JWT_KEY_FILE=/var/run/secrets/slurm/jwt_hs256.key \
      "$image" exporter --no-kubernetes --interval 1s --listen "127.0.0.1:$port" 2>"$tmp/log" &
  fi
  while [ $(( ($(now) - t0) / 1000000000 )) -lt 20 ]; do
    if body=$(curl -sf "http://127.0.0.1:$port/metrics"); then
      [ -n "$first" ] || first=$(now)
      if grep -q "^slurm_partition_nodes{cluster=\"$SLURM_CLUSTER\",partition=\"cpu\"}" <<<"$body"; then
        data=$(now); break
      fi
    fi
    sleep 0.005
  done
  if [ "$mode" = binary ]; then stop_pidfile "$tmp/pid"; else podman rm -f -t 0 "$name" >/dev/null; wait; fi
  [ -n "$data" ] || die "no Slurm metrics within 20 s: $(cat "$tmp/log")"
  echo "$(ms "$t0" "$first") $(ms "$t0" "$data")"
}
for _ in $(seq 5); do exporter_once; done >"$tmp/exporter"

echo "$mode${bin:+ $bin}${image:+ $image}, Slurm $flavor ($SLURM_REST_URL):"
echo "  --version: $(cat "$tmp/version") ms (median of 11)"
echo "  exporter, launch to first /metrics: $(cut -d' ' -f1 "$tmp/exporter" | median) ms," \
  "to Slurm metrics: $(cut -d' ' -f2 "$tmp/exporter" | median) ms (median of 5)"
