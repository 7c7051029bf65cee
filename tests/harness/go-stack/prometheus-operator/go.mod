// The Prometheus Operator (the controller kube-prometheus-stack runs): the tests install our
// chart's ServiceMonitor and PrometheusRule for it to turn into a Prometheus configuration.
// Its module also gives the slurm-operator its ServiceMonitor CRD.
module slurmscale.local/gostack/prometheusoperator

go 1.26.0

require github.com/prometheus-operator/prometheus-operator v0.93.0

// An old cloud.google.com/go in the graph still holds compute/metadata, which later moved to
// a module of its own: a newer one (as KEDA's build resolves) leaves that package in one place.
require cloud.google.com/go v0.123.0 // indirect

tool github.com/prometheus-operator/prometheus-operator/cmd/operator
