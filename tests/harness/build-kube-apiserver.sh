#!/usr/bin/env bash
# Builds kube-apiserver v1.20.2 from Debian bookworm's `kubernetes` source package with
# Debian's Go, offline, and caches the binary outside the clone. No registry ships a
# kube-apiserver binary, so this is how the tests get a real API server. 10-17 min on
# 2 cores the first time; a no-op afterwards.
source "$(dirname "$0")/common.sh"
need_root

if [ -x "$KUBE_APISERVER_BIN" ]; then exit 0; fi
"$HARNESS_DIR/deps.sh"

work="$SLURMSCALE_CACHE/build/kubernetes"
rm -rf "$work"
mkdir -p "$work/lists/partial" "$(dirname "$KUBE_APISERVER_BIN")"
cd "$work"

say "downloading Debian's kubernetes source package (a private deb-src list; /etc is untouched)"
echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $(apt_archive main) bookworm main" >sources.list
apt_src=(-o Dir::Etc::SourceList="$work/sources.list" -o Dir::Etc::SourceParts=/dev/null
  -o Dir::State::Lists="$work/lists" -o APT::Sandbox::User=root)
TMPDIR=/var/tmp apt-get "${apt_src[@]}" -qq update
TMPDIR=/var/tmp apt-get "${apt_src[@]}" -qq source --download-only kubernetes
dpkg-source -x --no-check kubernetes_*.dsc src >/dev/null

cd src
# The vendored reflect2 1.0.1 crashes under Go >= 1.18; Debian's 1.0.2 is API-compatible.
rm -rf vendor/github.com/modern-go/reflect2
cp -r /usr/share/gocode/src/github.com/modern-go/reflect2 vendor/github.com/modern-go/reflect2

say "building kube-apiserver (10-17 min on 2 cores; cached in $KUBE_APISERVER_BIN)"
export GOFLAGS=-mod=vendor GOPROXY=off CGO_ENABLED=0 GOCACHE="$work/gocache" GOPATH="$work/gopath"
make WHAT=cmd/kube-apiserver >"$work/build.log" 2>&1 ||
  { tail -30 "$work/build.log" >&2; die "kube-apiserver build failed (full log: $work/build.log)"; }
bin=$(find _output -type f -name kube-apiserver -perm -u+x | head -1)
[ -n "$bin" ] || die "kube-apiserver build produced no binary (log: $work/build.log)"
install -m 0755 "$bin" "$KUBE_APISERVER_BIN.tmp"
mv "$KUBE_APISERVER_BIN.tmp" "$KUBE_APISERVER_BIN"
cd / && rm -rf "$work"
say "kube-apiserver cached at $KUBE_APISERVER_BIN"
