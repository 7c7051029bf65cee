#!/usr/bin/env bash
# Builds a current Kubernetes test stack from Go modules, with the machine's Go and its
# configured module proxy, and caches the binaries outside the clone:
#
#   kube    kube-apiserver, kube-controller-manager, kube-scheduler (k8s.io/kubernetes)
#   etcd    etcd 3.6 (go.etcd.io/etcd/server/v3)
#   kwok    fake Nodes whose Pods become Running without a kubelet, plus its stage files
#   keda    KEDA operator + external-metrics adapter, plus KEDA's CRDs
#   slurm-operator  Slinky slurm-operator (NodeSet v1beta1), plus its CRDs
#   prometheus-operator  the Prometheus Operator, plus its CRDs (monitoring.coreos.com)
#   node    the real node's kubelet and kube-proxy (k8s.io/kubernetes)
#   containerd  containerd, its runc shim and ctr
#   coredns  CoreDNS with the plugins the real node uses (go-stack/coredns/main.go)
#
#   build-go-stack.sh [COMPONENT...]   (default: all of them)
#
# kube.sh runs them. Versions are pinned in go-stack/*/go.mod and nowhere else: kube, kwok,
# KEDA and the Prometheus Operator share one module graph (go-stack/stack), so what they have
# in common compiles once; etcd and slurm-operator have their own. Modules come through
# `go env GOPROXY` and are checked against the checksum database. Idempotent: a component
# whose directory is complete is skipped, so a second run builds nothing. Module and build
# caches live under $SLURMSCALE_CACHE/go-stack (GOSTACK_CACHE overrides) so later runs, and
# the other components, reuse them. Cold, on 2 cores: about 11 min, KEDA 3.5 of them.
source "$(dirname "$0")/common.sh"
source "$HARNESS_DIR/go-stack/paths.sh"

# The machine's Go (1.26 here, at /usr/local/go), not Debian's older golang-go.
GO="${GO:-$(if [ -x /usr/local/go/bin/go ]; then echo /usr/local/go/bin/go; else command -v go || true; fi)}"
if [ -z "$GO" ] || [ ! -x "$GO" ]; then die "no Go found (Go 1.26 is expected at /usr/local/go; set GO=...)"; fi

export GOPATH="$GOSTACK_CACHE/gopath" GOMODCACHE="$GOSTACK_CACHE/gomodcache" GOCACHE="$GOSTACK_CACHE/gocache"
# Static binaries; never fetch a newer Go behind our back (a pin that needs one should fail
# loudly); no VCS stamping (the build module is not a repository).
export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-buildvcs=false
logs="$GOSTACK_CACHE/logs"
mkdir -p "$logs" "$GOSTACK_CACHE/bin" "$GOSTACK_CACHE/mod"

# build NAME OUT_DIR LDFLAGS BIN=PACKAGE... : resolve go-stack/NAME/go.mod (and its Go files,
# if it has any) in a work copy and build each package into OUT_DIR. Runs niced: this 2-core
# machine is shared with cargo.
build() {
  local name=$1 out=$2 ldflags=$3; shift 3
  local work log start=$SECONDS spec
  work="$GOSTACK_CACHE/mod/$(basename "$out")" log="$logs/$(basename "$out").log"
  rm -rf "$work" "$out.partial"
  mkdir -p "$work" "$out.partial"
  cp "$GOSTACK_MODS/$name/go.mod" "$work/go.mod"
  find "$GOSTACK_MODS/$name" -maxdepth 1 -name '*.go' -exec cp {} "$work/" \;
  say "building $(basename "$out") (log: $log)"
  # A subshell with explicit exits: `set -e` does not apply inside a `... || die` list.
  if ! (
    cd "$work" || exit 1
    # tidy fills in the indirect requirements and go.sum; they follow from the pinned
    # versions alone (minimal version selection), and the checksum database verifies them.
    nice -n 19 "$GO" mod tidy || exit 1
    for spec in "$@"; do
      nice -n 19 "$GO" build -trimpath -ldflags "-s -w $ldflags" -o "$out.partial/${spec%%=*}" "${spec#*=}" || exit 1
    done
  ) >"$log" 2>&1; then
    tail -25 "$log" >&2
    die "building $(basename "$out") failed (full log: $log); after fixing, rerun: $0"
  fi
  echo "$(basename "$out") $((SECONDS - start))s" >>"$logs/times"
  say "built $(basename "$out") in $((SECONDS - start))s"
}

# The source directory of a module the work copy resolved (read-only, in GOMODCACHE).
module_dir() { (cd "$GOSTACK_CACHE/mod/$1" && "$GO" list -m -f '{{.Dir}}' "$2"); }

# Mark OUT_DIR complete (the skip test), atomically.
finish() { touch "$1.partial/.complete"; rm -rf "$1"; mv "$1.partial" "$1"; built+=("$(basename "$1")"); }
# Quiet when built: tests/run.sh calls this every time.
done_already() { [ -e "$1/.complete" ]; }

# What hack/lib/version.sh would stamp on Kubernetes' binaries; without it they call
# themselves v0.0.0.
kube_version_ldflags() {
  local v=$KUBE_VERSION minor ld="" p
  minor=${v#v1.}; minor=${minor%%.*}
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $p.gitVersion=$v -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  done
  echo "$ld"
}

build_kube() {
  done_already "$GOSTACK_KUBE_DIR" && return
  build stack "$GOSTACK_KUBE_DIR" "$(kube_version_ldflags)" \
    kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver \
    kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager \
    kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler
  finish "$GOSTACK_KUBE_DIR"
}

build_etcd() {
  done_already "$GOSTACK_ETCD_DIR" && return
  build etcd "$GOSTACK_ETCD_DIR" "" etcd=go.etcd.io/etcd/server/v3
  finish "$GOSTACK_ETCD_DIR"
}

build_kwok() {
  done_already "$GOSTACK_KWOK_DIR" && return
  build stack "$GOSTACK_KWOK_DIR" "" kwok=sigs.k8s.io/kwok/cmd/kwok
  # kwok does nothing without stage definitions: the "fast" ones (Nodes Ready at once,
  # Pods Running at once, deleted Pods removed) plus Node leases as heartbeat.
  local src
  src="$(module_dir "$(basename "$GOSTACK_KWOK_DIR")" sigs.k8s.io/kwok)/kustomize/stage"
  mkdir -p "$GOSTACK_KWOK_DIR.partial/stages"
  cp "$src"/node/fast/node-initialize.yaml "$src"/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
    "$src"/pod/fast/pod-*.yaml "$GOSTACK_KWOK_DIR.partial/stages/"
  finish "$GOSTACK_KWOK_DIR"
}

build_keda() {
  done_already "$GOSTACK_KEDA_DIR" && return
  build stack "$GOSTACK_KEDA_DIR" "-X github.com/kedacore/keda/v2/version.Version=${KEDA_VERSION#v}" \
    keda=github.com/kedacore/keda/v2/cmd/operator \
    keda-adapter=github.com/kedacore/keda/v2/cmd/adapter
  mkdir -p "$GOSTACK_KEDA_DIR.partial/crds"
  cp "$(module_dir "$(basename "$GOSTACK_KEDA_DIR")" github.com/kedacore/keda/v2)"/config/crd/bases/*.yaml \
    "$GOSTACK_KEDA_DIR.partial/crds/"
  finish "$GOSTACK_KEDA_DIR"
}

build_slurm_operator() {
  local out=$GOSTACK_SLURM_OPERATOR_DIR
  done_already "$out" && return
  build slurm-operator "$out" "" manager=github.com/SlinkyProject/slurm-operator/cmd/manager
  mkdir -p "$out.partial/crds"
  local mod
  mod=$(module_dir "$(basename "$out")" github.com/SlinkyProject/slurm-operator)
  cp "$mod"/config/crd/bases/*.yaml "$out.partial/crds/"
  # Slinky's own `slurm` Helm chart, which sites install their NodeSets with (the tests render
  # it). A module zip leaves out every directory named vendor/, so its templates/vendor/
  # (NVIDIA DCGM prolog and epilog, off unless asked for) is missing; the one helper the other
  # templates call from there comes back as it says: off.
  cp -r "$mod/helm/slurm" "$out.partial/helm-slurm"
  chmod -R u+w "$out.partial/helm-slurm"
  mkdir -p "$out.partial/helm-slurm/templates/vendor"
  printf '%s\n' '{{- define "vendor.dcgm.enabled" -}}{{- end -}}' \
    >"$out.partial/helm-slurm/templates/vendor/_dcgm.tpl"
  # Its Controller reconciler deletes/creates ServiceMonitors and fails while that kind is
  # unknown, so the ServiceMonitor CRD ships with it (the Prometheus Operator's).
  build_prometheus_operator
  cp "$GOSTACK_PROMETHEUS_OPERATOR_DIR/crds/monitoring.coreos.com_servicemonitors.yaml" "$out.partial/crds/"
  finish "$out"
}

build_prometheus_operator() {
  local out=$GOSTACK_PROMETHEUS_OPERATOR_DIR
  done_already "$out" && return
  build stack "$out" \
    "-X github.com/prometheus/common/version.Version=${PROMETHEUS_OPERATOR_VERSION#v}" \
    operator=github.com/prometheus-operator/prometheus-operator/cmd/operator
  mkdir -p "$out.partial/crds"
  cp "$(module_dir "$(basename "$out")" github.com/prometheus-operator/prometheus-operator)"/example/prometheus-operator-crd/*.yaml \
    "$out.partial/crds/"
  finish "$out"
}

build_node() {
  done_already "$GOSTACK_NODE_DIR" && return
  build stack "$GOSTACK_NODE_DIR" "$(kube_version_ldflags)" \
    kubelet=k8s.io/kubernetes/cmd/kubelet kube-proxy=k8s.io/kubernetes/cmd/kube-proxy
  finish "$GOSTACK_NODE_DIR"
}

build_containerd() {
  done_already "$GOSTACK_CONTAINERD_DIR" && return
  local m=github.com/containerd/containerd/v2
  build containerd "$GOSTACK_CONTAINERD_DIR" "-X $m/version.Version=${CONTAINERD_VERSION#v}" \
    containerd=$m/cmd/containerd containerd-shim-runc-v2=$m/cmd/containerd-shim-runc-v2 ctr=$m/cmd/ctr
  finish "$GOSTACK_CONTAINERD_DIR"
}

build_coredns() {
  done_already "$GOSTACK_COREDNS_DIR" && return
  build coredns "$GOSTACK_COREDNS_DIR" "" coredns=.
  finish "$GOSTACK_COREDNS_DIR"
}

components=("$@")
[ ${#components[@]} -gt 0 ] || components=(kube etcd kwok keda prometheus-operator slurm-operator node containerd coredns)
total=$SECONDS built=()
for c in "${components[@]}"; do
  case "$c" in
    kube) build_kube ;;
    etcd) build_etcd ;;
    kwok) build_kwok ;;
    keda) build_keda ;;
    slurm-operator) build_slurm_operator ;;
    prometheus-operator) build_prometheus_operator ;;
    node) build_node ;;
    containerd) build_containerd ;;
    coredns) build_coredns ;;
    *) die "unknown component '$c' (kube etcd kwok keda prometheus-operator slurm-operator node containerd coredns)" ;;
  esac
done
[ ${#built[@]} -eq 0 ] || say "built ${built[*]} in $((SECONDS - total))s (under $GOSTACK_CACHE/bin)"
