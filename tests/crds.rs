//! The CRDs checked into the repo are exactly what our Rust types generate. Run with
//! `SLURMSCALE_UPDATE_CRDS=1` to rewrite them after changing a type.

use std::path::PathBuf;

use kube::CustomResourceExt;
use slurmscale_autoscaler::crd::NodeSetAutoscaler;
use slurmscale_exporter::k8s::crd;

fn check(path: &str, rendered: String) {
    // The checkout this `cargo test` runs in (a shared target dir may hold a build from another).
    let root = std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from);
    let path = root.join(path);
    if std::env::var_os("SLURMSCALE_UPDATE_CRDS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &rendered).unwrap();
        return;
    }
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        on_disk == rendered,
        "{} is out of date with the Rust types: regenerate with `SLURMSCALE_UPDATE_CRDS=1 cargo test --test crds`",
        path.display()
    );
}

#[test]
fn checked_in_crds_match_the_rust_types() {
    check(
        "charts/slurmscale/crds/nodesetautoscalers.slurmscale.io.yaml",
        crd::to_yaml(&NodeSetAutoscaler::crd()).unwrap(),
    );
    check(
        "tests/crds/nodesets.slinky.slurm.net.yaml",
        crd::to_yaml(&crd::nodeset().unwrap()).unwrap(),
    );
    check(
        "tests/crds/genericnodes.kai.alibabacloud.com.yaml",
        crd::to_yaml(&crd::genericnode()).unwrap(),
    );
}

/// Every field of the NodeSetAutoscaler CRD says what it is: `kubectl explain
/// nodesetautoscaler.spec.<field>` shows the Rust doc comment of the field.
#[test]
fn every_field_of_our_crd_is_described() {
    fn walk(schema: &serde_json::Value, path: &str, missing: &mut Vec<String>) {
        let Some(props) = schema["properties"].as_object() else {
            return;
        };
        for (name, field) in props {
            let path = format!("{path}.{name}");
            if field["description"].as_str().is_none_or(str::is_empty) {
                missing.push(path.clone());
            }
            walk(field, &path, missing);
            walk(&field["items"], &format!("{path}[]"), missing);
        }
    }
    let crd = serde_json::to_value(NodeSetAutoscaler::crd()).unwrap();
    let mut missing = Vec::new();
    for version in crd["spec"]["versions"].as_array().unwrap() {
        walk(&version["schema"]["openAPIV3Schema"], "", &mut missing);
    }
    assert!(
        missing.is_empty(),
        "fields without a description: {missing:?}"
    );
}
