#!/usr/bin/env python3
"""The test binaries a `cargo test --no-run --message-format=json…` built, from its messages on
standard input: one line each, `NAME<TAB>PACKAGE_DIR<TAB>EXECUTABLE`, where NAME is an
integration test's name (`--test NAME`) or `LIB (lib)` / `BIN (bin)` for unit tests (by their
target names: `slurmscale_exporter (lib)`, `slurmscale (bin)`).
tests/run.sh runs them itself, so that its four parts do not each start a cargo that checks
the whole workspace again while the others wait on its lock."""
import json
import os
import sys

for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") != "compiler-artifact" or not m.get("executable"):
        continue
    if not m.get("profile", {}).get("test"):
        continue
    target = m["target"]
    kind = target["kind"][0]
    name = target["name"] if kind == "test" else f"{target['name']} ({kind})"
    print(f"{name}\t{os.path.dirname(m['manifest_path'])}\t{m['executable']}")
