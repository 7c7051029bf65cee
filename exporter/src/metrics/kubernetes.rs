//! How the Kubernetes API server treats this process: answers that pushed back (429
//! throttled, 503 unavailable, 504 timed out), every attempt counted, though the client
//! retries them itself ([`crate::k8s::client`]). Rendered at scrape time: it moves between
//! snapshots.

use super::Out;
use crate::k8s::client;

pub fn collect(out: &mut Out) {
    if !client::in_use() {
        return;
    }
    out.set_cluster("");
    for (code, n) in client::pushed_back() {
        out.counter(
            "slurmscale_kubernetes_pushback_responses_total",
            "Kubernetes API answers that pushed back (429 throttled, 503 unavailable, 504 timed out), every attempt counted: the client retries them, so these rise before any request fails.",
            &[("code", &code.to_string())],
            n as f64,
        );
    }
}
