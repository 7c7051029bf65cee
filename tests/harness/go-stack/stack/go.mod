// Kubernetes (kube-apiserver, kube-controller-manager, kube-scheduler; the kubelet and
// kube-proxy of the real node), kwok, KEDA (operator and metrics adapter) and the Prometheus
// Operator in one module graph: their shared
// dependencies (k8s.io/api, client-go, controller-runtime, grpc, protobuf, ...) resolve to one
// version each and compile once for all of them (cold, 9 minutes where four graphs took 12).
// etcd and slurm-operator keep graphs of their own: the etcd server needs its own client
// release, slurm-operator Kubernetes' 1.35 internals.
//
// k8s.io/kubernetes replaces its staging modules (k8s.io/api, ...) with local paths, and a
// replace only counts in the main module, so each staging module is required here at the
// v0.x.y that matches the v1.x.y tag. Versions only: build-go-stack.sh resolves the rest.
module slurmscale.local/gostack/stack

go 1.26.0

require (
	k8s.io/kubernetes v1.37.2
	k8s.io/api v0.37.2
	k8s.io/apiextensions-apiserver v0.37.2
	k8s.io/apimachinery v0.37.2
	k8s.io/apiserver v0.37.2
	k8s.io/cli-runtime v0.37.2
	k8s.io/client-go v0.37.2
	k8s.io/cloud-provider v0.37.2
	k8s.io/cluster-bootstrap v0.37.2
	k8s.io/code-generator v0.37.2
	k8s.io/component-base v0.37.2
	k8s.io/component-helpers v0.37.2
	k8s.io/controller-manager v0.37.2
	k8s.io/cri-api v0.37.2
	k8s.io/cri-client v0.37.2
	k8s.io/cri-streaming v0.37.2
	k8s.io/csi-translation-lib v0.37.2
	k8s.io/dynamic-resource-allocation v0.37.2
	k8s.io/endpointslice v0.37.2
	k8s.io/externaljwt v0.37.2
	k8s.io/kms v0.37.2
	k8s.io/kube-aggregator v0.37.2
	k8s.io/kube-controller-manager v0.37.2
	k8s.io/kube-proxy v0.37.2
	k8s.io/kube-scheduler v0.37.2
	k8s.io/kubectl v0.37.2
	k8s.io/kubelet v0.37.2
	k8s.io/metrics v0.37.2
	k8s.io/mount-utils v0.37.2
	k8s.io/pod-security-admission v0.37.2
	k8s.io/sample-apiserver v0.37.2
	k8s.io/streaming v0.37.2
	sigs.k8s.io/kwok v0.8.0
	github.com/kedacore/keda/v2 v2.21.0
	github.com/prometheus-operator/prometheus-operator v0.93.0
)

// KEDA's metrics adapter on Kubernetes 1.37's API types: custom-metrics-apiserver's
// generated OpenAPI of v1.36 names a type 1.37 removed (v1.PodStatusResult).
require sigs.k8s.io/custom-metrics-apiserver v1.37.0 // indirect

// An old cloud.google.com/go in the graph still holds compute/metadata, which later moved to
// a module of its own: a newer one leaves that package in one place.
require cloud.google.com/go v0.123.0 // indirect

// The one replace in KEDA's own go.mod (replaces only apply in the main module).
replace github.com/nexus-rpc/nexus-proto-annotations v0.1.0 => github.com/nexus-rpc/nexus-proto-annotations v0.1.1-0.20260629224316-835bd8d49cb4

tool (
	k8s.io/kubernetes/cmd/kube-apiserver
	k8s.io/kubernetes/cmd/kubelet
	k8s.io/kubernetes/cmd/kube-proxy
	k8s.io/kubernetes/cmd/kube-controller-manager
	k8s.io/kubernetes/cmd/kube-scheduler
	sigs.k8s.io/kwok/cmd/kwok
	github.com/kedacore/keda/v2/cmd/adapter
	github.com/kedacore/keda/v2/cmd/operator
	github.com/prometheus-operator/prometheus-operator/cmd/operator
)
