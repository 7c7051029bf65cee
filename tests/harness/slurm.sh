#!/usr/bin/env bash
# A real Slurm cluster on 127.0.0.1 in a temp dir: munged (before 26.05, which authenticates
# with auth/slurm as Slinky's clusters do), a MariaDB and slurmdbd for
# accounting (as every real site runs it), slurmctld, one `slurmd -N` per node and slurmrestd
# with JWT auth, serving the slurmdbd endpoints (/slurmdb/...) too.
#
#   slurm.sh FLAVOR start | stop | status | env | node-up NODE | node-down NODE
#                   | pod-up POD [CONF [SLURMD ARGS...]] | pod-down POD [down|delete]
#                   | pod-name POD               (whether POD is one of this Slurm's NodeSet pods:
#                                                 slinky-N, planned-N; a site's <nodeset>-N)
#                   | restd-stop | restd-start   (take slurmrestd away and back, for fault tests)
#                   | ctld-stop | ctld-start     (stop slurmctld, as a restart or upgrade would, and
#                                                 start it again from its saved state)
#                   | dbd-hold | dbd-release     (slurmdbd falls behind slurmctld, and catches up)
#
# FLAVOR is 22.05 (Debian bookworm's packages, REST v0.0.38), 24.11 (Debian trixie's packages
# in a root filesystem of their own, build-slurm-root.sh: REST v0.0.40-v0.0.42) or 26.05
# (Debian sid's, the same way: REST v0.0.42-v0.0.45, slurmctld's native metrics); the daemons
# and commands of the last two run chrooted there, see run_slurm. Their slurm.conf is written
# here (write_config). And `site-26.05`, `site-24.11`: that Slurm on the slurm.conf
# slurm-operator renders from a site's values for Slinky's chart, which `kube.sh site-start`
# starts (write_site_config); their nodes are NodeSet pods only, and they keep no accounting
# unless the values do. All three can run side
# by side, and a second copy of any beside the test one (benchmarks) with its own
# SLURMSCALE_RUN and SLURMSCALE_PORT_BASE_2205 / _2411 / _2605 (defaults 16800 / 17800 /
# 15800). Ports, all on 127.0.0.1:
# MariaDB base + 6, slurmctld + 17, slurmd + 18 (and + 30... per node), slurmdbd + 19,
# slurmrestd + 20, and a second slurmrestd + 21 started without its accounting plugins, as
# many sites run it (every /slurmdb/... path answers 404): SLURM_REST_URL_NO_ACCOUNTING.
#
# Accounting: each cluster has its own mariadbd (Debian's package, never its system service:
# data dir, socket, log and pid file in $SLURMSCALE_RUN/slurm-FLAVOR/mariadb, the data dir a
# copy of an empty one cached in $SLURMSCALE_CACHE, config in etc/mariadb.cnf, root admin
# over the unix socket only) and its own slurmdbd (Debian's, of the flavor's release)
# storing into database slurm_acct_2205 / _2411 / _2605 as MariaDB user `slurm`,
# whose generated password lives only in etc/slurmdbd.conf (0600).
# The cluster is registered with sacctmgr; root and the JWT user submit under account `root`.
# AccountingStorageEnforce is off, as without slurmdbd: no job is refused for want of an
# association. Every start begins with an empty database.
#
# Partitions: `cpu` (c1-c4, default), `gpu` (g1-g2, four fake gres/gpu each) and `elastic`
# (e1-e8, two fake GPUs each, State=FUTURE: no slurmd until a test "scales them up" with
# node-up, which is what a NodeSet pod would do in a real deployment); and `slinky`, built as
# Slinky builds a NodeSet's partition — no node lines, `NodeSet=slinky Feature=slinky`, nodes
# that exist only once a pod's `slurmd -Z` registers them (pod-up / pod-down).
#
# And `planned`, a NodeSet partition with Slurm's power saving, as slurmscale's slurm-planned
# mode has a site set it up: no node lines; the autoscaler creates the records at run time
# (`scontrol create NodeName=planned-N Feature=planned CPUs=4 RealMemory=8000 Weight=N+1
# State=CLOUD`, IDLE+CLOUD+DYNAMIC_NORM+POWERED_DOWN); slurmctld allocates jobs to them, asks
# for the allocated ones (ResumeProgram), and the autoscaler starts their pods
# (`pod-up planned-N 'Feature=planned CPUs=4 RealMemory=8000' -b`; without -b slurmctld
# ignores the registration, "Still waiting for boot", until ResumeTimeout). Why each setting,
# measured here on 22.05.8 and 24.11.5:
#  * Power saving comes from the partition's own SuspendTime: the global one stays INFINITE
#    and the other partitions are in SuspendExcParts as well, so no c/g/e node and no slinky
#    pod is ever suspended. On the partition line the values also show in REST /partitions
#    from v0.0.40 (suspend_time, timeouts.resume, timeouts.suspend; v0.0.38 has no such field).
#  * SuspendTime=10: an idle node is POWERING_DOWN 11-13 s after its job ends; soon enough
#    for a test, and room to submit the next job first. 24.11 also "suspends" a record 10 s
#    after `scontrol create` (SuspendProgram is called for it; 22.05 does not).
#  * SuspendTimeout=5: how long a POWERING_DOWN node is unavailable (POWERED_DOWN 6-7 s later);
#    a pod here stops in well under a second.
#  * ResumeTimeout=30: a pod's slurmd registers 0.2 s after pod-up here, so 30 s is ample on a
#    busy 2-core machine and keeps the ResumeTimeout-missed tests short. (The job then waits
#    for slurmctld's 30 s CONFIGURING check: RUNNING 21-30 s after pod-up.)
#  * ResumeProgram/SuspendProgram: power saving needs both; here they log
#    `<unix time> resume|suspend HOSTLIST [SLURM_RESUME_FILE's JSON]` to log/power.log
#    (SLURM_POWER_LOG in `env`), for tests to read, and resume then runs the documented
#    examples/autoscaler/resume-program.sh (POST /wake) at the host:port a test or bench
#    wrote to SLURM_WAKE_FILE, if any.
#  * ResumeRate=0 SuspendRate=0: no rate limit. power_save_interval=1 (default 10): a
#    power-up shows in REST /nodes ~1-1.6 s after submit. idle_on_node_suspend: a node that is
#    DOWN or DRAINED when suspended comes back IDLE. power_save_min_interval stays 0.
#  * 22.05 only: PrivateData=cloud, or powered-down CLOUD nodes are hidden from sinfo and
#    /nodes even for root; cloud_reg_addrs, so a record takes the address its pod registers
#    from, as 24.11 always does. 24.11 only: ReconfigFlags=KeepPowerSaveSettings (22.05 has no
#    such flag).
#  Known traps: a RESUME leaves IDLE+POWERED_DOWN+NOT_RESPONDING, which is schedulable until
#  the next `scontrol reconfigure` or slurmctld restart; after either, such records take no
#  job (ReqNodeNotAvail) until DOWN then RESUME again (both versions). On 22.05 a reconfigure
#  while a node is POWERING_UP left it ALLOCATED with no job (never suspended) until slurmctld
#  restarted. 22.05 ignores Weight: it takes records in node-table order, best-fit over runs
#  of adjacent entries, so records interleaved with slinky pods' nodes are not taken in
#  ordinal order; 24.11 takes the lowest Weight.
#
# `env` prints sourceable exports: SLURM_REST_URL, SLURM_USER, SLURM_CLUSTER and SLURMSCALE_JWT
# (what `slurmscale exporter` reads; not SLURM_JWT, which would switch Slurm's own commands in
# that shell to JWT auth), the token file and HS256 key as HARNESS_JWT_FILE and
# HARNESS_JWT_KEY_FILE, SLURM_CONF/SLURM_BIN for the cluster's own commands (sacct and sacctmgr
# among them), SLURM_DBD_PORT/SLURM_DB_NAME, and SLURM_PLANNED_PARTITION/SLURM_POWER_LOG. The
# token is read from its file at source time so it never shows up in a log. Only pids this
# script recorded are ever signalled.
source "$(dirname "$0")/common.sh"
need_root
# SLURM_JWT in the environment switches Slurm's commands *and daemons* to JWT auth (a slurmd
# started with it rejects munge-signed job launches); the harness itself always uses munge.
unset SLURM_JWT

flavor=${1:-}
cmd=${2:-}
# release: the Slurm release a flavor runs. base_var, root_var: the variables naming its port
# base and root filesystem, which its command wrappers pass on.
case "$flavor" in
  22.05)
    cluster=s2205 base=${SLURMSCALE_PORT_BASE_2205:-16800} api_versions="v0.0.38"
    sbin=/usr/sbin bin=/usr/bin
    ;;
  24.11)
    cluster=s2411 base=${SLURMSCALE_PORT_BASE_2411:-17800} api_versions="v0.0.40 v0.0.41 v0.0.42"
    sbin=/usr/sbin bin=/usr/bin root=$SLURM_2411_ROOT
    ;;
  26.05)
    cluster=s2605 base=${SLURMSCALE_PORT_BASE_2605:-15800} api_versions="v0.0.42 v0.0.43 v0.0.44 v0.0.45"
    sbin=/usr/sbin bin=/usr/bin root=$SLURM_2605_ROOT
    ;;
  # A release on the slurm.conf slurm-operator rendered from a site's values for Slinky's
  # chart (tests/harness/site/values.yaml): `kube.sh site-start` renders it into $render, with
  # the chart's keys, and starts this flavor on it. Its nodes are NodeSet pods only.
  site-26.05)
    site=yes cluster=site2605 base=${SLURMSCALE_PORT_BASE_SITE_2605:-14800} api_versions="v0.0.42 v0.0.43 v0.0.44 v0.0.45"
    sbin=/usr/sbin bin=/usr/bin root=$SLURM_2605_ROOT release=26.05
    base_var=SLURMSCALE_PORT_BASE_SITE_2605 root_var=SLURM_2605_ROOT
    ;;
  site-24.11)
    site=yes cluster=site2411 base=${SLURMSCALE_PORT_BASE_SITE_2411:-13800} api_versions="v0.0.40 v0.0.41 v0.0.42"
    sbin=/usr/sbin bin=/usr/bin root=$SLURM_2411_ROOT release=24.11
    base_var=SLURMSCALE_PORT_BASE_SITE_2411 root_var=SLURM_2411_ROOT
    ;;
  *) die "usage: slurm.sh 22.05|24.11|26.05|site-26.05|site-24.11 start|stop|status|env|node-up NODE|node-down NODE" ;;
esac
site=${site:-}
root=${root:-} release=${release:-$flavor}
base_var=${base_var:-SLURMSCALE_PORT_BASE_${flavor/./}} root_var=${root_var:-SLURM_${flavor/./}_ROOT}
render="$SLURMSCALE_RUN/$flavor-render"
# Where a test finds this Slurm's commands (SLURM_BIN in `env`): for 24.11 and 26.05,
# wrappers that run them in its root filesystem (`slurm.sh FLAVOR run`).
cmd_bin=$bin
[ -n "$root" ] && cmd_bin=$SLURMSCALE_RUN/slurm-$flavor/cmd

dir="$SLURMSCALE_RUN/slurm-$flavor"
conf="$dir/etc/slurm.conf"
pids="$dir/pids"
ctld_port=$((base + 17)) rest_port=$((base + 20)) plain_rest_port=$((base + 21)) node_port0=$((base + 30))
db_port=$((base + 6)) dbd_port=$((base + 19))
# Slurmd's port: the first copy's 26.05 takes Slinky's 6818, the port a slurmd pod's probes
# name (node.sh runs those pods); pods on loopback addresses share it.
slurmd_port=$((base + 18))
[ "$flavor" = 26.05 ] && [ "$base" = 15800 ] && slurmd_port=6818
# What slurmd pods call slurmctld (SlurmctldAddr; 26.05): a name both the run's hosts file
# and the real node's cluster DNS know.
ctld_name=slurmctld-$cluster
rest_url="http://127.0.0.1:$rest_port"
plain_rest_url="http://127.0.0.1:$plain_rest_port"
# SlurmUser: slurmctld and slurmdbd take it for an administrator (node updates) whatever
# the database says.
jwt_user=slurm
db_name=slurm_acct_${flavor/./}
mariadb_dir="$dir/mariadb"
mariadb_cnf="$dir/etc/mariadb.cnf"

cpu_nodes=(c1 c2 c3 c4)
gpu_nodes=(g1 g2)
elastic_nodes=(e1 e2 e3 e4 e5 e6 e7 e8)
# The site's nodes are its NodeSets' pods, and it keeps accounting only if its values do.
dbd=yes
if [ -n "$site" ]; then
  cpu_nodes=() gpu_nodes=() elastic_nodes=()
  grep -qx 'AccountingStorageType=accounting_storage/slurmdbd' "$render/slurm.conf" 2>/dev/null || dbd=
fi
# Names a Slinky NodeSet `slinky` gives its pods (slinky-0 ...), as many as the harness can run.
slinky_max=16
# Records (and pods) of the `planned` NodeSet: planned-0 ...
planned_max=8
all_nodes=("${cpu_nodes[@]}" "${gpu_nodes[@]}" "${elastic_nodes[@]}")

slurm() { (SLURM_CONF="$conf" run_slurm "$bin/$1" "${@:2}"); }

node_port() {
  local i
  for i in "${!all_nodes[@]}"; do
    [ "${all_nodes[$i]}" = "$1" ] && { echo $((node_port0 + i)); return; }
  done
  die "unknown node $1"
}

# How daemons and commands authenticate: munge before 26.05; auth/slurm (and cred/slurm) from
# 26.05, as Slinky's clusters do (and every site: the operator's slurm.conf says it).
uses_munge() { [ -z "$site" ] && [ "$release" != 26.05 ]; }
auth_config() { # [dbd]
  if [ "$release" = 26.05 ]; then
    echo AuthType=auth/slurm
    [ "${1:-}" = dbd ] || echo CredType=cred/slurm
  else
    printf 'AuthType=auth/munge\nAuthInfo=socket=%s\n' "$dir/munge/munge.socket"
  fi
}
dbd_auth_config() {
  # (with munge, Slurm's commands and daemons take its socket for slurmdbd from here, not
  # AuthInfo)
  [ "$release" = 26.05 ] || echo "AccountingStoragePass=socket=$dir/munge/munge.socket"
}

# The run dir as every flavor's daemons need it: directories, daemon names, keys, commands.
prepare_run_dir() {
  mkdir -p "$dir"/{etc,state,spool,log,run,munge,dev,bin} "$pids"
  chmod 0755 "$dir" "$dir/munge"
  chown slurm:slurm "$dir/state" "$dir/log"

  # Debian names its daemons *-wlm, but Slurm decides what it is from argv[0] (under the
  # -wlm names, GPU counts on node lines are silently dropped), so run them via symlinks
  # (in a root filesystem they resolve inside it, where the run dir is bound at its own path).
  for d in slurmctld slurmd slurmstepd; do ln -sf "/usr/sbin/$d-wlm" "$dir/bin/$d"; done

  # The HS256 key is the exact bytes of the file (slurmctld and slurmdbd both check tokens);
  # the site's is the one its chart made (the operator signs its tokens with it).
  if [ -n "$site" ]; then
    cp "$render/jwt.key" "$dir/etc/jwt_hs256.key"
  else
    openssl rand -hex 32 | tr -d '\n' >"$dir/etc/jwt_hs256.key"
  fi
  chown slurm:slurm "$dir/etc/jwt_hs256.key"
  chmod 0400 "$dir/etc/jwt_hs256.key"

  if uses_munge; then
    dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
    chmod 0400 "$dir/munge/munge.key"
  fi
  # 26.05 authenticates as a Slinky cluster does: auth/slurm, with the key slurmctld, slurmdbd
  # and every slurmd share (slurm.key beside slurm.conf; a pod's comes from a Secret: the
  # site's from its chart's).
  if [ -n "$site" ]; then
    cp "$render/slurm.key" "$dir/etc/slurm.key"
  elif [ "$flavor" = 26.05 ]; then
    dd if=/dev/urandom of="$dir/etc/slurm.key" bs=1024 count=1 status=none
  fi
  if [ "$release" = 26.05 ] || [ -n "$site" ]; then
    chown slurm:slurm "$dir/etc/slurm.key"
    chmod 0600 "$dir/etc/slurm.key"
  fi
  # The run's /run (run_slurm): where auth/slurm's daemons, once SlurmUser, make their sockets.
  mkdir -p "$dir"/sysrun/{slurmctld,slurmdbd}
  chown slurm:slurm "$dir"/sysrun/{slurmctld,slurmdbd}

  if [ -n "$root" ]; then
    mkdir -p "$cmd_bin"
    local c
    for c in sacct sacctmgr salloc sbatch scancel scontrol sdiag sinfo sprio squeue sreport srun sshare sstat; do
      cat >"$cmd_bin/$c" <<EOF
#!/bin/sh
exec env SLURMSCALE_RUN='$SLURMSCALE_RUN' SLURMSCALE_CACHE='$SLURMSCALE_CACHE' \\
  $base_var='$base' $root_var='$root' '$HARNESS_DIR/slurm.sh' $flavor run $bin/$c "\$@"
EOF
      chmod 0755 "$cmd_bin/$c"
    done
  fi

  # gres/gpu needs device files; symlinks to /dev/null pass its checks.
  for i in 0 1 2 3; do ln -sf /dev/null "$dir/dev/nvidia$i"; done
}

# The site's slurm.conf: the operator's, through operator-conf.sh's table and nothing else.
# Its gres.conf: the operator's asks for NVIDIA's library (AutoDetect=nvidia), which finds no
# GPU here and drops the node's; a line for every node instead names the fake device files
# (nodes without GPUs only log that they have none). No cgroup.conf: the operator's asks for
# cgroup v2, which this machine does not mount (slurmd would not start).
write_site_config() {
  [ -s "$render/slurm.conf" ] ||
    die "no slurm.conf rendered by slurm-operator in $render: tests/harness/kube.sh site-start renders it and starts this Slurm"
  grep -qx "ClusterName=$cluster" "$render/slurm.conf" ||
    die "the site's values name another cluster than '$cluster' ($render/slurm.conf)"
  prepare_run_dir
  "$HARNESS_DIR/operator-conf.sh" "$render/slurm.conf" "$dir" "$ctld_port" "$slurmd_port" >"$conf"
  echo "Name=gpu File=$dir/dev/nvidia[0-3]" >"$dir/etc/gres.conf"
  # Each NodeSet's pods (<nodeset>-0 ...) get loopback addresses of their own (see write_config).
  {
    cat /etc/hosts
    local k=0 nodeset i
    for nodeset in $(awk -F'[= ]' '$1 == "NodeSet" {print $2}' "$conf"); do
      for i in $(seq 0 $((slinky_max - 1))); do echo "127.0.$((20 + k)).$((i + 1)) $nodeset-$i # pod"; done
      k=$((k + 1))
    done
  } >"$dir/etc/hosts"
}

write_config() {
  prepare_run_dir
  {
    cat <<EOF
ClusterName=$cluster
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=slurm
SlurmdUser=root
$(auth_config)
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=$dir/etc/jwt_hs256.key
CommunicationParameters=NoInAddrAny,NoCtldInAddrAny
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$dbd_port
$(dbd_auth_config)
AccountingStorageTRES=gres/gpu
JobCompType=jobcomp/none
SlurmdParameters=config_overrides
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=500
GresTypes=gpu
MinJobAge=60
SlurmdTimeout=60
InactiveLimit=0
KillWait=5
MaxJobCount=200000
MaxArraySize=100001
EOF
    local i=0 n
    for n in "${all_nodes[@]}"; do
      case "$n" in
        c*) echo "NodeName=$n NodeAddr=127.0.0.1 Port=$((node_port0 + i)) CPUs=8 RealMemory=16000 State=UNKNOWN" ;;
        g*) echo "NodeName=$n NodeAddr=127.0.0.1 Port=$((node_port0 + i)) CPUs=16 RealMemory=64000 Gres=gpu:4 State=UNKNOWN" ;;
        e*) echo "NodeName=$n NodeAddr=127.0.0.1 Port=$((node_port0 + i)) CPUs=4 RealMemory=8000 Gres=gpu:2 State=FUTURE" ;;
      esac
      i=$((i + 1))
    done
    # Slinky's node model: no node lines, a NodeSet by feature, and pods whose `slurmd -Z`
    # registers a dynamic node carrying that feature (`pod-up`).
    echo "MaxNodeCount=64"
    [ "$flavor" = 22.05 ] && echo "TreeWidth=65533"
    echo "NodeSet=slinky Feature=slinky"
    echo "PartitionName=slinky Nodes=slinky MaxTime=INFINITE State=UP"
    # 26.05: the `real` NodeSet, whose pods are Slinky's own slurmd pods on the harness's real
    # node (node.sh): configless, they fetch this file from slurmctld (at its address for
    # them, which the run's hosts file maps to loopback here) and register on their own.
    if [ "$flavor" = 26.05 ]; then
      echo "SlurmctldAddr=$ctld_name"
      echo "NodeSet=real Feature=real"
      echo "PartitionName=real Nodes=real MaxTime=INFINITE State=UP"
    fi
    echo "PartitionName=cpu Nodes=c[1-4] Default=YES MaxTime=INFINITE State=UP"
    echo "PartitionName=gpu Nodes=g[1-2] MaxTime=INFINITE State=UP"
    echo "PartitionName=elastic Nodes=e[1-8] MaxTime=INFINITE State=UP"
    # The `planned` NodeSet: power saving for its partition only (see the header).
    echo "NodeSet=planned Feature=planned"
    echo "PartitionName=planned Nodes=planned MaxTime=INFINITE State=UP SuspendTime=10 SuspendTimeout=5 ResumeTimeout=30"
    echo "SuspendExcParts=cpu,gpu,elastic,slinky$([ "$flavor" = 26.05 ] && echo ,real)"
    echo "SuspendTimeout=5"
    echo "ResumeTimeout=30"
    echo "ResumeProgram=$dir/bin/resume"
    echo "SuspendProgram=$dir/bin/suspend"
    echo "ResumeRate=0"
    echo "SuspendRate=0"
    if [ "$flavor" = 22.05 ]; then
      echo "SlurmctldParameters=idle_on_node_suspend,power_save_interval=1,cloud_reg_addrs"
      echo "PrivateData=cloud"
    else
      echo "SlurmctldParameters=idle_on_node_suspend,power_save_interval=1$([ "$flavor" = 26.05 ] && echo ,enable_configless)"
      echo "ReconfigFlags=KeepPowerSaveSettings"
    fi
    # 26.05: slurmctld serves its own OpenMetrics at /metrics/... on SlurmctldPort.
    [ "$flavor" = 26.05 ] && echo "MetricsType=metrics/openmetrics"
  } >"$conf"
  # Power saving's programs (they run as SlurmUser, which owns log/): a line per call, for
  # tests to read; a pod stands for the node, so there is nothing to power.
  local what
  for what in resume suspend; do
    cat >"$dir/bin/$what" <<EOF
#!/bin/sh
echo "\$(date +%s.%N) $what \$1 \$(cat "\${SLURM_RESUME_FILE:-/dev/null}" 2>/dev/null | tr -d '\n')" >>"$dir/log/power.log"
EOF
    chmod 0755 "$dir/bin/$what"
  done
  # And the ResumeProgram slurmscale documents, which POSTs /wake to the autoscaler a test
  # or bench names in wake-to (host:port; SLURM_WAKE_FILE), if any.
  cp "$HARNESS_DIR/../../examples/autoscaler/resume-program.sh" "$dir/bin/wake"
  cat >>"$dir/bin/resume" <<EOF
[ -s "$dir/wake-to" ] && SLURMSCALE_WAKE=\$(cat "$dir/wake-to") exec "$dir/bin/wake" "\$@"
exit 0
EOF
  # Each pod's slurmd runs in its own UTS and mount namespaces, under its node name, with
  # this hosts file: Slurm binds a slurmd to the address its host name resolves to, so every
  # pod gets its own loopback address at the shared SlurmdPort, as pods get their own IPs,
  # and slurmctld (started with the same file) reaches each by name, as through a
  # headless Service. The machine's own entries stay (slurmctld binds to its host's
  # address). Nothing outside the run dir changes.
  {
    cat /etc/hosts
    [ "$flavor" = 26.05 ] && echo "127.0.0.1 $ctld_name"
    local i
    for i in $(seq 0 $((slinky_max - 1))); do echo "127.0.1.$((i + 1)) slinky-$i # pod"; done
    for i in $(seq 0 $((planned_max - 1))); do echo "127.0.2.$((i + 1)) planned-$i # pod"; done
  } >"$dir/etc/hosts"
  {
    echo "NodeName=g[1-2] Name=gpu File=$dir/dev/nvidia[0-3]"
    echo "NodeName=e[1-8] Name=gpu File=$dir/dev/nvidia[0-1]"
  } >"$dir/etc/gres.conf"
  write_accounting_config
}

# MariaDB's and slurmdbd's configs. slurmdbd finds slurmdbd.conf beside slurm.conf (SLURM_CONF);
# it holds the database password, so slurmdbd insists on 0600 and SlurmUser as the owner.
write_accounting_config() {
  mkdir -p "$mariadb_dir"
  chown mysql:mysql "$mariadb_dir"
  chmod 0750 "$mariadb_dir"
  # Read with --defaults-file alone: nothing from /etc/mysql or ~/.my.cnf. The InnoDB sizes are
  # the ones slurmdbd asks for (smaller ones cost it an error line at every start); the
  # buffer pool is only address space until used.
  cat >"$mariadb_cnf" <<EOF
[mariadbd]
user=mysql
datadir=$mariadb_dir/data
socket=$mariadb_dir/mariadb.sock
pid-file=$mariadb_dir/mariadbd.pid
log-error=$mariadb_dir/mariadb.log
bind-address=127.0.0.1
port=$db_port
skip-name-resolve
innodb_buffer_pool_size=2G
innodb_log_file_size=64M
innodb_lock_wait_timeout=900
EOF
  local pass
  pass=$(openssl rand -hex 24)
  (
    umask 077
    cat >"$dir/etc/slurmdbd.conf" <<EOF
$(auth_config dbd)
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=$dir/etc/jwt_hs256.key
CommunicationParameters=NoInAddrAny
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$dbd_port
SlurmUser=slurm
PidFile=$dir/run/slurmdbd.pid
LogFile=$dir/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$db_port
StorageUser=slurm
StoragePass=$pass
StorageLoc=$db_name
EOF
  )
  chown slurm:slurm "$dir/etc/slurmdbd.conf"
}

start_munged() {
  (run_slurm /usr/sbin/munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" --seed-file="$dir/munge/seed") ||
    die "munged failed to start (log: $dir/munge/munged.log)"
  cp "$dir/munge/munged.pid" "$pids/munged"
}

# wait_daemon SECS NAME LOG WHAT CHECK...: wait_for CHECK, but fail at once, with the end of
# LOG, when daemon NAME has exited (its port taken by another copy, say) instead of timing out.
wait_daemon() {
  local secs=$1 name=$2 log=$3 what=$4
  shift 4
  local deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    pid_alive "$pids/$name" || die "$name exited while waiting for $what: $(tail -n 3 "$log")"
    [ $SECONDS -lt $deadline ] || die "timed out after ${secs}s waiting for $what (log: $log)"
    sleep 0.2
  done
}

# root administers over the unix socket (unix_socket auth: no password anywhere).
mariadb_sql() { mariadb --no-defaults --socket="$mariadb_dir/mariadb.sock" -u root "$@"; }

# An empty data dir made by mariadb-install-db (system tables, root@localhost by unix socket),
# printed as a path. It takes 1-3 s and depends only on MariaDB's version and the InnoDB
# settings, so it is made once per version in the cache and each start copies it. Made aside
# and renamed into place: a second harness copy starting at the same time keeps either.
mariadb_template() {
  local version tmpl work
  version=$(/usr/sbin/mariadbd --version | awk '{print $3}')
  tmpl="$SLURMSCALE_CACHE/mariadb-$version-data"
  if [ ! -d "$tmpl" ]; then
    mkdir -p "$SLURMSCALE_CACHE"
    work=$(mktemp -d "$SLURMSCALE_CACHE/.mariadb-data.XXXXXX")
    chown mysql:mysql "$work"
    mariadb-install-db --defaults-file="$mariadb_cnf" --datadir="$work" \
      --auth-root-authentication-method=socket --skip-test-db --skip-name-resolve \
      >"$dir/log/mariadb-install-db.log" 2>&1 ||
      { rm -rf "$work"; die "mariadb-install-db failed (log: $dir/log/mariadb-install-db.log)"; }
    mv -T "$work" "$tmpl" 2>/dev/null || rm -rf "$work"
  fi
  echo "$tmpl"
}

start_mariadb() {
  local tmpl
  tmpl=$(mariadb_template)
  cp -a "$tmpl" "$mariadb_dir/data"
  # In the foreground, so $! is mariadbd itself (it drops to mysql; no mysqld_safe).
  /usr/sbin/mariadbd --defaults-file="$mariadb_cnf" >>"$dir/log/mariadbd.out" 2>&1 &
  echo $! >"$pids/mariadbd"
  wait_daemon 30 mariadbd "$mariadb_dir/mariadb.log" "MariaDB on 127.0.0.1:$db_port" mariadb_sql -e 'SELECT 1'
  # The password goes in on stdin, never on a command line.
  local pass
  pass=$(sed -n 's/^StoragePass=//p' "$dir/etc/slurmdbd.conf")
  mariadb_sql --batch <<EOF || die "could not create database $db_name"
CREATE DATABASE $db_name;
CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY '$pass';
GRANT ALL ON $db_name.* TO 'slurm'@'127.0.0.1';
EOF
}

# slurmdbd creates its tables on first contact with the database; then the cluster and its
# users are registered, before slurmctld registers with it.
start_slurmdbd() {
  SLURM_CONF="$conf" run_slurm "$sbin/slurmdbd" -D >>"$dir/log/slurmdbd.out" 2>&1 &
  echo $! >"$pids/slurmdbd"
  wait_daemon 60 slurmdbd "$dir/log/slurmdbd.out" "slurmdbd $flavor on 127.0.0.1:$dbd_port" \
    slurm sacctmgr -n show cluster
}

register_cluster() {
  slurm sacctmgr -i add cluster "$cluster" >/dev/null || die "sacctmgr add cluster $cluster failed"
  # Adding the cluster made account root with user root in it; the JWT user joins them.
  slurm sacctmgr -i add user "$jwt_user" account=root defaultaccount=root cluster="$cluster" >/dev/null ||
    die "sacctmgr add user $jwt_user failed"
}

start_slurmd() { # node
  local n=$1
  mkdir -p "$dir/spool/$n"
  SLURM_CONF="$conf" SLURMSCALE_OWN_RUN="$(runtime_dir "$n")" run_slurm "$dir/bin/slurmd" -D -N "$n" -f "$conf" -d "$dir/bin/slurmstepd" \
    >>"$dir/log/slurmd-$n.out" 2>&1 &
  echo $! >"$pids/slurmd-$n"
}

node_state() { slurm sinfo -h -N -n "$1" -o '%T' 2>/dev/null | head -1; }
node_ready() { case "$(node_state "$1")" in idle | mixed | allocated) return 0 ;; *) return 1 ;; esac; }

start_slurmrestd() { # [plain | PORT]: without the slurmdbd plugins, or one more on PORT
  local plugins port=$rest_port name=slurmrestd
  if [ "$flavor" = 22.05 ]; then
    plugins=openapi/v0.0.36,openapi/v0.0.37,openapi/v0.0.38,openapi/dbv0.0.36,openapi/dbv0.0.37,openapi/dbv0.0.38
  else
    plugins=openapi/slurmctld,openapi/slurmdbd
  fi
  [ -n "$dbd" ] || plugins=openapi/slurmctld
  local addr=127.0.0.1
  case "${1:-}" in
    plain)
      plugins=${plugins%%,openapi/dbv0.0.36*} plugins=${plugins%,openapi/slurmdbd}
      port=$plain_rest_port name=slurmrestd-plain
      ;;
    *:*) addr=${1%:*} port=${1##*:} name=slurmrestd-$port ;;
    [0-9]*) port=$1 name=slurmrestd-$1 ;;
  esac
  # Every REST version each Slurm has, with the slurmdbd ones (/slurmdb/...) unless plain.
  # slurmrestd refuses root and SlurmUser: it binds first, then drops to nobody (by number:
  # a root filesystem's cannot resolve the name inside it).
  # MALLOC_ARENA_MAX keeps its RSS sane on large /jobs answers.
  SLURM_CONF="$conf" SLURM_JWT=daemon MALLOC_ARENA_MAX=2 \
    run_slurm "$sbin/slurmrestd" -f "$conf" -a rest_auth/jwt -s "$plugins" -u "$(id -u nobody)" -g "$(getent group nogroup | cut -d: -f3)" \
    "$addr:$port" >>"$dir/log/$name.log" 2>&1 &
  echo $! >"$pids/$name"
}

# Runs "$@" — a daemon or a command of this flavor's Slurm — the way this flavor runs, and
# execs: only ever in the background (`run_slurm … &`: $! is then the daemon) or in a
# subshell (`(run_slurm …)`). With --hosts, in a mount namespace of its own where the run's
# hosts file is /etc/hosts; with `--hostname NAME` also in a UTS namespace under that name.
# For 24.11 and 26.05, chrooted into its root filesystem (build-slurm-root.sh), in a mount namespace
# of its own where /proc, /sys, /dev and the run dir are bound in at their own paths (so
# every path in the configs means the same inside and out), in the caller's directory when
# it exists there, and with the run's own /run (auth/slurm's daemons put their sockets there,
# which its commands look for at fixed paths; with SLURMSCALE_OWN_RUN=DIR, DIR is its
# /run/slurm). The mounts go with the namespace, when its last process ends.
run_slurm() {
  local name="" hosts="" uts=()
  while :; do
    case "${1:-}" in
      --hostname) name=$2 uts=(--uts) && shift 2 ;;
      --hosts) hosts=$dir/etc/hosts && shift ;;
      *) break ;;
    esac
  done
  [ -z "$root$hosts$name" ] && exec "$@"
  # The root has no hosts file of its own: the run's is its /etc/hosts.
  [ -n "$root" ] && hosts=$dir/etc/hosts
  exec unshare --mount "${uts[@]}" -- sh -c '
    name=$1 hosts=$2 root=$3 run=$4 cwd=$5
    shift 5
    [ -z "$name" ] || hostname "$name"
    if [ -z "$root" ]; then
      [ -z "$hosts" ] || mount --bind "$hosts" /etc/hosts
      exec "$@"
    fi
    for d in /proc /sys /dev; do mount --rbind "$d" "$root$d"; done
    mkdir -p "$root$run" && mount --bind "$run" "$root$run"
    mount --bind "$run/sysrun" "$root/run"
    if [ -n "${SLURMSCALE_OWN_RUN:-}" ]; then
      mkdir -p "$root/run/slurm" && mount --bind "$SLURMSCALE_OWN_RUN" "$root/run/slurm"
    fi
    [ -z "$hosts" ] || mount --bind "$hosts" "$root/etc/hosts"
    exec chroot "$root" /bin/sh -c "cd \"\$0\" 2>/dev/null; exec \"\$@\"" "$cwd" "$@"' \
    sh "$name" "$hosts" "$root" "$dir" "$PWD" "$@"
}

start_slurmctld() {
  # Without -c it recovers jobs, nodes and reservations from StateSaveLocation, as a restart
  # after an upgrade or a crash does.
  SLURM_CONF="$conf" run_slurm --hosts "$dir/bin/slurmctld" -D -i -f "$conf" >>"$dir/log/slurmctld.out" 2>&1 &
  echo $! >"$pids/slurmctld"
  wait_for 30 "slurmctld $flavor (log: $dir/log/slurmctld.log)" slurm scontrol ping
}

mint_token() {
  local out
  out=$(slurm scontrol token username="$jwt_user" lifespan=86400) || die "scontrol token failed"
  (umask 077 && printf '%s' "${out#SLURM_JWT=}" >"$dir/jwt.token")
}

# (a cluster started without accounting, by an older harness, counts as stopped: start
# replaces it)
running() {
  pid_alive "$pids/slurmctld" && { ! uses_munge || pid_alive "$pids/munged"; } &&
    { [ -z "$dbd" ] || { pid_alive "$pids/slurmdbd" && pid_alive "$pids/mariadbd"; }; }
}

restd_ready() { # URL
  curl -sf -o /dev/null -H "X-SLURM-USER-NAME: $jwt_user" -H "X-SLURM-USER-TOKEN: $(cat "$dir/jwt.token")" \
    "$1/slurm/${api_versions%% *}/ping"
}

ensure_slurmrestd() {
  pid_alive "$pids/slurmrestd" || start_slurmrestd
  pid_alive "$pids/slurmrestd-plain" || start_slurmrestd plain
  wait_for 30 "slurmrestd $flavor on $rest_url (log: $dir/log/slurmrestd.log)" restd_ready "$rest_url"
  wait_for 30 "slurmrestd $flavor without accounting on $plain_rest_url (log: $dir/log/slurmrestd-plain.log)" \
    restd_ready "$plain_rest_url"
}

start() {
  if running; then
    ensure_slurmrestd
    say "Slurm $flavor already running ($rest_url)"
    return
  fi
  [ -x "$root$sbin/slurmctld" ] && [ -x "$root$sbin/slurmdbd" ] && [ -x /usr/sbin/mariadbd ] ||
    die "Slurm $flavor or MariaDB is not installed here: run tests/harness/deps.sh (22.05) or tests/harness/build-slurm-root.sh $release"
  # slurmctld re-executes itself as SlurmUser and slurmrestd runs as nobody.
  runuser -u nobody -- test -x "$root$sbin/slurmrestd" ||
    die "$sbin is not reachable by other users (is SLURMSCALE_CACHE under /root?); use a world-traversable cache dir"
  stop >/dev/null 2>&1 || true
  if [ -n "$site" ]; then write_site_config; else write_config; fi
  if uses_munge; then start_munged; fi
  if [ -n "$dbd" ]; then
    start_mariadb
    start_slurmdbd
    register_cluster
  fi
  start_slurmctld
  local n
  for n in "${cpu_nodes[@]}" "${gpu_nodes[@]}"; do start_slurmd "$n"; done
  for n in "${cpu_nodes[@]}" "${gpu_nodes[@]}"; do registered "$n" 60; done
  mint_token
  ensure_slurmrestd
  write_env
  say "Slurm $flavor up: $rest_url (cluster $cluster, env: $dir/env)"
}

# runtime_dir NODE: a directory (made here) that run_slurm binds at /run/slurm for the node's
# slurmd, where auth/slurm's slurmd binds its socket: a shared /run/slurm would be every
# slurmd's of this Slurm, and two binding it at once kill one ("Address already in use").
runtime_dir() {
  mkdir -p "$dir/sysrun/slurmd-$1"
  echo "$dir/sysrun/slurmd-$1"
}

# registered NODE SECS: waits for NODE's slurmd to register; if it does not, says what
# slurmctld thinks of the node and how the slurmd's log ends (the run dir goes with the stop).
registered() {
  local n=$1 deadline=$((SECONDS + $2))
  until node_ready "$n" >/dev/null 2>&1; do
    if [ $SECONDS -ge "$deadline" ]; then
      die "node $n did not register within $2 s: slurmctld has it '$(node_state "$n" 2>&1)'; slurmd $(pid_alive "$pids/slurmd-$n" && echo runs || echo exited); its log ends: $(tail -n 6 "$dir/log/slurmd-$n.log" 2>/dev/null | tr '\n' '|')"
    fi
    sleep 0.2
  done
}

write_env() {
  cat >"$dir/env" <<EOF
export SLURM_CLUSTER=$cluster
export SLURM_FLAVOR=$flavor
export SLURM_REST_URL=$rest_url
export SLURM_REST_URL_NO_ACCOUNTING=$plain_rest_url
export SLURMCTLD_URL=http://127.0.0.1:$ctld_port
export SLURM_API_VERSIONS="$api_versions"
export SLURM_USER=$jwt_user
export HARNESS_JWT_FILE=$dir/jwt.token
export HARNESS_JWT_KEY_FILE=$dir/etc/jwt_hs256.key
export SLURM_CONF=$conf
export SLURM_BIN=$cmd_bin
export SLURM_DBD_PORT=$dbd_port
export SLURM_DB_NAME=$db_name
export SLURM_HARNESS="$HARNESS_DIR/slurm.sh $flavor"
export SLURM_ELASTIC_NODES="${elastic_nodes[*]}"
export SLURM_SLINKY_PARTITION=slinky
export SLURM_PLANNED_PARTITION=planned
export SLURM_POWER_LOG=$dir/log/power.log
export SLURM_WAKE_FILE=$dir/wake-to
EOF
}

cancel_jobs() {
  # Stopping slurmd leaves job processes behind, so jobs go first.
  pid_alive "$pids/slurmctld" || return 0
  local ids
  ids=$(slurm squeue -h -o '%A' 2>/dev/null | tr '\n' ' ')
  [ -z "${ids// /}" ] && return 0
  # shellcheck disable=SC2086
  slurm scancel $ids 2>/dev/null || true
  local deadline=$((SECONDS + 20))
  while [ $SECONDS -lt $deadline ] && [ -n "$(slurm squeue -h -t running,completing -o '%A' 2>/dev/null)" ]; do
    sleep 0.3
  done
}

stop() {
  [ -d "$dir" ] || return 0
  dbd_release
  cancel_jobs
  stop_pidfile "$pids/slurmrestd"
  local f
  for f in "$pids"/slurmrestd-*; do [ -e "$f" ] && stop_pidfile "$f"; done
  for f in "$pids"/slurmd-*; do [ -e "$f" ] && stop_pidfile "$f"; done
  stop_pidfile "$pids/slurmctld"
  # after slurmctld, which sends its last records on the way out
  stop_pidfile "$pids/slurmdbd"
  stop_pidfile "$pids/mariadbd"
  stop_pidfile "$pids/munged"
  rm -rf "$dir"
  say "Slurm $flavor stopped"
}

# slurmdbd behind slurmctld, on purpose, as at a site where it is still recording a burst of
# submissions: slurmctld's connections to slurmdbd are refused (an iptables rule on loopback
# for slurmctld's user id and slurmdbd's port, marked with this run's dir), so slurmctld keeps
# taking jobs and queues their records (sdiag's DBD Agent queue), while slurmdbd still answers
# slurmrestd's /slurmdb/ requests with what it has. dbd-release (and stop) removes the rule;
# slurmctld then reconnects and sends what it queued.
dbd_rule() { # -I|-D
  local uid
  uid=$(awk '/^Uid:/ {print $3}' "/proc/$(cat "$pids/slurmctld")/status") ||
    die "slurmctld $flavor is not running"
  iptables "$1" OUTPUT -o lo -p tcp --dport "$dbd_port" -m owner --uid-owner "$uid" \
    -m comment --comment "slurmscale-harness dbd-hold $dir" -j REJECT --reject-with tcp-reset
}

dbd_hold() {
  running || die "Slurm $flavor is not running"
  command -v iptables >/dev/null || die "dbd-hold needs iptables (tests/harness/deps.sh installs it)"
  dbd_release
  dbd_rule -I
}

dbd_release() {
  command -v iptables >/dev/null || return 0
  local rule
  while rule=$(iptables -S OUTPUT 2>/dev/null | grep -F -- "dbd-hold $dir\"" | head -1) && [ -n "$rule" ]; do
    eval "iptables ${rule/-A OUTPUT/-D OUTPUT}"
  done
}

node_up() {
  local n=$1
  running || die "Slurm $flavor is not running"
  node_port "$n" >/dev/null
  pid_alive "$pids/slurmd-$n" || start_slurmd "$n"
  registered "$n" 30
}

# A Slinky NodeSet pod: `slurmd -Z` registering (or joining the record of) node NAME with
# the NodeSet's feature and shape, extra slurmd arguments after the --conf text (`-b` for a
# planned-N pod, which joins its powered-down record: see the header).
pod_up() {
  local n=$1 nconf=${2:-"Feature=${1%-*} CPUs=4 RealMemory=8000"}
  running || die "Slurm $flavor is not running"
  pod_address "$n" >/dev/null || die "$n is not a NodeSet pod of Slurm $flavor (the run's hosts file has: $(pod_names))"
  pid_alive "$pids/slurmd-$n" && return 0
  mkdir -p "$dir/spool/$n"
  local stepd=(-d "$dir/bin/slurmstepd") shim="$dir/bin/srcaddr.so"
  [ -f "$shim" ] || gcc -shared -fPIC -O2 -o "$shim" "$HARNESS_DIR/srcaddr.c" -ldl ||
    die "cannot build $HARNESS_DIR/srcaddr.c (gcc comes with tests/harness/deps.sh)"
  # The pod's own address (its hosts line), for what it listens on and connects from.
  SLURM_CONF="$conf" SLURMSCALE_OWN_RUN="$(runtime_dir "$n")" LD_PRELOAD="$shim" SLURMSCALE_SOURCE_ADDR="$(pod_address "$n")" \
    run_slurm --hosts --hostname "$n" \
    "$dir/bin/slurmd" -D -Z -N "$n" --conf "$nconf" -f "$conf" "${stepd[@]}" "${@:3}" \
    >>"$dir/log/slurmd-$n.out" 2>&1 &
  echo $! >"$pids/slurmd-$n"
}

# pod_address NODE: the address of a NodeSet pod this Slurm can run (its `# pod` line of the
# run's hosts file); fails for any other name.
pod_address() {
  awk -v n="$1" '$2 == n && $3 == "#" && $4 == "pod" {print $1; found = 1} END {exit !found}' "$dir/etc/hosts"
}
pod_names() { # for a message: every pod name, comma-separated
  awk '$3 == "#" && $4 == "pod" {print $2}' "$dir/etc/hosts" | paste -sd, | sed 's/,/, /g'
}

# The pod goes, as slurm-operator's preStop has it: the node DOWN ("Pod is terminating"),
# and with `delete` (operator 1.1 and before) its record deleted; then slurmd stops.
pod_down() {
  local n=$1 how=${2:-down}
  running || die "Slurm $flavor is not running"
  if [ -n "$(slurm squeue -h -w "$n" -o '%A' 2>/dev/null)" ]; then
    die "$n still runs jobs; the operator deletes a pod only once its node is drained"
  fi
  slurm scontrol update nodename="$n" state=down reason="Pod is terminating" >/dev/null 2>&1 || true
  [ "$how" = delete ] && { slurm scontrol delete nodename="$n" || die "could not delete $n"; }
  stop_pidfile "$pids/slurmd-$n"
}

node_down() {
  local n=$1
  running || die "Slurm $flavor is not running"
  node_port "$n" >/dev/null
  # As an operator would: never take a node away from running work (stopping its slurmd
  # would leave the job completing forever).
  if [ -n "$(slurm squeue -h -w "$n" -o '%A' 2>/dev/null)" ]; then
    die "$n still runs jobs; not taking it down"
  fi
  stop_pidfile "$pids/slurmd-$n"
  # The node was idle and up until now: a job the scheduler placed on it after the check would
  # be left completing forever (seen once under load). Such a job keeps Slurm from returning
  # the node to FUTURE: then slurmd comes back for it, and the node-down is refused as above.
  # A refusal without a job on the node (a busy slurmctld timing out on a slow day, a node
  # still finishing its last job's epilog) is tried again for a while, then reported as it is.
  local tries=0 said
  until said=$(slurm scontrol update nodename="$n" state=future 2>&1); do
    if [ -n "$(slurm squeue -h -w "$n" -o '%A' 2>/dev/null)" ] || [ $((tries += 1)) -ge 15 ]; then
      break
    fi
    sleep 1
  done
  if [ -n "$(slurm squeue -h -w "$n" -o '%A' 2>/dev/null)" ]; then
    start_slurmd "$n"
    die "$n took a job while going down; its slurmd is back"
  fi
  if [ "$tries" -ge 15 ]; then
    start_slurmd "$n"
    die "slurmctld refused to return $n to FUTURE for 15 s ($said); its slurmd is back"
  fi
}

case "$cmd" in
  start) start ;;
  stop) stop ;;
  status) running && echo "running: $rest_url" || { echo "stopped"; exit 1; } ;;
  env) [ -f "$dir/env" ] || die "Slurm $flavor is not running: run tests/harness/slurm.sh $flavor start"; cat "$dir/env"; echo "export SLURMSCALE_JWT=\"\$(cat $dir/jwt.token)\"" ;;
  node-up) node_up "${3:?node name}" ;;
  # A command of this Slurm as its daemons run (24.11, 26.05: inside its root filesystem).
  run) shift 2 && run_slurm "$@" ;;
  restd-stop) stop_pidfile "$pids/slurmrestd" ;;
  # Another slurmrestd of this cluster on [ADDR:]PORT (the slurm-operator dials port 6820 of
  # its RestApi's Service), until restd-at-stop PORT or stop.
  restd-at)
    running || die "Slurm $flavor is not running"
    at=${3:?[address:]port}
    [[ "$at" == *:* ]] || at=127.0.0.1:$at
    pid_alive "$pids/slurmrestd-${at##*:}" || start_slurmrestd "$at"
    wait_for 30 "slurmrestd $flavor on $at (log: $dir/log/slurmrestd-${at##*:}.log)" \
      restd_ready "http://$at"
    ;;
  restd-at-stop) stop_pidfile "$pids/slurmrestd-${3:?port}" ;;
  restd-start) running || die "Slurm $flavor is not running"; ensure_slurmrestd ;;
  node-down) node_down "${3:?node name}" ;;
  pod-up) pod_up "${3:?node name}" "${@:4}" ;;
  # Whether NODE is a NodeSet pod this Slurm runs (operator-pods.sh asks).
  pod-name) [ -f "$dir/etc/hosts" ] && pod_address "${3:?node name}" >/dev/null ;;
  pod-down) pod_down "${3:?node name}" "${4:-down}" ;;
  # SIGTERM: slurmctld saves its state and exits; slurmd and slurmrestd stay up, as they do
  # while a site restarts its controller.
  ctld-stop) running || die "Slurm $flavor is not running"; stop_pidfile "$pids/slurmctld" ;;
  dbd-hold) dbd_hold ;;
  dbd-release) dbd_release ;;
  ctld-start)
    pid_alive "$pids/slurmdbd" || die "Slurm $flavor is not running"
    pid_alive "$pids/slurmctld" || start_slurmctld
    ;;
  *) die "usage: slurm.sh $flavor start|stop|status|env|node-up NODE|node-down NODE|restd-stop|restd-start|ctld-stop|ctld-start" ;;
esac
