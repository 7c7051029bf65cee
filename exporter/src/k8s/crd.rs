//! CRDs generated from our Rust types, rendered as YAML. The rendered files are checked in
//! (`tests/crds/`, `charts/slurmscale/crds/`) and a test fails when they drift from the types.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use kube::core::crd::merge_crds;

use super::{genericnode::GenericNode, nodeset};
use crate::error::{Error, Result};

/// NodeSet with both versions served (v1beta1 stored), so tests can use either at once.
/// Without a conversion webhook the apiserver only rewrites `apiVersion`; that is enough
/// because the fields we model have the same shape in both versions.
pub fn nodeset() -> Result<CustomResourceDefinition> {
    merge_crds(
        vec![
            nodeset::v1beta1::NodeSet::crd(),
            nodeset::v1alpha1::NodeSet::crd(),
        ],
        "v1beta1",
    )
    .map_err(|e| Error::CrdRender {
        name: "nodesets.slinky.slurm.net".into(),
        message: e.to_string(),
    })
}

pub fn genericnode() -> CustomResourceDefinition {
    GenericNode::crd()
}

/// YAML for a CRD, with a header saying where it comes from.
pub fn to_yaml(crd: &CustomResourceDefinition) -> Result<String> {
    let name = crd.metadata.name.clone().unwrap_or_default();
    let body = serde_saphyr::to_string(crd).map_err(|e| Error::CrdRender {
        name: name.clone(),
        message: e.to_string(),
    })?;
    Ok(format!(
        "# Generated from slurmscale's Rust types; do not edit. Regenerate with\n\
         #   SLURMSCALE_UPDATE_CRDS=1 cargo test --test crds\n{body}"
    ))
}
