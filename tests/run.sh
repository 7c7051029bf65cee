#!/usr/bin/env bash
# The whole test suite, from a bare Debian bookworm machine (as root): installs what is
# missing, builds (once, cached) the kube-apiserver and Slurm 24.11, checks formatting and
# lints, builds the container image, starts the real servers, runs every test against them
# (the image's among them) and stops the servers.
#
# Caches live outside the clone (default /var/cache/slurmscale, including the cargo target
# dir unless CARGO_TARGET_DIR is set), so a second run only builds what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
source tests/harness/common.sh
need_root

phase_start=$SECONDS
phase() { # report the previous phase's time, announce the next
  [ -n "${phase_name:-}" ] && say "phase '$phase_name' took $((SECONDS - phase_start))s"
  phase_name=$1 phase_start=$SECONDS
  [ -n "$phase_name" ] && say "== $phase_name"
  return 0
}

phase "prerequisites (apt, kube-apiserver build, Slurm 24.11 build, kubectl/helm)"
tests/harness/deps.sh
tests/harness/build-kube-apiserver.sh
tests/harness/build-slurm-24.11.sh
PATH="$(tests/harness/tools.sh):$PATH"
export PATH
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$SLURMSCALE_CACHE/target}"

phase "format and lint"
cargo fmt --all --check
cargo clippy --workspace --all-targets --locked -- -D warnings

phase "build tests"
cargo test --workspace --locked --no-run

# The release binary and the image tests/image.rs runs (rebuilt only when they changed).
phase "build the release binary and the container image"
tests/harness/image.sh >/dev/null

phase "start real servers"
trap 'tests/harness/down.sh' EXIT
tests/harness/up.sh

phase "tests"
cargo test --workspace --locked --no-fail-fast
phase ""
say "all tests passed"
