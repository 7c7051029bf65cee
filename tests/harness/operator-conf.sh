#!/usr/bin/env bash
# slurm.conf as slurm-operator renders it (its Controller's `<name>-config` ConfigMap), made
# runnable by the harness: every change is one line of the table below, and nothing else of
# the operator's file is touched.
#
#   operator-conf.sh OPERATOR_SLURM_CONF RUN_DIR CTLD_PORT SLURMD_PORT >SLURM_CONF
#
# A site's pods each have their own address, /etc/slurm, /var/spool and /var/log, and cgroup
# v2; here every daemon shares one loopback host, one run dir and a cgroup v1 tree, and
# several Slurms run side by side. So the table maps addresses and ports to loopback, paths
# into RUN_DIR, and the cgroup plugins to their plain equivalents; it adds what many slurmds
# on one host need (a pid file each; node shapes larger than the machine). `replace` fails
# when the operator's file does not have its key exactly once, `add` when it has it at all:
# a new operator version that moved, renamed or added one of these is caught here, not run
# as something else. tests/harness_slurm.rs checks each line against the operator's own
# render (tests/harness/site/operator-slurm.conf).
set -euo pipefail
in=${1:?operator slurm.conf} dir=${2:?run dir} ctld_port=${3:?slurmctld port} slurmd_port=${4:?slurmd port}
text=$(cat "$in")

count() { grep -c "^$1=" <<<"$text" || true; }
replace() { # KEY VALUE: the operator's one KEY= line becomes KEY=VALUE
  local n
  n=$(count "$1")
  [ "$n" = 1 ] || { echo "operator-conf.sh: $1 is on $n lines of $in, expected 1" >&2; exit 1; }
  text=$(awk -v k="$1" -v v="$2" 'index($0, k "=") == 1 {print k "=" v; next} {print}' <<<"$text")
}
add() { # KEY VALUE: a line the operator does not write
  local n
  n=$(count "$1")
  [ "$n" = 0 ] || { echo "operator-conf.sh: $1 is already on $n lines of $in; add it no more" >&2; exit 1; }
  text+=$'\n'"$1=$2"
}

# Addresses and ports: slurmctld on loopback at this Slurm's port (the operator's is its
# Service's name); each pod's slurmd binds its own loopback address at a port shared by them
# and not by the other Slurms here.
replace SlurmctldHost "localhost(127.0.0.1)"
replace SlurmctldPort "$ctld_port"
replace SlurmdPort "$slurmd_port"
replace CommunicationParameters "$(awk -F= '$1 == "CommunicationParameters" {print $2}' <<<"$text"),NoInAddrAny,NoCtldInAddrAny"
# Paths: the pods' volumes are the run dir here.
replace StateSaveLocation "$dir/state"
replace SlurmdSpoolDir "$dir/spool/%n"
replace SlurmctldLogFile "$dir/log/slurmctld.log"
replace SlurmSchedLogFile "$dir/log/slurmctld.log"
replace SlurmdLogFile "$dir/log/slurmd-%n.log"
replace AuthAltParameters "jwt_key=$dir/etc/jwt_hs256.key"
add SlurmctldPidFile "$dir/run/slurmctld.pid"
add SlurmdPidFile "$dir/run/slurmd-%n.pid"
# cgroup v1 here, one tree for every slurmd, and node shapes (CPUs=16) larger than the
# machine's cores: process tracking by process tree, no CPU binding, and each node taken
# as configured rather than as detected.
replace ProctrackType proctrack/linuxproc
replace TaskPlugin task/none
add SlurmdParameters config_overrides
printf '%s\n' "$text"
