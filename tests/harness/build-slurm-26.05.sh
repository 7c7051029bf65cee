#!/usr/bin/env bash
# A third real Slurm for the tests: Debian's own Slurm 26.05 (sid's slurm-wlm packages: REST
# v0.0.42-v0.0.45, slurmctld's native OpenMetrics endpoints, node creation over REST), in a
# root filesystem of its own, cached outside the clone. The same root holds sid's Prometheus
# 3.5 (prometheus3.sh runs it), the release kube-prometheus-stack ships, beside bookworm's
# 2.42.
#
# Why binaries in a root filesystem and not a build from source as for 24.11: the archive
# this machine's apt reaches lists sid's slurm-wlm source (its signed Sources index has it)
# but answers 404 for the files themselves, while it serves sid's binary packages; those need
# sid's C library (2.38 or later; bookworm has 2.36). So debootstrap makes a minimal sid
# system holding them, with packages checked against the archive's signed indexes
# (debootstrap verifies Release with the machine's keyring, then every package's checksum),
# and slurm.sh runs the daemons and commands inside it (chroot, in a mount namespace of their
# own: nothing outside the run dir is mounted for longer than a process lives). The daemons
# are Debian's build of 26.05, named `*-wlm` as in bookworm's packages.
#
# ~30-60 s the first time (about 290 MB); a no-op afterwards. sid moves: the cache keeps the
# release it was made with (26.05.N, printed below and kept in the root's .slurmscale-ready), and a root
# that no longer holds a 26.05 is refused rather than used.
source "$(dirname "$0")/common.sh"
need_root

stamp="$SLURM_2605_ROOT/.slurmscale-ready"
# (A root made before it held Prometheus is made again.)
[ -f "$stamp" ] && [ -x "$SLURM_2605_ROOT/usr/bin/prometheus" ] && exit 0
"$HARNESS_DIR/deps.sh"

packages=slurmctld,slurmd,slurmrestd,slurmdbd,slurm-client,slurm-wlm-basic-plugins,slurm-wlm-jwt-plugin,slurm-wlm-mysql-plugin,munge,bash,coreutils,procps,prometheus
work="$SLURMSCALE_CACHE/build/slurm-26.05-root"
rm -rf "$work"
mkdir -p "$(dirname "$work")"
say "making a Debian sid root with its Slurm 26.05 and Prometheus 3 packages (debootstrap, ~1 min)"
debootstrap --variant=minbase --include="$packages" \
  --keyring=/usr/share/keyrings/debian-archive-keyring.gpg \
  sid "$work" "$(apt_archive main)" >"$work.log" 2>&1 ||
  { tail -20 "$work.log" >&2; die "debootstrap failed (log: $work.log)"; }
version=$(chroot "$work" dpkg-query -W -f '${Version}' slurmctld) || die "no slurmctld in the root"
case "$version" in
  26.05.*) ;;
  *) die "sid's slurmctld is $version, not a 26.05: this harness's 26.05 flavor cannot be made from today's sid" ;;
esac
[ -f "$work/usr/lib/x86_64-linux-gnu/slurm-wlm/accounting_storage_mysql.so" ] ||
  die "the root has no accounting_storage/mysql plugin (log: $work.log)"
# (The packages' own daemons are not started here: there is no init in the root. The harness
# passes its own configuration everywhere.)
# A mount point for the run's hosts file (slurm.sh binds it there), and one for Prometheus's
# data (prometheus3.sh).
touch "$work/etc/hosts"
mkdir -p "$work/prometheus"
chroot "$work" /usr/bin/prometheus --version >/dev/null 2>&1 || die "the root's prometheus does not run (log: $work.log)"
printf '%s\n' "$version" >"$work/.slurmscale-ready"
rm -rf "$SLURM_2605_ROOT"
mv -T "$work" "$SLURM_2605_ROOT"
rm -f "$work.log"
say "Slurm $version (Debian sid) cached at $SLURM_2605_ROOT"
