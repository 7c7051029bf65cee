// CoreDNS with only the plugins the harness's real node uses: the cluster's names
// (kubernetes), bind, health, ready, errors and cache. CoreDNS's own build compiles every
// plugin it ships, cloud providers' SDKs among them; a site's DNS is not what is tested here.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/ready"
)

// The plugins' order in a server's chain: CoreDNS's own order (plugin.cfg), less the others.
func init() {
	dnsserver.Directives = []string{"bind", "ready", "health", "errors", "cache", "kubernetes"}
}

func main() { coremain.Run() }
