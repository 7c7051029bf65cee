#!/usr/bin/env bash
# Everything the end-to-end tests need, from a bare machine: Debian packages, the cached
# Kubernetes (build-go-stack.sh), Slurm 24.11's and 26.05's root filesystems, then the
# three real Slurms (each with its own MariaDB and slurmdbd for accounting; see slurm.sh) and
# Kubernetes.
# Idempotent: what is installed, built or running already is reused.
source "$(dirname "$0")/common.sh"
need_root

"$HARNESS_DIR/deps.sh"
"$HARNESS_DIR/build-go-stack.sh"
"$HARNESS_DIR/build-slurm-root.sh" 24.11
"$HARNESS_DIR/build-slurm-root.sh" 26.05
"$HARNESS_DIR/slurm.sh" 22.05 start
"$HARNESS_DIR/slurm.sh" 24.11 start
"$HARNESS_DIR/slurm.sh" 26.05 start
"$HARNESS_DIR/kube.sh" start
say "harness up; to use it from a shell:"
say "  source <(tests/harness/slurm.sh 22.05 env)   # or 24.11, 26.05"
say "  source <(tests/harness/kube.sh env)"
