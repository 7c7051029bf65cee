#!/usr/bin/env bash
# The whole test suite, from a bare Debian bookworm machine (as root): installs what is
# missing, builds (once, cached) Kubernetes with KEDA, the Prometheus Operator and the
# slurm-operator, makes Slurm 24.11's and 26.05's root filesystems, checks formatting and
# lints, builds the container image, starts the real servers, runs every test against them
# (the image's among them) and stops the servers.
#
# Caches live outside the clone (default /var/cache/slurmscale, including the cargo target
# dir unless CARGO_TARGET_DIR is set), so a second run only builds what changed.
#
# SLURMSCALE_SLOW_DAY=1 runs the servers and the tests with one of the machine's cores taken
# by a busy process (=all: the builds too), as on a day this shared machine runs at half
# speed; the tests must pass that way (docs/testing.md, "A slow day").
set -euo pipefail
cd "$(dirname "$0")/.."
source tests/harness/common.sh
need_root
busy_pid=
slow_day() { # take a core (once) when SLURMSCALE_SLOW_DAY asks for it from this phase on
  if [ -z "$busy_pid" ] && [[ " $* " == *" ${SLURMSCALE_SLOW_DAY:-} "* ]]; then
    busy_pid=$(take_a_core)
    say "slow day: one core taken by process $busy_pid"
  fi
}
trap 'release_core "$busy_pid"' EXIT
slow_day all

phase_start=$SECONDS
phase() { # report the previous phase's time, announce the next
  [ -n "${phase_name:-}" ] && say "phase '$phase_name' took $((SECONDS - phase_start))s"
  phase_name=$1 phase_start=$SECONDS
  [ -n "$phase_name" ] && say "== $phase_name"
  return 0
}

phase "prerequisites (apt, Slurm 24.11 and 26.05 roots, kubectl/helm, crates; the Go stack beside them)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$SLURMSCALE_CACHE/target}"
# What mostly downloads (apt, the Slurm roots, the tools, the crates) runs beside what mostly
# compiles (the Go stack: Go and its module proxy are the machine's own, it needs nothing of
# apt's): on a fresh machine the downloads cost no time of their own.
fetched=$(mktemp)
(
  tests/harness/deps.sh &&
    tests/harness/build-slurm-root.sh 24.11 &&
    tests/harness/build-slurm-root.sh 26.05 &&
    tests/harness/tools.sh >/dev/null &&
    cargo fetch --locked --quiet
) >"$fetched" 2>&1 &
fetch_pid=$!
go_status=0
tests/harness/build-go-stack.sh || go_status=$?
fetch_status=0
wait "$fetch_pid" || fetch_status=$?
cat "$fetched" >&2 && rm -f "$fetched"
[ "$fetch_status" = 0 ] || die "installing or fetching the prerequisites failed (output above)"
[ "$go_status" = 0 ] || die "building the Go stack failed (output above)"
PATH="$(tests/harness/tools.sh):$PATH"
export PATH

phase "format and lint"
cargo fmt --all --check
cargo clippy --workspace --all-targets --locked -- -D warnings

phase "build tests"
# What it built, by name (tests/harness/test-binaries.py), for tests/harness/run-tests.sh.
tests_list=$(mktemp)
cargo test --workspace --locked --no-run --message-format=json-render-diagnostics |
  tests/harness/test-binaries.py >"$tests_list"
[ -s "$tests_list" ] || die "the test build listed no test binary"

# The binary and the image tests/image.rs runs (rebuilt only when they changed): the
# release build without link-time optimisation, which only a release needs.
phase "build the binary and the container image"
SLURMSCALE_IMAGE_PROFILE=test-image tests/harness/image.sh >/dev/null

phase "start real servers"
slow_day 1 all
# Four copies of the harness side by side, so the suite takes the time of its longest part
# instead of the sum; the tests mostly wait on real time (SuspendTime, slurmctld's 30-second
# checks, poll intervals, pods).
# * The first copy (the default ports): the real Slinky slurm-operator's tests (kube.sh
#   operator-start: it manages this copy's Slurm 26.05). The operator reconciles every NodeSet
#   in its cluster, its Controller's or not, and rewrites their status within a second (other
#   tests set NodeSet status themselves), and only one can run on the machine (it dials
#   127.0.0.1:6820): so nothing else runs on this copy. The real node (kube.sh node-start: a
#   kubelet, containerd, kube-proxy and CoreDNS; one a machine, its bridge and rules being the
#   host's; Slinky's slurmd pods listen on 6818, this copy's slurmd port) for real_node.rs:
#   the README's install and Slinky's own slurmd pods. And two sites (kube.sh site-start:
#   Slinky's chart with a site's values, and a Slurm 26.05 and a 24.11 on the slurm.conf the
#   operator renders for them) for site.rs. One after the other: their pods must come up
#   within Slurm's timeouts, and beside each other on a busy machine they once did not. Once
#   they are done and the operator and the node are stopped, the calibration replay (on this
#   copy's 24.11): it compares real slurmctld's waits with the simulator's to the second, and
#   the operator's real pods beside it made them drift.
# * The second: the autoscaler's end-to-end tests and the long queue (which waits for
#   slurmctld's 30-second count of its jobs) drive their partitions for minutes; then booting
#   just in time for slurmctld's plan (a slurm-planned NodeSet waiting out a job's limit;
#   its stand-in operator must not meet the real one of the first copy).
# * The third: the tests that stop and start their copy's servers (restarts.rs: slurmctld, the
#   kube-apiserver; slurm_planned.rs: slurmctld while nodes power up, and it waits out
#   SuspendTime) and KEDA's (KEDA's operator and metrics adapter run beside that copy only);
#   then the load (100,000 jobs), after them, as it loads the machine.
# * The fourth: everything else.
with_operator=(operator real_node site)
after_operator=(calibration)
apart=(autoscaler_e2e long_queue just_in_time)
alone=(keda restarts slurm_planned)
after_alone=(load)
# * Beside them all, the release procedure itself (release/release.sh) up to the push: both
#   architectures' binaries (the test-image profile: the release's code without LTO) and
#   images, SBOMs, checksums, pushed with the chart to the fourth copy's registry on loopback;
#   then release.rs pulls them back, installs the chart from there on the fourth copy's
#   Kubernetes and runs the arm64 binary under qemu. It is mostly compiling (the arm64 build:
#   about 2 minutes after a change to the libraries, 8 on a fresh machine) while the tests
#   mostly wait, so it runs at the lowest CPU priority, on the cycles the tests leave idle,
#   instead of before them.
after_release=(release)
# Their ports stay below the kernel's ephemeral range (32768 and up here), where an outgoing
# connection could hold a port a slurmd is about to bind.
run=${SLURMSCALE_RUN:-/tmp/slurmscale-harness}
second=(env "SLURMSCALE_RUN=$run-2" SLURMSCALE_PORT_BASE_2205=19800
  SLURMSCALE_PORT_BASE_2411=20800 SLURMSCALE_PORT_BASE_2605=22800 SLURMSCALE_KUBE_PORT_BASE=21000)
third=(env "SLURMSCALE_RUN=$run-3" SLURMSCALE_PORT_BASE_2205=25800
  SLURMSCALE_PORT_BASE_2411=26800 SLURMSCALE_PORT_BASE_2605=28800 SLURMSCALE_KUBE_PORT_BASE=27000)
fourth=(env "SLURMSCALE_RUN=$run-4" SLURMSCALE_PORT_BASE_2205=23800
  SLURMSCALE_PORT_BASE_2411=24800 SLURMSCALE_PORT_BASE_2605=12800 SLURMSCALE_KUBE_PORT_BASE=29000)
trap 'tests/harness/down.sh; "${second[@]}" tests/harness/down.sh; "${third[@]}" tests/harness/down.sh; "${fourth[@]}" tests/harness/down.sh; release_core "$busy_pid"; rm -f "$tests_list"' EXIT
tests/harness/up.sh
"${second[@]}" tests/harness/up.sh
"${third[@]}" env SLURMSCALE_KUBE_WITH=keda tests/harness/up.sh
"${fourth[@]}" tests/harness/up.sh

"${fourth[@]}" tests/harness/registry.sh start

phase "tests (with the release rehearsed beside them)"
# Every test binary but those named above (the unit tests' too) runs on the fourth copy.
rest=()
while IFS=$'\t' read -r name _; do
  [[ " ${apart[*]} ${alone[*]} ${after_alone[*]} ${with_operator[*]} ${after_operator[*]} ${after_release[*]} " == *" $name "* ]] ||
    rest+=("$name")
done <"$tests_list"
operator_log=$(mktemp) apart_log=$(mktemp) alone_log=$(mktemp) release_log=$(mktemp)
(
  registry=$("${fourth[@]}" tests/harness/registry.sh env | cut -d= -f2)
  "${fourth[@]}" nice -n 19 release/release.sh --registry "$registry" --plain-http \
    --profile test-image --out "$run-4/release" &&
    "${fourth[@]}" tests/harness/run-tests.sh "$tests_list" "${after_release[@]}"
) >"$release_log" 2>&1 &
release_pid=$!
(
  status=0
  if tests/harness/kube.sh operator-start && tests/harness/kube.sh node-start &&
    tests/harness/kube.sh site-start; then
    tests/harness/run-tests.sh "$tests_list" "${with_operator[@]}" || status=1
  else
    status=1
  fi
  tests/harness/kube.sh node-stop || status=1
  tests/harness/kube.sh operator-stop || status=1
  tests/harness/run-tests.sh "$tests_list" "${after_operator[@]}" || status=1
  exit $status
) >"$operator_log" 2>&1 &
operator_pid=$!
"${second[@]}" tests/harness/run-tests.sh "$tests_list" "${apart[@]}" >"$apart_log" 2>&1 &
apart_pid=$!
(
  status=0
  "${third[@]}" tests/harness/run-tests.sh "$tests_list" "${alone[@]}" || status=1
  "${third[@]}" tests/harness/run-tests.sh "$tests_list" "${after_alone[@]}" || status=1
  exit $status
) >"$alone_log" 2>&1 &
alone_pid=$!
status=0
"${fourth[@]}" tests/harness/run-tests.sh "$tests_list" "${rest[@]}" || status=1
cargo test --workspace --locked --doc || status=1
wait "$operator_pid" || status=1
say "the first copy's tests, of the real slurm-operator (${with_operator[*]}), then ${after_operator[*]}:"
cat "$operator_log" && rm -f "$operator_log"
wait "$apart_pid" || status=1
say "the second copy's tests (${apart[*]}):"
cat "$apart_log" && rm -f "$apart_log"
wait "$alone_pid" || status=1
say "the third copy's tests (${alone[*]}, then ${after_alone[*]}):"
cat "$alone_log" && rm -f "$alone_log"
wait "$release_pid" || status=1
say "the release rehearsal (release/release.sh to the fourth copy's registry), then ${after_release[*]}:"
cat "$release_log" && rm -f "$release_log"
[ "$status" = 0 ] || die "tests failed (output above)"
phase ""
say "all tests passed"
