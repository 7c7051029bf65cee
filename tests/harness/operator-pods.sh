#!/usr/bin/env bash
# The kubelet and container runtime of the slurm-operator's NodeSet pods, for the harness.
# kwok makes the operator's pods Running but runs nothing in them; this loop does what each
# pod's slurmd container would, against the harness's real Slurm:
# * a pod Running (and not being deleted) → `slurm.sh FLAVOR pod-up NODE CONF [-b]`: a real
#   `slurmd -Z` registering NODE with the --conf text of the pod's slurmd container (operator
#   v1.0.1 builds `-Z --conf 'Features=<nodeset> <spec.extraConf>'`), and `-b` when the
#   container has it (the NodeSet's spec.slurmd.args, which slurm-planned mode needs), NODE
#   being the pod's hostname as the operator computes it (hostname, else the pod name; one
#   `slurm.sh FLAVOR pod-name` accepts: slinky-N, planned-N, or the site's <nodeset>-N);
# * a pod deleted or terminating (or replaced by a new one of the same name) → its preStop,
#   then slurmd stops: v1.0.1's own, `scontrol update nodename=NODE state=down reason='Pod is
#   terminating' && scontrol delete nodename=NODE` (`slurm.sh FLAVOR pod-down NODE delete`),
#   or, where the NodeSet overrides the container's lifecycle with a preStop that deletes
#   nothing (operator 1.2's, which slurm-planned mode needs on older ones), the DOWN alone
#   (`pod-down NODE down`). While NODE still runs jobs, the DOWN alone is done (Slurm kills
#   them, as in a cluster) and the rest retried next round.
# Only slurmds this loop started are ever taken down: slurm.sh pod-up/pod-down by tests
# (tests/slinky.rs) on other nodes are not its business.
#
#   operator-pods.sh NAMESPACE FLAVOR STATE_DIR    (kube.sh operator-start runs it)
#
# Reads KUBE_API_URL and HARNESS_KUBE_PKI (the admin certificate) from the environment, and
# polls the pods once a second (a kubelet reacts in about that time too).
source "$(dirname "$0")/common.sh"

ns=${1:?namespace} flavor=${2:?Slurm flavor} state=${3:?state dir}
slurm_sh="$HARNESS_DIR/slurm.sh"
mkdir -p "$state"

say() { printf '%s operator-pods: %s\n' "$(date +%T)" "$*"; }

# scontrol of the Slurm the pods join, as root with its own auth (munge, or auth/slurm's key
# on 26.05), never the env's SLURM_JWT.
scontrol() {
  local env
  env=$("$slurm_sh" "$flavor" env) || return 1
  (eval "$env" && unset SLURM_JWT && "$SLURM_BIN/scontrol" "$@")
}

# One line per slurmd pod: NODE UID USABLE CONF ARGS PRESTOP (USABLE: 1 when Running and not
# deleting; ARGS: `-b`, or `-` for none (read splits on tabs as whitespace: an empty field
# would vanish); PRESTOP: `delete` for v1.0.1's, `down` for an override that deletes nothing).
list_pods() {
  curl -sSf --cacert "$HARNESS_KUBE_PKI/ca.crt" --cert "$HARNESS_KUBE_PKI/admin.crt" \
    --key "$HARNESS_KUBE_PKI/admin.key" \
    "$KUBE_API_URL/api/v1/namespaces/$ns/pods?labelSelector=app.kubernetes.io%2Fname%3Dslurmd" |
    jq -r '.items[] |
      (if .spec.hostNetwork then .spec.nodeName elif (.spec.hostname // "") != "" then .spec.hostname
       else .metadata.name end) as $node |
      ([.spec.containers[] | select(.name == "slurmd")] | first // {}) as $c |
      ($c.args // []) as $a |
      (($a | index("--conf")) as $i | if $i == null then "" else $a[$i + 1] end) as $conf |
      (($c.lifecycle.preStop.exec.command // []) | join(" ")) as $pre |
      [$node, .metadata.uid,
       (if .status.phase == "Running" and .metadata.deletionTimestamp == null then 1 else 0 end),
       ($conf | ltrimstr("'\''") | rtrimstr("'\''")),
       (if ($a | index("-b")) != null then "-b" else "-" end),
       (if $pre != "" and ($pre | test("delete") | not) then "down" else "delete" end)] | @tsv'
}

# The pod's slurmd is gone: preStop, then stop it. Fails while NODE still runs jobs.
down() {
  local node=$1 how
  how=$(cat "$state/.prestop-$node" 2>/dev/null || echo delete)
  if "$slurm_sh" "$flavor" pod-down "$node" "$how"; then
    rm -f "$state/$node" "$state/.prestop-$node"
    say "$node: pod gone; preStop ($how) done, slurmd stopped"
  else
    scontrol update nodename="$node" state=down reason="Pod is terminating" >/dev/null 2>&1 || true
    say "$node: pod gone, pod-down refused (jobs still on it?); set DOWN as the preStop does, retrying"
  fi
}

round() {
  local pods node uid usable conf args prestop f
  pods=$(list_pods) || { say "cannot list pods in $ns (API server away?)"; return; }
  # Down first: a pod replaced under the same name needs its old slurmd gone.
  for f in "$state"/*; do
    [ -f "$f" ] || continue
    node=${f##*/}
    uid=$(cat "$f")
    awk -F'\t' -v n="$node" -v u="$uid" '$1 == n && $2 == u && $3 == 1 {found = 1} END {exit !found}' \
      <<<"$pods" || down "$node"
  done
  while IFS=$'\t' read -r node uid usable conf args prestop; do
    if [ -z "$node" ] || [ "$usable" != 1 ] || [ -e "$state/$node" ]; then continue; fi
    if ! "$slurm_sh" "$flavor" pod-name "$node"; then
      [ -e "$state/.skipped-$uid" ] || say "$node: not a pod name of Slurm $flavor's NodeSets; nothing runs it"
      touch "$state/.skipped-$uid"
      continue
    fi
    [ "$args" = - ] && args=""
    # shellcheck disable=SC2086 # ARGS is `-b` or nothing
    if "$slurm_sh" "$flavor" pod-up "$node" "$conf" $args; then
      echo "$uid" >"$state/$node"
      echo "$prestop" >"$state/.prestop-$node"
      say "$node: pod Running; slurmd -Z --conf '$conf' $args started"
    else
      say "$node: pod-up failed"
    fi
  done <<<"$pods"
}

say "watching slurmd pods in namespace $ns for Slurm $flavor"
while true; do
  round
  sleep 1
done
