// Source of the ServiceMonitor CRD (example/prometheus-operator-crd/): the slurm-operator's
// Controller reconciler fails without it. Downloaded only, never built; kept apart so it
// does not move the slurm-operator's own dependency versions.
module slurmscale.local/gostack/monitoringcrds

go 1.24.0

require github.com/prometheus-operator/prometheus-operator v0.93.0
