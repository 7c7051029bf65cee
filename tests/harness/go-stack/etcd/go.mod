// etcd 3.6 (Debian's 3.4 works with kube-apiserver 1.37 but lacks RequestWatchProgress:
// every client-go 0.36+ watch stream is refused and controllers such as kwok miss events).
// The server module replaces its sibling modules with ../ paths, so they are pinned here too.
module slurmscale.local/gostack/etcd

go 1.26.0

require (
	go.etcd.io/etcd/api/v3 v3.6.16
	go.etcd.io/etcd/client/pkg/v3 v3.6.16
	go.etcd.io/etcd/client/v3 v3.6.16
	go.etcd.io/etcd/pkg/v3 v3.6.16
	go.etcd.io/etcd/server/v3 v3.6.16
)

tool go.etcd.io/etcd/server/v3
