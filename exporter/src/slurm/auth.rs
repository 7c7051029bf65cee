//! Where the `X-SLURM-USER-TOKEN` comes from.
//!
//! * a fixed token (`SLURM_JWT`);
//! * a token file, re-read whenever it changes on disk and after slurmrestd rejects the
//!   token — Slinky's Token CR rotates its secret hourly, and exporters that read the file
//!   once break on rotation (slurm-operator #240);
//! * tokens we sign ourselves: HS256 with slurmctld's `jwt_hs256.key`, or RS256/ES256 with a
//!   private key for sites that verify with JWKS. Claims `sun`, `iat`, `exp`; short-lived and
//!   renewed once two thirds of their life has passed.
//!
//! Tokens are [`Secret`]s: their `Debug` is redacted and they have no `Display`, so they
//! cannot end up in a log line or an error by accident.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use jsonwebtoken::{Algorithm, EncodingKey, Header};

use crate::error::{Error, Result};

/// A token; readable only through [`Secret::expose`].
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Self {
        Self(s.into())
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

/// Algorithms for self-signed tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SigningAlgorithm {
    Hs256,
    Rs256,
    Es256,
}

impl std::str::FromStr for SigningAlgorithm {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_uppercase().as_str() {
            "HS256" => Ok(Self::Hs256),
            "RS256" => Ok(Self::Rs256),
            "ES256" => Ok(Self::Es256),
            _ => Err(format!(
                "unsupported JWT algorithm {s:?} (HS256, RS256 or ES256)"
            )),
        }
    }
}

pub enum TokenSource {
    Fixed(Secret),
    File(FileToken),
    Signed(Signer),
}

impl fmt::Debug for TokenSource {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Self::Fixed(_) => f.write_str("TokenSource::Fixed([redacted])"),
            Self::File(t) => write!(f, "TokenSource::File({})", t.path.display()),
            Self::Signed(s) => write!(
                f,
                "TokenSource::Signed({:?}, {})",
                s.algorithm,
                s.key_path.display()
            ),
        }
    }
}

impl TokenSource {
    pub fn fixed(token: impl Into<String>) -> Self {
        Self::Fixed(Secret::new(token.into().trim().to_string()))
    }

    pub fn file(path: impl Into<PathBuf>) -> Self {
        Self::File(FileToken {
            path: path.into(),
            cached: Mutex::new(None),
        })
    }

    /// Signs tokens for `user` with the key in `key_path`. The key is read now (so a bad key
    /// fails at start-up) and again whenever the file changes.
    pub fn signed(
        key_path: impl Into<PathBuf>,
        algorithm: SigningAlgorithm,
        user: impl Into<String>,
        lifetime: Duration,
    ) -> Result<Self> {
        let signer = Signer {
            key_path: key_path.into(),
            algorithm,
            user: user.into(),
            lifetime: lifetime.max(Duration::from_secs(30)),
            state: Mutex::new(SignerState::default()),
        };
        signer.load_key()?;
        Ok(Self::Signed(signer))
    }

    /// The token to send now.
    pub fn token(&self) -> Result<Secret> {
        match self {
            Self::Fixed(s) => Ok(s.clone()),
            Self::File(f) => f.token(),
            Self::Signed(s) => s.token(SystemTime::now()),
        }
    }

    /// slurmrestd rejected the last token: read the file again / sign a fresh one next time.
    pub fn invalidate(&self) {
        match self {
            Self::Fixed(_) => {}
            Self::File(f) => *lock(&f.cached) = None,
            Self::Signed(s) => lock(&s.state).token = None,
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic elsewhere while holding the lock must not stop token refresh for good.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What identifies a version of a file without reading it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    modified: Option<SystemTime>,
    len: u64,
    inode: u64,
}

fn stamp(path: &Path) -> std::io::Result<Stamp> {
    // Kubernetes secret volumes swap a symlink on rotation: metadata() follows it.
    let m = std::fs::metadata(path)?;
    #[cfg(unix)]
    let inode = std::os::unix::fs::MetadataExt::ino(&m);
    #[cfg(not(unix))]
    let inode = 0;
    Ok(Stamp {
        modified: m.modified().ok(),
        len: m.len(),
        inode,
    })
}

pub struct FileToken {
    path: PathBuf,
    cached: Mutex<Option<(Stamp, Secret)>>,
}

impl FileToken {
    fn token(&self) -> Result<Secret> {
        let now = stamp(&self.path).map_err(|e| {
            Error::Token(format!(
                "cannot read token file {}: {e}",
                self.path.display()
            ))
        })?;
        let mut cached = lock(&self.cached);
        if let Some((s, token)) = cached.as_ref()
            && *s == now
        {
            return Ok(token.clone());
        }
        let text = std::fs::read_to_string(&self.path).map_err(|e| {
            Error::Token(format!(
                "cannot read token file {}: {e}",
                self.path.display()
            ))
        })?;
        // Accept both a bare token and `SLURM_JWT=<token>` as `scontrol token` prints it.
        let token = text.trim();
        let token = token.strip_prefix("SLURM_JWT=").unwrap_or(token).trim();
        if token.is_empty() {
            return Err(Error::Token(format!(
                "token file {} is empty",
                self.path.display()
            )));
        }
        let token = Secret::new(token);
        *cached = Some((now, token.clone()));
        Ok(token)
    }
}

pub struct Signer {
    key_path: PathBuf,
    algorithm: SigningAlgorithm,
    user: String,
    lifetime: Duration,
    state: Mutex<SignerState>,
}

#[derive(Default)]
struct SignerState {
    key: Option<(Stamp, EncodingKey)>,
    /// The current token and the time after which we sign a new one.
    token: Option<(Secret, SystemTime)>,
}

#[derive(serde::Serialize)]
struct Claims<'a> {
    sun: &'a str,
    iat: u64,
    exp: u64,
}

impl Signer {
    fn load_key(&self) -> Result<EncodingKey> {
        let path = &self.key_path;
        let now = stamp(path)
            .map_err(|e| Error::Token(format!("cannot read JWT key {}: {e}", path.display())))?;
        let mut state = lock(&self.state);
        if let Some((s, key)) = &state.key
            && *s == now
        {
            return Ok(key.clone());
        }
        let bytes = std::fs::read(path)
            .map_err(|e| Error::Token(format!("cannot read JWT key {}: {e}", path.display())))?;
        let bad = |what: &str| Error::Token(format!("JWT key {} is not {what}", path.display()));
        let key = match self.algorithm {
            // slurmctld uses the exact bytes of the file as the HMAC key.
            SigningAlgorithm::Hs256 if bytes.is_empty() => {
                return Err(bad("a non-empty HS256 key"));
            }
            SigningAlgorithm::Hs256 => EncodingKey::from_secret(&bytes),
            SigningAlgorithm::Rs256 => {
                EncodingKey::from_rsa_pem(&bytes).map_err(|_| bad("an RSA private key in PEM"))?
            }
            SigningAlgorithm::Es256 => EncodingKey::from_ec_pem(&bytes)
                .map_err(|_| bad("an EC P-256 private key in PEM"))?,
        };
        state.key = Some((now, key.clone()));
        state.token = None; // a new key invalidates tokens signed with the old one
        Ok(key)
    }

    fn token(&self, now: SystemTime) -> Result<Secret> {
        let key = self.load_key()?;
        let mut state = lock(&self.state);
        if let Some((token, renew_at)) = &state.token
            && now < *renew_at
        {
            return Ok(token.clone());
        }
        let iat = now
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let exp = iat + self.lifetime.as_secs();
        let algorithm = match self.algorithm {
            SigningAlgorithm::Hs256 => Algorithm::HS256,
            SigningAlgorithm::Rs256 => Algorithm::RS256,
            SigningAlgorithm::Es256 => Algorithm::ES256,
        };
        let token = jsonwebtoken::encode(
            &Header::new(algorithm),
            &Claims {
                sun: &self.user,
                iat,
                exp,
            },
            &key,
        )
        .map_err(|e| {
            Error::Token(format!(
                "cannot sign a token with {}: {e}",
                self.key_path.display()
            ))
        })?;
        let token = Secret::new(token);
        state.token = Some((token.clone(), now + self.lifetime * 2 / 3));
        Ok(token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonwebtoken::{DecodingKey, Validation};

    /// A file in a directory that goes away with the returned guard.
    fn temp(name: &str, content: &[u8]) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join(name);
        std::fs::write(&p, content).unwrap();
        (dir, p)
    }

    #[test]
    fn secrets_never_print() {
        let s = TokenSource::fixed("eyJhbGciOiJIUzI1NiJ9.secret.sig");
        assert!(!format!("{s:?}").contains("secret"));
        assert!(!format!("{:?}", s.token().unwrap()).contains("secret"));
    }

    #[test]
    fn a_rotated_token_file_is_picked_up() {
        let (_dir, p) = temp("token", b"SLURM_JWT=first\n");
        let source = TokenSource::file(&p);
        assert_eq!(source.token().unwrap().expose(), "first");
        // Rotation writes a new file (a new inode, as a secret volume's symlink swap does).
        let tmp = p.with_extension("new");
        std::fs::write(&tmp, "second").unwrap();
        std::fs::rename(&tmp, &p).unwrap();
        assert_eq!(source.token().unwrap().expose(), "second");
        std::fs::write(&p, "").unwrap();
        assert!(
            source.token().is_err(),
            "an empty token file is an error, not an empty token"
        );
    }

    #[test]
    fn hs256_tokens_carry_sun_iat_exp_and_are_renewed_early() {
        let key = b"0123456789abcdef0123456789abcdef";
        let (_dir, p) = temp("jwt_hs256.key", key);
        let source = TokenSource::signed(
            &p,
            SigningAlgorithm::Hs256,
            "slurm",
            Duration::from_secs(600),
        )
        .unwrap();
        let TokenSource::Signed(signer) = &source else {
            unreachable!()
        };
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let first = signer.token(t0).unwrap();
        let mut v = Validation::new(Algorithm::HS256);
        v.validate_exp = false;
        v.required_spec_claims.clear();
        let claims = jsonwebtoken::decode::<serde_json::Value>(
            first.expose(),
            &DecodingKey::from_secret(key),
            &v,
        )
        .unwrap()
        .claims;
        assert_eq!(claims["sun"], "slurm");
        assert_eq!(
            claims["exp"].as_u64().unwrap() - claims["iat"].as_u64().unwrap(),
            600
        );
        assert_eq!(
            signer.token(t0 + Duration::from_secs(300)).unwrap(),
            first,
            "reused while young"
        );
        assert_ne!(
            signer.token(t0 + Duration::from_secs(401)).unwrap(),
            first,
            "renewed after 2/3 of its life"
        );
    }

    #[test]
    fn a_bad_key_fails_at_start_not_at_first_request() {
        let (_dir, p) = temp("not-a-pem", b"hello");
        let err = TokenSource::signed(
            &p,
            SigningAlgorithm::Rs256,
            "slurm",
            Duration::from_secs(600),
        )
        .unwrap_err();
        assert!(err.to_string().contains("not an RSA private key"), "{err}");
        assert!(
            !err.to_string().contains("hello"),
            "key material leaked: {err}"
        );
    }
}
