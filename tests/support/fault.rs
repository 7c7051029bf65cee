//! A fault-injecting proxy in front of a real slurmrestd, for the faults a real server cannot
//! be made to produce on demand: slowness past a timeout, a 401, `errors[]` in a 500 or a
//! 200, truncated or invalid JSON, a connection dropped mid-body, enum values and shapes from
//! a future Slurm. Without a fault it passes requests through unchanged, so tests using it
//! still talk to the real server.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::Value;

#[derive(Clone)]
pub enum Fault {
    /// Pass through.
    None,
    /// Answer after this delay.
    Slow(Duration),
    /// This status and body instead of the real answer.
    Status(u16, &'static str),
    /// The real answer with an error injected into `errors[]`, status kept (200).
    ErrorsIn200,
    /// The first half of the real body, as a complete HTTP answer.
    TruncatedJson,
    /// A body that is not JSON.
    InvalidJson,
    /// The connection drops after half the body.
    DroppedMidBody,
    /// The real answer, rewritten (unknown enums, missing fields, ...).
    Rewrite(fn(&mut Value)),
}

#[derive(Clone)]
struct Shared {
    upstream: String,
    http: reqwest::Client,
    /// The fault and the endpoint it applies to (`None`: every endpoint).
    fault: Arc<Mutex<(Fault, Option<&'static str>)>>,
    /// Items in the last answer forwarded per endpoint (`jobs`: job records).
    items: Arc<Mutex<std::collections::BTreeMap<String, usize>>>,
    /// Requests seen per endpoint (everything feeding the job list is `jobs`).
    requests: Arc<Mutex<std::collections::BTreeMap<String, usize>>>,
}

pub struct FaultProxy {
    pub url: String,
    fault: Arc<Mutex<(Fault, Option<&'static str>)>>,
    items: Arc<Mutex<std::collections::BTreeMap<String, usize>>>,
    requests: Arc<Mutex<std::collections::BTreeMap<String, usize>>>,
    task: tokio::task::JoinHandle<()>,
}

impl FaultProxy {
    pub async fn start(upstream: &str) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind proxy");
        let url = format!("http://{}", listener.local_addr().unwrap());
        let fault = Arc::new(Mutex::new((Fault::None, None)));
        let items = Arc::new(Mutex::new(std::collections::BTreeMap::new()));
        let requests = Arc::new(Mutex::new(std::collections::BTreeMap::new()));
        let shared = Shared {
            upstream: upstream.trim_end_matches('/').to_string(),
            http: reqwest::Client::new(),
            fault: fault.clone(),
            items: items.clone(),
            requests: requests.clone(),
        };
        let app = Router::new().fallback(forward).with_state(shared);
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            url,
            fault,
            items,
            requests,
            task,
        }
    }

    /// Applies `fault` to requests for `endpoint` (e.g. "jobs"), or to all with `None`.
    pub fn set(&self, fault: Fault, endpoint: Option<&'static str>) {
        *self.fault.lock().unwrap() = (fault, endpoint);
    }

    pub fn clear(&self) {
        self.set(Fault::None, None);
    }

    /// Requests forwarded so far for `endpoint` (`jobs` counts `/jobs`, `/jobs/state/` and
    /// `/job/{id}`).
    pub fn requests(&self, endpoint: &str) -> usize {
        self.requests
            .lock()
            .unwrap()
            .get(endpoint)
            .copied()
            .unwrap_or(0)
    }

    /// How many items (`jobs`, `nodes`, ...) the last answer for `endpoint` carried.
    pub fn items(&self, endpoint: &str) -> Option<usize> {
        self.items.lock().unwrap().get(endpoint).copied()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn forward(State(s): State<Shared>, req: Request) -> Response {
    let path = req
        .uri()
        .path_and_query()
        .map(|p| p.to_string())
        .unwrap_or_default();
    let (fault, only) = s.fault.lock().unwrap().clone();
    // Everything that keeps the job list (`/jobs`, `/jobs/state/`, `/job/{id}`) is "jobs".
    let last = req
        .uri()
        .path()
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or("")
        .to_string();
    let p = req.uri().path();
    let endpoint = if p.contains("/job/") || p.contains("/jobs") {
        "jobs".to_string()
    } else {
        last
    };
    *s.requests
        .lock()
        .unwrap()
        .entry(endpoint.clone())
        .or_default() += 1;
    // Only a full answer counts its items.
    let full_list = p.trim_end_matches('/').ends_with("/jobs") || !endpoint.eq("jobs");
    let fault = if only.is_none_or(|e| e == endpoint) {
        fault
    } else {
        Fault::None
    };

    // A rewrite must be applied to a full answer, not to "unchanged since update_time".
    let path = if matches!(fault, Fault::Rewrite(_)) {
        req.uri().path().to_string()
    } else {
        path
    };
    let mut upstream = s.http.get(format!("{}{path}", s.upstream));
    for name in ["x-slurm-user-name", "x-slurm-user-token"] {
        if let Some(v) = req.headers().get(name) {
            upstream = upstream.header(name, v);
        }
    }
    if let Fault::Slow(d) = &fault {
        tokio::time::sleep(*d).await;
    }
    let Ok(resp) = upstream.send().await else {
        return StatusCode::BAD_GATEWAY.into_response();
    };
    let status = resp.status().as_u16();
    let body = resp.bytes().await.unwrap_or_default();
    let json = |v: &Value| Bytes::from(serde_json::to_vec(v).unwrap());
    let (status, body) = match fault {
        Fault::None | Fault::Slow(_) => (status, body),
        Fault::Status(code, text) => (code, Bytes::from_static(text.as_bytes())),
        Fault::ErrorsIn200 => {
            let mut v: Value = serde_json::from_slice(&body).unwrap_or_default();
            v["errors"] = serde_json::json!([{"error": "injected failure", "error_number": 9999, "source": "fault-proxy"}]);
            (200, json(&v))
        }
        Fault::TruncatedJson => (status, body.slice(..body.len() / 2)),
        Fault::InvalidJson => (200, Bytes::from_static(b"<html>502 Bad Gateway</html>")),
        Fault::Rewrite(f) => {
            let mut v: Value = serde_json::from_slice(&body).unwrap_or_default();
            f(&mut v);
            // 24.11's "unchanged since update_time" is an empty list with a warning: not a
            // count. "Zero jobs to dump" is a real empty queue: a count of 0.
            let unchanged = v
                .get("warnings")
                .and_then(Value::as_array)
                .is_some_and(|w| w.iter().any(|m| m.to_string().contains("No job changes")));
            if let Some(list) = v
                .get(&endpoint)
                .and_then(Value::as_array)
                .filter(|l| full_list && !(l.is_empty() && unchanged))
            {
                s.items.lock().unwrap().insert(endpoint.clone(), list.len());
            }
            (status, json(&v))
        }
        Fault::DroppedMidBody => {
            let half = body.slice(..body.len() / 2);
            let chunks: Vec<Result<Bytes, std::io::Error>> = vec![
                Ok(half),
                Err(std::io::Error::other(
                    "connection dropped by the fault proxy",
                )),
            ];
            let mut headers = HeaderMap::new();
            headers.insert("content-type", "application/json".parse().unwrap());
            return (
                StatusCode::OK,
                headers,
                Body::from_stream(futures::stream::iter(chunks)),
            )
                .into_response();
        }
    };
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Body::from(body))
        .unwrap()
}
