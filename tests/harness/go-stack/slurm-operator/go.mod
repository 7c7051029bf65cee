// Slinky slurm-operator, NodeSet API v1beta1: the newest release the module proxy can build.
// v1.1.0-rc1 needs slurm-client v1.1.0-rc1 (served); v1.1.0 needs slurm-client v1.1.0 and
// every 1.2 the proxy does not serve. It speaks REST v0.0.44 only, which Slurm 26.05 serves.
module slurmscale.local/gostack/slurmoperator

go 1.26.1

require github.com/SlinkyProject/slurm-operator v1.1.0-rc1

tool github.com/SlinkyProject/slurm-operator/cmd/manager
