#!/usr/bin/env bash
# Runs test binaries the test build made, by name, as `cargo test --no-fail-fast` would: one
# after the other, each from its package's directory, every one even after a failure; fails
# when one failed or a name has no binary. LIST is what tests/harness/test-binaries.py wrote.
#
#   tests/harness/run-tests.sh LIST NAME...     (NAME: `golden`, `slurmscale_exporter (lib)`)
#
# tests/run.sh's four parts run their tests this way instead of each starting a cargo, which
# checks the whole workspace again while the others wait on its lock (20 to 66 s each).
source "$(dirname "$0")/common.sh"
list=${1:?usage: $0 LIST NAME...}
shift
status=0
for name in "$@"; do
  dir= exe=
  IFS=$'\t' read -r dir exe < <(awk -F'\t' -v n="$name" '$1 == n { print $2 "\t" $3; exit }' "$list") || true
  if [ -z "$exe" ]; then
    say "error: the test build made no test binary named '$name'"
    status=1
    continue
  fi
  echo "     Running $name ($exe)" >&2
  # cargo test's CARGO_MANIFEST_DIR: the tests read this checkout through it.
  (cd "$dir" && CARGO_MANIFEST_DIR=$dir "$exe") || status=1
done
exit $status
