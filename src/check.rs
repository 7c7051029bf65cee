//! `slurmscale check`: is an install working? The chart's `helm test` runs it, as the image
//! has no shell or curl. It asks each `/metrics` given whether it answers and whether what it
//! says is healthy (every Slurm cluster read, every Kubernetes watch up), and whether the
//! autoscaler's Lease has a holder that renewed it in time. One line per check; any failure
//! makes the exit status non-zero, with the reason in words.

use anyhow::{Context, Result, bail};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;

use crate::cli::CheckArgs;

pub async fn run(args: CheckArgs) -> Result<()> {
    if args.metrics.is_empty() && args.lease.is_none() {
        bail!("nothing to check: give --metrics URL (repeatable) and/or --lease NAMESPACE/NAME");
    }
    let http = reqwest::Client::builder()
        .timeout(args.timeout)
        .tls_danger_accept_invalid_certs(args.insecure_skip_verify)
        .build()
        .context("building the HTTP client")?;
    let mut failed = 0;
    for url in &args.metrics {
        let verdict = metrics(&http, url).await;
        failed += usize::from(verdict.is_err());
        report(&format!("metrics {url}"), verdict);
    }
    if let Some(lease) = &args.lease {
        let verdict = match args.kube.client().await {
            Ok(Some(client)) => held(client, lease).await,
            Ok(None) => Err(anyhow::anyhow!("--no-kubernetes: the Lease cannot be read")),
            Err(e) => Err(e.context("no way to the API server")),
        };
        failed += usize::from(verdict.is_err());
        report(&format!("lease {lease}"), verdict);
    }
    if failed > 0 {
        bail!("{failed} check(s) failed");
    }
    Ok(())
}

fn report(what: &str, verdict: Result<String>) {
    match verdict {
        Ok(said) => println!("ok    {what}: {said}"),
        Err(e) => println!("FAIL  {what}: {e:#}"),
    }
}

/// `/metrics` at `url` answers, and its health gauges say every cluster and watch is up.
async fn metrics(http: &reqwest::Client, url: &str) -> Result<String> {
    let response = http.get(url).send().await.context("no answer")?;
    let status = response.status();
    if status == reqwest::StatusCode::UNAUTHORIZED {
        // The web config asks for a password the check does not have: the server is up.
        return Ok("answers (basic auth required: its figures are not read)".into());
    }
    if !status.is_success() {
        bail!("answered {status}");
    }
    let body = response.text().await.context("reading the answer")?;
    let verdicts = health(&body);
    if verdicts.series == 0 {
        bail!("answered, but with no slurmscale or slurm series: not slurmscale's /metrics?");
    }
    if !verdicts.down.is_empty() {
        bail!("answers, but reports down: {}", verdicts.down.join(", "));
    }
    let standby = if verdicts.standby {
        " (an autoscaler standby: Slurm is read by the leader)"
    } else {
        ""
    };
    Ok(format!(
        "answers, {} series; {} health gauge(s) all 1{standby}",
        verdicts.series, verdicts.gauges
    ))
}

/// The gauges that say whether the exporter reads its sources: at 1, the source is read.
const HEALTH: [&str; 2] = ["slurm_exporter_up", "slurm_exporter_kubernetes_watch_up"];

struct Health {
    /// Series of slurmscale's own families.
    series: usize,
    /// Health gauges counted.
    gauges: usize,
    /// Those not at 1, as written (`name{labels}`).
    down: Vec<String>,
    /// An autoscaler replica that does not lead (`slurmscale_autoscaler_leader 0`): it polls
    /// no Slurm, so its `slurm_exporter_up` says nothing of Slurm and is not counted.
    standby: bool,
}

/// Reads Prometheus' text format for the health gauges and slurmscale's own series.
fn health(body: &str) -> Health {
    let samples: Vec<(&str, &str, f64)> = body
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let name = series.split('{').next().unwrap_or_default();
            Some((name, series, value.trim().parse().unwrap_or(f64::NAN)))
        })
        .collect();
    let standby = samples
        .iter()
        .any(|(name, _, v)| *name == "slurmscale_autoscaler_leader" && *v == 0.0);
    let mut h = Health {
        series: 0,
        gauges: 0,
        down: Vec::new(),
        standby,
    };
    for (name, series, value) in samples {
        if name.starts_with("slurm_") || name.starts_with("slurmscale_") {
            h.series += 1;
        }
        let counted = HEALTH.contains(&name) && !(standby && name == "slurm_exporter_up");
        if counted {
            h.gauges += 1;
            if value != 1.0 {
                h.down.push(series.to_string());
            }
        }
    }
    h
}

/// The Lease `namespace/name` has a holder whose renewal has not expired.
async fn held(client: kube::Client, lease: &str) -> Result<String> {
    let (ns, name) = lease
        .split_once('/')
        .context("give the Lease as NAMESPACE/NAME")?;
    let leases: Api<Lease> = Api::namespaced(client, ns);
    let spec = leases
        .get_opt(name)
        .await
        .context("reading the Lease")?
        .with_context(|| format!("no Lease {lease}: no autoscaler replica ever led"))?
        .spec
        .unwrap_or_default();
    let Some(holder) = spec.holder_identity.filter(|h| !h.is_empty()) else {
        bail!("nobody holds it: no autoscaler replica leads");
    };
    let renewed = spec.renew_time.map(|t| t.0);
    let duration = spec.lease_duration_seconds.unwrap_or(0);
    let Some(renewed) = renewed else {
        bail!("held by {holder}, never renewed");
    };
    let age = k8s_openapi::jiff::Timestamp::now().as_millisecond() - renewed.as_millisecond();
    let age = age.max(0) / 1000;
    if age > i64::from(duration) {
        bail!(
            "held by {holder}, but last renewed {age}s ago, past its {duration}s: that replica stopped leading"
        );
    }
    Ok(format!("held by {holder}, renewed {age}s ago"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_health_gauge_not_at_one_is_down_and_others_count() {
        let body = "# HELP slurm_exporter_up x\n\
                    slurm_exporter_up{cluster=\"a\"} 1\n\
                    slurm_exporter_up{cluster=\"b\"} 0\n\
                    slurm_exporter_kubernetes_watch_up{cluster=\"\",resource=\"nodes\"} 1\n\
                    slurmscale_build_info{version=\"0.1.0\"} 1\n\
                    process_open_fds 9\n";
        let h = health(body);
        assert_eq!((h.series, h.gauges), (4, 3));
        assert_eq!(h.down, ["slurm_exporter_up{cluster=\"b\"}"]);
        // A standby autoscaler polls no Slurm: its Slurm gauge is not the check's business,
        // its Kubernetes watches still are.
        let standby = format!("{body}slurmscale_autoscaler_leader 0\n");
        let h = health(&standby);
        assert!(h.standby);
        assert_eq!((h.gauges, h.down.len()), (1, 0));
    }
}
