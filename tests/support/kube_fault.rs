//! A fault-injecting proxy in front of the real kube-apiserver, for what a real API server
//! cannot be made to do on demand: a 409 on the scale subresource (after a real concurrent
//! change), a 429 with `Retry-After`, bursts of 500 and 503, watch streams cut mid-way or
//! answered "too old resource version", answers slower than the client's timeout, and a
//! network partition that holds requests and delivers them late.
//!
//! The autoscaler talks plain HTTP to it (a kubeconfig of its own, no credentials); the proxy
//! forwards over TLS with the harness's admin client certificate, streaming watch bodies.
//! Without a fault it passes everything through. Every request is recorded — method, path,
//! query, when it arrived, when it was forwarded and answered, the status, the bodies of
//! writes and of small answers — so tests assert on what reached the API server, not on
//! what the autoscaler says it did.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::StreamExt;
use tokio::time::Instant;

/// Which requests a fault applies to.
#[derive(Clone, Debug, Default)]
pub struct Match {
    /// `GET`, `PATCH`, ...; `None`: any.
    pub method: Option<Method>,
    /// A substring of the path; empty: any.
    pub path: String,
    /// Only watches (`Some(true)`), only the rest (`Some(false)`), or both.
    pub watch: Option<bool>,
}

impl Match {
    pub fn path(path: &str) -> Self {
        Self {
            path: path.to_string(),
            ..Default::default()
        }
    }

    pub fn method(mut self, method: Method) -> Self {
        self.method = Some(method);
        self
    }

    pub fn watch(mut self, watch: bool) -> Self {
        self.watch = Some(watch);
        self
    }

    /// Every request.
    pub fn all() -> Self {
        Self::default()
    }

    fn matches(&self, method: &Method, path: &str, watch: bool) -> bool {
        self.method.as_ref().is_none_or(|m| m == method)
            && path.contains(&self.path)
            && self.watch.is_none_or(|w| w == watch)
    }
}

#[derive(Clone, Debug)]
pub enum Fault {
    /// This status (a Kubernetes `Status` body), with `Retry-After: N` if given.
    Status { code: u16, retry_after: Option<u64> },
    /// A real concurrent change to the object (an annotation, so its resourceVersion moves),
    /// then 409 Conflict: what the API server answers when someone wrote in between.
    Conflict,
    /// Forwarded after this delay, whatever happens to the fault meanwhile.
    Delay(Duration),
    /// A partition: held until the fault is removed, then forwarded if the client still
    /// waits (a client that gave up has closed its connection; its request is dropped).
    Hold,
    /// Watch streams cut (connection dropped) this long after they start or after the fault
    /// is added, whichever is later: streams already open are cut too.
    CutWatch(Duration),
    /// A watch answered with a 410 Expired ERROR event: the client must list again.
    Gone,
}

/// One request as the proxy saw it.
#[derive(Clone, Debug)]
pub struct Record {
    pub method: Method,
    pub path: String,
    pub query: String,
    pub watch: bool,
    pub received: Instant,
    /// When it was sent on to the API server (`None`: answered by a fault, or dropped).
    pub forwarded: Option<Instant>,
    /// When its answer (headers) came back.
    pub answered: Option<Instant>,
    pub status: Option<u16>,
    /// Answered by a fault instead of the API server.
    pub injected: bool,
    /// The client gave up (closed its connection) while the request was held or in flight.
    pub abandoned: bool,
    /// A watch whose stream the proxy cut.
    pub cut: bool,
    /// The body the client sent (writes).
    pub body: Bytes,
    /// The API server's answer, for answers that are not watches.
    pub answer: Option<Bytes>,
}

impl Record {
    pub fn is_write(&self) -> bool {
        !matches!(self.method, Method::GET | Method::HEAD | Method::OPTIONS)
    }

    /// The JSON body sent, if any.
    pub fn json(&self) -> Option<serde_json::Value> {
        serde_json::from_slice(&self.body).ok()
    }

    /// The JSON answer, if recorded.
    pub fn answer_json(&self) -> Option<serde_json::Value> {
        serde_json::from_slice(self.answer.as_ref()?).ok()
    }
}

struct Rule {
    matcher: Match,
    fault: Fault,
    /// How many more requests it applies to (`None`: until removed).
    remaining: Option<usize>,
    id: u64,
}

struct Shared {
    upstream: kube::Client,
    rules: Mutex<Vec<Rule>>,
    log: Mutex<Vec<Record>>,
    /// Bumped whenever rules change, so held requests look again.
    changed: tokio::sync::watch::Sender<u64>,
    next_id: Mutex<u64>,
}

impl Shared {
    /// The fault for this request, counting it against its rule.
    fn fault_for(&self, method: &Method, path: &str, watch: bool) -> Option<(u64, Fault)> {
        let mut rules = self.rules.lock().unwrap();
        // The latest rule added wins.
        let rule = rules
            .iter_mut()
            .rev()
            .find(|r| r.remaining != Some(0) && r.matcher.matches(method, path, watch))?;
        if let Some(n) = rule.remaining.as_mut() {
            *n -= 1;
        }
        Some((rule.id, rule.fault.clone()))
    }

    /// How long after now to cut a watch of `path`, if a rule says so (not counted).
    fn cut_for(&self, path: &str) -> Option<Duration> {
        self.rules
            .lock()
            .unwrap()
            .iter()
            .find_map(|r| match r.fault {
                Fault::CutWatch(d) if r.matcher.matches(&Method::GET, path, true) => Some(d),
                _ => None,
            })
    }

    /// Resolves when a CutWatch rule for `path` has been in force for its delay.
    async fn cut_signal(self: Arc<Self>, path: String) {
        let mut changed = self.changed.subscribe();
        loop {
            if let Some(d) = self.cut_for(&path) {
                tokio::time::sleep(d).await;
                if self.cut_for(&path).is_some() {
                    return;
                }
            }
            if changed.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }

    fn holds(&self, id: u64) -> bool {
        self.rules.lock().unwrap().iter().any(|r| r.id == id)
    }

    fn update(&self, i: usize, f: impl FnOnce(&mut Record)) {
        if let Some(r) = self.log.lock().unwrap().get_mut(i) {
            f(r);
        }
    }
}

pub struct KubeProxy {
    pub url: String,
    /// A kubeconfig pointing at the proxy (plain HTTP, no credentials).
    pub kubeconfig: PathBuf,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

/// A handle on one added fault.
#[derive(Clone, Copy, Debug)]
pub struct FaultId(u64);

impl KubeProxy {
    /// A proxy to the harness kube-apiserver.
    pub async fn start() -> Self {
        let path = super::kubeconfig_path();
        let kubeconfig = kube::config::Kubeconfig::read_from(&path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .expect("harness kubeconfig");
        // The proxy answers exactly what the API server answered: no retries of its own.
        config.default_retry = false;
        let upstream = kube::Client::try_from(config).expect("upstream client");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind kube proxy");
        let url = format!("http://{}", listener.local_addr().unwrap());
        let shared = Arc::new(Shared {
            upstream,
            rules: Mutex::default(),
            log: Mutex::default(),
            changed: tokio::sync::watch::Sender::new(0),
            next_id: Mutex::new(0),
        });
        let app = Router::new().fallback(handle).with_state(shared.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        let kubeconfig =
            std::env::temp_dir().join(format!("{}.kubeconfig", super::unique("kube-proxy")));
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: proxy\n  cluster: {{server: \"{url}\"}}\nusers:\n- name: anonymous\n  user: {{}}\ncontexts:\n- name: proxy\n  context: {{cluster: proxy, user: anonymous, namespace: default}}\ncurrent-context: proxy\n"
            ),
        )
        .expect("write proxy kubeconfig");
        Self {
            url,
            kubeconfig,
            shared,
            task,
        }
    }

    /// Applies `fault` to matching requests until removed.
    pub fn add(&self, matcher: Match, fault: Fault) -> FaultId {
        self.add_n(matcher, fault, None)
    }

    /// Applies `fault` to the next `n` matching requests.
    pub fn times(&self, n: usize, matcher: Match, fault: Fault) -> FaultId {
        self.add_n(matcher, fault, Some(n))
    }

    fn add_n(&self, matcher: Match, fault: Fault, remaining: Option<usize>) -> FaultId {
        let id = {
            let mut n = self.shared.next_id.lock().unwrap();
            *n += 1;
            *n
        };
        self.shared.rules.lock().unwrap().push(Rule {
            matcher,
            fault,
            remaining,
            id,
        });
        self.shared.changed.send_modify(|g| *g += 1);
        FaultId(id)
    }

    pub fn remove(&self, id: FaultId) {
        self.shared.rules.lock().unwrap().retain(|r| r.id != id.0);
        self.shared.changed.send_modify(|g| *g += 1);
    }

    /// No faults: everything passes (held requests are forwarded).
    pub fn clear(&self) {
        self.shared.rules.lock().unwrap().clear();
        self.shared.changed.send_modify(|g| *g += 1);
    }

    /// Every request so far, in arrival order.
    pub fn records(&self) -> Vec<Record> {
        self.shared.log.lock().unwrap().clone()
    }

    /// Requests so far whose path contains `path` (watches excluded).
    pub fn requests_to(&self, path: &str) -> Vec<Record> {
        self.records()
            .into_iter()
            .filter(|r| !r.watch && r.path.contains(path))
            .collect()
    }
}

impl Drop for KubeProxy {
    fn drop(&mut self) {
        self.task.abort();
        let _ = std::fs::remove_file(&self.kubeconfig);
    }
}

/// Marks a request abandoned if its handler is dropped before it answers (the client closed
/// its connection).
struct InFlight {
    shared: Arc<Shared>,
    index: usize,
    done: bool,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if !self.done {
            self.shared.update(self.index, |r| r.abandoned = true);
        }
    }
}

fn status_body(code: u16, reason: &str, message: &str) -> Bytes {
    Bytes::from(
        serde_json::to_vec(&serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Failure", "message": message, "reason": reason, "code": code,
        }))
        .unwrap(),
    )
}

fn is_watch(query: &str) -> bool {
    query
        .split('&')
        .any(|kv| kv == "watch=true" || kv == "watch=1")
}

async fn handle(State(s): State<Arc<Shared>>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let method = parts.method.clone();
    let path = parts.uri.path().to_string();
    let query = parts.uri.query().unwrap_or("").to_string();
    let watch = is_watch(&query);
    let body = axum::body::to_bytes(body, 16 << 20)
        .await
        .unwrap_or_default();
    let index = {
        let mut log = s.log.lock().unwrap();
        log.push(Record {
            method: method.clone(),
            path: path.clone(),
            query: query.clone(),
            watch,
            received: Instant::now(),
            forwarded: None,
            answered: None,
            status: None,
            injected: false,
            abandoned: false,
            cut: false,
            body: body.clone(),
            answer: None,
        });
        log.len() - 1
    };
    let mut in_flight = InFlight {
        shared: s.clone(),
        index,
        done: false,
    };
    let fault = s.fault_for(&method, &path, watch);
    let injected = |code: u16, body: Bytes, retry_after: Option<u64>| {
        s.update(index, |r| {
            r.injected = true;
            r.status = Some(code);
            r.answered = Some(Instant::now());
        });
        let mut resp = Response::builder()
            .status(code)
            .header("content-type", "application/json");
        if let Some(n) = retry_after {
            resp = resp.header("retry-after", n.to_string());
        }
        resp.body(Body::from(body)).unwrap()
    };
    match fault {
        None => {}
        Some((_, Fault::Status { code, retry_after })) => {
            in_flight.done = true;
            let reason = match code {
                429 => "TooManyRequests",
                503 => "ServiceUnavailable",
                _ => "InternalError",
            };
            return injected(
                code,
                status_body(code, reason, "injected by the fault proxy"),
                retry_after,
            );
        }
        Some((_, Fault::Conflict)) => {
            // Someone else writes the object first: its resourceVersion moves on.
            let object = path.trim_end_matches("/scale").to_string();
            let stamp = format!("{:?}", Instant::now());
            let patch = serde_json::json!({"metadata": {"annotations": {"kube-fault/concurrent-write": stamp}}});
            let change = axum::http::Request::builder()
                .method(Method::PATCH)
                .uri(object)
                .header("content-type", "application/merge-patch+json")
                .body(kube::client::Body::from(
                    serde_json::to_vec(&patch).unwrap(),
                ))
                .unwrap();
            let _ = s.upstream.send(change).await;
            in_flight.done = true;
            return injected(
                409,
                status_body(
                    409,
                    "Conflict",
                    "Operation cannot be fulfilled: the object has been modified; please apply your changes to the latest version and try again",
                ),
                None,
            );
        }
        Some((_, Fault::Delay(d))) => tokio::time::sleep(d).await,
        Some((id, Fault::Hold)) => {
            let mut changed = s.changed.subscribe();
            while s.holds(id) {
                if changed.changed().await.is_err() {
                    break;
                }
            }
        }
        Some((_, Fault::CutWatch(_))) => {} // below, with the streams already open
        Some((_, Fault::Gone)) => {
            in_flight.done = true;
            let event = serde_json::json!({"type": "ERROR", "object": serde_json::from_slice::<serde_json::Value>(&status_body(410, "Expired", "too old resource version (injected by the fault proxy)")).unwrap()});
            let mut line = serde_json::to_vec(&event).unwrap();
            line.push(b'\n');
            return injected(200, Bytes::from(line), None);
        }
    }

    // Forward.
    let mut upstream = axum::http::Request::builder()
        .method(method.clone())
        .uri(parts.uri.path_and_query().map_or("/", |p| p.as_str()));
    for name in ["content-type", "accept"] {
        if let Some(v) = parts.headers.get(name) {
            upstream = upstream.header(name, v);
        }
    }
    let upstream = upstream
        .body(kube::client::Body::from(body.to_vec()))
        .unwrap();
    s.update(index, |r| r.forwarded = Some(Instant::now()));
    let resp = match s.upstream.send(upstream).await {
        Ok(r) => r,
        Err(_) => {
            in_flight.done = true;
            s.update(index, |r| {
                r.status = Some(502);
                r.answered = Some(Instant::now());
            });
            return StatusCode::BAD_GATEWAY.into_response();
        }
    };
    let status = resp.status().as_u16();
    s.update(index, |r| {
        r.status = Some(status);
        r.answered = Some(Instant::now());
    });
    let (rparts, rbody) = resp.into_parts();
    let mut out = Response::builder().status(status);
    for name in ["content-type", "retry-after"] {
        if let Some(v) = rparts.headers.get(name) {
            out = out.header(name, v.clone());
        }
    }
    if watch {
        in_flight.done = true;
        let stream = Box::pin(Body::new(rbody).into_data_stream());
        let cut = Box::pin(s.clone().cut_signal(path.clone()));
        let (shared, i) = (s.clone(), index);
        let body =
            futures::stream::unfold((stream, cut, false), move |(mut stream, mut cut, done)| {
                let shared = shared.clone();
                async move {
                    if done {
                        return None;
                    }
                    tokio::select! {
                        chunk = stream.next() => {
                            chunk.map(|c| (c.map_err(std::io::Error::other), (stream, cut, false)))
                        }
                        _ = &mut cut => {
                            shared.update(i, |r| r.cut = true);
                            let e = std::io::Error::other("watch cut by the fault proxy");
                            Some((Err(e), (stream, cut, true)))
                        }
                    }
                }
            });
        return out.body(Body::from_stream(body)).unwrap();
    }
    let answer = match rbody.collect_bytes().await {
        Ok(b) => b,
        Err(_) => {
            in_flight.done = true;
            return StatusCode::BAD_GATEWAY.into_response();
        }
    };
    in_flight.done = true;
    s.update(index, |r| r.answer = Some(answer.clone()));
    out.body(Body::from(answer)).unwrap()
}
