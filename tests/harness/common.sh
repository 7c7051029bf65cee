# Shared settings for the harness scripts (sourced, not run).
#
# Everything slow to make (the Kubernetes binaries of build-go-stack.sh, the Slurm 24.11
# build, an empty MariaDB data dir, the cargo target dir) lives in one cache outside the clone
# so a second run reuses it;
# everything a run creates (configs, keys, logs, pid files) lives in a run dir that
# `stop` removes.

set -euo pipefail

# /var/cache, not ~/.cache: slurmctld re-executes itself after dropping to SlurmUser, and
# slurmrestd runs as nobody, so the Slurm 24.11 prefix must be reachable by other users.
SLURMSCALE_CACHE="${SLURMSCALE_CACHE:-/var/cache/slurmscale}"
SLURMSCALE_RUN="${SLURMSCALE_RUN:-/tmp/slurmscale-harness}"
HARNESS_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

# Debian trixie's Slurm 24.11 and sid's 26.05, each in a root filesystem of its own
# (build-slurm-root.sh).
SLURM_2411_ROOT="${SLURM_2411_ROOT:-$SLURMSCALE_CACHE/slurm-24.11-root}"
SLURM_2605_ROOT="${SLURM_2605_ROOT:-$SLURMSCALE_CACHE/slurm-26.05-root}"

say() { printf '[harness] %s\n' "$*" >&2; }
die() { printf '[harness] error: %s\n' "$*" >&2; exit 1; }

# The build-context digest buildah's IMAGE was built from (label io.slurmscale.context, set by
# image.sh and node.sh), or nothing.
image_context() {
  buildah inspect --type image --format '{{index .OCIv1.Config.Labels "io.slurmscale.context"}}' "$1" 2>/dev/null || true
}

need_root() {
  [ "$(id -u)" = 0 ] || die "the harness runs Slurm daemons and apt as root; run it as root"
}

# A slow day: a busy process that takes one core (the last, at a high priority, so the
# scheduler moves everything else off it) until `release_core PID`. Prints its pid.
take_a_core() {
  local cpu
  cpu=$(($(nproc) - 1))
  nice -n -10 taskset -c "$cpu" bash -c 'while :; do :; done' >/dev/null 2>&1 &
  echo $!
}

release_core() { [ -n "${1:-}" ] && kill "$1" 2>/dev/null; return 0; }

# Poll a command until it succeeds; fail with a message after $1 seconds.
wait_for() {
  local secs=$1 what=$2; shift 2
  local deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || die "timed out after ${secs}s waiting for $what"
    sleep 0.2
  done
}

# True when process $1 runs. A zombie does not: our daemons outlive the script that started
# them, and whoever reaps orphans here may take a second to do it.
proc_alive() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [ "${stat%% *}" != Z ]
}

# True when the pid recorded in $1 is alive.
pid_alive() { [ -s "$1" ] && proc_alive "$(cat "$1")"; }

# Stop the processes whose pids we recorded in the files given (TERM to all at once, then
# KILL what is left after 5 s), and forget them. We only ever signal pids we wrote down.
stop_pidfiles() {
  # (not `pids`: the scripts name their pid dir so)
  local f pid procs=() left
  for f in "$@"; do
    [ -s "$f" ] && pid=$(cat "$f") && proc_alive "$pid" && kill -TERM "$pid" 2>/dev/null && procs+=("$pid")
  done
  for _ in $(seq 50); do
    left=()
    for pid in "${procs[@]}"; do proc_alive "$pid" && left+=("$pid"); done
    [ ${#left[@]} -eq 0 ] && break
    sleep 0.1
  done
  for pid in "${procs[@]}"; do proc_alive "$pid" && kill -KILL "$pid" 2>/dev/null; done
  rm -f "$@"
}

stop_pidfile() { stop_pidfiles "$1"; }

# The Debian archive this machine's apt is configured with: `apt_archive main` prints the
# URI serving the release's own suite, `apt_archive security` the one serving its
# `-security` suite. The harness fetches Debian's packages from there (build-slurm-root.sh),
# so it follows whatever mirror the machine uses and no host name lives in this repository.
# Reads both formats apt does: one-line sources.list entries and deb822 `.sources` files.
apt_archive() {
  local kind=$1 list parts uri
  eval "$(apt-config shell list Dir::Etc::sourcelist/f parts Dir::Etc::sourceparts/d)"
  # One "URI SUITE" line per source, from both formats, then the first that serves `kind`.
  uri=$(
    {
      {
        [ -f "$list" ] && cat "$list"
        for f in "$parts"*.list; do [ -f "$f" ] && cat "$f"; done
        true
      } | awk '/^[[:space:]]*deb(-src)?[[:space:]]/ { sub(/\[[^]]*\]/, ""); print $2, $3 }'
      for f in "$parts"*.sources; do
        [ -f "$f" ] || continue
        # every URI with every suite of each stanza whose Types include deb or deb-src
        awk 'function flush() { if (deb && !off) for (u in U) for (s in S) print U[u], S[s]
                                delete U; delete S; deb = off = 0 }
             /^[[:space:]]*$/ { flush(); next }
             /^[[:space:]]*#/ { next }
             tolower($1) == "types:" { for (i = 2; i <= NF; i++) if ($i ~ /^deb(-src)?$/) deb = 1 }
             tolower($1) == "uris:" { for (i = 2; i <= NF; i++) U[i] = $i }
             tolower($1) == "suites:" { for (i = 2; i <= NF; i++) S[i] = $i }
             tolower($1) == "enabled:" && tolower($2) == "no" { off = 1 }
             END { flush() }' "$f"
      done
    } | awk -v kind="$kind" '
      $1 !~ /^https?:\/\// { next }
      kind == "security" && ($2 ~ /-security$/ || $2 ~ /\/updates$/) { print $1; exit }
      kind == "main" && $2 ~ /^[a-z]+$/ { print $1; exit }'
  )
  [ -n "$uri" ] || die "no Debian $kind archive (http or https) in apt's sources ($list, ${parts}*.list, ${parts}*.sources); configure one as apt expects and run again"
  echo "${uri%/}"
}
