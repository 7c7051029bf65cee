// kwok: fake Nodes, and Pods on them become Running without a kubelet.
module slurmscale.local/gostack/kwok

go 1.26.0

require sigs.k8s.io/kwok v0.8.0

tool sigs.k8s.io/kwok/cmd/kwok
