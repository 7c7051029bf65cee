//! The Kubernetes client every role uses: kube's own, with its retry of answers that mean
//! "throttled" or "not now" (429, 503, 504) kept, and each such answer counted as it
//! arrives. kube retries them silently, so a counter of failed requests stays at zero while
//! the API server pushes back and moves only once a request has failed every retry; this
//! one ([`pushed_back`], `slurmscale_kubernetes_pushback_responses_total`) shows the pressure
//! while it builds.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll};

use kube::client::retry::RetryPolicy;
use kube::client::{Body, ClientBuilder};
use tower::buffer::BufferLayer;
use tower::retry::RetryLayer;
use tower::{Layer, Service};

/// The statuses kube's retry policy retries, in the order [`pushed_back`] reports them.
pub const PUSHBACK_CODES: [u16; 3] = [429, 503, 504];

static PUSHED_BACK: [AtomicU64; 3] = [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)];
static IN_USE: AtomicBool = AtomicBool::new(false);

/// Whether this process built a Kubernetes client (with `--no-kubernetes` it has none, and
/// no pushback to report).
pub fn in_use() -> bool {
    IN_USE.load(Ordering::Relaxed)
}

/// Answers of each of [`PUSHBACK_CODES`] this process has had from the API server, every
/// attempt counted (retried or not).
pub fn pushed_back() -> [(u16, u64); 3] {
    std::array::from_fn(|i| (PUSHBACK_CODES[i], PUSHED_BACK[i].load(Ordering::Relaxed)))
}

/// A client for `config`, retrying as kube does by default and counting each pushback.
pub fn client(mut config: kube::Config) -> Result<kube::Client, kube::Error> {
    // kube's own retry layer sits where no layer of ours can see the attempts it repeats:
    // put the same policy outside a counting layer instead (retrying needs a service it
    // can clone, which the buffer makes of kube's boxed stack).
    config.default_retry = false;
    IN_USE.store(true, Ordering::Relaxed);
    Ok(ClientBuilder::try_from(config)?
        .with_layer(&CountPushback)
        .with_layer(&BufferLayer::new(1024))
        .with_layer(&RetryLayer::new(Retry(RetryPolicy::server_retry())))
        .build())
}

/// kube's policy, but an eviction is never retried: its 429 is a PodDisruptionBudget
/// saying "not now", which the caller reports and asks again later, not throttling to sit out
/// (kube's policy would repeat it for up to 15 tries, holding the caller meanwhile).
#[derive(Clone)]
struct Retry(RetryPolicy);

impl<Res> tower::retry::Policy<http::Request<Body>, http::Response<Res>, tower::BoxError>
    for Retry
{
    type Future = tokio::time::Sleep;

    fn retry(
        &mut self,
        req: &mut http::Request<Body>,
        result: &mut Result<http::Response<Res>, tower::BoxError>,
    ) -> Option<Self::Future> {
        if req.uri().path().ends_with("/eviction") {
            return None;
        }
        self.0.retry(req, result)
    }

    fn clone_request(&mut self, req: &http::Request<Body>) -> Option<http::Request<Body>> {
        <RetryPolicy as tower::retry::Policy<_, http::Response<Res>, _>>::clone_request(
            &mut self.0,
            req,
        )
    }
}

/// Counts the responses whose status is one of [`PUSHBACK_CODES`].
#[derive(Clone, Copy, Debug)]
struct CountPushback;

impl<S> Layer<S> for CountPushback {
    type Service = Counted<S>;
    fn layer(&self, inner: S) -> Counted<S> {
        Counted(inner)
    }
}

#[derive(Clone, Debug)]
struct Counted<S>(S);

impl<S, B> Service<http::Request<Body>> for Counted<S>
where
    S: Service<http::Request<Body>, Response = http::Response<B>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let answer = self.0.call(req);
        Box::pin(async move {
            let res = answer.await?;
            count(res.status().as_u16());
            Ok(res)
        })
    }
}

fn count(status: u16) {
    if let Some(i) = PUSHBACK_CODES.iter().position(|&c| c == status) {
        PUSHED_BACK[i].fetch_add(1, Ordering::Relaxed);
    }
}
