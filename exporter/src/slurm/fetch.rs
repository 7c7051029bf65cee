//! One endpoint, one GET, one verdict. An answer is good only when the HTTP status is 2xx
//! **and** `errors[]` is empty **and** the data key is present; 304, or 24.11's "200, empty
//! list, 'No job changes' warning" for an unchanged `/jobs`, means "keep what you have". Decoding runs on the
//! blocking pool: a 500 MB `/jobs` must not stall scrapes served by the same runtime.

use super::client::{Fetched, SlurmClient, is_auth_failure};
use super::versions::{ApiVersion, Endpoint};
use super::wire::{self, Decoded};
use crate::error::{Error, Result};
use crate::model::job_table::{JobTable, StateEntry};
use crate::model::{Diag, Jobs, Node, Partition, Ping};

/// A good answer, or "unchanged since the `update_time` we sent".
#[derive(Debug)]
pub enum Outcome<T> {
    Fresh {
        data: T,
        release: Option<String>,
        last_update: Option<i64>,
    },
    Unchanged,
}

impl<T> Outcome<T> {
    fn from(decoded: Option<Decoded<T>>) -> Self {
        match decoded {
            None => Self::Unchanged,
            Some(d) => Self::Fresh {
                data: d.data,
                release: d.release,
                last_update: d.last_update,
            },
        }
    }
}

/// GET, decode and check; `None` for 304.
async fn fetch<T, F>(
    client: &SlurmClient,
    version: ApiVersion,
    endpoint: Endpoint,
    since: Option<i64>,
    decode: F,
) -> Result<Option<Decoded<T>>>
where
    T: Send + 'static,
    F: FnOnce(&[u8]) -> serde_json::Result<Decoded<T>> + Send + 'static,
{
    let since = since.filter(|_| version.accepts_unix_update_time());
    let (status, bytes) = match client.get(version, endpoint, since).await? {
        Fetched::NotModified => return Ok(None),
        Fetched::Body { status, bytes } => (status, bytes),
    };
    let decode_error = |message: String| Error::Decode {
        endpoint: endpoint.to_string(),
        version: version.to_string(),
        message,
    };
    let decoded = tokio::task::spawn_blocking(move || decode(&bytes))
        .await
        .map_err(|e| decode_error(format!("decoder stopped: {e}")))?
        .map_err(|e| decode_error(e.to_string()))?;
    if !decoded.errors.is_empty() {
        if is_auth_failure(status, &decoded.errors) {
            client.invalidate_token();
        }
        return Err(Error::SlurmErrors {
            endpoint: endpoint.to_string(),
            status,
            detail: wire::describe(&decoded.errors),
        });
    }
    if !decoded.data_present {
        return Err(decode_error(format!(
            "the answer has no `{}` data",
            endpoint.as_str()
        )));
    }
    Ok(Some(decoded))
}

pub async fn ping(client: &SlurmClient, version: ApiVersion) -> Result<Outcome<Ping>> {
    fetch(client, version, Endpoint::Ping, None, move |b| {
        version.decode_ping(b)
    })
    .await
    .map(Outcome::from)
}

pub async fn diag(client: &SlurmClient, version: ApiVersion) -> Result<Outcome<Diag>> {
    fetch(client, version, Endpoint::Diag, None, move |b| {
        version.decode_diag(b)
    })
    .await
    .map(Outcome::from)
}

/// `/nodes` is always fetched in full: with `update_time`, slurmrestd (22.05 and 24.11 alike)
/// answers 500 "Unspecified error" whenever nodes changed but partitions did not — it
/// reloads partitions with the same `update_time` and treats "no change" as a failure.
pub async fn nodes(client: &SlurmClient, version: ApiVersion) -> Result<Outcome<Vec<Node>>> {
    fetch(client, version, Endpoint::Nodes, None, move |b| {
        version.decode_nodes(b)
    })
    .await
    .map(Outcome::from)
}

pub async fn partitions(
    client: &SlurmClient,
    version: ApiVersion,
) -> Result<Outcome<Vec<Partition>>> {
    fetch(client, version, Endpoint::Partitions, None, move |b| {
        version.decode_partitions(b)
    })
    .await
    .map(Outcome::from)
}

pub async fn jobs(
    client: &SlurmClient,
    version: ApiVersion,
    since: Option<i64>,
    per_owner: bool,
) -> Result<Outcome<Jobs>> {
    let sent = since
        .filter(|_| version.accepts_unix_update_time())
        .is_some();
    let decoded = fetch(client, version, Endpoint::Jobs, since, move |b| {
        version.decode_jobs(b, per_owner)
    })
    .await?;
    if let Some(d) = &decoded
        && sent
        && means_unchanged(d)
    {
        return Ok(Outcome::Unchanged);
    }
    Ok(Outcome::from(decoded))
}

/// 24.11 answers an unchanged `/jobs` with 200, an empty list and the warning "No job changes
/// since update_time", not 304. A queue that really emptied is also an empty list with a
/// warning, "Zero jobs to dump": only the first wording means "keep what you have".
fn means_unchanged(d: &Decoded<Jobs>) -> bool {
    d.data.cluster.total() == 0 && said_unchanged(&d.warnings)
}

fn said_unchanged(warnings: &[wire::Message]) -> bool {
    warnings.iter().any(|w| {
        w.description
            .as_deref()
            .is_some_and(|t| t.starts_with("No job changes"))
    })
}

/// Slurm's "Invalid job id specified": the job is not (or no longer) in slurmctld.
const INVALID_JOB_ID: i64 = 2017;

/// One job (or an array with its split tasks) from `/job/{id}`; `None` when slurmctld does
/// not know the id (never submitted, or finished and purged).
pub async fn job(client: &SlurmClient, version: ApiVersion, id: u64) -> Result<Option<JobTable>> {
    decode_job(version, client.get_job(version, id).await?).await
}

/// [`job`] for a job list's start (see [`SlurmClient::get_job_reading_through`]).
pub async fn job_reading_through(
    client: &SlurmClient,
    version: ApiVersion,
    id: u64,
) -> Result<Option<JobTable>> {
    decode_job(version, client.get_job_reading_through(version, id).await?).await
}

async fn decode_job(
    version: ApiVersion,
    (status, bytes): (u16, bytes::Bytes),
) -> Result<Option<JobTable>> {
    let decode_error = |message: String| Error::Decode {
        endpoint: "job".into(),
        version: version.to_string(),
        message,
    };
    let decoded = tokio::task::spawn_blocking(move || version.decode_job_table(&bytes))
        .await
        .map_err(|e| decode_error(format!("decoder stopped: {e}")))?
        .map_err(|e| decode_error(e.to_string()))?;
    if decoded
        .errors
        .iter()
        .any(|m| m.error_number == Some(INVALID_JOB_ID))
    {
        return Ok(None);
    }
    if !(200..300).contains(&status) {
        return Err(Error::Http {
            endpoint: "job".into(),
            status,
            detail: wire::describe(&decoded.errors),
        });
    }
    if !decoded.errors.is_empty() {
        return Err(Error::SlurmErrors {
            endpoint: "job".into(),
            status,
            detail: wire::describe(&decoded.errors),
        });
    }
    if !decoded.data_present {
        return Err(decode_error("the answer has no `jobs` data".into()));
    }
    Ok(Some(decoded.data))
}

/// `/jobs/state/`: the id and state of every job, or of `only` these (the key repeated:
/// `?job_id=1&job_id=2`; slurmrestd refuses commas); `None` where the API lacks it.
pub async fn job_states(
    client: &SlurmClient,
    version: ApiVersion,
    only: &[u64],
) -> Result<Option<Vec<StateEntry>>> {
    if !version.has_job_states() {
        return Ok(None);
    }
    let mut path = String::from("jobs/state/");
    for (i, id) in only.iter().enumerate() {
        path.push(if i == 0 { '?' } else { '&' });
        path.push_str(&format!("job_id={id}"));
    }
    let decode_error = |message: String| Error::Decode {
        endpoint: "jobs_state".into(),
        version: version.to_string(),
        message,
    };
    let (status, bytes) = match client.get_path(version, &path, "jobs_state").await? {
        Fetched::Body { status, bytes } => (status, bytes),
        Fetched::NotModified => return Err(decode_error("304 without update_time".into())),
    };
    let decoded = tokio::task::spawn_blocking(move || version.decode_job_states(&bytes))
        .await
        .map_err(|e| decode_error(format!("decoder stopped: {e}")))?
        .ok_or_else(|| decode_error("no decoder".into()))?
        .map_err(|e| decode_error(e.to_string()))?;
    if !decoded.errors.is_empty() {
        return Err(Error::SlurmErrors {
            endpoint: "jobs_state".into(),
            status,
            detail: wire::describe(&decoded.errors),
        });
    }
    if !decoded.data_present {
        return Err(decode_error("the answer has no `jobs` data".into()));
    }
    Ok(Some(decoded.data))
}

/// slurmdbd's "Nothing found" (22.05 sends it as an error with an empty answer).
const NOTHING_FOUND: i64 = 9003;

/// The records accounting has of `ids`, in any state (ended long ago included), from
/// slurmdbd's `/slurmdb/…/jobs?step=…` (the ids' form: [`ApiVersion::lists_ids_in_one_value`]),
/// every version with `skip_steps`. An array's tasks
/// come with their array's id.
pub async fn accounted(
    client: &SlurmClient,
    version: ApiVersion,
    ids: &[u64],
) -> Result<Vec<StateEntry>> {
    let list: Vec<String> = ids.iter().map(u64::to_string).collect();
    // Without their steps: a job that ran carries two or more, which nothing here reads.
    let query = if version.lists_ids_in_one_value() {
        format!("jobs?skip_steps=true&step={}", list.join("%2C"))
    } else {
        format!("jobs/?skip_steps=true&step={}", list.join("&step="))
    };
    let decode_error = |message: String| Error::Decode {
        endpoint: "slurmdb_jobs".into(),
        version: version.to_string(),
        message,
    };
    let (status, bytes) = match client
        .get_accounting(version, &query, "slurmdb_jobs")
        .await?
    {
        Fetched::Body { status, bytes } => (status, bytes),
        Fetched::NotModified => return Err(decode_error("304 without update_time".into())),
    };
    let decoded = tokio::task::spawn_blocking(move || wire::decode_accounted(&bytes))
        .await
        .map_err(|e| decode_error(format!("decoder stopped: {e}")))?
        .map_err(|e| decode_error(e.to_string()))?;
    let errors: Vec<_> = decoded
        .errors
        .iter()
        .filter(|m| m.error_number != Some(NOTHING_FOUND))
        .cloned()
        .collect();
    if !errors.is_empty() {
        return Err(Error::SlurmErrors {
            endpoint: "slurmdb_jobs".into(),
            status,
            detail: wire::describe(&errors),
        });
    }
    Ok(decoded.data)
}

/// A full `/jobs` as a table of records (see [`jobs`] for `since`).
pub async fn job_table(
    client: &SlurmClient,
    version: ApiVersion,
    since: Option<i64>,
) -> Result<Outcome<JobTable>> {
    let sent = since
        .filter(|_| version.accepts_unix_update_time())
        .is_some();
    let decoded = fetch(client, version, Endpoint::Jobs, since, move |b| {
        version.decode_job_table(b)
    })
    .await?;
    if let Some(d) = &decoded
        && sent
        && d.data.is_empty()
        && said_unchanged(&d.warnings)
    {
        return Ok(Outcome::Unchanged);
    }
    Ok(Outcome::from(decoded))
}

/// Finds the newest API version slurmrestd serves: GET ping, newest first. 404 means "not
/// served"; any other failure (auth, connection) is returned as is, since trying older
/// versions would not fix it.
pub async fn probe(client: &SlurmClient) -> Result<ApiVersion> {
    let mut tried = Vec::new();
    for version in ApiVersion::ALL {
        match client.get_now(version, Endpoint::Ping, None).await {
            Ok(Fetched::Body { .. }) => return Ok(version),
            Ok(Fetched::NotModified) => return Ok(version),
            Err(Error::Http { status: 404, .. }) => tried.push(version.as_str()),
            Err(e) => return Err(e),
        }
    }
    Err(Error::NoVersion {
        url: client.url().to_string(),
        tried: tried.join(", "),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(body: &str) -> Decoded<Jobs> {
        ApiVersion::V0042
            .decode_jobs(body.as_bytes(), false)
            .unwrap()
    }

    /// Both bodies as Slurm 24.11.5 sends them; the first is "unchanged", the second is a
    /// queue that emptied and must clear the exported jobs.
    #[test]
    fn an_emptied_queue_is_not_taken_for_unchanged() {
        let unchanged = decode(
            r#"{"jobs":[],"warnings":[{"description":"No job changes since update_time[1795328681]=2026-11-22T06:24:41","source":"op_handler_jobs"}],"errors":[]}"#,
        );
        let emptied = decode(
            r#"{"jobs":[],"warnings":[{"description":"Zero jobs to dump","source":""}],"errors":[]}"#,
        );
        assert!(means_unchanged(&unchanged));
        assert!(!means_unchanged(&emptied));
    }
}
