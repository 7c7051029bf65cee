# Where build-go-stack.sh puts each pinned component, for it and kube.sh (sourced after
# common.sh). The versions live only in the go.mod files beside this file.

GOSTACK_MODS="$HARNESS_DIR/go-stack"
GOSTACK_CACHE="${GOSTACK_CACHE:-$SLURMSCALE_CACHE/go-stack}"

# gostack_pin DIR MODULE: the version DIR/go.mod requires MODULE at.
gostack_pin() {
  awk -v m="$2" '$1 == m {print $2; exit} $1 == "require" && $2 == m {print $3; exit}' \
    "$GOSTACK_MODS/$1/go.mod"
}

KUBE_VERSION=$(gostack_pin kube k8s.io/kubernetes)
ETCD_VERSION=$(gostack_pin etcd go.etcd.io/etcd/server/v3)
KWOK_VERSION=$(gostack_pin kwok sigs.k8s.io/kwok)
KEDA_VERSION=$(gostack_pin keda github.com/kedacore/keda/v2)
SLURM_OPERATOR_VERSION=$(gostack_pin slurm-operator github.com/SlinkyProject/slurm-operator)
PROMETHEUS_OPERATOR_VERSION=$(gostack_pin prometheus-operator github.com/prometheus-operator/prometheus-operator)

# One directory per component and version: a new pin builds beside the old one.
GOSTACK_KUBE_DIR="$GOSTACK_CACHE/bin/kube-$KUBE_VERSION"
GOSTACK_ETCD_DIR="$GOSTACK_CACHE/bin/etcd-$ETCD_VERSION"
GOSTACK_KWOK_DIR="$GOSTACK_CACHE/bin/kwok-$KWOK_VERSION"
GOSTACK_KEDA_DIR="$GOSTACK_CACHE/bin/keda-$KEDA_VERSION"
GOSTACK_SLURM_OPERATOR_DIR="$GOSTACK_CACHE/bin/slurm-operator-$SLURM_OPERATOR_VERSION"
GOSTACK_PROMETHEUS_OPERATOR_DIR="$GOSTACK_CACHE/bin/prometheus-operator-$PROMETHEUS_OPERATOR_VERSION"
