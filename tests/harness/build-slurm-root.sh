#!/usr/bin/env bash
# A real Slurm of another release for the tests: Debian's own build of it, in a root
# filesystem of its own, cached outside the clone.
#
#   build-slurm-root.sh 24.11   Debian trixie's slurm-wlm 24.11 (REST v0.0.40-v0.0.42, node
#                               updates over REST)
#   build-slurm-root.sh 26.05   Debian sid's slurm-wlm 26.05 (REST v0.0.42-v0.0.45, slurmctld's
#                               native OpenMetrics, node creation over REST), with sid's
#                               Prometheus 3.5 (the release kube-prometheus-stack ships; run by
#                               prometheus3.sh), beside bookworm's 2.42
#
# Why binaries in a root filesystem, not a build from source: these releases' packages need
# their suite's C library (trixie's 2.41, sid's 2.38 or later; bookworm has 2.36), and a
# minimal system of that suite made with debootstrap takes about a minute where compiling
# Slurm took 7.5 (and the archive this machine's apt reaches does not serve sid's sources).
# debootstrap verifies the suite's Release file with the machine's keyring, then every
# package's checksum. slurm.sh runs the daemons and commands inside the root (chroot, in a
# mount namespace of their own: nothing outside the run dir is mounted for longer than a
# process lives). The daemons are named `*-wlm`, as in bookworm's packages.
#
# ~30-60 s the first time (about 250-290 MB); a no-op afterwards. Suites move: the cache keeps
# the release it was made with (printed below and kept in the root's .slurmscale-ready), and
# a root that no longer holds the flavor's release is refused rather than used.
source "$(dirname "$0")/common.sh"
need_root

flavor=${1:-}
case "$flavor" in
  24.11) suite=trixie root=$SLURM_2411_ROOT extra="" ;;
  26.05) suite=sid root=$SLURM_2605_ROOT extra=",prometheus" ;;
  *) die "usage: build-slurm-root.sh 24.11|26.05" ;;
esac
stamp="$root/.slurmscale-ready"
[ -f "$stamp" ] && { [ -z "$extra" ] || [ -x "$root/usr/bin/prometheus" ]; } && exit 0
"$HARNESS_DIR/deps.sh"

packages=slurmctld,slurmd,slurmrestd,slurmdbd,slurm-client,slurm-wlm-basic-plugins,slurm-wlm-jwt-plugin,slurm-wlm-mysql-plugin,munge,bash,coreutils,procps$extra
work="$SLURMSCALE_CACHE/build/slurm-$flavor-root"
rm -rf "$work"
mkdir -p "$(dirname "$work")"
say "making a Debian $suite root with its Slurm $flavor packages (debootstrap, ~1 min)"
debootstrap --variant=minbase --include="$packages" \
  --keyring=/usr/share/keyrings/debian-archive-keyring.gpg \
  "$suite" "$work" "$(apt_archive main)" >"$work.log" 2>&1 ||
  { tail -20 "$work.log" >&2; die "debootstrap failed (log: $work.log)"; }
version=$(chroot "$work" dpkg-query -W -f '${Version}' slurmctld) || die "no slurmctld in the root"
case "$version" in
  "$flavor".*) ;;
  *) die "$suite's slurmctld is $version, not a $flavor: this harness's $flavor flavor cannot be made from today's $suite" ;;
esac
[ -f "$work/usr/lib/x86_64-linux-gnu/slurm-wlm/accounting_storage_mysql.so" ] ||
  die "the root has no accounting_storage/mysql plugin (log: $work.log)"
# (The packages' own daemons are not started here: there is no init in the root. The harness
# passes its own configuration everywhere.)
# A mount point for the run's hosts file (slurm.sh binds it there), and one for Prometheus's
# data (prometheus3.sh).
touch "$work/etc/hosts"
if [ -n "$extra" ]; then
  mkdir -p "$work/prometheus"
  chroot "$work" /usr/bin/prometheus --version >/dev/null 2>&1 || die "the root's prometheus does not run (log: $work.log)"
fi
printf '%s\n' "$version" >"$work/.slurmscale-ready"
rm -rf "$root"
mv -T "$work" "$root"
rm -f "$work.log"
say "Slurm $version (Debian $suite) cached at $root"
