// KEDA operator and its external-metrics API server (the adapter).
module slurmscale.local/gostack/keda

go 1.26.0

require github.com/kedacore/keda/v2 v2.21.0

// The one replace in keda's own go.mod (replaces only apply in the main module).
replace github.com/nexus-rpc/nexus-proto-annotations v0.1.0 => github.com/nexus-rpc/nexus-proto-annotations v0.1.1-0.20260629224316-835bd8d49cb4

tool (
	github.com/kedacore/keda/v2/cmd/adapter
	github.com/kedacore/keda/v2/cmd/operator
)
