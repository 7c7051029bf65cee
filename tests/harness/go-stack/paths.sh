# Where build-go-stack.sh puts each pinned component, for it and kube.sh (sourced after
# common.sh). The versions live only in the go.mod files beside this file.

GOSTACK_MODS="$HARNESS_DIR/go-stack"
GOSTACK_CACHE="${GOSTACK_CACHE:-$SLURMSCALE_CACHE/go-stack}"

# gostack_pin DIR MODULE: the version DIR/go.mod requires MODULE at.
gostack_pin() {
  awk -v m="$2" '$1 == m {print $2; exit} $1 == "require" && $2 == m {print $3; exit}' \
    "$GOSTACK_MODS/$1/go.mod"
}

KUBE_VERSION=$(gostack_pin stack k8s.io/kubernetes)
ETCD_VERSION=$(gostack_pin etcd go.etcd.io/etcd/server/v3)
KWOK_VERSION=$(gostack_pin stack sigs.k8s.io/kwok)
KEDA_VERSION=$(gostack_pin stack github.com/kedacore/keda/v2)
SLURM_OPERATOR_VERSION=$(gostack_pin slurm-operator github.com/SlinkyProject/slurm-operator)
CONTAINERD_VERSION=$(gostack_pin containerd github.com/containerd/containerd/v2)
COREDNS_VERSION=$(gostack_pin coredns github.com/coredns/coredns)
PROMETHEUS_OPERATOR_VERSION=$(gostack_pin stack github.com/prometheus-operator/prometheus-operator)

# One directory per component, version and module graph (the first 8 hex of the sha256 of its
# go.mod's pinned versions): a new pin, of the component or of anything in its graph, builds
# beside the old one; a comment or a new tool line does not.
gostack_graph() {
  sed -n 's|//.*||; /[[:space:]]v[0-9]/p' "$GOSTACK_MODS/$1/go.mod" | sha256sum | cut -c1-8
}
stack_graph=$(gostack_graph stack)
GOSTACK_KUBE_DIR="$GOSTACK_CACHE/bin/kube-$KUBE_VERSION-$stack_graph"
GOSTACK_ETCD_DIR="$GOSTACK_CACHE/bin/etcd-$ETCD_VERSION-$(gostack_graph etcd)"
GOSTACK_KWOK_DIR="$GOSTACK_CACHE/bin/kwok-$KWOK_VERSION-$stack_graph"
GOSTACK_KEDA_DIR="$GOSTACK_CACHE/bin/keda-$KEDA_VERSION-$stack_graph"
GOSTACK_SLURM_OPERATOR_DIR="$GOSTACK_CACHE/bin/slurm-operator-$SLURM_OPERATOR_VERSION-$(gostack_graph slurm-operator)"
GOSTACK_PROMETHEUS_OPERATOR_DIR="$GOSTACK_CACHE/bin/prometheus-operator-$PROMETHEUS_OPERATOR_VERSION-$stack_graph"
# The real node (node.sh): the kubelet and kube-proxy from the same graph as the API server.
GOSTACK_NODE_DIR="$GOSTACK_CACHE/bin/node-$KUBE_VERSION-$stack_graph"
GOSTACK_CONTAINERD_DIR="$GOSTACK_CACHE/bin/containerd-$CONTAINERD_VERSION-$(gostack_graph containerd)"
GOSTACK_COREDNS_DIR="$GOSTACK_CACHE/bin/coredns-$COREDNS_VERSION-$(gostack_graph coredns)"
