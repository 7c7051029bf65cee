#!/usr/bin/env bash
# A release in one command, from a clean clone (as root: buildah):
#
#   release/release.sh --registry HOST[:PORT][/PATH] [--plain-http] [--out DIR] [--profile P]
#
# The version is the workspace's (Cargo.toml, [workspace.package]); the chart's version and
# appVersion and the image tag repeat it, and CHANGELOG.md has a `## VERSION` section with its
# upgrade notes: the release stops before building anything when one of them disagrees.
# Then, for linux/amd64 and linux/arm64 (cross-built with Debian's gcc-aarch64-linux-gnu):
# the binary and its image (tests/harness/image.sh), and the binary's SBOM (release/sbom.py,
# CycloneDX). Pushed: the two images as one multi-platform manifest, REGISTRY/slurmscale:VERSION,
# and the chart, oci://REGISTRY/charts/slurmscale VERSION (its values pointing at that image).
# Written to DIR (default dist/VERSION): the binaries as tarballs, the chart package, the SBOMs,
# the pushed image's digest (image-digest.txt) and SHA256SUMS of them all.
#
# --plain-http: a registry without TLS (the loopback one the test command rehearses against,
# tests/harness/registry.sh). --profile: the Cargo profile (default `release`, fat LTO; the test
# command's rehearsal builds `test-image`, the same code without LTO, in a fraction of the time).
# Credentials for a real registry come from `buildah login` and `helm registry login`.
set -euo pipefail
cd "$(dirname "$0")/.."
source tests/harness/common.sh
need_root

registry= plain_http= out= profile=release
while [ $# -gt 0 ]; do
  case $1 in
    --registry) registry=${2:?--registry HOST[:PORT][/PATH]} && shift ;;
    --plain-http) plain_http=1 ;;
    --out) out=${2:?--out DIR} && shift ;;
    --profile) profile=${2:?--profile NAME} && shift ;;
    *) die "unknown argument $1 (usage: $0 --registry HOST[:PORT][/PATH] [--plain-http] [--out DIR] [--profile P])" ;;
  esac
  shift
done
[ -n "$registry" ] || die "--registry is required (where the image and the chart are pushed)"

# One version, said the same everywhere.
version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version *= *"\([^"]*\)".*/\1/p' Cargo.toml)
[ -n "$version" ] || die "no version in Cargo.toml's [workspace.package]"
chart=charts/slurmscale
chart_version=$(sed -n 's/^version: *"\{0,1\}\([^" ]*\)"\{0,1\} *$/\1/p' $chart/Chart.yaml)
app_version=$(sed -n 's/^appVersion: *"\{0,1\}\([^" ]*\)"\{0,1\} *$/\1/p' $chart/Chart.yaml)
[ "$chart_version" = "$version" ] && [ "$app_version" = "$version" ] ||
  die "Chart.yaml says version $chart_version, appVersion $app_version; Cargo.toml says $version: make them equal"
grep -q "^## $version\b" CHANGELOG.md ||
  die "CHANGELOG.md has no '## $version' section: say what changed and how to upgrade"
revision=$(git rev-parse --short=12 HEAD)
if [ -n "$(git status --porcelain)" ]; then
  say "warning: the working tree has uncommitted changes; the artifacts are labelled $revision all the same"
fi
out=${out:-dist/$version}
rm -rf "$out"
mkdir -p "$out"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$SLURMSCALE_CACHE/target}"
image=$registry/slurmscale:$version
tls=(--tls-verify=true)
[ -n "$plain_http" ] && tls=(--tls-verify=false)
say "release $version ($revision) to $registry"

# Each architecture: its binary and image, built under its own local name, then the tarball
# and the SBOM. The binary in the tarball is the one in the image.
# The target each SBOM describes.
declare -A triples=([amd64]=x86_64-unknown-linux-gnu [arm64]=aarch64-unknown-linux-gnu)
local_images=()
for arch in amd64 arm64; do
  local_image=localhost/slurmscale-release:$version-$arch
  SLURMSCALE_IMAGE=$local_image SLURMSCALE_IMAGE_ARCH=$arch SLURMSCALE_IMAGE_PROFILE=$profile \
    tests/harness/image.sh >/dev/null
  local_images+=("$local_image")
  name=slurmscale-$version-linux-$arch
  mkdir -p "$out/$name"
  # From the build context image.sh just laid out for this image (the next one replaces it).
  cp "$CARGO_TARGET_DIR/image-context/rootfs/usr/local/bin/slurmscale" LICENSE README.md CHANGELOG.md "$out/$name/"
  tar -C "$out" --sort=name --owner=0 --group=0 --numeric-owner \
    --mtime="@$(git log -1 --format=%ct)" -czf "$out/$name.tar.gz" "$name"
  rm -rf "$out/$name"
  python3 release/sbom.py "${triples[$arch]}" "$out/$name.sbom.cdx.json"
done

# One manifest for both, pushed with every image it lists.
list=localhost/slurmscale-release:$version
buildah manifest rm "$list" >/dev/null 2>&1 || true
buildah manifest create "$list" >/dev/null
for local_image in "${local_images[@]}"; do
  buildah manifest add "$list" "containers-storage:$local_image" >/dev/null
done
buildah manifest push --quiet --all "${tls[@]}" --digestfile "$out/image-digest.txt" \
  "$list" "docker://$image"
buildah manifest rm "$list" >/dev/null
digest=$(cat "$out/image-digest.txt")
say "pushed $image ($digest): linux/amd64 and linux/arm64"

# The chart, its default image the one just pushed.
staged=$(mktemp -d)
trap 'rm -rf "$staged"' EXIT
cp -rL $chart "$staged/" # its dashboards are a link to the repository's
repo=$registry/slurmscale
sed -i "/^image:/,/^[^ #]/s|^  repository: .*|  repository: $repo|" "$staged/slurmscale/values.yaml"
grep -q "^  repository: $repo$" "$staged/slurmscale/values.yaml" ||
  die "could not point the chart's image.repository at $repo"
helm package "$staged/slurmscale" --destination "$out" >/dev/null
helm_tls=()
[ -n "$plain_http" ] && helm_tls=(--plain-http)
helm push "${helm_tls[@]}" "$out/slurmscale-$version.tgz" "oci://$registry/charts" >/dev/null
say "pushed oci://$registry/charts/slurmscale $version"

(cd "$out" && sha256sum -- * >SHA256SUMS)
say "release $version written to $out:"
ls -l "$out" >&2
