//! The exporter's own health per cluster and endpoint: is the data good, how old is it, what
//! went wrong how often, which API version and Slurm release answered. These series are what
//! alerts on a silent exporter or an unreachable slurmctld key off.

use std::time::SystemTime;

use super::{MetricsOptions, Out, unix_seconds};
use crate::slurm::Endpoint;
use crate::snapshot::{ClusterSnapshot, EndpointHealth};

pub fn collect(out: &mut Out, s: &ClusterSnapshot, _: &MetricsOptions) {
    out.gauge(
        "slurm_exporter_up",
        "1 when the last collection got good answers from every endpoint and slurmctld answered ping.",
        &[],
        f64::from(u8::from(s.up())),
    );
    out.counter(
        "slurm_exporter_collections_total",
        "Collection cycles run against this cluster.",
        &[],
        s.cycles as f64,
    );
    if let Some(d) = s.collection_duration {
        out.gauge(
            "slurm_exporter_collection_duration_seconds",
            "Wall time of the last collection cycle (all endpoints fetched concurrently).",
            &[],
            d.as_secs_f64(),
        );
    }
    if let Some(t) = s.collected_at {
        out.gauge(
            "slurm_exporter_last_collection_timestamp_seconds",
            "When the last collection cycle finished.",
            &[],
            unix_seconds(t),
        );
    }
    if let Some(v) = s.api_version {
        out.info(
            "slurm_exporter_api_info",
            "The slurmrestd API version in use and the Slurm release it reports.",
            &[
                ("version", v.as_str()),
                ("release", s.release.as_deref().unwrap_or("")),
            ],
        );
    }
    for e in Endpoint::ALL {
        let h = s.health(e);
        if h.last_attempt.is_some() {
            endpoint(out, e, &h);
        }
    }
    for (endpoint, h) in &s.requests {
        out.histogram(
            "slurm_exporter_request_duration_seconds",
            "Time slurmrestd took to answer our requests, by endpoint (job: one job, jobs_state: ids and states only, node: a drain or resume): what we cost it.",
            &[("endpoint", endpoint)],
            h,
        );
    }
    job_list(out, s);
    controllers(out, s);
}

/// Ages at scrape time (rendered per scrape, not cached).
pub fn ages(out: &mut Out, s: &ClusterSnapshot, now: SystemTime) {
    if let Some(t) = s.collected_at {
        out.gauge(
            "slurm_exporter_snapshot_age_seconds",
            "Seconds since the cluster's last collection cycle finished.",
            &[],
            now.duration_since(t).unwrap_or_default().as_secs_f64(),
        );
    }
    for e in Endpoint::ALL {
        if let Some(t) = s.health(e).last_success {
            out.gauge(
                "slurm_exporter_endpoint_data_age_seconds",
                "Seconds since the endpoint's served data was last confirmed by slurmrestd.",
                &[("endpoint", e.as_str())],
                now.duration_since(t).unwrap_or_default().as_secs_f64(),
            );
        }
    }
}

/// How one endpoint's requests go: its last answer, when it last worked, how often it is
/// asked, how long it took, and its failures by kind.
fn endpoint(out: &mut Out, e: Endpoint, h: &EndpointHealth<'_>) {
    let ep = [("endpoint", e.as_str())];
    out.gauge(
        "slurm_exporter_endpoint_up",
        "1 when the endpoint's last answer was good (2xx and no errors[]); 0 means its last good data is being served.",
        &ep,
        f64::from(u8::from(h.up)),
    );
    if let Some(t) = h.last_success {
        out.gauge(
            "slurm_exporter_endpoint_last_success_timestamp_seconds",
            "When the endpoint last gave a good answer (a 304 counts: the data was confirmed).",
            &ep,
            unix_seconds(t),
        );
    }
    if let Some(c) = h.cadence {
        out.gauge(
            "slurm_exporter_endpoint_poll_interval_seconds",
            "The gap the poller now leaves between two requests for the endpoint: the interval, or more when slurmrestd answered it slowly (--poll-budget). For jobs: how often the list is confirmed (from /diag and single-job reads).",
            &ep,
            c.as_secs_f64(),
        );
    }
    if let Some(d) = h.duration {
        out.gauge(
            "slurm_exporter_endpoint_duration_seconds",
            "Time the endpoint's last request took, decoding included.",
            &ep,
            d.as_secs_f64(),
        );
    }
    for (kind, n) in h.errors {
        out.counter(
            "slurm_exporter_errors_total",
            "Failed requests by endpoint and kind (connect, timeout, transport, auth, http, slurm_errors, decode, version).",
            &[("endpoint", e.as_str()), ("kind", kind)],
            *n as f64,
        );
    }
}

/// How the job list is kept current, and how sure it is.
fn job_list(out: &mut Out, s: &ClusterSnapshot) {
    let effort = &s.jobs_effort;
    for (how, n) in [
        ("full", effort.full_fetches),
        ("states", effort.state_fetches),
        ("single", effort.single_reads),
        ("accounting", effort.accounting_reads),
    ] {
        out.counter(
            "slurm_exporter_job_list_requests_total",
            "Requests made to keep the job list current: full /jobs, /jobs/state/, single /job/{id} reads, and slurmdbd's /slurmdb/.../jobs by id (where the ids of a list too long for one answer are).",
            &[("request", how)],
            n as f64,
        );
    }
    if s.jobs.last_attempt.is_some() {
        let read = &s.job_list;
        out.info(
            "slurm_exporter_job_list_info",
            "How the job list is read: whole (/jobs, kept current between reads) or id by id (above --request-max-jobs live jobs; slurmdbd's accounting, or without it /jobs/state/, says where the ids are); and what accounting showed when a long list needed it (unknown: never needed; not_served: slurmrestd runs without its slurmdbd plugin; failing: slurmdbd did not answer).",
            &[
                ("read", if read.by_id { "id_by_id" } else { "whole" }),
                ("accounting", read.accounting.as_str()),
            ],
        );
        out.gauge(
            "slurm_exporter_job_ids_unaccounted",
            "Job ids slurmctld had given out above the newest slurmdbd had recorded, when the job list was last read id by id (slurmdbd behind slurmctld: those ids are read from slurmctld alone; 0 when it keeps up).",
            &[],
            read.unaccounted as f64,
        );
    }
    if let Some(jobs) = &s.jobs.data {
        out.gauge(
            "slurm_exporter_jobs_maybe_started",
            "Pending jobs in the list that may have started or left since it was last exact (demand is then a range; the autoscaler scales up to its low end and never down).",
            &[],
            jobs.uncertain.maybe_left as f64,
        );
        out.gauge(
            "slurm_exporter_jobs_unread",
            "While a job list too long for one answer is read id by id: live jobs slurmctld counts that the list has not read yet (0 once complete; after a read that found fewer than slurmctld counts, the difference, until one of its counts matches the list).",
            &[],
            jobs.uncertain.unread as f64,
        );
        out.gauge(
            "slurm_exporter_jobs_unlisted_new",
            "1 while new jobs may exist that the list lacks (no scale-down until they are read).",
            &[],
            f64::from(u8::from(jobs.uncertain.unseen_new)),
        );
    }
}

/// Each slurmctld as slurmrestd's ping saw it.
fn controllers(out: &mut Out, s: &ClusterSnapshot) {
    // A controller's state is known only from a ping that just worked: while slurmrestd
    // itself cannot be reached the series goes away (unknown), rather than repeating the
    // last answer; slurm_exporter_endpoint_up{endpoint="ping"} says why.
    if let Some(ping) = s.ping.data.as_ref().filter(|_| s.ping.up) {
        for c in &ping.controllers {
            let labels = [
                ("controller", c.hostname.as_str()),
                ("mode", c.mode.as_str()),
            ];
            out.gauge(
                "slurm_controller_up",
                "1 when this slurmctld answered slurmrestd's latest ping, 0 when it did not; absent while slurmrestd itself does not answer (slurm_exporter_endpoint_up{endpoint=\"ping\"} is 0).",
                &labels,
                f64::from(u8::from(c.responding)),
            );
            if let Some(l) = c.latency_seconds {
                out.gauge(
                    "slurm_controller_ping_seconds",
                    "Round trip of slurmrestd's ping to this slurmctld.",
                    &labels,
                    l,
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures;

    /// The scrape-time ages a minute after the fixture's answers were taken.
    #[test]
    fn renders_the_ages_at_scrape_time() {
        let mut out = super::super::Out::new();
        let s = fixtures::snapshot();
        out.set_cluster(&s.cluster);
        super::ages(&mut out, &s, fixtures::now());
        fixtures::assert_text(
            &out.encode(),
            r#"
            # HELP slurm_exporter_snapshot_age_seconds Seconds since the cluster's last collection cycle finished.
            # TYPE slurm_exporter_snapshot_age_seconds gauge
            slurm_exporter_snapshot_age_seconds{cluster="fixture"} 60
            # HELP slurm_exporter_endpoint_data_age_seconds Seconds since the endpoint's served data was last confirmed by slurmrestd.
            # TYPE slurm_exporter_endpoint_data_age_seconds gauge
            slurm_exporter_endpoint_data_age_seconds{cluster="fixture",endpoint="ping"} 60
            slurm_exporter_endpoint_data_age_seconds{cluster="fixture",endpoint="diag"} 60
            slurm_exporter_endpoint_data_age_seconds{cluster="fixture",endpoint="jobs"} 60
            slurm_exporter_endpoint_data_age_seconds{cluster="fixture",endpoint="nodes"} 60
            slurm_exporter_endpoint_data_age_seconds{cluster="fixture",endpoint="partitions"} 60
            
            "#,
        );
    }

    /// The family alone on the fixture cluster (`metrics::fixtures`), line by line.
    #[test]
    fn renders_the_fixture_cluster() {
        fixtures::assert_text(
            &fixtures::render(super::collect),
            r#"
            # HELP slurm_exporter_up 1 when the last collection got good answers from every endpoint and slurmctld answered ping.
            # TYPE slurm_exporter_up gauge
            slurm_exporter_up{cluster="fixture"} 1
            # HELP slurm_exporter_collections_total Collection cycles run against this cluster.
            # TYPE slurm_exporter_collections_total counter
            slurm_exporter_collections_total{cluster="fixture"} 1
            # HELP slurm_exporter_collection_duration_seconds Wall time of the last collection cycle (all endpoints fetched concurrently).
            # TYPE slurm_exporter_collection_duration_seconds gauge
            slurm_exporter_collection_duration_seconds{cluster="fixture"} 0.02
            # HELP slurm_exporter_last_collection_timestamp_seconds When the last collection cycle finished.
            # TYPE slurm_exporter_last_collection_timestamp_seconds gauge
            slurm_exporter_last_collection_timestamp_seconds{cluster="fixture"} 1800000000
            # HELP slurm_exporter_api_info The slurmrestd API version in use and the Slurm release it reports.
            # TYPE slurm_exporter_api_info gauge
            slurm_exporter_api_info{cluster="fixture",version="v0.0.42",release="24.11.5"} 1
            # HELP slurm_exporter_endpoint_up 1 when the endpoint's last answer was good (2xx and no errors[]); 0 means its last good data is being served.
            # TYPE slurm_exporter_endpoint_up gauge
            slurm_exporter_endpoint_up{cluster="fixture",endpoint="ping"} 1
            slurm_exporter_endpoint_up{cluster="fixture",endpoint="diag"} 1
            slurm_exporter_endpoint_up{cluster="fixture",endpoint="jobs"} 1
            slurm_exporter_endpoint_up{cluster="fixture",endpoint="nodes"} 1
            slurm_exporter_endpoint_up{cluster="fixture",endpoint="partitions"} 1
            # HELP slurm_exporter_endpoint_last_success_timestamp_seconds When the endpoint last gave a good answer (a 304 counts: the data was confirmed).
            # TYPE slurm_exporter_endpoint_last_success_timestamp_seconds gauge
            slurm_exporter_endpoint_last_success_timestamp_seconds{cluster="fixture",endpoint="ping"} 1800000000
            slurm_exporter_endpoint_last_success_timestamp_seconds{cluster="fixture",endpoint="diag"} 1800000000
            slurm_exporter_endpoint_last_success_timestamp_seconds{cluster="fixture",endpoint="jobs"} 1800000000
            slurm_exporter_endpoint_last_success_timestamp_seconds{cluster="fixture",endpoint="nodes"} 1800000000
            slurm_exporter_endpoint_last_success_timestamp_seconds{cluster="fixture",endpoint="partitions"} 1800000000
            # HELP slurm_exporter_endpoint_duration_seconds Time the endpoint's last request took, decoding included.
            # TYPE slurm_exporter_endpoint_duration_seconds gauge
            slurm_exporter_endpoint_duration_seconds{cluster="fixture",endpoint="ping"} 0.02
            slurm_exporter_endpoint_duration_seconds{cluster="fixture",endpoint="diag"} 0.02
            slurm_exporter_endpoint_duration_seconds{cluster="fixture",endpoint="jobs"} 0.02
            slurm_exporter_endpoint_duration_seconds{cluster="fixture",endpoint="nodes"} 0.02
            slurm_exporter_endpoint_duration_seconds{cluster="fixture",endpoint="partitions"} 0.02
            # HELP slurm_exporter_job_list_requests_total Requests made to keep the job list current: full /jobs, /jobs/state/, single /job/{id} reads, and slurmdbd's /slurmdb/.../jobs by id (where the ids of a list too long for one answer are).
            # TYPE slurm_exporter_job_list_requests_total counter
            slurm_exporter_job_list_requests_total{cluster="fixture",request="full"} 0
            slurm_exporter_job_list_requests_total{cluster="fixture",request="states"} 0
            slurm_exporter_job_list_requests_total{cluster="fixture",request="single"} 0
            slurm_exporter_job_list_requests_total{cluster="fixture",request="accounting"} 0
            # HELP slurm_exporter_job_list_info How the job list is read: whole (/jobs, kept current between reads) or id by id (above --request-max-jobs live jobs; slurmdbd's accounting, or without it /jobs/state/, says where the ids are); and what accounting showed when a long list needed it (unknown: never needed; not_served: slurmrestd runs without its slurmdbd plugin; failing: slurmdbd did not answer).
            # TYPE slurm_exporter_job_list_info gauge
            slurm_exporter_job_list_info{cluster="fixture",read="whole",accounting="unknown"} 1
            # HELP slurm_exporter_job_ids_unaccounted Job ids slurmctld had given out above the newest slurmdbd had recorded, when the job list was last read id by id (slurmdbd behind slurmctld: those ids are read from slurmctld alone; 0 when it keeps up).
            # TYPE slurm_exporter_job_ids_unaccounted gauge
            slurm_exporter_job_ids_unaccounted{cluster="fixture"} 0
            # HELP slurm_exporter_jobs_maybe_started Pending jobs in the list that may have started or left since it was last exact (demand is then a range; the autoscaler scales up to its low end and never down).
            # TYPE slurm_exporter_jobs_maybe_started gauge
            slurm_exporter_jobs_maybe_started{cluster="fixture"} 0
            # HELP slurm_exporter_jobs_unread While a job list too long for one answer is read id by id: live jobs slurmctld counts that the list has not read yet (0 once complete; after a read that found fewer than slurmctld counts, the difference, until one of its counts matches the list).
            # TYPE slurm_exporter_jobs_unread gauge
            slurm_exporter_jobs_unread{cluster="fixture"} 0
            # HELP slurm_exporter_jobs_unlisted_new 1 while new jobs may exist that the list lacks (no scale-down until they are read).
            # TYPE slurm_exporter_jobs_unlisted_new gauge
            slurm_exporter_jobs_unlisted_new{cluster="fixture"} 0
            # HELP slurm_controller_up 1 when this slurmctld answered slurmrestd's latest ping, 0 when it did not; absent while slurmrestd itself does not answer (slurm_exporter_endpoint_up{endpoint="ping"} is 0).
            # TYPE slurm_controller_up gauge
            slurm_controller_up{cluster="fixture",controller="ctl",mode="primary"} 1
            # HELP slurm_controller_ping_seconds Round trip of slurmrestd's ping to this slurmctld.
            # TYPE slurm_controller_ping_seconds gauge
            slurm_controller_ping_seconds{cluster="fixture",controller="ctl",mode="primary"} 0.0015
            
            "#,
        );
    }
}
