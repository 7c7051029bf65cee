# A real node beside kwok's (sourced by kube.sh: `kube.sh node-start | node-stop`): a kubelet
# and kube-proxy v1.37 and containerd v2.4 from build-go-stack.sh, Debian's runc and CNI
# plugins, and a CoreDNS of the harness's own build, all host processes of the first harness
# copy, for the tests that need what kwok never does — an image pulled from containerd's store,
# a Secret mounted, a probe answered, a preStop run, a pod address dialled through a Service or
# a DNS name.
#
# Addresses stay on this machine: the node is the bridge slurmscale0 at 198.18.128.1 (node IP,
# pods' gateway and DNS server), its pods get 198.18.128.10-250, Services 198.19.0.0/16 — all
# in 198.18.0.0/15, the block reserved for benchmarking (RFC 2544), which an `unreachable`
# route keeps from ever leaving the machine. Pods reach the API server and slurmctld on the
# host's loopback through DNAT rules of the chain SLURMSCALE-NODE, and nothing else. Every
# change to the host — the bridge, the route, the chains, ip_forward and the sysctls the
# kubelet sets — is undone by node-stop (and by `kube.sh stop`), every mount under the node's
# directory unmounted before anything is deleted.
#
# The node is Node `slurmscale-node`, labelled type=real and tainted
# slurmscale.test/real-node=true:NoSchedule: only a pod that asks (node selector type=real and
# that toleration) runs there. Pods in namespaces labelled slurmscale.test/real-node=true get
# a service account token (the harness runs without the ServiceAccount admission plugin).
# Images come from containerd's store only (imported with `kube.sh node-import`, pull policy
# Never or IfNotPresent): nothing is ever pulled.

node_name=slurmscale-node
node_ip=198.18.128.1
node_pods=198.18.128.0/24
node_bridge=slurmscale0
node_dir="$dir/node"
node_kubelet_port=$((kube_base + 250)) node_kubelet_healthz=$((kube_base + 248))
node_proxy_metrics=$((kube_base + 249)) node_proxy_healthz=$((kube_base + 256))
node_dns_health=$((kube_base + 253)) node_dns_ready=$((kube_base + 254))
# Images survive runs (imported once); everything else lives and dies with the run dir.
node_images="$SLURMSCALE_CACHE/containerd"
node_sock="$node_dir/containerd.sock"
node_sysctls=(net.ipv4.ip_forward vm.overcommit_memory vm.panic_on_oom kernel.panic
  kernel.panic_on_oops kernel.keys.root_maxkeys kernel.keys.root_maxbytes)
node_procs=(kubelet kube-proxy coredns containerd)
node_pause=localhost/slurmscale/pause:harness
node_slurmd=localhost/slurmscale/slurmd:26.05

# ctr, without its warning on every call that containerd will drop cgroup v1 one day.
node_ctr() {
  "$GOSTACK_CONTAINERD_DIR/ctr" --address "$node_sock" --namespace k8s.io "$@" 2> >(grep -v 'DEPRECATION: The support for cgroup v1' >&2)
}

node_running() { pid_alive "$pids/kubelet"; }

node_start() {
  running || die "Kubernetes is not running: run tests/harness/kube.sh start"
  node_running && { node_ready "$node_name" && return 0; }
  [ "$kube_base" = 18000 ] || [ -n "${SLURMSCALE_KUBE_NODE_ANY_COPY:-}" ] ||
    die "the real node runs on the first harness copy only (its bridge, route and rules are the machine's)"
  ip link show "$node_bridge" >/dev/null 2>&1 && ! [ -f "$node_dir/orig" ] &&
    die "$node_bridge exists and is not this copy's: another harness runs a node"
  need_bin "$GOSTACK_NODE_DIR/kubelet" node
  need_bin "$GOSTACK_CONTAINERD_DIR/containerd" containerd
  need_bin "$GOSTACK_COREDNS_DIR/coredns" coredns
  command -v runc >/dev/null || die "runc is missing (tests/harness/deps.sh installs it)"
  [ -x /usr/lib/cni/bridge ] || die "the CNI plugins are missing (tests/harness/deps.sh installs containernetworking-plugins)"
  node_stop >/dev/null 2>&1 || true
  mkdir -p "$node_dir"/{cni,ipam,kubelet,pod-logs,volume-plugins,runc,s} "$node_images"
  # die exits the script: take down what was made, keep the logs.
  trap 'if [ $? -ne 0 ]; then node_stop; say "node start failed; stopped, logs kept in $logs"; fi' EXIT
  node_network_up
  node_relays
  node_containerd
  node_import_images
  node_kubelet
  node_kube_proxy
  node_coredns
  node_token_policy
  # What the quick start's chart needs of the Prometheus Operator: its CRDs, as a site that
  # follows the README has them.
  install_crds "$repo_root"/tests/upstream/crds/monitoring.coreos.com_{servicemonitors,prometheusrules}.yaml
  node_write_env
  trap - EXIT
  say "real node $node_name up: $node_ip, pods $node_pods, Services $service_cidr"
}

node_network_up() {
  local s
  : >"$node_dir/orig"
  for s in "${node_sysctls[@]}"; do echo "$s=$(sysctl -n "$s")" >>"$node_dir/orig"; done
  [ -d /var/log/containers ] || echo "made=/var/log/containers" >>"$node_dir/orig"
  [ -d /var/lib/cni ] || echo "made=/var/lib/cni" >>"$node_dir/orig"
  ip link add "$node_bridge" type bridge
  ip addr add "$node_ip/24" dev "$node_bridge"
  ip link set "$node_bridge" up
  # Pods dial host services on loopback through DNAT: allowed on this interface only.
  sysctl -qw "net.ipv4.conf.$node_bridge.route_localnet=1"
  ip route add unreachable 198.18.0.0/15 2>/dev/null && echo "route=198.18.0.0/15" >>"$node_dir/orig"
  # Services from the host too: its own connections are routed before kube-proxy's DNAT, so the
  # Service range needs a route (the bridge's; it goes with the bridge) or the lookup above
  # refuses them.
  ip route add "$service_cidr" dev "$node_bridge"
  iptables -t nat -N SLURMSCALE-NODE
  iptables -t nat -I PREROUTING 1 -i "$node_bridge" -j SLURMSCALE-NODE
  # The API server for the `kubernetes` Service (whose endpoints nobody reconciles here), and
  # the 26.05 slurmctld for slurmd pods: the source stays the pod's address, which a dynamic
  # node takes for its NodeAddr.
  iptables -t nat -A SLURMSCALE-NODE -d "${service_cidr%.*/*}.1/32" -p tcp --dport 443 \
    -j DNAT --to-destination "127.0.0.1:$api_port"
  local ctld_ports
  ctld_ports=$(node_host_ports SLURMCTLD_URL)
  [ -z "$ctld_ports" ] || iptables -t nat -A SLURMSCALE-NODE -d "$node_ip/32" -p tcp -m multiport \
    --dports "$ctld_ports" -j DNAT --to-destination 127.0.0.1
  iptables -N SLURMSCALE-FWD
  iptables -I FORWARD 1 -j SLURMSCALE-FWD
  iptables -A SLURMSCALE-FWD -i "$node_bridge" -o "$node_bridge" -j ACCEPT
  iptables -A SLURMSCALE-FWD -i "$node_bridge" -j REJECT
  iptables -A SLURMSCALE-FWD -o "$node_bridge" -j REJECT
  sysctl -qw net.ipv4.ip_forward=1
}

# node_host_ports VAR: the loopback port of VAR (a URL in slurm.sh's env) of each Slurm this
# copy runs, comma-separated.
node_host_ports() {
  local f ports=()
  for f in "$SLURMSCALE_RUN"/slurm-*/env; do
    [ -f "$f" ] || continue
    ports+=("$(sed -n "s|^export $1=http://127.0.0.1:\([0-9]*\).*|\1|p" "$f")")
  done
  local IFS=,
  echo "${ports[*]}"
}

# Each Slurm's slurmrestd at the node's address, as a site's sits behind a Service: a Service
# whose endpoint is the node's address is DNATed there by kube-proxy, which is the one
# translation a connection gets, so a relay listens there (slurmctld, which pods dial
# directly, is DNATed instead: a dynamic node takes its address from the connection's source).
node_relays() {
  local port
  for port in $(node_host_ports SLURM_REST_URL | tr , ' '); do
    run "relay-$port" socat "TCP-LISTEN:$port,bind=$node_ip,fork,reuseaddr" "TCP:127.0.0.1:$port"
  done
}

node_containerd() {
  # containerd's own config version 3; the cri plugin's keys as in containerd 2.4.
  cat >"$node_dir/containerd.toml" <<EOF
version = 3
root = '$node_images'
state = '$node_dir/containerd'
disabled_plugins = ['io.containerd.snapshotter.v1.btrfs', 'io.containerd.snapshotter.v1.zfs',
  'io.containerd.snapshotter.v1.devmapper', 'io.containerd.nri.v1.nri',
  'io.containerd.tracing.processor.v1.otlp', 'io.containerd.internal.v1.tracing']

[grpc]
  address = '$node_sock'

[ttrpc]
  address = '$node_sock.ttrpc'

[plugins.'io.containerd.internal.v1.opt']
  path = '$node_images/opt'

[plugins.'io.containerd.shim.v1.manager']
  socket_dir = '$node_dir/s'

[plugins.'io.containerd.cri.v1.images']
  snapshotter = 'overlayfs'

[plugins.'io.containerd.cri.v1.images'.pinned_images]
  sandbox = '$node_pause'

[plugins.'io.containerd.cri.v1.runtime']
  # This VM refuses a lower oom_score_adj than containerd's own.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  disable_hugetlb_controller = true

[plugins.'io.containerd.cri.v1.runtime'.containerd]
  default_runtime_name = 'runc'

[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
  runtime_type = 'io.containerd.runc.v2'

[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
  BinaryName = '$(command -v runc)'
  Root = '$node_dir/runc'
  SystemdCgroup = false

[plugins.'io.containerd.cri.v1.runtime'.cni]
  bin_dirs = ['/usr/lib/cni']
  conf_dir = '$node_dir/cni'
  max_conf_num = 1

[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = '127.0.0.1'
  stream_server_port = '0'
EOF
  cat >"$node_dir/cni/10-slurmscale.conflist" <<EOF
{"cniVersion": "1.0.0", "name": "slurmscale", "plugins": [
  {"type": "bridge", "bridge": "$node_bridge", "isGateway": true, "ipMasq": false,
   "hairpinMode": true,
   "ipam": {"type": "host-local", "dataDir": "$node_dir/ipam",
            "ranges": [[{"subnet": "$node_pods", "rangeStart": "198.18.128.10",
                         "rangeEnd": "198.18.128.250", "gateway": "$node_ip"}]],
            "routes": [{"dst": "0.0.0.0/0"}]}}]}
EOF
  PATH="$GOSTACK_CONTAINERD_DIR:$PATH" run containerd "$GOSTACK_CONTAINERD_DIR/containerd" \
    --config "$node_dir/containerd.toml"
  wait_up 30 containerd "containerd" node_ctr version
}

# Images the node runs, imported into containerd's store when missing or changed: the sandbox
# (a static pause built here), and whatever `kube.sh node-import` is given.
node_import_images() {
  node_import "$node_pause" "$(node_pause_context)"
  if [ -f "$SLURM_2605_ROOT/.slurmscale-ready" ]; then node_slurmd_image; fi
  # slurmscale's own, as image.sh last built it (the chart's pods run it).
  local ours
  ours=$("$HARNESS_DIR/image.sh" name)
  if [ -n "$(image_context "$ours")" ]; then node_import_built "$ours"; fi
}

# Slinky's slurmd image, made of the harness's Slurm 26.05 root filesystem (what a NodeSet on
# the real node runs, its `logfile` sidecar too): slurmd started as Slinky's image starts it —
# the operator's arguments parsed by a shell (its `--conf` value comes single-quoted) — after
# making the directories the harness's slurm.conf names for a slurmd (spool, log and pid
# files under the first copy's run dir, which a pod does not mount).
node_slurmd_image() {
  local ctx="$SLURMSCALE_CACHE/build/slurmd-26.05" run="$SLURMSCALE_RUN/slurm-26.05" stamp
  # Remade when the root's release, the run dir or this function changes (not the rest of
  # node.sh).
  stamp="$(cat "$SLURM_2605_ROOT/.slurmscale-ready") $run $(declare -f node_slurmd_image | sha256sum | cut -c1-16)"
  if [ "$(cat "$ctx/.stamp" 2>/dev/null)" != "$stamp" ]; then
    rm -rf "$ctx" && mkdir -p "$ctx"
    # Hard links: the root stays as it is, the context costs no copy.
    cp -al "$SLURM_2605_ROOT" "$ctx/rootfs"
    rm -rf "$ctx"/rootfs/{prometheus,proc,sys,dev,run,tmp,.slurmscale-ready} \
      "$ctx"/rootfs/usr/share/{doc,man,locale,info} "$ctx"/rootfs/var/lib/apt/lists "$ctx"/rootfs/var/cache/apt
    mkdir -p "$ctx"/rootfs/{proc,sys,dev,run,tmp}
    chmod 1777 "$ctx/rootfs/tmp"
    cat >"$ctx/entrypoint" <<EOF
#!/bin/sh
mkdir -p /run/slurm /var/log/slurm '$run/spool' '$run/log' '$run/run'
eval "exec /usr/sbin/slurmd -D \$*"
EOF
    chmod 0755 "$ctx/entrypoint"
    printf 'FROM scratch\nCOPY rootfs /\nCOPY entrypoint /usr/local/bin/slurmd-entrypoint\nENTRYPOINT ["/usr/local/bin/slurmd-entrypoint"]\n' >"$ctx/Containerfile"
    echo "$stamp" >"$ctx/.stamp"
  fi
  node_import "$node_slurmd" "$ctx" "$(sha256sum <<<"$stamp" | cut -c1-16)"
}

# The sandbox every pod holds its namespaces with: a static C program built here (no registry
# to pull one from).
node_pause_context() {
  local ctx="$SLURMSCALE_CACHE/build/pause"
  if [ ! -x "$ctx/pause" ] || [ "$HARNESS_DIR/pause.c" -nt "$ctx/pause" ]; then
    mkdir -p "$ctx"
    gcc -static -Os -o "$ctx/pause" "$HARNESS_DIR/pause.c" || die "cannot build $HARNESS_DIR/pause.c"
    printf 'FROM scratch\nCOPY pause /pause\nENTRYPOINT ["/pause"]\n' >"$ctx/Containerfile"
  fi
  echo "$ctx"
}

# node_import IMAGE CONTEXT [DIGEST]: build IMAGE with buildah from a context directory (one
# with a Containerfile), unless buildah holds it already with that context's digest (of its
# files, unless given), and import it into containerd when containerd lacks that digest.
node_import() {
  local image=$1 ctx=$2 digest=${3:-}
  [ -n "$digest" ] ||
    digest=$(cd "$ctx" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)
  if [ "$(image_context "$image")" != "$digest" ]; then
    buildah bud --quiet --label "io.slurmscale.context=$digest" -t "$image" -f "$ctx/Containerfile" "$ctx" >/dev/null ||
      die "buildah could not build $image from $ctx"
  fi
  node_import_built "$image"
}

# node_import_built IMAGE: buildah's IMAGE into containerd's store, unless it holds that build.
node_import_built() {
  local image=$1 digest
  digest=$(image_context "$image")
  [ -n "$digest" ] || die "buildah has no image $image"
  if ! node_ctr images ls -q "labels.\"io.slurmscale.context\"==$digest" 2>/dev/null | grep -qx "$image"; then
    local archive="$node_dir/import.tar"
    rm -f "$archive"
    buildah push --quiet "$image" "oci-archive:$archive:$image" >/dev/null || die "buildah push $image failed"
    node_ctr images import --label "io.slurmscale.context=$digest" "$archive" >/dev/null ||
      die "containerd could not import $image"
    rm -f "$archive"
  fi
}

node_kubelet() {
  issue kubelet-client "/O=system:nodes/CN=system:node:$node_name" "extendedKeyUsage=clientAuth"
  issue kubelet "/CN=$node_name" "subjectAltName=IP:$node_ip,DNS:$node_name
extendedKeyUsage=serverAuth"
  write_kubeconfig "$node_dir/kubelet.kubeconfig" kubelet-client
  cat >"$node_dir/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $node_ip
port: $node_kubelet_port
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $node_kubelet_healthz
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $pki/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: $pki/kubelet.crt
tlsPrivateKeyFile: $pki/kubelet.key
containerRuntimeEndpoint: unix://$node_sock
# This VM mounts cgroup v1 (hybrid) and runs no systemd.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
# true refuses to start unless the kernel's settings are the kubelet's; false makes it set
# them: node-stop puts them back.
protectKernelDefaults: false
makeIPTablesUtilChains: false
clusterDomain: cluster.local
clusterDNS: [$node_ip]
# Never the host's resolver: pods resolve cluster names only.
resolvConf: ""
podLogsDir: $node_dir/pod-logs
volumePluginDir: $node_dir/volume-plugins
registerWithTaints:
- {key: slurmscale.test/real-node, value: "true", effect: NoSchedule}
# Images are imported, never pulled: never collect them (the disk may look full to the kubelet).
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
maxPods: 32
# A Secret's new content reaches its pods within this (the default is a minute): the chart's
# token file follows the operator's rotation in a short test.
syncFrequency: 10s
EOF
  run kubelet "$GOSTACK_NODE_DIR/kubelet" --config="$node_dir/kubelet.yaml" \
    --kubeconfig="$node_dir/kubelet.kubeconfig" --hostname-override="$node_name" \
    --node-ip="$node_ip" --node-labels=type=real,slurmscale.test/node=real \
    --root-dir="$node_dir/kubelet" --cert-dir="$node_dir/kubelet/pki"
  wait_up 120 kubelet "Node $node_name Ready" node_ready "$node_name"
  # The API server adds node.kubernetes.io/not-ready to a new Node; the node lifecycle
  # controller, which is off, would lift it. Only the real node's own taint stays.
  api -f -o /dev/null -X PATCH -H 'Content-Type: application/merge-patch+json' \
    -d '{"spec":{"taints":[{"key":"slurmscale.test/real-node","value":"true","effect":"NoSchedule"}]}}' \
    "$api_url/api/v1/nodes/$node_name" || die "untainting $node_name failed"
}

node_kube_proxy() {
  issue kube-proxy "/CN=system:kube-proxy" "extendedKeyUsage=clientAuth"
  write_kubeconfig "$node_dir/kube-proxy.kubeconfig" kube-proxy
  # iptables mode; every setting that would change the host's sysctls left at zero or off.
  cat >"$node_dir/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $node_dir/kube-proxy.kubeconfig}
hostnameOverride: $node_name
mode: iptables
clusterCIDR: $node_pods
nodePortAddresses: [$node_ip/32]
iptables: {localhostNodePorts: false, minSyncPeriod: 1s}
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
healthzBindAddress: 127.0.0.1:$node_proxy_healthz
metricsBindAddress: 127.0.0.1:$node_proxy_metrics
EOF
  run kube-proxy "$GOSTACK_NODE_DIR/kube-proxy" --config="$node_dir/kube-proxy.yaml"
  wait_up 60 kube-proxy "kube-proxy /healthz" curl -sf "http://127.0.0.1:$node_proxy_healthz/healthz"
}

node_coredns() {
  # Cluster names only: nothing is forwarded to the host's resolver.
  cat >"$node_dir/Corefile" <<EOF
cluster.local:53 in-addr.arpa:53 {
    bind $node_ip
    errors
    health 127.0.0.1:$node_dns_health
    ready 127.0.0.1:$node_dns_ready
    kubernetes cluster.local in-addr.arpa {
        kubeconfig $kubeconfig harness
        pods insecure
    }
    cache 5
}
.:53 {
    bind $node_ip
    errors
}
EOF
  run coredns "$GOSTACK_COREDNS_DIR/coredns" -conf "$node_dir/Corefile"
  wait_up 60 coredns "CoreDNS ready" curl -sf "http://127.0.0.1:$node_dns_ready/ready"
}

# Pods in namespaces labelled slurmscale.test/real-node=true get the projected service account
# token the ServiceAccount admission plugin would give them (off here: see start_apiserver).
node_token_policy() {
  apply /apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies/slurmscale-harness-sa-token <<'EOF'
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: slurmscale-harness-sa-token}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
    namespaceSelector: {matchLabels: {slurmscale.test/real-node: "true"}}
  matchConditions:
  - name: automount
    expression: "!has(object.spec.automountServiceAccountToken) || object.spec.automountServiceAccountToken"
  failurePolicy: Fail
  reinvocationPolicy: Never
  # A JSON patch (an apply configuration may not add to the atomic lists inside a projected
  # volume): the volume appended to the pod's, its mount to each of the pod's first four
  # containers (an empty list added first where the pod or a container has none: the patch's
  # operations apply in order), and the ServiceAccount `default` where none is named, as the
  # admission plugin would.
  mutations:
  - patchType: JSONPatch
    jsonPatch:
      expression: >
        (has(object.spec.volumes) ? [] :
          [JSONPatch{op: "add", path: "/spec/volumes", value: []}]) +
        [JSONPatch{op: "add", path: "/spec/volumes/-", value: Object.spec.volumes{
          name: "kube-api-access",
          projected: Object.spec.volumes.projected{
            defaultMode: 420,
            sources: [
              Object.spec.volumes.projected.sources{
                serviceAccountToken: Object.spec.volumes.projected.sources.serviceAccountToken{
                  path: "token", expirationSeconds: 3607}},
              Object.spec.volumes.projected.sources{
                configMap: Object.spec.volumes.projected.sources.configMap{
                  name: "kube-root-ca.crt",
                  items: [Object.spec.volumes.projected.sources.configMap.items{key: "ca.crt", path: "ca.crt"}]}},
              Object.spec.volumes.projected.sources{
                downwardAPI: Object.spec.volumes.projected.sources.downwardAPI{
                  items: [Object.spec.volumes.projected.sources.downwardAPI.items{
                    path: "namespace",
                    fieldRef: Object.spec.volumes.projected.sources.downwardAPI.items.fieldRef{
                      apiVersion: "v1", fieldPath: "metadata.namespace"}}]}}]}}}] +
        [0, 1, 2, 3].filter(i, i < size(object.spec.containers) &&
            !has(object.spec.containers[i].volumeMounts)).map(i,
          JSONPatch{op: "add", path: "/spec/containers/" + string(i) + "/volumeMounts", value: []}) +
        [0, 1, 2, 3].filter(i, i < size(object.spec.containers)).map(i,
          JSONPatch{op: "add", path: "/spec/containers/" + string(i) + "/volumeMounts/-",
            value: Object.spec.containers.volumeMounts{name: "kube-api-access",
              mountPath: "/var/run/secrets/kubernetes.io/serviceaccount", readOnly: true}}) +
        (has(object.spec.serviceAccountName) && object.spec.serviceAccountName != "" ? [] :
          [JSONPatch{op: "add", path: "/spec/serviceAccountName", value: "default"}])
EOF
  apply /apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicybindings/slurmscale-harness-sa-token <<'EOF'
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: slurmscale-harness-sa-token}
spec:
  policyName: slurmscale-harness-sa-token
EOF
}

node_write_env() {
  cat >"$dir/node.env" <<EOF
export HARNESS_NODE_NAME=$node_name
export HARNESS_NODE_IP=$node_ip
export HARNESS_NODE_SELECTOR=type=real
export HARNESS_NODE_TAINT=slurmscale.test/real-node
export HARNESS_NODE_NAMESPACE_LABEL=slurmscale.test/real-node=true
export HARNESS_NODE_CONTAINERD=$node_sock
export HARNESS_SERVICE_CIDR=$service_cidr
export HARNESS_SLURMD_IMAGE=$node_slurmd
EOF
}

# Takes the node down and puts back every change to the host: pods first (the kubelet's and
# containerd's CNI teardown), then the processes, the mounts under the node's directory
# (deepest first: a hostPath mounted into a pod must be unmounted, never deleted through), the
# rules, the route, the bridge and the sysctls.
node_stop() {
  [ -f "$node_dir/orig" ] || [ -d "$node_dir" ] || return 0
  stop_pidfile "$pids/kubelet"
  if pid_alive "$pids/containerd"; then
    local c
    for c in $(node_ctr containers ls -q 2>/dev/null); do
      node_ctr tasks kill -s KILL "$c" >/dev/null 2>&1 || true
    done
  fi
  stop_pidfiles "$pids/kube-proxy" "$pids/coredns" "$pids"/relay-*
  [ -x "$GOSTACK_NODE_DIR/kube-proxy" ] && "$GOSTACK_NODE_DIR/kube-proxy" --cleanup >/dev/null 2>&1
  stop_pidfile "$pids/containerd"
  # The shims of our containerd: by the socket directory on their command line.
  local p
  for p in $(pgrep -f "containerd-shim-runc-v2.*$node_dir" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
  node_unmount
  if iptables -t nat -S SLURMSCALE-NODE >/dev/null 2>&1; then
    iptables -t nat -D PREROUTING -i "$node_bridge" -j SLURMSCALE-NODE 2>/dev/null
    iptables -t nat -F SLURMSCALE-NODE && iptables -t nat -X SLURMSCALE-NODE
  fi
  if iptables -S SLURMSCALE-FWD >/dev/null 2>&1; then
    iptables -D FORWARD -j SLURMSCALE-FWD 2>/dev/null
    iptables -F SLURMSCALE-FWD && iptables -X SLURMSCALE-FWD
  fi
  ip link del "$node_bridge" 2>/dev/null
  local line
  if [ -f "$node_dir/orig" ]; then
    while IFS= read -r line; do
      case "$line" in
        route=*) ip route del unreachable "${line#route=}" 2>/dev/null ;;
        made=*) rm -rf "${line#made=}" ;;
        *=*) sysctl -qw "$line" ;;
      esac
    done <"$node_dir/orig"
    rm -f "$node_dir/orig"
  fi
  api -s -o /dev/null -X DELETE "$api_url/api/v1/nodes/$node_name" 2>/dev/null || true
  node_unmount
  if grep -q " $node_dir" /proc/self/mountinfo; then
    say "error: mounts are left under $node_dir; not deleting it"
    return 1
  fi
  rm -rf "$node_dir" "$dir/node.env"
}

node_unmount() {
  local m
  # Deepest first (longest path).
  for m in $(awk -v d="$node_dir" 'index($5, d) == 1 {print length($5), $5}' /proc/self/mountinfo | sort -rn | cut -d' ' -f2); do
    umount -l "$m" 2>/dev/null || true
  done
}
