#!/usr/bin/env python3
"""The software bill of materials of the slurmscale binary for one target, as CycloneDX 1.5 JSON.

    release/sbom.py TRIPLE OUT.json

What is in it is what is linked into the binary: the crates the `slurmscale` package reaches
through normal dependencies on that target (`cargo metadata --filter-platform`), not build
scripts', procedural macros' or tests' crates. Each crate with its version, package URL, licence expression and,
for a crate from the registry, the SHA-256 Cargo.lock pins it to; the dependency graph
between them. The same lock file and commit give the same file byte for byte (no clock, a
serial number derived from what is described).
"""

import hashlib
import json
import subprocess
import sys
import tomllib
import uuid
from pathlib import Path

ROOT = "slurmscale"


def main() -> None:
    triple, out = sys.argv[1], Path(sys.argv[2])
    meta = json.loads(
        subprocess.run(
            ["cargo", "metadata", "--format-version", "1", "--locked", "--filter-platform", triple],
            check=True,
            capture_output=True,
        ).stdout
    )
    lock = tomllib.loads(Path(meta["workspace_root"], "Cargo.lock").read_text())
    checksums = {(p["name"], p["version"]): p.get("checksum") for p in lock["package"]}
    packages = {p["id"]: p for p in meta["packages"]}
    nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
    root = next(p["id"] for p in meta["packages"] if p["name"] == ROOT and p["source"] is None)

    # Normal dependencies only: a build script's crates run at build time, dev ones in tests,
    # and a procedural macro's (with its own dependencies) in the compiler.
    def macro(pid):
        return all("proc-macro" in t["kind"] for t in packages[pid]["targets"])

    def linked(node):
        return [
            d["pkg"]
            for d in node["deps"]
            if any(k["kind"] is None for k in d["dep_kinds"]) and not macro(d["pkg"])
        ]

    reached, todo = {root}, [root]
    while todo:
        for dep in linked(nodes[todo.pop()]):
            if dep not in reached:
                reached.add(dep)
                todo.append(dep)

    def ref(pid):
        p = packages[pid]
        return f"pkg:cargo/{p['name']}@{p['version']}"

    def component(pid):
        p = packages[pid]
        c = {
            "type": "application" if pid == root else "library",
            "bom-ref": ref(pid),
            "name": p["name"],
            "version": p["version"],
            "purl": ref(pid),
        }
        if p.get("license"):
            c["licenses"] = [{"expression": p["license"]}]
        checksum = checksums.get((p["name"], p["version"]))
        if p["source"] and checksum:
            c["hashes"] = [{"alg": "SHA-256", "content": checksum}]
        if p["source"] is None:
            c["properties"] = [{"name": "slurmscale:workspace", "value": "true"}]
        return c

    others = sorted(reached - {root}, key=ref)
    described = json.dumps([triple, sorted(ref(p) for p in reached), sorted(map(str, checksums.items()))])
    bom = {
        "bomFormat": "CycloneDX",
        "specVersion": "1.5",
        "serialNumber": f"urn:uuid:{uuid.UUID(hashlib.sha256(described.encode()).hexdigest()[:32])}",
        "version": 1,
        "metadata": {
            "tools": {"components": [{"type": "application", "name": "slurmscale release/sbom.py"}]},
            "component": component(root),
            "properties": [{"name": "slurmscale:target", "value": triple}],
        },
        "components": [component(p) for p in others],
        "dependencies": [
            {"ref": ref(pid), "dependsOn": sorted({ref(d) for d in linked(nodes[pid])})}
            for pid in [root, *others]
        ],
    }
    out.write_text(json.dumps(bom, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
