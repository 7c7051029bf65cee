#!/usr/bin/env bash
# Stops everything up.sh started (only the pids it recorded: the Slurm daemons, each Slurm's
# slurmdbd and mariadbd, Kubernetes), the site's Slurm if kube.sh site-start started it, the
# registry if registry.sh did, and removes the run dir, accounting databases included.
source "$(dirname "$0")/common.sh"
need_root

status=0
"$HARNESS_DIR/registry.sh" stop || status=1
"$HARNESS_DIR/kube.sh" stop || status=1
"$HARNESS_DIR/slurm.sh" site-26.05 stop || status=1
"$HARNESS_DIR/slurm.sh" site-24.11 stop || status=1
"$HARNESS_DIR/slurm.sh" 26.05 stop || status=1
"$HARNESS_DIR/slurm.sh" 24.11 stop || status=1
"$HARNESS_DIR/slurm.sh" 22.05 stop || status=1
rmdir "$SLURMSCALE_RUN" 2>/dev/null || true
exit $status
