#!/usr/bin/env bash
# A current Kubernetes on 127.0.0.1, from the binaries build-go-stack.sh caches: etcd 3.6,
# kube-apiserver, kube-controller-manager and kube-scheduler 1.37, and kwok's fake Nodes
# (Pods there become Running without a kubelet). Fresh certificates and an empty etcd per
# start, and the CRDs the tests need. On request, KEDA (operator + external metrics API) and
# the Slinky slurm-operator.
#
#   kube.sh start | stop | status | env | apiserver-stop | apiserver-start
#   kube.sh keda-start | keda-stop | operator-start | operator-stop
#   kube.sh site-start | site-stop [site-26.05 | site-24.11]   (both when none is named)
#   kube.sh node-start | node-stop | node-import IMAGE CONTEXT   (a real node: node.sh)
#
# SLURMSCALE_KUBE_WITH="keda slurm-operator" (either or both) makes `start` start those too.
# The slurm-operator comes with what makes it manage the harness's real Slurm
# (SLURMSCALE_OPERATOR_SLURM: 26.05, the default, which slurm.sh must have started; 24.11;
# or `none` for the operator alone): a slurmrestd on 127.0.0.1:6820 (its fixed slurmrestd
# address) — 26.05's own, which speaks the operator's v0.0.44, or for 24.11
# slurmrestd-v0044.py, a path-rewriting proxy in front of 24.11's —, a Controller and a
# RestApi in namespace slurm-operator, and operator-pods.sh, which plays each NodeSet pod's
# slurmd. See operator_start. With the operator up, `site-start` adds sites as Slinky's chart
# makes them (see site_start): the chart's objects in namespace `site-2605` (`site-2411`), and
# a Slurm 26.05 (24.11), `slurm.sh site-26.05` (`site-24.11`), on the slurm.conf the operator
# renders for them. Mind that the operator
# reconciles every NodeSet in the cluster, whichever Controller it names, and rewrites its
# status within a second: tests/run.sh starts it only while the operator's own tests run.
#
# What tests can rely on:
# * kwok's Nodes (kwok-node-0, ...; SLURMSCALE_KWOK_NODES of them, default 1) carry kwok's
#   usual taint kwok.x-k8s.io/node=fake:NoSchedule and label type=kwok. A Pod runs there when
#   it tolerates that taint or names the Node in spec.nodeName. The scheduler places Pods on
#   kwok Nodes only, so a Pod that opts in to neither stays Pending (Unschedulable), and Nodes
#   a test creates stay the test's: nobody binds to them, and the node lifecycle controller is
#   off, so nothing taints them or evicts from them for want of a kubelet.
# * After apiserver-start, the scheduler, controllers and kwok resume on their own within
#   about 30 s (their watches back off while the API server is away).
# * Ports: SLURMSCALE_KUBE_PORT_BASE (default 18000) plus fixed offsets below 1000, so a
#   second copy (tests/run.sh: 21000) runs beside the first. Only the slurm-operator's
#   slurmrestds are fixed: it dials port 6820 of each RestApi's Service, and nothing moves it.
#   Everything listens on 127.0.0.1 but KEDA's adapter's own /metrics (base + 84), which
#   has no address flag.
# Only pids this script recorded are ever signalled.
source "$(dirname "$0")/common.sh"
source "$HARNESS_DIR/go-stack/paths.sh"
need_root

dir="$SLURMSCALE_RUN/kube"
pids="$dir/pids" pki="$dir/pki" logs="$dir/log"
kube_base=${SLURMSCALE_KUBE_PORT_BASE:-18000}
# Below the kernel's ephemeral range (32768 and up), where an outgoing connection could hold
# a port before we bind it.
if [ "$kube_base" -lt 1024 ] || [ $((kube_base + 1000)) -gt 32768 ]; then
  die "SLURMSCALE_KUBE_PORT_BASE=$kube_base: every port is base + 0..999 and must stay within 1024..32767"
fi
etcd_port=$((kube_base + 379)) etcd_peer_port=$((kube_base + 380)) api_port=$((kube_base + 443))
kcm_port=$((kube_base + 257)) sched_port=$((kube_base + 259))
keda_metrics_port=$((kube_base + 80)) keda_probe_port=$((kube_base + 81)) keda_grpc_port=$((kube_base + 666))
adapter_port=$((kube_base + 444)) adapter_metrics_port=$((kube_base + 84))
operator_probe_port=$((kube_base + 82)) operator_metrics_port=$((kube_base + 83))
# Fixed, not from the base: the operator dials port 6820 of a RestApi's Service, and nothing
# moves it. So one operator per machine (tests/run.sh: on the first copy only).
operator_restd_port=6820
# The operator's objects. The Controller's name is one no other test's NodeSet names in
# controllerRef (they say `slurm`): the operator would make pods for those, and it gives up
# reconciling a Controller when a NodeSet in another namespace names it.
operator_ns=slurm-operator operator_controller=harness
# The sites (site_start): Slinky's chart, one a Slurm release, each in a namespace of its own
# with its slurmrestd for the operator on a loopback address of its own (port 6820 is taken on
# 127.0.0.1 by the harness Controller's).
sites=(site-26.05 site-24.11)
site_values="$HARNESS_DIR/site/values.yaml" site_placement="$HARNESS_DIR/site/placement.yaml"
operator_slurm=${SLURMSCALE_OPERATOR_SLURM:-26.05}
api_url="https://127.0.0.1:$api_port"
kubeconfig="$dir/kubeconfig"
kwok_nodes=${SLURMSCALE_KWOK_NODES:-1}
# kwok hands out fake Pod IPs and Services get ClusterIPs, all in 198.18.0.0/15, the block
# reserved for benchmarking networks (RFC 2544, never routed): kwok's pods in its first half,
# the real node's (node.sh) in 198.18.128.0/24, Services in 198.19.0.0/16. Endpoints and
# EndpointSlices refuse a loopback address, so a Service's endpoints are filled as on a real
# cluster (a Prometheus discovers its targets through them). Only the real node's kube-proxy
# routes a ClusterIP; while the node runs, an `unreachable` route keeps the whole block here.
pod_cidr=198.18.0.0/17 service_cidr=198.19.0.0/16
repo_root="$(cd "$HARNESS_DIR/../.." && pwd)"
# CRDs installed at start: ours generated from Rust types (NodeSet with both versions,
# GenericNode, NodeSetAutoscaler, ...), all checked in under tests/crds and charts/.
crd_files=("$repo_root"/tests/crds/*.yaml "$repo_root"/charts/slurmscale/crds/*.yaml)
base_procs=(kube-controller-manager kube-scheduler kwok)

# issue NAME SUBJECT EXTENSIONS [CA]: an EC key pair signed by CA (default: the cluster CA).
# EC rather than RSA: a dozen RSA keys are a second of a start on a busy 2-core machine.
issue() {
  local ca=${4:-ca}
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "$2" \
    -keyout "$pki/$1.key" -out "$pki/$1.csr" 2>/dev/null
  openssl x509 -req -in "$pki/$1.csr" -CA "$pki/$ca.crt" -CAkey "$pki/$ca.key" -CAcreateserial -days 2 \
    -extfile <(printf '%s\n' "$3") -out "$pki/$1.crt" 2>/dev/null
}

new_ca() {
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj "/CN=$2" \
    -keyout "$pki/$1.key" -out "$pki/$1.crt" 2>/dev/null
}

make_certs() {
  mkdir -p "$pki/keda"
  new_ca ca slurmscale-test-ca
  # The aggregation layer's own CA, as kubeadm does: extension API servers (KEDA's) trust
  # only requests that carry the front-proxy client certificate.
  new_ca front-proxy-ca slurmscale-test-front-proxy-ca
  issue apiserver "/CN=kube-apiserver" "subjectAltName=IP:127.0.0.1,IP:${service_cidr%.*/*}.1,DNS:localhost,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local
extendedKeyUsage=serverAuth"
  # What the API server shows a kubelet (the real node's: logs, exec).
  issue apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "extendedKeyUsage=clientAuth"
  issue admin "/O=system:masters/CN=slurmscale-test-admin" "extendedKeyUsage=clientAuth"
  # Their own users, so the bootstrap RBAC roles apply as in a real cluster.
  issue kcm "/CN=system:kube-controller-manager" "extendedKeyUsage=clientAuth"
  issue scheduler "/CN=system:kube-scheduler" "extendedKeyUsage=clientAuth"
  issue front-proxy-client "/CN=front-proxy-client" "extendedKeyUsage=clientAuth" front-proxy-ca
  # KEDA's operator <-> adapter gRPC is mutual TLS with one key pair, and the aggregator
  # checks the adapter's serving cert against <service>.<namespace>.svc.
  issue keda "/CN=keda" "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:keda-operator.keda.svc,DNS:keda-metrics-apiserver.keda.svc
extendedKeyUsage=serverAuth,clientAuth"
  cp "$pki/ca.crt" "$pki/keda/ca.crt"
  cp "$pki/keda.crt" "$pki/keda/tls.crt"
  cp "$pki/keda.key" "$pki/keda/tls.key"
  openssl ecparam -name prime256v1 -genkey -noout 2>/dev/null | openssl pkcs8 -topk8 -nocrypt -out "$pki/sa.key"
  openssl pkey -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
  chmod 0600 "$pki"/*.key "$pki"/keda/tls.key
}

# write_kubeconfig FILE USER: a kubeconfig for the client certificate $pki/USER.crt.
write_kubeconfig() {
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: harness
  cluster:
    server: $api_url
    certificate-authority: $pki/ca.crt
users:
- name: $2
  user:
    client-certificate: $pki/$2.crt
    client-key: $pki/$2.key
contexts:
- name: harness
  context: {cluster: harness, user: $2, namespace: default}
current-context: harness
EOF
  chmod 0600 "$1"
}

api() { # curl as the admin user; extra args follow
  curl -sS --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" "$@"
}

ready() { [ "$(api -o /dev/null -w '%{http_code}' "$api_url/readyz")" = 200 ]; }

# create PATH [FILE]: POST one YAML object (stdin without FILE). One that exists already is
# kept (409): the object a caller installed first wins.
create() {
  local code
  code=$(api -o "$dir/api.out" -w '%{http_code}' -X POST -H 'Content-Type: application/yaml' \
    --data-binary "@${2:--}" "$api_url$1")
  case $code in
    201 | 409) ;;
    *) die "POST $1 ${2:-} failed ($code): $(head -c 600 "$dir/api.out")" ;;
  esac
}

# install_crds FILE...: create them all, then wait until each is served.
install_crds() {
  local f name
  for f in "$@"; do create /apis/apiextensions.k8s.io/v1/customresourcedefinitions "$f"; done
  for f in "$@"; do
    name=$(awk '/^metadata:/{m=1} m && /^  name:/{print $2; exit}' "$f")
    wait_for 30 "CRD $name to be established" crd_established "$name"
  done
}

crd_established() {
  api "$api_url/apis/apiextensions.k8s.io/v1/customresourcedefinitions/$1" |
    jq -e '.status.conditions[]? | select(.type=="Established" and .status=="True")' >/dev/null
}

# run NAME CMD...: start in the background, log to $logs/NAME.log, remember the pid.
run() {
  local name=$1
  shift
  "$@" >>"$logs/$name.log" 2>&1 &
  echo $! >"$pids/$name"
}

need_bin() { [ -x "$1" ] || die "missing $1: run tests/harness/build-go-stack.sh $2"; }

# wait_up SECS PROC WHAT CHECK...: wait_for CHECK, but fail at once, with the end of its log,
# when PROC has exited (a port taken by another copy, a bad flag) instead of timing out.
wait_up() {
  local secs=$1 proc=$2 what=$3
  shift 3
  local deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    pid_alive "$pids/$proc" || die "$proc exited while waiting for $what: $(tail -n 3 "$logs/$proc.log")"
    # The log's end too: CI keeps this output, not the run directory.
    [ $SECONDS -lt $deadline ] ||
      die "timed out after ${secs}s waiting for $what; the end of $logs/$proc.log:
$(tail -n 15 "$logs/$proc.log" | cut -c1-400)"
    sleep 0.2
  done
}

start_etcd() {
  run etcd "$GOSTACK_ETCD_DIR/etcd" --name harness --data-dir "$dir/etcd" \
    --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$etcd_peer_port" \
    --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer_port" \
    --initial-cluster "harness=http://127.0.0.1:$etcd_peer_port" \
    --listen-metrics-urls "" --unsafe-no-fsync
}

start_apiserver() {
  # --endpoint-reconciler-type=none: 1.37 refuses a loopback advertise address for the
  # `kubernetes` Service's endpoints (nothing here needs them). The requestheader and
  # proxy-client flags enable the aggregation layer (KEDA's external metrics API).
  # --enable-aggregator-routing=false on purpose: with routing on, the aggregator dials a
  # Service's endpoints, which may not hold loopback addresses; with it off, an ExternalName
  # Service naming 127.0.0.1 works (keda_start).
  # No ServiceAccount admission: it refuses a Pod until kube-controller-manager has made its
  # namespace's `default` ServiceAccount, which under load (or for up to 30 s after an API
  # server restart, while the controller's watch backs off) is later than a test creating a
  # namespace and then a Pod. No Pod here runs anything that would use the token.
  run kube-apiserver "$GOSTACK_KUBE_DIR/kube-apiserver" \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$api_port" \
    --disable-admission-plugins=ServiceAccount \
    --endpoint-reconciler-type=none --etcd-servers="http://127.0.0.1:$etcd_port" \
    --tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
    --client-ca-file="$pki/ca.crt" --authorization-mode=Node,RBAC \
    --service-account-issuer=https://kubernetes.default.svc \
    --service-account-key-file="$pki/sa.pub" --service-account-signing-key-file="$pki/sa.key" \
    --service-cluster-ip-range="$service_cidr" --allow-privileged=true \
    --requestheader-client-ca-file="$pki/front-proxy-ca.crt" --requestheader-allowed-names=front-proxy-client \
    --requestheader-username-headers=X-Remote-User --requestheader-group-headers=X-Remote-Group \
    --requestheader-extra-headers-prefix=X-Remote-Extra- \
    --proxy-client-cert-file="$pki/front-proxy-client.crt" --proxy-client-key-file="$pki/front-proxy-client.key" \
    --enable-aggregator-routing=false \
    --kubelet-client-certificate="$pki/apiserver-kubelet-client.crt" \
    --kubelet-client-key="$pki/apiserver-kubelet-client.key" --kubelet-preferred-address-types=InternalIP
}

start_kcm() {
  # Every default controller (deployments, replica sets, HPA, garbage collector, namespaces,
  # service accounts, ...) but the node lifecycle one: with no kubelet behind the Nodes tests
  # create, it would taint them unreachable after a minute and evict their Pods.
  # kwok keeps its own Nodes Ready. The HPA keeps its default 15 s sync, as clusters run it:
  # KEDA's reaction measured here is a site's.
  run kube-controller-manager "$GOSTACK_KUBE_DIR/kube-controller-manager" \
    --kubeconfig="$dir/kcm.kubeconfig" --authentication-kubeconfig="$dir/kcm.kubeconfig" \
    --authorization-kubeconfig="$dir/kcm.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port="$kcm_port" --leader-elect=false \
    --controllers='*,-node-lifecycle-controller' --use-service-account-credentials=true \
    --service-account-private-key-file="$pki/sa.key" --root-ca-file="$pki/ca.crt" \
    --cluster-signing-cert-file="$pki/ca.crt" --cluster-signing-key-file="$pki/ca.key"
}

start_scheduler() {
  # Only kwok's Nodes (label type=kwok) and the real node (type=real, node.sh) are candidates: a
  # Node a test creates is never given a Pod behind the test's back.
  cat >"$dir/scheduler.yaml" <<EOF
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection: {kubeconfig: $dir/scheduler.kubeconfig}
leaderElection: {leaderElect: false}
profiles:
- schedulerName: default-scheduler
  pluginConfig:
  - name: NodeAffinity
    args:
      addedAffinity:
        requiredDuringSchedulingIgnoredDuringExecution:
          nodeSelectorTerms:
          - matchExpressions: [{key: type, operator: In, values: [kwok, real]}]
EOF
  run kube-scheduler "$GOSTACK_KUBE_DIR/kube-scheduler" --config="$dir/scheduler.yaml" \
    --authentication-kubeconfig="$dir/scheduler.kubeconfig" \
    --authorization-kubeconfig="$dir/scheduler.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port="$sched_port"
}

start_kwok() {
  local cfg=() f
  for f in "$GOSTACK_KWOK_DIR"/stages/*.yaml; do cfg+=(--config="$f"); done
  # Only Nodes annotated kwok.x-k8s.io/node=fake are kwok's. HOME: kwok reads ~/.kwok.
  # It opens no port (no --server-address).
  mkdir -p "$dir/kwok-home"
  HOME="$dir/kwok-home" run kwok "$GOSTACK_KWOK_DIR/kwok" --kubeconfig="$kubeconfig" "${cfg[@]}" \
    --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
    --cidr="$pod_cidr" --node-ip=127.0.0.1 --node-lease-duration-seconds=40
}

kwok_node_names() { local i; for ((i = 0; i < kwok_nodes; i++)); do printf 'kwok-node-%s ' "$i"; done; }

# create_kwok_nodes [NAME...]: kwok's fake Nodes (default: kwok_node_names), labelled as a
# Linux node is (Slinky's chart selects kubernetes.io/os=linux for its pods).
create_kwok_nodes() {
  local n taint='[{"key":"kwok.x-k8s.io/node","value":"fake","effect":"NoSchedule"}]'
  local names=("$@")
  [ ${#names[@]} -gt 0 ] || read -ra names <<<"$(kwok_node_names)"
  for n in "${names[@]}"; do
    create /api/v1/nodes <<EOF
apiVersion: v1
kind: Node
metadata:
  name: $n
  annotations: {kwok.x-k8s.io/node: fake}
  labels: {kubernetes.io/hostname: $n, kubernetes.io/os: linux, type: kwok}
spec:
  taints: $taint
status:
  allocatable: {cpu: "64", memory: 512Gi, pods: "250"}
  capacity: {cpu: "64", memory: 512Gi, pods: "250"}
EOF
    # The API server adds node.kubernetes.io/not-ready to a new Node; the node lifecycle
    # controller, which is off, would lift it once kwok reports Ready. Only kwok's stays.
    api -f -o /dev/null -X PATCH -H 'Content-Type: application/merge-patch+json' \
      -d "{\"spec\":{\"taints\":$taint}}" "$api_url/api/v1/nodes/$n" || die "untainting $n failed"
  done
}

node_ready() {
  api "$api_url/api/v1/nodes/$1" |
    jq -e '.status.conditions[]? | select(.type=="Ready" and .status=="True")' >/dev/null
}

running() {
  local p
  for p in etcd kube-apiserver "${base_procs[@]}"; do pid_alive "$pids/$p" || return 1; done
}

write_env() {
  cat >"$dir/env" <<EOF
export KUBECONFIG=$kubeconfig
export KUBE_API_URL=$api_url
export KUBE_VERSION=$KUBE_VERSION
# kube-scheduler and the other Kubernetes binaries (tests run a second scheduler from here).
export HARNESS_KUBE_BIN=$GOSTACK_KUBE_DIR
export HARNESS_KUBE_PKI=$pki
export HARNESS_KWOK_NODES="$(kwok_node_names | sed 's/ $//')"
export HARNESS_KEDA_VERSION=$KEDA_VERSION
export HARNESS_KEDA_CRDS=$GOSTACK_KEDA_DIR/crds
export HARNESS_KEDA_METRICS_URL=http://127.0.0.1:$keda_metrics_port/metrics
export HARNESS_KEDA_ADAPTER_URL=https://127.0.0.1:$adapter_port
export HARNESS_SLURM_OPERATOR_VERSION=$SLURM_OPERATOR_VERSION
export HARNESS_SLURM_OPERATOR_CRDS=$GOSTACK_SLURM_OPERATOR_DIR/crds
# Slinky's own \`slurm\` Helm chart, from the same operator module.
export HARNESS_SLINKY_CHART=$GOSTACK_SLURM_OPERATOR_DIR/helm-slurm
export HARNESS_SLURM_OPERATOR_METRICS_URL=http://127.0.0.1:$operator_metrics_port/metrics
export HARNESS_SLURM_OPERATOR_RESTD_URL=http://127.0.0.1:$operator_restd_port
export HARNESS_SLURM_OPERATOR_NAMESPACE=$operator_ns
export HARNESS_SLURM_OPERATOR_CONTROLLER=$operator_controller
export HARNESS_SLURM_OPERATOR_SLURM=$operator_slurm
export HARNESS_SLURM_OPERATOR_LOG=$logs/slurm-operator.log
# operator-pods.sh's pods with a slurmd running (one file each): empty once it is done.
export HARNESS_SLURM_OPERATOR_PODS=$dir/operator-pods
# The Prometheus Operator's build (operator, crds/): tests/real_node.rs runs it.
export HARNESS_PROMETHEUS_OPERATOR=$GOSTACK_PROMETHEUS_OPERATOR_DIR
EOF
}

start() {
  if running && ready; then
    say "Kubernetes already running ($api_url)"
  else
    start_base
  fi
  local extra
  for extra in ${SLURMSCALE_KUBE_WITH:-}; do
    case "$extra" in
      keda) keda_start ;;
      slurm-operator) operator_start ;;
      *) die "SLURMSCALE_KUBE_WITH: unknown '$extra' (keda, slurm-operator)" ;;
    esac
  done
}

start_base() {
  need_bin "$GOSTACK_ETCD_DIR/etcd" etcd
  need_bin "$GOSTACK_KUBE_DIR/kube-apiserver" kube
  need_bin "$GOSTACK_KWOK_DIR/kwok" kwok
  stop >/dev/null 2>&1 || true
  mkdir -p "$dir/etcd" "$logs" "$pids"
  # die exits the script: leave no process behind, but keep the logs to read.
  trap 'if [ $? -ne 0 ]; then stop_processes; say "start failed; processes stopped, logs kept in $logs"; fi' EXIT
  start_etcd # comes up while the certificates are made
  make_certs
  write_kubeconfig "$kubeconfig" admin
  write_kubeconfig "$dir/kcm.kubeconfig" kcm
  write_kubeconfig "$dir/scheduler.kubeconfig" scheduler
  wait_up 30 etcd "etcd /health" curl -sf "http://127.0.0.1:$etcd_port/health"
  start_apiserver
  wait_up 60 kube-apiserver "kube-apiserver /readyz" ready
  # The clients connect while the CRDs are installed.
  start_kcm
  start_scheduler
  start_kwok
  install_crds "${crd_files[@]}"
  create_kwok_nodes
  local n
  for n in $(kwok_node_names); do
    wait_up 30 kwok "kwok to make $n Ready" node_ready "$n"
  done
  wait_up 30 kube-controller-manager "kube-controller-manager /healthz" \
    curl -skf "https://127.0.0.1:$kcm_port/healthz"
  wait_up 30 kube-scheduler "kube-scheduler /healthz" \
    curl -skf "https://127.0.0.1:$sched_port/healthz"
  write_env
  trap - EXIT
  say "Kubernetes $KUBE_VERSION up: $api_url (KUBECONFIG=$kubeconfig)"
}

# KEDA's operator and metrics adapter, as the admin user outside the cluster (no pods, no
# RBAC objects), and the APIService v1beta1.external.metrics.k8s.io pointing at the adapter.
keda_start() {
  need_bin "$GOSTACK_KEDA_DIR/keda" keda
  running || die "Kubernetes is not running: run tests/harness/kube.sh start"
  if pid_alive "$pids/keda-operator" && pid_alive "$pids/keda-adapter"; then return; fi
  keda_stop >/dev/null 2>&1
  # Its controllers give up on kinds that are not served yet when they start.
  install_crds "$GOSTACK_KEDA_DIR"/crds/*.yaml
  create /api/v1/namespaces <<<'{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "keda"}}'
  # KEDA_CLUSTER_OBJECT_NAMESPACE/POD_NAMESPACE stand in for the pod's service-account files;
  # WATCH_NAMESPACE must be set, empty is all namespaces.
  KEDA_CLUSTER_OBJECT_NAMESPACE=keda POD_NAMESPACE=keda WATCH_NAMESPACE="" \
    run keda-operator "$GOSTACK_KEDA_DIR/keda" --kubeconfig="$kubeconfig" \
    --metrics-bind-address="127.0.0.1:$keda_metrics_port" \
    --health-probe-bind-address="127.0.0.1:$keda_probe_port" \
    --metrics-service-bind-address="127.0.0.1:$keda_grpc_port" \
    --cert-dir="$pki/keda" --enable-cert-rotation=false --leader-elect=false --zap-log-level=info
  # The adapter's controller-runtime client reads only $KUBECONFIG (or in-cluster config).
  # Its own /metrics (--port) binds every interface: it has no address flag.
  KUBECONFIG="$kubeconfig" KEDA_CLUSTER_OBJECT_NAMESPACE=keda POD_NAMESPACE=keda WATCH_NAMESPACE="" \
    run keda-adapter "$GOSTACK_KEDA_DIR/keda-adapter" \
    --lister-kubeconfig="$kubeconfig" --authentication-kubeconfig="$kubeconfig" \
    --authorization-kubeconfig="$kubeconfig" \
    --bind-address=127.0.0.1 --secure-port="$adapter_port" --port="$adapter_metrics_port" \
    --tls-cert-file="$pki/keda/tls.crt" --tls-private-key-file="$pki/keda/tls.key" \
    --client-ca-file="$pki/ca.crt" --cert-dir="$pki/keda" \
    --metrics-service-address="127.0.0.1:$keda_grpc_port" \
    --metrics-service-grpc-authority=keda-operator.keda.svc --zap-log-level=info
  # The APIService names a Service. For a ClusterIP Service the aggregator wants ready
  # endpoints (which may not hold 127.0.0.1) before it calls the APIService Available; an
  # ExternalName Service naming 127.0.0.1 needs none, and the aggregator dials
  # 127.0.0.1:<APIService port>, checking the cert as keda-metrics-apiserver.keda.svc.
  create /api/v1/namespaces/keda/services <<'EOF'
apiVersion: v1
kind: Service
metadata: {name: keda-metrics-apiserver, namespace: keda}
spec: {type: ExternalName, externalName: 127.0.0.1}
EOF
  create /apis/apiregistration.k8s.io/v1/apiservices <<EOF
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1beta1.external.metrics.k8s.io}
spec:
  group: external.metrics.k8s.io
  version: v1beta1
  groupPriorityMinimum: 100
  versionPriority: 100
  service: {name: keda-metrics-apiserver, namespace: keda, port: $adapter_port}
  caBundle: $(base64 -w0 "$pki/ca.crt")
EOF
  wait_up 90 keda-adapter "KEDA's external metrics API (see also $logs/keda-operator.log)" \
    api -f "$api_url/apis/external.metrics.k8s.io/v1beta1"
  say "KEDA $KEDA_VERSION up (external.metrics.k8s.io served by 127.0.0.1:$adapter_port)"
}

keda_stop() {
  # An APIService nobody answers breaks discovery for every client: remove it first.
  if [ -f "$pki/admin.crt" ]; then
    api -o /dev/null -X DELETE \
      "$api_url/apis/apiregistration.k8s.io/v1/apiservices/v1beta1.external.metrics.k8s.io" 2>/dev/null || true
  fi
  stop_pidfiles "$pids/keda-adapter" "$pids/keda-operator"
}

# apply PATH: create or update the YAML object on stdin (server-side apply; PATH names it).
apply() {
  local code
  code=$(api -o "$dir/api.out" -w '%{http_code}' -X PATCH -H 'Content-Type: application/apply-patch+yaml' \
    --data-binary @- "$api_url$1?fieldManager=harness&force=true")
  case $code in
    200 | 201) ;;
    *) die "apply $1 failed ($code): $(head -c 600 "$dir/api.out")" ;;
  esac
}

# The slurm-operator (NodeSet v1beta1), as the admin user, managing the real Slurm
# $operator_slurm. Its CRDs are installed unless one of the same name is (our NodeSet CRD,
# with both versions, stays), plus prometheus-operator's ServiceMonitor CRD: its Controller
# reconciler fails while that kind is unknown.
operator_start() {
  need_bin "$GOSTACK_SLURM_OPERATOR_DIR/manager" slurm-operator
  running || die "Kubernetes is not running: run tests/harness/kube.sh start"
  case "$operator_slurm" in
    26.05 | 24.11 | none) ;;
    # Its slurmrestd serves v0.0.36-v0.0.38: no node update endpoint at all (the operator
    # drains through POST node/{name}, v0.0.39 on), and states are strings, not arrays.
    22.05) die "SLURMSCALE_OPERATOR_SLURM=22.05: the operator needs REST v0.0.44; Slurm 22.05 serves v0.0.38, which has no node update and other shapes; use 24.11" ;;
    *) die "SLURMSCALE_OPERATOR_SLURM=$operator_slurm: 26.05, 24.11 or none" ;;
  esac
  if pid_alive "$pids/slurm-operator" && { [ "$operator_slurm" = none ] ||
    { restd_answers && pid_alive "$pids/operator-pods"; }; }; then
    return
  fi
  operator_stop
  # die exits the script: leave none of the three behind, but keep the logs to read.
  trap 'if [ $? -ne 0 ]; then operator_stop; say "operator start failed; stopped, logs kept in $logs"; fi' EXIT
  install_crds "$GOSTACK_SLURM_OPERATOR_DIR"/crds/*.yaml
  # slurm-operator 1.1 keeps one slurmd pod a Kubernetes node (a required anti-affinity):
  # Nodes for as many pods as a NodeSet here has (slurm.sh's slinky-0..15), beside the first.
  local i extra=()
  for ((i = 0; i < 16; i++)); do extra+=("kwok-slurmd-$i"); done
  create_kwok_nodes "${extra[@]}"
  [ "$operator_slurm" = none ] || operator_slurm_objects
  operator_log_from=0
  if [ -f "$logs/slurm-operator.log" ]; then operator_log_from=$(wc -l <"$logs/slurm-operator.log"); fi
  # The operator dials each Controller's slurmrestd at its RestApi's Service,
  # <restapi>-restapi.<namespace>:6820. There is no cluster DNS for a process on the host, so
  # it runs in a mount namespace of its own whose /etc/hosts maps those names to where the
  # harness runs them (operator_hosts). It still waits for the RestApi's Deployment to have a
  # ready replica, which kwok provides when its pod template tolerates kwok's taint.
  operator_hosts >"$dir/operator-hosts"
  run slurm-operator unshare --mount -- sh -c 'mount --bind "$0" /etc/hosts && exec "$@"' \
    "$dir/operator-hosts" "$GOSTACK_SLURM_OPERATOR_DIR/manager" --kubeconfig="$kubeconfig" \
    --health-addr="127.0.0.1:$operator_probe_port" --metrics-addr="127.0.0.1:$operator_metrics_port" \
    --leader-elect=false
  wait_up 30 slurm-operator "slurm-operator /readyz" \
    curl -sf "http://127.0.0.1:$operator_probe_port/readyz"
  if [ "$operator_slurm" = none ]; then
    trap - EXIT
    say "slurm-operator $SLURM_OPERATOR_VERSION up (slurmrestd expected at http://127.0.0.1:$operator_restd_port)"
    return
  fi
  KUBE_API_URL=$api_url HARNESS_KUBE_PKI=$pki \
    run operator-pods "$HARNESS_DIR/operator-pods.sh" "$operator_ns" "$operator_slurm" "$dir/operator-pods"
  # Ready once the operator has built its Slurm client and slurmrestd accepted its own token.
  wait_up 60 slurm-operator "the operator's Slurm client" restd_served
  trap - EXIT
  say "slurm-operator $SLURM_OPERATOR_VERSION up, managing Slurm $operator_slurm through http://127.0.0.1:$operator_restd_port (Controller $operator_ns/$operator_controller)"
}

# The names the operator dials slurmrestd by, and where the harness runs each: the harness
# Controller's on 127.0.0.1, each site's on its own address.
operator_hosts() {
  cat /etc/hosts
  echo "127.0.0.1 $operator_controller-restapi.$operator_ns"
  local site
  for site in "${sites[@]}"; do
    site_vars "$site"
    echo "$site_restd_addr $site_full-restapi.$site_ns"
  done
}

# A site as Slinky's chart makes one, for tests of the layouts sites run (docs/testing.md), on
# Slurm FLAVOR's release (site-26.05, site-24.11): the chart (the operator module's,
# tests/harness/site/values.yaml as the site's values, placement.yaml for where kwok runs its
# pods, the cluster named per site) rendered and applied in the site's namespace; the operator
# writes slurm.conf for its Controller (ConfigMap slurm-config) as it would for a slurmctld
# pod; the harness saves it with the chart's keys and starts Slurm on it (`slurm.sh FLAVOR
# start`: operator-conf.sh's substitutions and nothing else), a slurmrestd where the operator
# dials the site's RestApi (24.11's through the v0.0.44 proxy), and an operator-pods.sh for
# the site's pods. Needs the operator (operator-start) and the release's root filesystem.
site_start() {
  local flavor=$1 tools
  site_vars "$flavor"
  pid_alive "$pids/slurm-operator" || die "the slurm-operator is not running: run tests/harness/kube.sh operator-start first"
  tools=$("$HARNESS_DIR/tools.sh") || die "tests/harness/tools.sh failed"
  rm -rf "$site_render" && mkdir -p "$site_render"
  create /api/v1/namespaces <<<"{\"apiVersion\": \"v1\", \"kind\": \"Namespace\", \"metadata\": {\"name\": \"$site_ns\"}}"
  # The chart makes new keys at every render, in immutable Secrets, unless they exist (as
  # `helm upgrade` finds them): a start after a stop keeps the keys, which the operator
  # holds on to.
  local keep=()
  if [ -n "$(site_key "$site_full-auth-jwt" jwt.key 2>/dev/null)" ] &&
    [ -n "$(site_key "$site_full-auth-slurm" slurm.key 2>/dev/null)" ]; then
    keep=(--set jwtKey.create=false --set slurmKey.create=false)
  fi
  HOME=$dir "$tools/helm" template "$site_release" "$GOSTACK_SLURM_OPERATOR_DIR/helm-slurm" -n "$site_ns" \
    -f "$site_values" -f "$site_placement" --set "clusterName=$site_cluster" "${keep[@]}" \
    >"$site_render/chart.yaml" || die "helm template of Slinky's chart failed"
  "$tools/kubectl" --kubeconfig="$kubeconfig" apply --server-side --force-conflicts --field-manager=harness \
    -f "$site_render/chart.yaml" >"$site_render/apply.log" 2>&1 ||
    die "applying the chart's objects failed: $(tail -n 5 "$site_render/apply.log")"
  wait_for 60 "slurm-operator's slurm.conf for $flavor (ConfigMap $site_ns/$site_full-config)" site_rendered
  site_key "$site_full-auth-jwt" jwt.key >"$site_render/jwt.key"
  site_key "$site_full-auth-slurm" slurm.key >"$site_render/slurm.key"
  [ -s "$site_render/jwt.key" ] && [ -s "$site_render/slurm.key" ] || die "the chart's key Secrets in $site_ns are empty"
  "$HARNESS_DIR/slurm.sh" "$flavor" start
  local env
  env=$("$HARNESS_DIR/slurm.sh" "$flavor" env) || die "no env of Slurm $flavor"
  if [ "$flavor" = site-24.11 ]; then
    stop_pidfile "$pids/slurmrestd-v0044-$flavor"
    run "slurmrestd-v0044-$flavor" python3 "$HARNESS_DIR/slurmrestd-v0044.py" "$site_restd_addr:$operator_restd_port" \
      "$(sed -n 's/^export SLURM_REST_URL=//p' <<<"$env")"
  else
    "$HARNESS_DIR/slurm.sh" "$flavor" restd-at "$site_restd_addr:$operator_restd_port"
  fi
  stop_pidfile "$pids/operator-pods-$flavor"
  KUBE_API_URL=$api_url HARNESS_KUBE_PKI=$pki \
    run "operator-pods-$flavor" "$HARNESS_DIR/operator-pods.sh" "$site_ns" "$flavor" "$dir/operator-pods-$flavor"
  wait_up 60 slurm-operator "the operator's Slurm client for $flavor's Controller" \
    awk -v c="\"$site_ns/$site_full\"" 'index($0, "Added slurm client") && index($0, c) {found = 1; exit} END {exit !found}' \
    "$logs/slurm-operator.log"
  say "$flavor up: Slinky's chart in namespace $site_ns, Slurm ${flavor#site-} on the operator's slurm.conf ($site_render)"
}

# site_vars FLAVOR: the site's namespace (site-2605), cluster and Helm release name
# (site2605), the chart's name for its objects (site2605-slurm: the Controller, its ConfigMap
# and Secrets, the RestApi, `site2605-slurm-worker-<nodeset>`), where the operator finds its
# slurmrestd, and where its render is kept (slurm.sh reads it there). The release names
# differ: slurm-operator v1.1.0-rc1 mixes up Controllers of one name in two namespaces
# ("cross-namespace owner references are disallowed").
site_vars() {
  local release=${1#site-}
  case "$1" in
    site-26.05) site_restd_addr=127.0.4.1 ;;
    site-24.11) site_restd_addr=127.0.4.2 ;;
    *) die "a site is site-26.05 or site-24.11, not $1" ;;
  esac
  site_ns=site-${release/./} site_cluster=site${release/./} site_render=$SLURMSCALE_RUN/$1-render
  site_release=$site_cluster site_full=$site_cluster-slurm
}

# site_rendered: the operator's ConfigMap has slurm.conf with a NodeSet line for every NodeSet
# the chart made; saved in the site's render dir with the ConfigMap's other files.
site_rendered() {
  local cm nodeset
  cm=$(api -f "$api_url/api/v1/namespaces/$site_ns/configmaps/$site_full-config") || return 1
  jq -r '.data["slurm.conf"] // empty' <<<"$cm" >"$site_render/slurm.conf.new"
  for nodeset in $(awk '$1 == "hostname:" {sub(/-$/, "", $2); print $2}' "$site_render/chart.yaml"); do
    grep -qx "NodeSet=$nodeset Feature=$nodeset" "$site_render/slurm.conf.new" || return 1
  done
  mv "$site_render/slurm.conf.new" "$site_render/slurm.conf"
  jq -r '.data["gres.conf"] // empty' <<<"$cm" >"$site_render/gres.conf"
  jq -r '.data["cgroup.conf"] // empty' <<<"$cm" >"$site_render/cgroup.conf"
}

site_key() { # SECRET KEY: its bytes
  api -f "$api_url/api/v1/namespaces/$site_ns/secrets/$1" | jq -r --arg k "$2" '.data[$k] // empty' | base64 -d
}

# The site's Slurm, proxy and pods loop go; its objects stay in Kubernetes (the next start
# applies them again).
site_stop() {
  stop_pidfiles "$pids/operator-pods-$1" "$pids/slurmrestd-v0044-$1"
  "$HARNESS_DIR/slurm.sh" "$1" stop
}

# The operator's Slurm client is up: 24.11's proxy logged a 200 since this start (after its
# first $proxy_log_from lines); 26.05's slurmrestd logs no request, so the operator's own log
# since this start (after its first $operator_log_from lines) says it added its client.
# The file is read directly: `tail | grep -q` fails under pipefail once what follows the
# match outgrows a pipe's buffer (tail is killed by SIGPIPE), and the operator logs a lot.
restd_served() {
  if [ "$operator_slurm" = 24.11 ]; then
    logged_since "$logs/slurmrestd-v0044.log" "$proxy_log_from" ' -> 200 '
  else
    logged_since "$logs/slurm-operator.log" "$operator_log_from" '"msg":"Added slurm client"'
  fi
}

# logged_since FILE N TEXT: TEXT is on a line of FILE after its first N.
logged_since() {
  awk -v from="$2" -v text="$3" 'NR > from && index($0, text) { found = 1; exit } END { exit !found }' "$1"
}

restd_answers() { # any HTTP status (401 without a token): the proxy and slurmrestd are up
  [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$operator_restd_port/slurm/v0.0.44/ping")" != 000 ]
}

# operator_secret NAME KEY BASE64: a Secret of one key in the operator's namespace.
operator_secret() {
  apply "/api/v1/namespaces/$operator_ns/secrets/$1" <<EOF
apiVersion: v1
kind: Secret
metadata: {name: $1, namespace: $operator_ns}
data: {$2: $3}
EOF
}

# A slurmrestd speaking v0.0.44 on the operator's fixed address — 26.05's own, or the proxy
# in front of 24.11's — and what the operator needs before it reconciles a NodeSet. Applied,
# not just created: after a Slurm restart the key and ports are new.
operator_slurm_objects() {
  local env ctld_port
  env=$("$HARNESS_DIR/slurm.sh" "$operator_slurm" env 2>/dev/null) ||
    die "Slurm $operator_slurm is not running: start it first (tests/harness/slurm.sh $operator_slurm start), or set SLURMSCALE_OPERATOR_SLURM=none"
  # SLURM_REST_URL, SLURM_CONF, SLURM_CLUSTER, HARNESS_JWT_KEY_FILE (not the token).
  eval "$(grep -v '^export SLURM_JWT=' <<<"$env")"
  ctld_port=$(awk -F= '$1 == "SlurmctldPort" {print $2}' "$SLURM_CONF")
  # The log is appended to: operator_start reads what this start adds, after line $proxy_log_from.
  proxy_log_from=0
  if [ "$operator_slurm" = 26.05 ]; then
    "$HARNESS_DIR/slurm.sh" 26.05 restd-at "$operator_restd_port" ||
      die "cannot start 26.05's slurmrestd on 127.0.0.1:$operator_restd_port (taken by another harness copy?)"
  else
    if [ -f "$logs/slurmrestd-v0044.log" ]; then proxy_log_from=$(wc -l <"$logs/slurmrestd-v0044.log"); fi
    run slurmrestd-v0044 python3 "$HARNESS_DIR/slurmrestd-v0044.py" "$operator_restd_port" "$SLURM_REST_URL"
    wait_up 15 slurmrestd-v0044 "slurmrestd-v0044 on 127.0.0.1:$operator_restd_port (taken by another harness copy?)" \
      restd_answers
  fi
  create /api/v1/namespaces <<<"{\"apiVersion\": \"v1\", \"kind\": \"Namespace\", \"metadata\": {\"name\": \"$operator_ns\"}}"
  # The JWT key: the exact bytes of slurmctld's key file (the operator mints HS256 tokens with
  # it for user `slurm`, SlurmUser here). The auth/slurm key: 26.05's own (its slurmd pods
  # authenticate with it); 24.11 uses munge, and the schema requires one anyway. Named as
  # Slinky's `slurm` chart (1.1 on) names them for a release named as the Controller.
  local slurm_key
  slurm_key=$(head -c 32 /dev/urandom | base64 -w0)
  [ "$operator_slurm" = 26.05 ] && slurm_key=$(base64 -w0 "$(dirname "$SLURM_CONF")/slurm.key")
  operator_secret "$operator_controller-auth-jwt" jwt.key "$(base64 -w0 "$HARNESS_JWT_KEY_FILE")"
  operator_secret "$operator_controller-auth-slurm" slurm.key "$slurm_key"
  # slurmctld as a slurmd pod on the real node (node.sh) finds it: its SlurmctldAddr, a
  # headless Service whose one endpoint is the node's address, where the node's rules take a
  # pod to slurmctld on loopback (kwok's stand-ins never dial it).
  local ctld_host
  ctld_host=$(awk -F= '$1 == "SlurmctldAddr" {print $2}' "$SLURM_CONF")
  ctld_host=${ctld_host:-127.0.0.1}
  if [ "$ctld_host" != 127.0.0.1 ]; then
    apply "/api/v1/namespaces/$operator_ns/services/$ctld_host" <<EOF
apiVersion: v1
kind: Service
metadata: {name: $ctld_host, namespace: $operator_ns}
spec:
  clusterIP: None
  ports: [{name: slurmctld, port: $ctld_port}]
EOF
    apply "/apis/discovery.k8s.io/v1/namespaces/$operator_ns/endpointslices/$ctld_host-node" <<EOF
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: $ctld_host-node
  namespace: $operator_ns
  labels: {kubernetes.io/service-name: $ctld_host}
addressType: IPv4
endpoints: [{addresses: [$node_ip]}]
ports: [{name: slurmctld, port: $ctld_port, protocol: TCP}]
EOF
  fi
  # external: the operator deploys no slurmctld; NodeSet pods get --conf-server host:port.
  apply "/apis/slinky.slurm.net/v1beta1/namespaces/$operator_ns/controllers/$operator_controller" <<EOF
apiVersion: slinky.slurm.net/v1beta1
kind: Controller
metadata: {name: $operator_controller, namespace: $operator_ns}
spec:
  clusterName: $SLURM_CLUSTER
  external: true
  externalConfig: {host: $ctld_host, port: $ctld_port}
  slurmKeyRef: {name: $operator_controller-auth-slurm, key: slurm.key}
  jwtKeyRef: {name: $operator_controller-auth-jwt, key: jwt.key}
EOF
  # The operator builds its Slurm client once a RestApi names this Controller (it dials its
  # Service's name, which operator_hosts maps to 127.0.0.1); its Deployment runs a stand-in
  # pod on kwok.
  apply "/apis/slinky.slurm.net/v1beta1/namespaces/$operator_ns/restapis/$operator_controller" <<EOF
apiVersion: slinky.slurm.net/v1beta1
kind: RestApi
metadata: {name: $operator_controller, namespace: $operator_ns}
spec:
  controllerRef: {name: $operator_controller, namespace: $operator_ns}
  replicas: 1
  slurmrestd: {image: harness/slurmrestd-v0044}
  template:
    spec:
      tolerations: [{key: kwok.x-k8s.io/node, operator: Exists, effect: NoSchedule}]
EOF
}

operator_stop() {
  # The sites first (they need the operator), then the pods' stand-in: pods vanishing with the
  # operator are no preStop.
  local site
  for site in "${sites[@]}"; do site_stop "$site"; done
  stop_pidfiles "$pids/operator-pods" "$pids/slurm-operator"
  stop_pidfile "$pids/slurmrestd-v0044"
  if [ "$operator_slurm" = 26.05 ]; then
    "$HARNESS_DIR/slurm.sh" 26.05 restd-at-stop "$operator_restd_port" 2>/dev/null || true
  fi
}

stop_processes() {
  # Everything that talks to etcd first (at once: each takes a moment), etcd last.
  stop_pidfiles "$pids"/operator-pods-site-* "$pids"/slurmrestd-v0044-site-* "$pids"/operator-pods "$pids"/slurm-operator "$pids"/slurmrestd-v0044 "$pids"/keda-adapter "$pids"/keda-operator "$pids"/kwok \
    "$pids"/kube-scheduler "$pids"/kube-controller-manager "$pids"/kube-apiserver
  stop_pidfile "$pids/etcd"
}

stop() {
  [ -d "$dir" ] || return 0
  # The node first: its pods' mounts and the host's network go back before anything is deleted.
  node_stop || die "the real node did not stop cleanly; $dir left in place"
  stop_processes
  rm -rf "$dir"
  say "Kubernetes stopped"
}

source "$HARNESS_DIR/node.sh"

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) running && ready && echo "running: $api_url" || { echo "stopped"; exit 1; } ;;
  # The API server alone, stopped and started again on the same etcd (what a control-plane
  # upgrade or a crash looks like to its clients); CRDs and objects survive, and the other
  # components reconnect by themselves.
  apiserver-stop) running || die "Kubernetes is not running"; stop_pidfile "$pids/kube-apiserver" ;;
  apiserver-start)
    pid_alive "$pids/etcd" || die "etcd is not running: run tests/harness/kube.sh start"
    pid_alive "$pids/kube-apiserver" || start_apiserver
    wait_up 60 kube-apiserver "kube-apiserver /readyz" ready
    ;;
  keda-start) keda_start ;;
  keda-stop) keda_stop ;;
  operator-start) operator_start ;;
  operator-stop) operator_stop ;;
  # The sites named, or both.
  site-start | site-stop)
    named=("${@:2}")
    [ ${#named[@]} -gt 0 ] || named=("${sites[@]}")
    for site in "${named[@]}"; do "${1/-/_}" "$site"; done
    ;;
  node-start) node_start ;;
  node-stop) node_stop ;;
  # An image for the real node: built from CONTEXT (a directory with a Containerfile) and
  # imported into its containerd, when either lacks it.
  node-import) node_running || die "the real node is not running"; node_import "${2:?image}" "${3:?context dir}" ;;
  env)
    [ -f "$dir/env" ] || die "Kubernetes is not running: run tests/harness/kube.sh start"
    cat "$dir/env"
    [ -f "$dir/node.env" ] && cat "$dir/node.env"
    ;;
  *) die "usage: kube.sh start|stop|status|env|apiserver-stop|apiserver-start|keda-start|keda-stop|operator-start|operator-stop|site-start|site-stop [SITE]|node-start|node-stop|node-import IMAGE CONTEXT" ;;
esac
