// containerd v2.4 (the daemon, its runc shim and ctr) for the harness's real node: the
// kubelet's container runtime, over Debian's runc.
module slurmscale.local/gostack/containerd

go 1.26.0

require github.com/containerd/containerd/v2 v2.4.2

tool (
	github.com/containerd/containerd/v2/cmd/containerd
	github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2
	github.com/containerd/containerd/v2/cmd/ctr
)
