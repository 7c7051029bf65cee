//! Locking `/metrics` down the way exporters built on the Prometheus exporter-toolkit do
//! (`--web.config.file`), so the web config a site already uses for node_exporter works here:
//! TLS, with the certificate reloaded when its files change and client certificates checked
//! against a CA when one is given, and basic auth against bcrypt hashes. `/healthz` and
//! `/readyz` stay open (kubelet probes cannot send credentials) but are served over TLS too.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime};

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use serde::Deserialize;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tracing::{debug, info, warn};

use crate::error::{Error, Result};

/// The web config file: the exporter-toolkit's format, the keys it documents for TLS and
/// basic auth. Anything else is refused rather than ignored: a setting that silently did
/// nothing could leave `/metrics` open.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebConfig {
    #[serde(default)]
    pub tls_server_config: Option<TlsConfig>,
    /// User name → bcrypt hash of the password.
    #[serde(default)]
    pub basic_auth_users: BTreeMap<String, String>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
    #[serde(default)]
    pub client_ca_file: Option<PathBuf>,
    /// `NoClientCert` (default), `RequestClientCert`, `RequireAnyClientCert`,
    /// `VerifyClientCertIfGiven` or `RequireAndVerifyClientCert`.
    #[serde(default)]
    pub client_auth_type: Option<String>,
    /// `TLS12` (default) or `TLS13`.
    #[serde(default)]
    pub min_version: Option<String>,
}

impl WebConfig {
    /// Reads `path`; relative file names in it are relative to its folder.
    pub fn load(path: &Path) -> Result<Self> {
        let bad = |m: String| Error::Config(format!("web config {}: {m}", path.display()));
        let text = fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
        let mut cfg: WebConfig = serde_saphyr::from_str(&text).map_err(|e| bad(e.to_string()))?;
        let dir = path.parent().unwrap_or(Path::new("."));
        if let Some(tls) = cfg.tls_server_config.as_mut() {
            for p in [&mut tls.cert_file, &mut tls.key_file] {
                *p = dir.join(&*p);
            }
            if let Some(ca) = tls.client_ca_file.as_mut() {
                *ca = dir.join(&*ca);
            }
        }
        for (user, hash) in &cfg.basic_auth_users {
            if !hash.starts_with("$2") {
                return Err(bad(format!(
                    "the password of {user:?} is not a bcrypt hash"
                )));
            }
        }
        // Fail at start, not at the first scrape.
        if let Some(tls) = &cfg.tls_server_config {
            tls.server_config().map_err(|e| bad(e.to_string()))?;
        }
        Ok(cfg)
    }

    pub fn basic_auth(&self) -> Option<Arc<Users>> {
        (!self.basic_auth_users.is_empty()).then(|| {
            Arc::new(Users {
                hashes: self.basic_auth_users.clone(),
                accepted: Mutex::default(),
            })
        })
    }
}

fn provider() -> Arc<CryptoProvider> {
    // One crypto provider for the whole process (two panic at start-up): aws-lc-rs, as
    // kube and reqwest use.
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

impl TlsConfig {
    fn server_config(&self) -> Result<rustls::ServerConfig> {
        let bad = |m: String| Error::Config(format!("TLS: {m}"));
        let versions: &[&rustls::SupportedProtocolVersion] =
            match self.min_version.as_deref().unwrap_or("TLS12") {
                "TLS12" => &[&rustls::version::TLS13, &rustls::version::TLS12],
                "TLS13" => &[&rustls::version::TLS13],
                v => return Err(bad(format!("min_version {v:?} is not TLS12 or TLS13"))),
            };
        let builder = rustls::ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(versions)
            .map_err(|e| bad(e.to_string()))?;
        let auth = self.client_auth_type.as_deref().unwrap_or("NoClientCert");
        let verifier = match (auth, &self.client_ca_file) {
            ("NoClientCert", _) => None,
            (
                "RequireAndVerifyClientCert"
                | "VerifyClientCertIfGiven"
                | "RequireAnyClientCert"
                | "RequestClientCert",
                Some(ca),
            ) => {
                let mut roots = rustls::RootCertStore::empty();
                for cert in read_certs(ca)? {
                    roots.add(cert).map_err(|e| bad(e.to_string()))?;
                }
                let b = WebPkiClientVerifier::builder_with_provider(roots.into(), provider());
                let b = if matches!(auth, "RequireAndVerifyClientCert" | "RequireAnyClientCert") {
                    b
                } else {
                    b.allow_unauthenticated()
                };
                Some(b.build().map_err(|e| bad(e.to_string()))?)
            }
            (other, None) if other != "NoClientCert" => {
                return Err(bad(format!(
                    "client_auth_type {other} needs a client_ca_file to check certificates against"
                )));
            }
            (other, _) => return Err(bad(format!("unknown client_auth_type {other:?}"))),
        };
        let builder = match verifier {
            Some(v) => builder.with_client_cert_verifier(v),
            None => builder.with_no_client_auth(),
        };
        let resolver = Reloading::new(self.cert_file.clone(), self.key_file.clone())?;
        let mut cfg = builder.with_cert_resolver(Arc::new(resolver));
        cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(cfg)
    }
}

fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>> {
    let certs: Vec<_> = CertificateDer::pem_file_iter(path)
        .map_err(|e| Error::Config(format!("{}: {e}", path.display())))?
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| Error::Config(format!("{}: {e}", path.display())))?;
    if certs.is_empty() {
        return Err(Error::Config(format!(
            "{}: no certificate in it",
            path.display()
        )));
    }
    Ok(certs)
}

fn load_key(cert: &Path, key: &Path) -> Result<Arc<CertifiedKey>> {
    let certs = read_certs(cert)?;
    let der = PrivateKeyDer::from_pem_file(key)
        // The key's contents never go into the message.
        .map_err(|_| Error::Config(format!("{}: not a PEM private key", key.display())))?;
    let key = provider()
        .key_provider
        .load_private_key(der)
        .map_err(|_| Error::Config(format!("{}: an unsupported private key", key.display())))?;
    Ok(Arc::new(CertifiedKey::new(certs, key)))
}

/// The certificate, read again when its files change (cert-manager renews them in place).
#[derive(Debug)]
struct Reloading {
    cert: PathBuf,
    key: PathBuf,
    current: RwLock<(Option<SystemTime>, Instant, Arc<CertifiedKey>)>,
}

impl Reloading {
    fn new(cert: PathBuf, key: PathBuf) -> Result<Self> {
        let loaded = load_key(&cert, &key)?;
        let stamp = stamp(&cert, &key);
        Ok(Self {
            cert,
            key,
            current: RwLock::new((stamp, Instant::now(), loaded)),
        })
    }
}

fn stamp(cert: &Path, key: &Path) -> Option<SystemTime> {
    let m = |p: &Path| fs::metadata(p).and_then(|m| m.modified()).ok();
    m(cert).max(m(key))
}

impl ResolvesServerCert for Reloading {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        {
            let (seen, checked, key) = &*self.current.read().ok()?;
            if checked.elapsed() < Duration::from_secs(1) || stamp(&self.cert, &self.key) == *seen {
                return Some(key.clone());
            }
        }
        let mut current = self.current.write().ok()?;
        let now = stamp(&self.cert, &self.key);
        current.1 = Instant::now();
        if now != current.0 {
            match load_key(&self.cert, &self.key) {
                Ok(key) => {
                    info!(cert = %self.cert.display(), "TLS certificate reloaded");
                    *current = (now, Instant::now(), key);
                }
                // Half-written files: keep serving the old one, try again in a second.
                Err(e) => warn!(error = %e, "keeping the TLS certificate in use"),
            }
        }
        Some(current.2.clone())
    }
}

/// A TLS listener for `axum::serve`: handshakes run concurrently, each with a deadline, so
/// a client that connects and says nothing holds up no one.
pub struct TlsListener {
    rx: tokio::sync::mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    addr: SocketAddr,
}

const HANDSHAKE_DEADLINE: Duration = Duration::from_secs(10);

impl TlsListener {
    pub fn new(listener: TcpListener, tls: &TlsConfig) -> Result<Self> {
        let acceptor = TlsAcceptor::from(Arc::new(tls.server_config()?));
        let addr = listener.local_addr()?;
        let (tx, rx) = tokio::sync::mpsc::channel(64);
        tokio::spawn(async move {
            loop {
                let (tcp, peer) = match listener.accept().await {
                    Ok(c) => c,
                    Err(e) => {
                        debug!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let (acceptor, tx) = (acceptor.clone(), tx.clone());
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_DEADLINE, acceptor.accept(tcp)).await {
                        Ok(Ok(tls)) => {
                            let _ = tx.send((tls, peer)).await;
                        }
                        Ok(Err(e)) => debug!(%peer, error = %e, "TLS handshake failed"),
                        Err(_) => debug!(%peer, "TLS handshake timed out"),
                    }
                });
            }
        });
        Ok(Self { rx, addr })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.rx.recv().await {
            Some(c) => c,
            // The accept loop is gone: nothing more will come.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.addr)
    }
}

/// Basic auth users. bcrypt is slow on purpose (tens of milliseconds a check), so a
/// password once accepted is remembered for a minute.
pub struct Users {
    hashes: BTreeMap<String, String>,
    accepted: Mutex<HashMap<(String, String), Instant>>,
}

const REMEMBER: Duration = Duration::from_secs(60);

impl Users {
    async fn verify(&self, user: &str, password: &str) -> bool {
        let Some(hash) = self.hashes.get(user).cloned() else {
            return false;
        };
        let key = (user.to_string(), password.to_string());
        {
            let mut accepted = self.accepted.lock().unwrap_or_else(|e| e.into_inner());
            accepted.retain(|_, at| at.elapsed() < REMEMBER);
            if accepted.contains_key(&key) {
                return true;
            }
        }
        let pw = password.to_string();
        let ok = tokio::task::spawn_blocking(move || bcrypt::verify(pw, &hash).unwrap_or(false))
            .await
            .unwrap_or(false);
        if ok {
            self.accepted
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(key, Instant::now());
        }
        ok
    }
}

/// Middleware: the request goes on only with a user and password that match.
pub async fn require_basic_auth(
    State(users): State<Arc<Users>>,
    req: Request,
    next: Next,
) -> Response {
    let credentials = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Basic "))
        .and_then(|b| {
            base64::engine::general_purpose::STANDARD
                .decode(b.trim())
                .ok()
        })
        .and_then(|b| String::from_utf8(b).ok());
    if let Some((user, password)) = credentials.as_deref().and_then(|c| c.split_once(':'))
        && users.verify(user, password).await
    {
        return next.run(req).await;
    }
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, "Basic realm=\"slurmscale\"")],
        "unauthorized\n",
    )
        .into_response()
}
