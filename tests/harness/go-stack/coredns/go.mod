// The real node's cluster DNS: CoreDNS with only the plugins it uses (main.go).
module slurmscale.local/gostack/coredns

go 1.26.0

require github.com/coredns/coredns v1.15.0
