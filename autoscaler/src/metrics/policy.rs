//! Each autoscaler's policy's own families: what its [`PolicyRow`] renders (a colocated
//! pool's split, a NodeSet's records by power state), written in the policy's room.

use slurmscale_exporter::metrics::Out;

use super::{AutoscalerMetrics, PolicyRow};

pub fn collect(out: &mut Out, m: &AutoscalerMetrics) {
    for r in m.rows.values() {
        let Some(p) = &r.policy else { continue };
        out.set_cluster(&r.cluster);
        PolicyRow::collect(&**p, out, r.labels());
    }
}
