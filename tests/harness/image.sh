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
source "$(dirname "$0")/common.sh"
cd "$HARNESS_DIR/../.."

max_bytes=40000000 # the issue's 40 MB

repo=$(sed -n '/^image:/,/^[^ #]/s/^  repository: *\([^ #]*\).*/\1/p' charts/slurmscale/values.yaml)
tag=$(sed -n 's/^appVersion: *"\{0,1\}\([^" ]*\)"\{0,1\} *$/\1/p' charts/slurmscale/Chart.yaml)
[ -n "$repo" ] && [ -n "$tag" ] || die "cannot read image.repository (values.yaml) or appVersion (Chart.yaml)"
image=${SLURMSCALE_IMAGE:-$repo:$tag}
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
say "building the binary (cargo build --profile $profile; target dir $CARGO_TARGET_DIR)"
cargo build --locked --profile "$profile" --bin slurmscale >&2
bin=$CARGO_TARGET_DIR/$profile/slurmscale
revision=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)

# The build context, made afresh each time (a few MB; hashing it is what decides a rebuild).
ctx=$CARGO_TARGET_DIR/image-context
rootfs=$ctx/rootfs
rm -rf "$ctx"
mkdir -p "$rootfs"/{etc/ssl/certs,home/nonroot,usr/local/bin}
install -m 0755 "$bin" "$rootfs/usr/local/bin/slurmscale"

# The loader and every library ldd lists, at the paths the loader looks for them. A scratch
# image with a dynamic binary and no loader fails with "no such file or directory".
libs=$(ldd "$bin") || die "ldd $bin failed"
if grep -q 'not found' <<<"$libs"; then die "libraries of $bin not found: $libs"; fi
while read -r path; do
  install -D -m 0755 "$(readlink -f "$path")" "$rootfs$path"
done < <(grep -o '/[^ ]*' <<<"$libs")
[ -e "$rootfs/lib64/ld-linux-x86-64.so.2" ] || die "no loader among $bin's libraries: $libs"

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
  echo "$tag $revision"
} | sha256sum | cut -c1-64)
if [ "$(image_context "$image")" = "$digest" ]; then
  say "image $image is up to date"
else
  say "building image $image"
  # Dated by the commit, not the clock: the same commit and context give the same image.
  created=$(git log -1 --format=%ct 2>/dev/null || echo 0)
  buildah bud --quiet --timestamp "$created" --omit-history \
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
