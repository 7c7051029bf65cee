#!/usr/bin/env bash
# Builds the slurmscale container image from ./Containerfile with buildah, offline:
# the binary (cargo, reusing the target dir; the release profile unless
# SLURMSCALE_IMAGE_PROFILE says otherwise), then a build context holding it, its
# loader and libraries (what ldd lists), CA certificates, nsswitch.conf, hosts, passwd and
# group, then the image. The image is rebuilt only when that context changed, and checked:
# at most 40 MB, USER 65532, the binary's libraries all shipped.
#
#   tests/harness/image.sh          build what changed, check it, print the image name
#   tests/harness/image.sh name     print the image name only
#   tests/harness/image.sh context  build the binary and the context, print the context dir
#                                   (for `docker build -f Containerfile DIR` elsewhere)
#
# The name is what the chart pulls by default: values.yaml's image.repository and the
# chart's appVersion as tag. SLURMSCALE_IMAGE overrides it (to push to your own registry).
#
# SLURMSCALE_IMAGE_ARCH=arm64 builds the linux/arm64 image instead (tag suffixed `-arm64`):
# the binary cross-built for aarch64-unknown-linux-gnu with Debian's cross compiler
# (gcc-aarch64-linux-gnu, which also builds the C in ring and aws-lc), its loader and
# libraries from Debian's arm64 cross C library. release/release.sh puts both in one
# multi-platform manifest.
source "$(dirname "$0")/common.sh"
cd "$HARNESS_DIR/../.."

max_bytes=40000000 # the issue's 40 MB

repo=$(sed -n '/^image:/,/^[^ #]/s/^  repository: *\([^ #]*\).*/\1/p' charts/slurmscale/values.yaml)
tag=$(sed -n 's/^appVersion: *"\{0,1\}\([^" ]*\)"\{0,1\} *$/\1/p' charts/slurmscale/Chart.yaml)
[ -n "$repo" ] && [ -n "$tag" ] || die "cannot read image.repository (values.yaml) or appVersion (Chart.yaml)"
arch=${SLURMSCALE_IMAGE_ARCH:-amd64}
case $arch in
  amd64) triple= suffix= ;;
  arm64) triple=aarch64-unknown-linux-gnu suffix=-arm64 ;;
  *) die "SLURMSCALE_IMAGE_ARCH=$arch: amd64 or arm64" ;;
esac
image=${SLURMSCALE_IMAGE:-$repo:$tag$suffix}
what=${1:-build}
case $what in
  name) echo "$image"; exit 0 ;;
  build | context) ;;
  *) die "usage: $0 [build|name|context]" ;;
esac

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$SLURMSCALE_CACHE/target}"
# The Cargo profile of the binary: `release` (fat LTO, what ships) unless
# SLURMSCALE_IMAGE_PROFILE names another; the test command builds `test-image`, the same
# code optimised without LTO, which builds in a fraction of the time.
profile=${SLURMSCALE_IMAGE_PROFILE:-release}
if [ -z "$triple" ]; then
  say "building the binary (cargo build --profile $profile; target dir $CARGO_TARGET_DIR)"
  cargo build --locked --profile "$profile" --bin slurmscale >&2
  bin=$CARGO_TARGET_DIR/$profile/slurmscale
else
  cross=aarch64-linux-gnu sysroot=/usr/aarch64-linux-gnu
  command -v $cross-gcc >/dev/null && [ -e $sysroot/lib/libc.so.6 ] ||
    die "no arm64 cross toolchain (Debian: apt-get install gcc-aarch64-linux-gnu libc6-dev-arm64-cross)"
  rustup target list --installed | grep -qx $triple || rustup target add $triple >&2
  say "building the arm64 binary (cargo build --profile $profile --target $triple; target dir $CARGO_TARGET_DIR)"
  CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=$cross-gcc CC_aarch64_unknown_linux_gnu=$cross-gcc \
    AR_aarch64_unknown_linux_gnu=$cross-ar \
    cargo build --locked --profile "$profile" --target $triple --bin slurmscale >&2
  bin=$CARGO_TARGET_DIR/$triple/$profile/slurmscale
fi
revision=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)

# The build context, made afresh each time (a few MB; hashing it is what decides a rebuild).
ctx=$CARGO_TARGET_DIR/image-context
rootfs=$ctx/rootfs
rm -rf "$ctx"
mkdir -p "$rootfs"/{etc/ssl/certs,home/nonroot,usr/local/bin}
install -m 0755 "$bin" "$rootfs/usr/local/bin/slurmscale"

# The loader and every library the binary needs, at the paths the loader looks for them. A
# scratch image with a dynamic binary and no loader fails with "no such file or directory".
if [ -z "$triple" ]; then
  libs=$(ldd "$bin") || die "ldd $bin failed"
  if grep -q 'not found' <<<"$libs"; then die "libraries of $bin not found: $libs"; fi
  while read -r path; do
    install -D -m 0755 "$(readlink -f "$path")" "$rootfs$path"
  done < <(grep -o '/[^ ]*' <<<"$libs")
  loader=/lib64/ld-linux-x86-64.so.2
else
  # ldd cannot run a foreign binary: its ELF header names the loader and the libraries, taken
  # from the cross C library into Debian's arm64 layout, where that loader looks.
  loader=$(readelf -l "$bin" | sed -n 's/.*program interpreter: \([^]]*\)].*/\1/p')
  [ -n "$loader" ] || die "$bin names no loader"
  install -D -m 0755 "$(readlink -f "$sysroot/lib/${loader##*/}")" "$rootfs$loader"
  for lib in $(readelf -d "$bin" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p'); do
    [ -e "$sysroot/lib/$lib" ] || die "$bin needs $lib, which $sysroot/lib lacks"
    install -D -m 0755 "$(readlink -f "$sysroot/lib/$lib")" "$rootfs/lib/aarch64-linux-gnu/$lib"
  done
fi
[ -e "$rootfs$loader" ] || die "no loader $loader among $bin's libraries"

cp /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/" ||
  die "no /etc/ssl/certs/ca-certificates.crt (Debian: apt-get install ca-certificates)"
cat >"$rootfs/etc/nsswitch.conf" <<'EOF'
passwd: files
group: files
hosts: files dns
EOF
cat >"$rootfs/etc/hosts" <<'EOF'
127.0.0.1 localhost
::1 localhost ip6-localhost ip6-loopback
EOF
cat >"$rootfs/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
EOF
cat >"$rootfs/etc/group" <<'EOF'
root:x:0:
nonroot:x:65532:
EOF
mkdir -m 1777 "$rootfs/tmp"
cp Containerfile "$ctx/Containerfile"
if [ "$what" = context ]; then echo "$ctx"; exit 0; fi

command -v buildah >/dev/null ||
  die "buildah is missing (Debian: apt-get install buildah podman runc, or run tests/harness/deps.sh)"
need_root # buildah as root: rootless needs subuid ranges set up, which we do not assume

# What decides a rebuild: every file's path, mode and content, and the labels.
digest=$(cd "$ctx" && {
  find . -printf '%p %m %y\n' | LC_ALL=C sort
  find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
  echo "$tag $revision $arch"
} | sha256sum | cut -c1-64)
if [ "$(image_context "$image")" = "$digest" ]; then
  say "image $image is up to date"
else
  say "building image $image"
  # Dated by the commit, not the clock: the same commit and context give the same image.
  created=$(git log -1 --format=%ct 2>/dev/null || echo 0)
  buildah bud --quiet --timestamp "$created" --omit-history \
    --platform "linux/$arch" \
    --build-arg "VERSION=$tag" --build-arg "REVISION=$revision" \
    --label "io.slurmscale.context=$digest" \
    -t "$image" -f "$ctx/Containerfile" "$ctx" >/dev/null
  # The image this one replaces is left untagged: drop those of ours, nobody else's.
  for id in $(buildah images --quiet --filter dangling=true --filter label=org.opencontainers.image.title=slurmscale); do
    buildah rmi "$id" >/dev/null 2>&1 || true
  done
fi

# The promises the chart relies on.
user=$(buildah inspect --type image --format '{{.OCIv1.Config.User}}' "$image")
[ "$user" = 65532:65532 ] || die "image $image runs as '$user', not 65532:65532"
if command -v podman >/dev/null; then
  size=$(podman image inspect --format '{{.Size}}' "$image")
else # what the one layer holds
  size=$(du -sb --apparent-size "$rootfs" | cut -f1)
fi
[ "$size" -le $max_bytes ] || die "image $image holds $size bytes, more than $max_bytes"
say "image $image: $size bytes (limit $max_bytes), user $user, commit $revision"
echo "$image"
