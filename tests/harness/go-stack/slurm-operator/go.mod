// Slinky slurm-operator, NodeSet API v1beta1. v1.0.1 is the newest the module proxy can
// build: v1.0.2+ need slurm-client v1.0.2+, which the proxy does not serve.
module slurmscale.local/gostack/slurmoperator

go 1.25.0

require github.com/SlinkyProject/slurm-operator v1.0.1

tool github.com/SlinkyProject/slurm-operator/cmd/manager
