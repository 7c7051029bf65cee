// Builds kube-apiserver, kube-controller-manager and kube-scheduler from k8s.io/kubernetes.
// k8s.io/kubernetes replaces its staging modules (k8s.io/api, ...) with local paths, and a
// replace only counts in the main module, so each staging module is required here at the
// v0.x.y that matches the v1.x.y tag. Versions only: build-go-stack.sh resolves the rest.
module slurmscale.local/gostack/kube

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
)

tool (
	k8s.io/kubernetes/cmd/kube-apiserver
	k8s.io/kubernetes/cmd/kube-controller-manager
	k8s.io/kubernetes/cmd/kube-scheduler
)
