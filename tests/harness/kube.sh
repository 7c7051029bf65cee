#!/usr/bin/env bash
# A real kube-apiserver v1.20.2 (built by build-kube-apiserver.sh) with Debian's etcd, both on
# 127.0.0.1, fresh certificates and an empty etcd per start, and the CRDs the tests need.
#
#   kube.sh start | stop | status | env | apiserver-stop | apiserver-start
#
# There is no kubelet, scheduler or controller-manager: pods stay Pending, which is all the
# tests need (they play the operator themselves). Only pids this script recorded are signalled.
source "$(dirname "$0")/common.sh"
need_root

dir="$SLURMSCALE_RUN/kube"
pids="$dir/pids"
pki="$dir/pki"
# SLURMSCALE_KUBE_PORT_BASE moves all three (a second copy beside the test one).
kube_base=${SLURMSCALE_KUBE_PORT_BASE:-18000}
etcd_port=$((kube_base + 379)) etcd_peer_port=$((kube_base + 380)) api_port=$((kube_base + 443))
api_url="https://127.0.0.1:$api_port"
kubeconfig="$dir/kubeconfig"
repo_root="$(cd "$HARNESS_DIR/../.." && pwd)"
# CRDs installed at start: ours generated from Rust types (NodeSet with both versions,
# GenericNode, NodeSetAutoscaler, ...), all checked in under tests/crds and charts/.
crd_files=("$repo_root"/tests/crds/*.yaml "$repo_root"/charts/slurmscale/crds/*.yaml)

make_certs() {
  mkdir -p "$pki"
  cd "$pki"
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=slurmscale-test-ca" \
    -keyout ca.key -out ca.crt 2>/dev/null
  # issue NAME SUBJECT [EXTENSIONS]
  issue() {
    openssl req -newkey rsa:2048 -nodes -subj "$2" -keyout "$1.key" -out "$1.csr" 2>/dev/null
    openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
      -extfile <(printf '%s\n' "${3:-basicConstraints=CA:FALSE}") -out "$1.crt" 2>/dev/null
  }
  issue apiserver "/CN=kube-apiserver" \
    "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc
extendedKeyUsage=serverAuth"
  issue admin "/O=system:masters/CN=slurmscale-test-admin" "extendedKeyUsage=clientAuth"
  openssl genrsa -out sa.key 2048 2>/dev/null
  openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
  chmod 0600 ./*.key
  cd - >/dev/null
}

write_kubeconfig() {
  cat >"$kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: harness
  cluster:
    server: $api_url
    certificate-authority: $pki/ca.crt
users:
- name: admin
  user:
    client-certificate: $pki/admin.crt
    client-key: $pki/admin.key
contexts:
- name: harness
  context: {cluster: harness, user: admin, namespace: default}
current-context: harness
EOF
  chmod 0600 "$kubeconfig"
}

api() { # curl as the admin user; extra args follow
  curl -sS --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" "$@"
}

ready() { [ "$(api -o /dev/null -w '%{http_code}' "$api_url/readyz")" = 200 ]; }

install_crds() {
  local f code name
  for f in "${crd_files[@]}"; do
    [ -e "$f" ] || continue
    code=$(api -o "$dir/crd.out" -w '%{http_code}' -X POST -H 'Content-Type: application/yaml' \
      --data-binary "@$f" "$api_url/apis/apiextensions.k8s.io/v1/customresourcedefinitions")
    [ "$code" = 201 ] || die "installing CRD $f failed ($code): $(head -c 600 "$dir/crd.out")"
    name=$(awk '/^metadata:/{m=1} m && /^  name:/{print $2; exit}' "$f")
    wait_for 30 "CRD $name to be established" crd_established "$name"
  done
}

crd_established() {
  api "$api_url/apis/apiextensions.k8s.io/v1/customresourcedefinitions/$1" |
    jq -e '.status.conditions[]? | select(.type=="Established" and .status=="True")' >/dev/null
}

start_apiserver() {
  "$KUBE_APISERVER_BIN" \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$api_port" --insecure-port=0 \
    --etcd-servers="http://127.0.0.1:$etcd_port" \
    --tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
    --client-ca-file="$pki/ca.crt" --authorization-mode=RBAC \
    --disable-admission-plugins=ServiceAccount \
    --service-account-issuer=https://kubernetes.default.svc \
    --service-account-key-file="$pki/sa.pub" --service-account-signing-key-file="$pki/sa.key" \
    --service-cluster-ip-range=10.96.0.0/16 --allow-privileged=true \
    >>"$dir/log/kube-apiserver.log" 2>&1 &
  echo $! >"$pids/kube-apiserver"
}

running() { pid_alive "$pids/etcd" && pid_alive "$pids/kube-apiserver"; }

start() {
  if running && ready; then
    say "kube-apiserver already running ($api_url)"
    return
  fi
  [ -x "$KUBE_APISERVER_BIN" ] || die "no kube-apiserver at $KUBE_APISERVER_BIN: run tests/harness/build-kube-apiserver.sh"
  command -v etcd >/dev/null || die "etcd is missing: run tests/harness/deps.sh"
  stop >/dev/null 2>&1 || true
  mkdir -p "$dir/etcd" "$dir/log" "$pids"
  make_certs
  write_kubeconfig

  etcd --name harness --data-dir "$dir/etcd" \
    --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$etcd_peer_port" \
    --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer_port" \
    --initial-cluster "harness=http://127.0.0.1:$etcd_peer_port" \
    --unsafe-no-fsync >"$dir/log/etcd.log" 2>&1 &
  echo $! >"$pids/etcd"
  wait_for 30 "etcd (log: $dir/log/etcd.log)" curl -sf "http://127.0.0.1:$etcd_port/health"

  start_apiserver
  wait_for 60 "kube-apiserver /readyz (log: $dir/log/kube-apiserver.log)" ready
  install_crds
  cat >"$dir/env" <<EOF
export KUBECONFIG=$kubeconfig
export KUBE_API_URL=$api_url
EOF
  say "kube-apiserver up: $api_url (KUBECONFIG=$kubeconfig)"
}

stop() {
  [ -d "$dir" ] || return 0
  stop_pidfile "$pids/kube-apiserver"
  stop_pidfile "$pids/etcd"
  rm -rf "$dir"
  say "kube-apiserver stopped"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) running && ready && echo "running: $api_url" || { echo "stopped"; exit 1; } ;;
  # The API server alone, stopped and started again on the same etcd (what a control-plane
  # upgrade or a crash looks like to its clients); CRDs and objects survive.
  apiserver-stop) running || die "kube-apiserver is not running"; stop_pidfile "$pids/kube-apiserver" ;;
  apiserver-start)
    pid_alive "$pids/etcd" || die "etcd is not running: run tests/harness/kube.sh start"
    pid_alive "$pids/kube-apiserver" || start_apiserver
    wait_for 60 "kube-apiserver /readyz (log: $dir/log/kube-apiserver.log)" ready
    ;;
  env) [ -f "$dir/env" ] || die "kube-apiserver is not running: run tests/harness/kube.sh start"; cat "$dir/env" ;;
  *) die "usage: kube.sh start|stop|status|env|apiserver-stop|apiserver-start" ;;
esac
