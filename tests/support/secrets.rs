//! Secrets never leak. Every log a test's slurmscale process writes and every page a test
//! reads from one is checked for the harness's tokens and keys, for anything shaped like a
//! JWT or a private key, and for the passwords tests register; a find fails the test without
//! printing the secret. Because every end-to-end test goes through [`super::Process`], the
//! whole suite is covered.

use std::sync::Mutex;

static EXTRA: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// A secret a test uses (a password, a token it minted) that must not appear anywhere.
pub fn register(secret: &str) {
    if secret.len() >= 6 {
        EXTRA.lock().unwrap().push(secret.to_string());
    }
}

/// The harness's own secrets: both Slurms' token and HS256 key.
fn harness_secrets() -> Vec<String> {
    let mut out = Vec::new();
    for flavor in ["22.05", "24.11"] {
        let env = super::run_dir().join(format!("slurm-{flavor}/env"));
        let Ok(text) = std::fs::read_to_string(env) else {
            continue;
        };
        for key in ["HARNESS_JWT_FILE", "HARNESS_JWT_KEY_FILE"] {
            let path = text.lines().find_map(|l| {
                l.strip_prefix(&format!("export {key}="))
                    .map(|v| v.trim_matches('"').to_string())
            });
            if let Some(secret) = path.and_then(|p| std::fs::read_to_string(p).ok()) {
                let secret = secret.trim();
                if secret.len() >= 16 {
                    out.push(secret.to_string());
                }
            }
        }
    }
    out
}

/// What kind of secret `text` holds, if any.
pub fn find(text: &str) -> Option<&'static str> {
    if text.contains("PRIVATE KEY-----") {
        return Some("private key");
    }
    if has_jwt(text) {
        return Some("JWT");
    }
    if harness_secrets().iter().any(|s| text.contains(s.as_str())) {
        return Some("harness token or key");
    }
    if EXTRA
        .lock()
        .unwrap()
        .iter()
        .any(|s| text.contains(s.as_str()))
    {
        return Some("registered secret");
    }
    None
}

/// Fails the test when `text` (from `what`) holds a secret.
pub fn check(what: &str, text: &str) {
    if let Some(kind) = find(text) {
        panic!("a {kind} leaked into {what}");
    }
}

/// Three dot-separated base64url runs after a JSON header's `eyJ`.
fn has_jwt(text: &str) -> bool {
    let mut rest = text;
    while let Some(i) = rest.find("eyJ") {
        let candidate: String = rest[i..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            .collect();
        let parts: Vec<&str> = candidate.split('.').collect();
        if parts.len() >= 3 && parts.iter().take(3).all(|p| p.len() >= 8) {
            return true;
        }
        rest = &rest[i + 3..];
    }
    false
}

#[test]
fn jwts_and_keys_are_found() {
    assert_eq!(
        find("token eyJhbGciOiJIUzI1NiJ9.eyJzdW4iOiJzbHVybSJ9.c2lnbmF0dXJlLXBhcnQ"),
        Some("JWT")
    );
    assert_eq!(find("-----BEGIN PRIVATE KEY-----"), Some("private key"));
    assert_eq!(find("eyJ is a prefix, not a token"), None);
    register("hunter2-password");
    assert_eq!(
        find("basic auth hunter2-password"),
        Some("registered secret")
    );
}
