//! Scale targets kept in memory by a watch, so a reconcile that changes nothing asks the API
//! server for nothing. Read from the API server, every autoscaler cost two requests a
//! reconcile (the object, then its scale): 200 autoscalers at a 2 s poll were 200 requests a
//! second, and on a slow machine a round of them took longer than a poll.
//!
//! A NodeSet's scale subresource is its `spec.replicas`, `status.replicas` and
//! `status.selector` at the object's resourceVersion, so the object as watched is all a
//! reconcile reads. Only NodeSets are watched (the chart lets the autoscaler list and watch
//! them; other kinds of target it may only get): the watch of a version starts at the first
//! read of a target of that version, and until it has listed, or from a failure until it has
//! listed again, targets are read from the API server as before. After a scale is written, the watched object is used
//! again only once it shows that write (a resourceVersion at least the one the write
//! returned); after a conflict, the next read goes to the API server.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use futures::StreamExt;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use tracing::warn;

use crate::crd::ScaleTargetRef;

/// A target: its apiVersion, namespace and name.
type Key = (String, String, String);

/// What the autoscaler last did to a target's scale.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Written {
    /// Wrote it; the answer had this resourceVersion.
    At(u64),
    /// A write met a conflict, or its answer had no resourceVersion to compare: read it
    /// from the API server next.
    Unsure,
}

/// One watch of every NodeSet of one version.
struct Watch {
    store: Store<DynamicObject>,
    listed: Arc<AtomicBool>,
}

/// The NodeSets the autoscaler scales, as watched.
pub struct Targets {
    client: Client,
    watches: Mutex<HashMap<String, Watch>>,
    written: Mutex<HashMap<Key, Written>>,
}

/// Whether targets of this kind are watched.
fn watched(target: &ScaleTargetRef) -> bool {
    target.kind == "NodeSet" && target.api_version.starts_with("slinky.slurm.net/")
}

fn key(namespace: &str, target: &ScaleTargetRef) -> Key {
    (
        target.api_version.clone(),
        namespace.to_string(),
        target.name.clone(),
    )
}

/// A resourceVersion as the API server gives it out (etcd's revision); `None` if it is not
/// a number, which makes it never comparable and the object always read from the server.
fn revision(rv: Option<&str>) -> Option<u64> {
    rv?.parse().ok()
}

impl Targets {
    pub fn new(client: Client) -> Self {
        Self {
            client,
            watches: Mutex::default(),
            written: Mutex::default(),
        }
    }

    fn watches(&self) -> MutexGuard<'_, HashMap<String, Watch>> {
        self.watches.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn written(&self) -> MutexGuard<'_, HashMap<Key, Written>> {
        self.written.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The target as watched, when the watch can be trusted for it; `None`: read it from the
    /// API server. Starts the watch of its version on first use.
    pub fn get(
        &self,
        namespace: &str,
        target: &ScaleTargetRef,
        resource: &ApiResource,
    ) -> Option<Arc<DynamicObject>> {
        if !watched(target) {
            return None;
        }
        let object = {
            let mut watches = self.watches();
            let watch = watches
                .entry(target.api_version.clone())
                .or_insert_with(|| self.start(resource));
            if !watch.listed.load(Ordering::SeqCst) {
                return None;
            }
            let at = ObjectRef::new_with(&target.name, resource.clone()).within(namespace);
            watch.store.get(&at)?
        };
        let key = key(namespace, target);
        let mut written = self.written();
        match written.get(&key).copied() {
            None => Some(object),
            Some(Written::At(rv))
                if revision(object.metadata.resource_version.as_deref())
                    .is_some_and(|r| r >= rv) =>
            {
                written.remove(&key);
                Some(object)
            }
            Some(Written::At(_)) => None,
            Some(Written::Unsure) => {
                written.remove(&key);
                None
            }
        }
    }

    /// The target's scale was written; the answer's resourceVersion.
    pub fn wrote(&self, namespace: &str, target: &ScaleTargetRef, rv: Option<&str>) {
        if watched(target) {
            let seen = revision(rv).map_or(Written::Unsure, Written::At);
            self.written().insert(key(namespace, target), seen);
        }
    }

    /// A write met a newer version of the target than the one read: read it from the API
    /// server next.
    pub fn conflicted(&self, namespace: &str, target: &ScaleTargetRef) {
        if watched(target) {
            self.written()
                .insert(key(namespace, target), Written::Unsure);
        }
    }

    /// Watches every object of `resource`, cluster-wide, for as long as the process runs.
    fn start(&self, resource: &ApiResource) -> Watch {
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), resource);
        let writer = reflector::store::Writer::new(resource.clone());
        let store = writer.as_reader();
        let listed = Arc::new(AtomicBool::new(false));
        let first = listed.clone();
        let kind = format!("{}/{}", resource.api_version, resource.kind);
        tokio::spawn(async move {
            let stream = reflector::reflector(writer, watcher(api, watcher::Config::default()))
                .default_backoff();
            let mut stream = std::pin::pin!(stream);
            let mut failing = false;
            while let Some(event) = stream.next().await {
                match event {
                    Ok(watcher::Event::InitDone) => {
                        first.store(true, Ordering::SeqCst);
                        failing = false;
                    }
                    Ok(_) => failing = false,
                    // Until the watch lists again, targets are read from the API server (the
                    // store keeps objects that may have moved since). Said once a streak.
                    Err(e) => {
                        first.store(false, Ordering::SeqCst);
                        if !failing {
                            warn!(%kind, error = %e, "cannot watch scale targets; reading them one by one");
                        }
                        failing = true;
                    }
                }
            }
        });
        Watch { store, listed }
    }
}
