//! How the Kubernetes API server treats this process: answers that pushed back (429
//! throttled, 503 unavailable, 504 timed out), every attempt counted, though the client
//! retries them itself ([`crate::k8s::client`]). Rendered at scrape time: it moves between
//! snapshots.

use super::Out;
use crate::k8s::client;

pub fn collect(out: &mut Out) {
    if client::in_use() {
        render(out, client::pushed_back());
    }
}

/// The counters of a process with a Kubernetes client: `(status, answers)`.
fn render(out: &mut Out, pushed_back: [(u16, u64); 3]) {
    out.set_cluster("");
    for (code, n) in pushed_back {
        out.counter(
            "slurmscale_kubernetes_pushback_responses_total",
            "Kubernetes API answers that pushed back (429 throttled, 503 unavailable, 504 timed out), every attempt counted: the client retries them, so these rise before any request fails.",
            &[("code", &code.to_string())],
            n as f64,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Out, fixtures};

    #[test]
    fn renders_each_pushback_code() {
        let mut out = Out::new();
        super::render(&mut out, [(429, 3), (503, 0), (504, 1)]);
        fixtures::assert_text(
            &out.encode(),
            r#"
            # HELP slurmscale_kubernetes_pushback_responses_total Kubernetes API answers that pushed back (429 throttled, 503 unavailable, 504 timed out), every attempt counted: the client retries them, so these rise before any request fails.
            # TYPE slurmscale_kubernetes_pushback_responses_total counter
            slurmscale_kubernetes_pushback_responses_total{cluster="",code="429"} 3
            slurmscale_kubernetes_pushback_responses_total{cluster="",code="503"} 0
            slurmscale_kubernetes_pushback_responses_total{cluster="",code="504"} 1
            
            "#,
        );
    }
}
