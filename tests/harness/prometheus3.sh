#!/usr/bin/env bash
# Runs Prometheus 3 as a pod of the Prometheus Operator would run it: Debian sid's prometheus
# (3.5, the long-term release kube-prometheus-stack ships; it lives in the 26.05 root,
# build-slurm-root.sh 26.05) with a directory of the test's as /etc/prometheus and another as the
# pod's service account, so the configuration the operator generated runs unmodified: its
# rule files at /etc/prometheus/rules/..., its Kubernetes discovery in-cluster (the token and
# CA at /var/run/secrets/kubernetes.io/serviceaccount, the API server from
# KUBERNETES_SERVICE_HOST and _PORT, which the caller sets).
#
#   prometheus3.sh DIR [PROMETHEUS ARGS...]
#
# DIR holds etc/ (/etc/prometheus), sa/ (token, ca.crt, namespace) and data/
# (/prometheus, for --storage.tsdb.path=/prometheus). Everything is bound in a mount
# namespace of its own, gone with the process; it execs, so its pid is Prometheus's.
source "$(dirname "$0")/common.sh"
need_root
dir=${1:?usage: prometheus3.sh DIR [PROMETHEUS ARGS...]}
shift
dir=$(cd "$dir" && pwd)
[ -x "$SLURM_2605_ROOT/usr/bin/prometheus" ] ||
  die "no Prometheus 3 in $SLURM_2605_ROOT: run tests/harness/build-slurm-root.sh 26.05"
for d in etc sa data; do [ -d "$dir/$d" ] || die "$dir/$d is missing"; done
exec unshare --mount -- sh -c '
  root=$1 dir=$2
  shift 2
  for d in /proc /sys /dev; do mount --rbind "$d" "$root$d"; done
  mount --bind "$dir/etc" "$root/etc/prometheus"
  mount -t tmpfs tmpfs "$root/run"
  mkdir -p "$root/run/secrets/kubernetes.io/serviceaccount"
  mount --bind "$dir/sa" "$root/run/secrets/kubernetes.io/serviceaccount"
  mount --bind "$dir/data" "$root/prometheus"
  exec chroot "$root" /usr/bin/prometheus "$@"' \
  sh "$SLURM_2605_ROOT" "$dir" "$@"
