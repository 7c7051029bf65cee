//! Puts the git commit into the binary (`slurmscale --version`), as `SLURMSCALE_GIT_COMMIT`.
//!
//! Where it comes from, first that answers: the `SLURMSCALE_GIT_COMMIT` environment variable
//! (for builds from a tarball or a context without `.git`), `git rev-parse`, else `unknown`.
//!
//! Cargo reruns this script only when one of the files it names changes: the checkout's HEAD
//! (another branch checked out) and the ref HEAD points at (a new commit). So a commit costs
//! a rebuild of this crate and a relink, never a rebuild of the workspace, and a build with
//! no new commit does nothing. Where git does not answer, it runs at every build until it
//! does: an `unknown` kept by a build made before the checkout had its `.git` would stay.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The checkout being built, as cargo says it when it runs this script — not `env!`, which
/// would keep the checkout this script was first compiled in: a target directory shared by
/// two checkouts reuses the compiled script, and git would be asked about a folder that may
/// be gone.
fn checkout() -> PathBuf {
    PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| ".".into()))
}

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(checkout())
        .output()
        .ok()?;
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !s.is_empty()).then_some(s)
}

/// A path `git rev-parse --git-path` gives, made absolute (it may answer relative to the
/// checkout).
fn git_path(name: &str) -> Option<PathBuf> {
    let p = PathBuf::from(git(&["rev-parse", "--git-path", name])?);
    Some(if p.is_absolute() {
        p
    } else {
        checkout().join(p)
    })
}

fn watch(path: &Path) {
    // Naming a path that does not exist would rerun the script on every build.
    if path.exists() {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}

fn main() {
    println!("cargo:rerun-if-env-changed=SLURMSCALE_GIT_COMMIT");
    let commit = match std::env::var("SLURMSCALE_GIT_COMMIT") {
        Ok(c) if !c.trim().is_empty() => c.trim().to_string(),
        _ => {
            if let Some(head) = git_path("HEAD") {
                watch(&head);
            }
            // A branch's commit lives in its loose ref file, or in packed-refs until the next
            // commit writes the loose file (into the folder then watched). Only that one
            // file when it exists: a commit on another branch must not relink us.
            if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
                match git_path(&branch) {
                    Some(r) if r.exists() => watch(&r),
                    r => {
                        if let Some(dir) = r.as_deref().and_then(Path::parent) {
                            watch(dir);
                        }
                        if let Some(packed) = git_path("packed-refs") {
                            watch(&packed);
                        }
                    }
                }
            }
            git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| {
                // git did not answer (no checkout yet, no git): ask again at every build
                // rather than keep `unknown` once it would (a path that does not exist).
                println!("cargo:rerun-if-changed=.git/slurmscale-no-commit-yet");
                "unknown".into()
            })
        }
    };
    println!("cargo:rustc-env=SLURMSCALE_GIT_COMMIT={commit}");
}
