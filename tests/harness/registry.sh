#!/usr/bin/env bash
# An OCI registry on loopback (Debian's docker-registry, the CNCF Distribution registry) for
# rehearsing a release: release/release.sh pushes the two-architecture image and the chart to
# it, and tests/release.rs pulls them back and installs from it. Plain HTTP, no auth, its
# storage in the run directory: nothing outlives `stop`.
#
#   tests/harness/registry.sh start|stop|env
#
# SLURMSCALE_REGISTRY_PORT (default 15500) is its port on 127.0.0.1.
source "$(dirname "$0")/common.sh"

run_dir=${SLURMSCALE_RUN:-/tmp/slurmscale-harness}/registry
port=${SLURMSCALE_REGISTRY_PORT:-15500}
pidfile=$run_dir/registry.pid

case ${1:-} in
  start)
    need_root
    [ -x /usr/bin/docker-registry ] ||
      die "docker-registry is missing (Debian: apt-get install docker-registry, or run tests/harness/deps.sh)"
    if pid_alive "$pidfile"; then
      say "registry already up on 127.0.0.1:$port"
      exit 0
    fi
    rm -rf "$run_dir"
    mkdir -p "$run_dir/data"
    # A fixed secret: the registry would make up one and warn that it did.
    cat >"$run_dir/config.yml" <<EOF
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $run_dir/data
  delete:
    enabled: true
http:
  addr: 127.0.0.1:$port
  secret: slurmscale-harness
EOF
    /usr/bin/docker-registry serve "$run_dir/config.yml" >"$run_dir/registry.log" 2>&1 &
    echo $! >"$pidfile"
    wait_for 20 "the registry on 127.0.0.1:$port" curl -sf "http://127.0.0.1:$port/v2/"
    echo "SLURMSCALE_REGISTRY=127.0.0.1:$port" >"$run_dir/env"
    say "registry up: http://127.0.0.1:$port (env: $run_dir/env)"
    ;;
  stop)
    stop_pidfile "$pidfile"
    rm -rf "$run_dir"
    ;;
  env) cat "$run_dir/env" ;;
  *) die "usage: $0 start|stop|env" ;;
esac
