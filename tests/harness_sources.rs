//! Where the harness downloads from. The build scripts fetch Debian source packages from the
//! archive this machine's apt is configured with (`apt_archive` in `tests/harness/common.sh`),
//! so no package registry's host name is written into the repository: a site behind its own
//! mirror runs the harness unchanged, and a machine with no archive configured gets a clear
//! error instead of a download from somewhere it never chose.

mod support;

use std::path::Path;
use std::process::{Command, Output};

/// Runs `apt_archive KIND` with apt reading its sources from `dir` only.
fn apt_archive(dir: &Path, kind: &str) -> Output {
    let conf = dir.join("apt.conf");
    std::fs::create_dir_all(dir.join("parts")).unwrap();
    std::fs::write(
        &conf,
        format!(
            "Dir::Etc::sourcelist \"{0}/sources.list\";\nDir::Etc::sourceparts \"{0}/parts\";\n",
            dir.display()
        ),
    )
    .unwrap();
    let common = support::repo_root().join("tests/harness/common.sh");
    Command::new("bash")
        .arg("-c")
        .arg(format!(
            "source '{}' && apt_archive {kind}",
            common.display()
        ))
        .env("APT_CONFIG", &conf)
        .output()
        .expect("bash runs")
}

fn archive_of(dir: &Path, kind: &str) -> String {
    let out = apt_archive(dir, kind);
    assert!(
        out.status.success(),
        "apt_archive {kind} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[test]
fn the_archive_comes_from_deb822_sources() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("parts")).unwrap();
    std::fs::write(
        dir.path().join("parts/debian.sources"),
        "Types: deb\n\
         # a comment between fields\n\
         URIs: http://mirror.example.test/debian/\n\
         Suites: bookworm bookworm-updates\n\
         Components: main\n\
         \n\
         Types: deb\n\
         URIs: https://mirror.example.test/debian-security\n\
         Suites: bookworm-security\n\
         Components: main\n\
         \n\
         Types: deb\n\
         Enabled: no\n\
         URIs: http://disabled.example.test/debian\n\
         Suites: trixie\n",
    )
    .unwrap();
    assert_eq!(
        archive_of(dir.path(), "main"),
        "http://mirror.example.test/debian"
    );
    assert_eq!(
        archive_of(dir.path(), "security"),
        "https://mirror.example.test/debian-security"
    );
}

#[test]
fn the_archive_comes_from_one_line_sources() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("sources.list"),
        "# deb http://commented.example.test/debian bookworm main\n\
         deb [signed-by=/usr/share/keyrings/x.gpg arch=amd64] http://one.example.test/debian bookworm main\n\
         deb http://one.example.test/debian-security bookworm-security main\n",
    )
    .unwrap();
    assert_eq!(
        archive_of(dir.path(), "main"),
        "http://one.example.test/debian"
    );
    assert_eq!(
        archive_of(dir.path(), "security"),
        "http://one.example.test/debian-security"
    );
}

#[test]
fn no_configured_archive_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("sources.list"),
        "deb cdrom:[Debian GNU/Linux 12]/ bookworm main\n",
    )
    .unwrap();
    let out = apt_archive(dir.path(), "security");
    assert!(!out.status.success(), "no security archive is configured");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no Debian security archive") && err.contains("sources.list"),
        "the error says what is missing and where it looked: {err}"
    );
}

/// No file of the repository names a package registry's host: the harness takes its
/// archives from apt's configuration and Go modules through `go env GOPROXY`.
#[test]
fn no_registry_host_is_written_into_the_repository() {
    // Written backwards (as reverse-DNS names), so that this list is not itself what it
    // looks for.
    const REVERSED: &[&str] = &[
        "org.debian.deb",
        "org.debian.security",
        "org.debian.snapshot",
        "org.debian.ftp",
        "org.golang.proxy",
        "org.golang.sum",
        "org.npmjs.registry",
        "org.pypi",
        "org.pythonhosted.files",
        "io.crates.static",
        "io.crates.index",
        "org.maven.repo1",
        "org.apache.maven.repo",
    ];
    let hosts: Vec<String> = REVERSED
        .iter()
        .map(|r| r.split('.').rev().collect::<Vec<_>>().join("."))
        .collect();
    let root = support::repo_root();
    let files = Command::new("git")
        .args([
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ])
        .current_dir(&root)
        .output()
        .expect("git runs");
    let mut found = Vec::new();
    for name in String::from_utf8(files.stdout).unwrap().split('\0') {
        let Ok(text) = std::fs::read_to_string(root.join(name)) else {
            continue; // binary, or deleted in the work tree
        };
        for (n, line) in text.lines().enumerate() {
            for host in hosts.iter().filter(|h| line.contains(h.as_str())) {
                found.push(format!("{name}:{}: {host}", n + 1));
            }
        }
    }
    assert!(found.is_empty(), "registry host names: {found:#?}");
}
