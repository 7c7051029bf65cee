//! The repository stands alone: what its tests, benches and documented commands read lives in
//! it, with its provenance. No file refers to a folder beside the clone or to a path of the
//! machine it was built on, and every data file the docs name is here.

use std::path::{Path, PathBuf};

/// The package's directory as the running `cargo test` says: a target dir shared by two
/// checkouts may hold this binary built from the other, with the other's path compiled in.
fn root() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from)
}

/// Every file of the repository (not build output, not git's own).
fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if matches!(name.to_str(), Some(".git" | "target")) {
            continue;
        }
        if path.is_dir() {
            files(&path, out);
        } else {
            out.push(path);
        }
    }
}

fn texts() -> Vec<(PathBuf, String)> {
    let mut all = Vec::new();
    files(&root(), &mut all);
    all.into_iter()
        .filter_map(|p| {
            let text = String::from_utf8(std::fs::read(&p).ok()?).ok()?;
            Some((p.strip_prefix(root()).unwrap().to_path_buf(), text))
        })
        .collect()
}

#[test]
fn nothing_refers_outside_the_repository() {
    // Spelled in pieces so this file does not match itself.
    let outside = [
        concat!("..", "/shared"),
        concat!("/wo", "rk/"),
        concat!("SLURMSCALE_OPENAPI", "_DIR"),
        concat!("SLURMSCALE_OFFICIAL", "_CRDS"),
    ];
    let mut found = Vec::new();
    for (path, text) in texts() {
        for (n, line) in text.lines().enumerate() {
            if let Some(what) = outside.iter().find(|o| line.contains(**o)) {
                found.push(format!("{}:{}: {what}", path.display(), n + 1));
            }
        }
    }
    assert!(
        found.is_empty(),
        "references outside the repository:\n{}",
        found.join("\n")
    );
}

#[test]
fn every_data_file_the_docs_name_is_here_with_its_provenance() {
    let data = [
        "tests/traces/",
        "tests/upstream/",
        "exporter/tests/openapi/",
    ];
    let mut missing = Vec::new();
    for (path, text) in texts() {
        if path.extension().is_none_or(|e| e != "md") {
            continue;
        }
        for dir in data {
            for (at, _) in text.match_indices(dir) {
                let named: String = text[at..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || "/._-".contains(*c))
                    .collect();
                let named = named.trim_end_matches(['.', '/']);
                if !root().join(named).exists() {
                    missing.push(format!("{}: {named}", path.display()));
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "named but not in the repository:\n{}",
        missing.join("\n")
    );
    for dir in data {
        let readme = root().join(dir).join("README.md");
        assert!(
            readme.is_file(),
            "{dir} says nothing of where its files come from"
        );
    }
}

#[test]
fn the_licence_the_packages_declare_is_in_the_repository() {
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    assert!(manifest.contains("license = \"Apache-2.0\""));
    let licence = std::fs::read_to_string(root().join("LICENSE")).unwrap();
    assert!(licence.contains("Apache License") && licence.contains("Version 2.0, January 2004"));
}

/// Family names in the tables of docs/metrics.md (first column, in backticks).
fn documented_families() -> std::collections::BTreeSet<String> {
    let text = std::fs::read_to_string(root().join("docs/metrics.md")).unwrap();
    text.lines()
        .filter_map(|l| l.strip_prefix("| `")?.split_once('`'))
        .map(|(name, _)| name.to_string())
        .collect()
}

#[test]
fn the_metrics_reference_lists_every_family_the_code_renders_and_no_other() {
    // Every family name the code writes: string literals in the metric modules and the
    // policies' metrics.rs (each family is rendered under a literal name), and what the golden
    // pages of every API version hold.
    let mut rendered = std::collections::BTreeSet::new();
    let mut sources = Vec::new();
    files(&root().join("exporter/src/metrics"), &mut sources);
    files(&root().join("autoscaler/src/metrics"), &mut sources);
    // A policy's own families live in its room.
    let mut rooms = Vec::new();
    files(&root().join("autoscaler/src/controller/plan"), &mut rooms);
    sources.extend(rooms.into_iter().filter(|p| p.ends_with("metrics.rs")));
    for path in sources {
        let text = std::fs::read_to_string(&path).unwrap();
        for piece in text.split('"').skip(1).step_by(2) {
            let is_name = (piece.starts_with("slurm_") || piece.starts_with("slurmscale_"))
                && piece
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
            if is_name {
                rendered.insert(piece.to_string());
            }
        }
    }
    let mut goldens = Vec::new();
    files(&root().join("exporter/tests/golden"), &mut goldens);
    for path in goldens.iter().filter(|p| p.ends_with("metrics.prom")) {
        let text = std::fs::read_to_string(path).unwrap();
        for line in text.lines() {
            if let Some(name) = line
                .strip_prefix("# TYPE ")
                .and_then(|l| l.split(' ').next())
            {
                rendered.insert(name.to_string());
            }
        }
    }
    let documented = documented_families();
    let undocumented: Vec<_> = rendered.difference(&documented).collect();
    assert!(
        undocumented.is_empty(),
        "rendered but not in docs/metrics.md: {undocumented:?}"
    );
    // What the reference lists beyond them is only the process's standard families.
    let extra: Vec<_> = documented
        .difference(&rendered)
        .filter(|n| !n.starts_with("process_"))
        .collect();
    assert!(
        extra.is_empty(),
        "in docs/metrics.md but rendered nowhere: {extra:?}"
    );
}

/// The source folders of the libraries and the binary, where ARCHITECTURE.md's paths start.
const SOURCE_DIRS: [&str; 4] = ["exporter/src", "autoscaler/src", "sim/src", "src"];

/// A crate named at the head of a path (`autoscaler::metrics`): its source folder.
fn crate_dir(first: &str) -> Option<&'static str> {
    Some(match first {
        "exporter" | "slurmscale_exporter" => "exporter/src",
        "autoscaler" | "slurmscale_autoscaler" => "autoscaler/src",
        "sim" | "slurmscale_sim" => "sim/src",
        _ => return None,
    })
}

/// Every product source file (tests apart: they are read for declarations too, harmlessly).
fn product_sources() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for dir in SOURCE_DIRS {
        files(&root().join(dir), &mut out);
    }
    out.retain(|p| p.extension().is_some_and(|e| e == "rs"));
    out
}

/// The source of module `dir/name`, if it is one.
fn module_file(dir: &Path, name: &str) -> Option<PathBuf> {
    [
        dir.join(format!("{name}.rs")),
        dir.join(name).join("mod.rs"),
    ]
    .into_iter()
    .find(|p| p.is_file())
}

/// Whether `item` is declared in `file` (or in a file of its folder: a `mod.rs`'s children).
fn declares(file: &Path, item: &str) -> bool {
    let kinds = [
        "fn", "struct", "enum", "trait", "type", "const", "static", "mod",
    ];
    let mut sources = vec![file.to_path_buf()];
    if file.ends_with("mod.rs") || file.ends_with("lib.rs") {
        files(file.parent().unwrap(), &mut sources);
    }
    sources.iter().any(|f| {
        let text = std::fs::read_to_string(f).unwrap_or_default();
        kinds.iter().any(|k| {
            text.contains(&format!("{k} {item}(")) || text.contains(&format!("{k} {item}<"))
                || text.contains(&format!("{k} {item} "))
                || text.contains(&format!("{k} {item}:"))
                || text.contains(&format!("{k} {item};"))
        }) || text.contains(&format!("pub {item}:")) // a field
            || text.contains(&format!("    {item},")) // an enum variant
            || text.contains(&format!("    {item}("))
            || text.contains(&format!("    {item} {{"))
    })
}

/// Resolves a module path (`a::b::C`) from `dir`: modules, then at most two items (a type
/// and its method or variant).
fn resolves_in(dir: &Path, segments: &[&str]) -> bool {
    let mut dir = dir.to_path_buf();
    // A crate's own items live in its root file.
    let mut file = ["lib.rs", "main.rs"]
        .iter()
        .map(|f| dir.join(f))
        .find(|f| f.is_file());
    for (i, s) in segments.iter().enumerate() {
        if let Some(f) = module_file(&dir, s) {
            dir = f.parent().unwrap().join(s);
            file = Some(f);
            continue;
        }
        let Some(f) = &file else { return false };
        // The rest are items: the first declared in the module, a second (a method or a
        // variant) anywhere in the same file.
        let rest = &segments[i..];
        return rest.len() <= 2
            && declares(f, rest[0])
            && rest.get(1).is_none_or(|m| declares(f, m));
    }
    true
}

/// Resolves a path ARCHITECTURE.md names: from a crate (`autoscaler::metrics`), from a module
/// of any crate (`collect::jobs`, `act::Moved`, nested modules found by their last segment's
/// folder), or from a type of ours (`ApiVersion::wire`: declared in some product file, its
/// item in that file or in a file implementing it). Anything else does not resolve: a path of
/// std or another crate has no business in backticks on this page.
fn resolves(path: &str) -> bool {
    let segments: Vec<&str> = path
        .trim_end_matches("()")
        .split("::")
        .filter(|s| !s.starts_with('<')) // a turbofish: `effects::<T>()`
        .collect();
    if let Some(dir) = crate_dir(segments[0]) {
        return resolves_in(&root().join(dir), &segments[1..]);
    }
    // A module of one of the crates, at its top or nested anywhere in it.
    let mut module_dirs: Vec<PathBuf> = SOURCE_DIRS.iter().map(|d| root().join(d)).collect();
    for dir in SOURCE_DIRS {
        let mut all = Vec::new();
        files(&root().join(dir), &mut all);
        module_dirs.extend(all.iter().filter_map(|f| f.parent().map(Path::to_path_buf)));
    }
    module_dirs.sort();
    module_dirs.dedup();
    if module_dirs
        .iter()
        .any(|d| module_file(d, segments[0]).is_some() && resolves_in(d, &segments))
    {
        return true;
    }
    // A type of ours and at most one item of it.
    let ty = segments[0];
    if !ty.starts_with(|c: char| c.is_ascii_uppercase()) || segments.len() > 2 {
        return false;
    }
    let sources = product_sources();
    let texts: Vec<(PathBuf, String)> = sources
        .iter()
        .map(|p| (p.clone(), std::fs::read_to_string(p).unwrap()))
        .collect();
    let declared = |t: &str| {
        ["struct", "enum", "trait", "type"].iter().any(|k| {
            t.contains(&format!("{k} {ty} "))
                || t.contains(&format!("{k} {ty}<"))
                || t.contains(&format!("{k} {ty};"))
                || t.contains(&format!("{k} {ty}:"))
                || t.contains(&format!("{k} {ty}("))
        })
    };
    let implements = |t: &str| {
        t.lines().any(|l| {
            let l = l.trim_start();
            l.starts_with("impl")
                && (l.contains(&format!(" {ty} ")) || l.contains(&format!(" {ty}<")))
        })
    };
    let homes: Vec<&PathBuf> = texts
        .iter()
        .filter(|(_, t)| declared(t) || implements(t))
        .map(|(p, _)| p)
        .collect();
    texts.iter().any(|(_, t)| declared(t))
        && segments
            .get(1)
            .is_none_or(|item| homes.iter().any(|f| declares(f, item)))
}

/// The methods a trait of ours declares (its `fn` lines at the trait's own indent + 4).
fn trait_methods(path: &str) -> Option<Vec<String>> {
    let name = path.rsplit("::").next()?;
    for file in product_sources() {
        let text = std::fs::read_to_string(&file).unwrap();
        let Some(start) = text.find(&format!("pub trait {name}")) else {
            continue;
        };
        let body = &text[start..];
        let end = body.find("\n}\n")?;
        return Some(
            body[..end]
                .lines()
                .filter_map(|l| {
                    let l = l.strip_prefix("    ")?;
                    let l = l.strip_prefix("async ").unwrap_or(l);
                    let name = l.strip_prefix("fn ")?.split(['(', '<']).next()?;
                    Some(name.to_string())
                })
                .collect(),
        );
    }
    None
}

/// The seam's traits as ARCHITECTURE.md lists them, `` `trait` (`method` …, `method`) ``,
/// against the traits' own methods: a method added to a trait and not to the page (or the
/// other way round) fails.
fn seam_lists_disagree(text: &str) -> Vec<String> {
    let mut wrong = Vec::new();
    let seam = text
        .split("**The seam.**")
        .nth(1)
        .and_then(|t| t.split("\n\n").next())
        .expect("ARCHITECTURE.md has a paragraph on the seam");
    let mut listed = 0;
    for (i, part) in seam.split('`').enumerate() {
        if i % 2 == 0 || !part.contains("::") {
            continue;
        }
        let after: String = seam.split('`').skip(i + 1).collect::<Vec<_>>().join("`");
        let Some(list) = after.strip_prefix(" (") else {
            continue;
        };
        let list = &list[..list.find(')').unwrap_or(list.len())];
        let mut named: Vec<String> = list
            .split('`')
            .enumerate()
            .filter(|(j, _)| j % 2 == 1)
            .map(|(_, m)| m.to_string())
            .collect();
        let Some(mut methods) = trait_methods(part) else {
            wrong.push(format!("{part}: no such trait"));
            continue;
        };
        listed += 1;
        named.sort();
        methods.sort();
        if named != methods {
            wrong.push(format!(
                "{part}: the page lists {named:?}, the trait has {methods:?}"
            ));
        }
    }
    if listed < 3 {
        wrong.push(format!(
            "the seam paragraph lists the methods of {listed} traits, not 3"
        ));
    }
    wrong
}

/// ARCHITECTURE.md is a map a newcomer follows: every file, folder and module path it names
/// exists, and every item it names is declared where it says.
#[test]
fn every_path_the_architecture_page_names_exists() {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let (mut missing, mut resolved) = (Vec::new(), 0);
    for (i, part) in text.split('`').enumerate() {
        if i % 2 == 0 {
            continue; // outside backticks
        }
        let word = part.trim();
        if word.contains(' ') || word.is_empty() {
            continue;
        }
        if word.contains("::") {
            if resolves(word) {
                resolved += 1;
            } else {
                missing.push(word.to_string());
            }
        } else if (word.ends_with(".rs") || word.ends_with('/') || word.ends_with(".md"))
            && word.contains('/')
            && !word.starts_with('/') // a REST path
            && !word.contains('*')
            && !word.contains("NN")
            // From the repository's root, or from a crate's sources.
            && !["", "exporter/src/", "autoscaler/src/", "sim/src/", "src/"]
                .iter()
                .any(|dir| root().join(dir).join(word).exists())
        {
            missing.push(word.to_string());
        }
    }
    // The file names of the code block ("Rooms") are relative to their folder: check those too.
    let rooms = text
        .split("## Rooms")
        .nth(1)
        .and_then(|t| t.split("```").nth(1))
        .expect("ARCHITECTURE.md has a Rooms block");
    let mut parent = String::new();
    for line in rooms.lines() {
        let top = !line.starts_with(' ');
        let first = line.split_whitespace().next().unwrap_or("");
        if top && first.ends_with('/') && !first.contains('*') {
            parent = first.to_string();
            if !root().join(first).is_dir() {
                missing.push(first.to_string());
            }
        } else if line.starts_with("  ") && !line.starts_with("   ") {
            let name = first.trim_end_matches(',');
            let path = if parent == "sim/" || parent == "exporter/" || parent == "autoscaler/" {
                format!("{parent}src/{name}")
            } else {
                format!("{parent}{name}")
            };
            if (name.ends_with(".rs") || name.ends_with('/')) && !root().join(&path).exists() {
                missing.push(path);
            }
        }
    }
    missing.extend(seam_lists_disagree(&text));
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names what is not there: {missing:?}"
    );
    // The page is a map only while it names things: the paths it resolves do not fall.
    assert!(
        resolved >= RESOLVED_AT_LEAST,
        "ARCHITECTURE.md resolves {resolved} paths, fewer than {RESOLVED_AT_LEAST}"
    );
}

/// What the page resolved when the check became strict; raise it as the page grows.
const RESOLVED_AT_LEAST: usize = 61;

/// The resolver refuses what is not ours or not there, and finds what is, however it is named.
#[test]
fn the_architecture_resolver_can_fail() {
    for good in [
        "collect::jobs",
        "act::MARKS_SETTLE",
        "ApiVersion::wire",
        "Plan::effects::<T>()",
        "autoscaler::metrics",
        "model::Node::busy",
        "sim::Policy",
    ] {
        assert!(resolves(good), "{good} should resolve");
    }
    for bad in [
        "std::sync::Arc",
        "collect::nothing",
        "ApiVersion::no_such_method",
        "NoSuchType::new",
        "act::Moved::a::b",
    ] {
        assert!(!resolves(bad), "{bad} should not resolve");
    }
    let seam = "**The seam.** `actuator::Kubernetes` (`read`, `scale`) and more\n\n";
    assert!(!seam_lists_disagree(seam).is_empty());
}

/// The product's lines of a source file: its test items (`#[cfg(test)]` modules, functions
/// and impls) blanked, found by the item they mark, wherever they sit in the file. Files that
/// are test modules themselves (declared `#[cfg(test)] mod x;`) are left out by the caller.
fn product_lines(text: &str) -> Vec<&str> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::with_capacity(lines.len());
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if line.trim_start() != "#[cfg(test)]" {
            out.push(line);
            i += 1;
            continue;
        }
        let indent = &line[..line.len() - line.trim_start().len()];
        let close = format!("{indent}}}");
        // The marked item: one line ending `;`, or up to its closing brace at the same indent.
        let mut j = i + 1;
        if !lines.get(j).is_some_and(|l| l.ends_with(';')) {
            while j < lines.len() && lines[j] != close {
                j += 1;
            }
        }
        out.extend(std::iter::repeat_n("", j + 1 - i));
        i = j + 1;
    }
    out
}

/// Source files that are test modules: declared `#[cfg(test)] mod x;` by their parent.
fn test_module_files(sources: &[PathBuf]) -> std::collections::BTreeSet<PathBuf> {
    let mut out = std::collections::BTreeSet::new();
    for path in sources {
        let text = std::fs::read_to_string(path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let stem = path.file_stem().unwrap().to_string_lossy();
        let dir = if ["mod", "lib", "main"].contains(&stem.as_ref()) {
            path.parent().unwrap().to_path_buf()
        } else {
            path.with_extension("")
        };
        for pair in lines.windows(2) {
            if pair[0].trim() != "#[cfg(test)]" {
                continue;
            }
            let decl = pair[1].trim();
            let name = decl
                .trim_start_matches("pub(crate) ")
                .trim_start_matches("pub(super) ")
                .strip_prefix("mod ")
                .and_then(|r| r.strip_suffix(';'));
            if let Some(name) = name {
                out.extend(module_file(&dir, name));
                // A test module that is a folder: everything in it is tests.
                let folder = dir.join(name);
                if folder.is_dir() {
                    let mut inside = Vec::new();
                    files(&folder, &mut inside);
                    out.extend(inside);
                }
            }
        }
    }
    out
}

/// A function of the product's code: where it is, its name and its lines (test items left
/// out), found by its `fn` line and the closing brace at the same indent.
struct Function {
    file: PathBuf,
    line: usize,
    name: String,
    body: Vec<String>,
}

impl Function {
    fn at(&self) -> String {
        let rel = self.file.strip_prefix(root()).unwrap();
        format!("{}:{} {}", rel.display(), self.line, self.name)
    }

    fn has(&self, text: &str) -> bool {
        self.body.iter().any(|l| l.contains(text))
    }
}

/// Every function with a body in the product sources under `dirs`.
fn product_functions(dirs: &[&str]) -> Vec<Function> {
    let mut sources = Vec::new();
    for dir in dirs {
        files(&root().join(dir), &mut sources);
    }
    sources.retain(|p| p.extension().is_some_and(|e| e == "rs"));
    let tests = test_module_files(&sources);
    let mut out = Vec::new();
    for path in sources.iter().filter(|p| !tests.contains(*p)) {
        let text = std::fs::read_to_string(path).unwrap();
        let lines = product_lines(&text);
        for (i, line) in lines.iter().enumerate() {
            let body = line.trim_start();
            let indent = &line[..line.len() - body.len()];
            let name = [
                "pub fn ",
                "pub(crate) fn ",
                "pub(super) fn ",
                "fn ",
                "pub async fn ",
                "pub(crate) async fn ",
                "async fn ",
            ]
            .iter()
            .find_map(|p| body.strip_prefix(p))
            .and_then(|rest| rest.split(['(', '<']).next());
            let Some(name) = name else { continue };
            let close = format!("{indent}}}");
            let Some(len) = lines[i..].iter().position(|l| *l == close) else {
                continue; // a declaration without a body
            };
            out.push(Function {
                file: path.clone(),
                line: i + 1,
                name: name.to_string(),
                body: lines[i..=i + len].iter().map(|l| l.to_string()).collect(),
            });
        }
    }
    out
}

/// No function of the product's code is longer than 100 lines: a longer one is a sign it
/// does several things a reader would rather find apart. Every product line counts; a file's
/// tests are found by the module (or item) `#[cfg(test)]` marks, not by where the first mark sits.
#[test]
fn no_function_is_longer_than_a_hundred_lines() {
    let mut sources = Vec::new();
    for dir in SOURCE_DIRS {
        files(&root().join(dir), &mut sources);
    }
    sources.retain(|p| p.extension().is_some_and(|e| e == "rs"));
    let tests = test_module_files(&sources);
    assert!(
        tests.iter().any(|p| p.ends_with("metrics/fixtures.rs"))
            && tests
                .iter()
                .any(|p| p.ends_with("collect/jobs/tests/long.rs")),
        "the test-module finder sees the metric fixtures and the job list's test folder: {tests:?}"
    );
    let long: Vec<String> = product_functions(&SOURCE_DIRS)
        .iter()
        .filter(|f| f.body.len() > 100)
        .map(|f| format!("{} ({} lines)", f.at(), f.body.len()))
        .collect();
    assert!(long.is_empty(), "functions over 100 lines: {long:?}");
}

/// No source file of the product holds more than 1,000 product lines (its tests apart): past
/// that, a file is several rooms under one name.
#[test]
fn no_source_file_is_longer_than_a_thousand_product_lines() {
    let mut sources = Vec::new();
    for dir in SOURCE_DIRS {
        files(&root().join(dir), &mut sources);
    }
    sources.retain(|p| p.extension().is_some_and(|e| e == "rs"));
    let tests = test_module_files(&sources);
    let mut long = Vec::new();
    for path in sources.iter().filter(|p| !tests.contains(*p)) {
        let text = std::fs::read_to_string(path).unwrap();
        let lines = product_lines(&text);
        // Blanked test items are not product lines; the file's own blank lines are.
        let blanked = lines.iter().filter(|l| l.is_empty()).count()
            - text.lines().filter(|l| l.is_empty()).count();
        let n = lines.len() - blanked;
        if n > 1000 {
            let rel = path.strip_prefix(root()).unwrap();
            long.push(format!("{} ({n} lines)", rel.display()));
        }
    }
    assert!(long.is_empty(), "files over 1,000 product lines: {long:?}");
}

/// Where a function of the simulated world or the binary is, for the one-of-each test.
fn places(functions: &[Function], what: impl Fn(&Function) -> bool) -> Vec<String> {
    functions
        .iter()
        .filter(|f| what(f))
        .map(|f| {
            let rel = f.file.strip_prefix(root()).unwrap();
            format!("{} {}", rel.display(), f.name)
        })
        .collect()
}

/// Whether `f` makes a `ty` by a struct literal (`Jobs {`, not `PendingJobs {` nor a return
/// type `-> Jobs {`).
fn literal(f: &Function, ty: &str) -> bool {
    let pat = format!("{ty} {{");
    f.body.iter().filter(|l| !l.contains("->")).any(|l| {
        l.match_indices(&pat).any(|(i, _)| {
            !l[..i]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_alphanumeric() || c == '_')
        })
    })
}

/// The simulated world has one of each of what its runs share, so that a change to the
/// controller's inputs or writes, to slurm-operator or to slurmrestd's answers is made once:
/// one driver (the function that runs the real controller on the in-memory seam and takes
/// its writes), one scale-in order (slurm-operator's ranking of a NodeSet's pods), and one
/// room that builds /jobs answers (sim's view.rs, its planned starts from one function). The
/// demo, the single-partition replay and the shared pool each had their own driver and
/// scale-in order; a second copy of either fails here.
#[test]
fn the_simulated_world_has_one_driver_one_scale_in_order_and_one_jobs_builder() {
    let functions = product_functions(&["sim/src", "src"]);
    assert!(
        functions.len() > 300,
        "functions found: {}",
        functions.len()
    );
    // The driver: the only function that reconciles on the fake and takes its writes.
    let runs = places(&functions, |f| f.has("reconcile_all("));
    let takes = places(&functions, |f| f.has("take_writes("));
    assert_eq!(
        runs,
        ["sim/src/driver.rs run"],
        "functions running the controller"
    );
    assert_eq!(takes, runs, "functions taking the controller's writes");
    // The scale-in order: the only function that orders a NodeSet's pods for deletion is
    // slurm-operator's; no function that removes pods or nodes orders anything itself.
    let orders = |f: &Function| {
        [".sort", "select_nth", ".min_by", ".max_by"]
            .iter()
            .any(|o| f.has(o))
    };
    let removes = |f: &Function| {
        [
            "remove_pod(",
            ".retire(",
            "power_off(",
            "draining = true",
            "leaving.insert(",
        ]
        .iter()
        .any(|r| f.has(r))
    };
    let ranking = places(&functions, |f| {
        orders(f) && (removes(f) || f.file.ends_with("sim/src/operator.rs"))
    });
    assert_eq!(ranking, ["sim/src/operator.rs condemn"], "scale-in orders");
    let worlds = places(&functions, |f| f.has("operator::condemn("));
    assert_eq!(worlds.len(), 3, "the worlds that scale in: {worlds:?}");
    // /jobs: answers built in view.rs only, each pending job's plan by one function.
    let builders = places(&functions, |f| {
        f.has("JobsBuilder::new(") || literal(f, "Jobs") || literal(f, "PendingJob")
    });
    assert!(
        !builders.is_empty() && builders.iter().all(|b| b.starts_with("sim/src/view.rs ")),
        "functions building /jobs: {builders:?}"
    );
    let plans = places(&functions, |f| literal(f, "PlannedStart"));
    assert_eq!(
        plans,
        ["sim/src/view.rs plan_of"],
        "functions making a planned start"
    );
}

/// The product-line finder blanks test items wherever they sit and keeps what follows them.
#[test]
fn product_lines_skip_test_items_only() {
    let text = "fn a() {}\n#[cfg(test)]\nmod fixtures;\nfn b() {\n}\n#[cfg(test)]\nmod tests {\n    fn t() {}\n}\nfn c() {}\n";
    let kept: Vec<&str> = product_lines(text)
        .into_iter()
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(kept, ["fn a() {}", "fn b() {", "}", "fn c() {}"]);
}

/// The module a `use` path names, as a source file: `crate::a::b::C` from the crate's root,
/// `super::x` from the file's parent module, `self::x` from the file itself; the deepest
/// module that has a file.
fn used_file(from: &Path, crate_root: &Path, path: &str) -> Option<PathBuf> {
    let module_dir = |f: &Path| -> PathBuf {
        let stem = f.file_stem().unwrap().to_string_lossy();
        if ["mod", "lib", "main"].contains(&stem.as_ref()) {
            f.parent().unwrap().to_path_buf()
        } else {
            f.with_extension("")
        }
    };
    let mut segments = path.split("::");
    let mut dir = match segments.next()? {
        "crate" => crate_root.to_path_buf(),
        "self" => module_dir(from),
        "super" => {
            let own = module_dir(from);
            let mut d = own.parent()?.to_path_buf();
            for s in segments.clone().take_while(|s| *s == "super") {
                let _ = s;
                d = d.parent()?.to_path_buf();
            }
            d
        }
        _ => return None,
    };
    let mut found = None;
    for s in segments.filter(|s| *s != "super") {
        let s = s.trim_start_matches('{');
        match module_file(&dir, s) {
            Some(f) => {
                dir = f.with_extension("");
                if f.ends_with("mod.rs") {
                    dir = f.parent().unwrap().to_path_buf();
                }
                found = Some(f);
            }
            None => break,
        }
    }
    found
}

/// A source file's module path inside its crate: `controller/plan/pool.rs` is
/// `[controller, plan, pool]`, a `mod.rs` its folder's, the crate root `[]`.
fn module_path(crate_root: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(crate_root).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .iter()
        .map(|s| s.to_string_lossy().into_owned())
        .collect();
    if parts
        .last()
        .is_some_and(|l| ["mod", "lib", "main"].contains(&l.as_str()))
    {
        parts.pop();
    }
    parts
}

/// No two modules import each other, directly or round a longer circle: a module that both
/// uses and is used by another is one room in two places, or a layer turned upside down.
/// Modules are compared as siblings: an import from `a::x` of `b::y` is `a` using `b` where
/// `a` and `b` share a parent. A module's own ancestors (the crate root, each crate's face, and
/// the parents that hold it) are not counted: every module may name them.
#[test]
fn no_module_imports_form_a_circle() {
    use std::collections::{BTreeMap, BTreeSet};
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for dir in SOURCE_DIRS {
        let crate_root = root().join(dir);
        let mut sources = Vec::new();
        files(&crate_root, &mut sources);
        sources.retain(|p| p.extension().is_some_and(|e| e == "rs"));
        let tests = test_module_files(&sources);
        for file in sources.iter().filter(|p| !tests.contains(*p)) {
            let from = module_path(&crate_root, file);
            let text = std::fs::read_to_string(file).unwrap();
            for line in product_lines(&text) {
                let Some(rest) = line.trim_start().strip_prefix("use ") else {
                    continue;
                };
                let rest = rest.trim_start_matches("pub ").trim_end_matches(';');
                let Some(to) = used_file(file, &crate_root, rest) else {
                    continue;
                };
                let to = module_path(&crate_root, &to);
                let shared = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
                if shared == from.len() || shared == to.len() {
                    continue; // the same module, or one holds the other
                }
                let name = |m: &[String]| format!("{dir}:{}", m[..=shared].join("::"));
                edges.entry(name(&from)).or_default().insert(name(&to));
            }
        }
    }
    fn visit(
        n: &String,
        edges: &BTreeMap<String, BTreeSet<String>>,
        stack: &mut Vec<String>,
        done: &mut BTreeSet<String>,
        circles: &mut Vec<String>,
    ) {
        if done.contains(n) {
            return;
        }
        if let Some(i) = stack.iter().position(|s| s == n) {
            let round: Vec<&str> = stack[i..].iter().chain([n]).map(String::as_str).collect();
            circles.push(round.join(" → "));
            return;
        }
        stack.push(n.clone());
        for m in edges.get(n).into_iter().flatten() {
            visit(m, edges, stack, done, circles);
        }
        stack.pop();
        done.insert(n.clone());
    }
    let (mut done, mut circles) = (BTreeSet::new(), Vec::new());
    for n in edges.keys() {
        visit(n, &edges, &mut Vec::new(), &mut done, &mut circles);
    }
    assert!(
        edges.len() > 40,
        "the import reader finds the modules' imports ({} modules)",
        edges.len()
    );
    assert!(circles.is_empty(), "imports that go round: {circles:#?}");
}

/// A policy is one room and one registration: outside its room, the production code names
/// the slurm-planned policy only where the spec picks it (`controller/plan/mod.rs`) and in
/// the CRD that selects it (`crd.rs`). Tests, and the simulated world's replay row (sim, and
/// the command line that offers the rows, `src/cli.rs`), may name it.
#[test]
fn the_slurm_planned_policy_is_named_only_in_its_room_its_registration_and_the_crd() {
    let allowed = [
        "autoscaler/src/controller/plan/planned/",
        "autoscaler/src/controller/plan/mod.rs",
        "autoscaler/src/crd.rs",
        "src/cli.rs",
    ];
    let names = [
        "slurm-planned",
        "slurm_planned",
        "slurmplanned",
        "slurm planned",
        "followslurm",
    ];
    let mut sources = Vec::new();
    for dir in ["exporter/src", "autoscaler/src", "src"] {
        files(&root().join(dir), &mut sources);
    }
    sources.retain(|p| p.extension().is_some_and(|e| e == "rs"));
    let tests = test_module_files(&sources);
    let mut outside = Vec::new();
    for path in sources.iter().filter(|p| !tests.contains(*p)) {
        let rel = path
            .strip_prefix(root())
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if allowed.iter().any(|a| rel.starts_with(a)) {
            continue;
        }
        let text = std::fs::read_to_string(path).unwrap();
        for (i, line) in product_lines(&text).iter().enumerate() {
            let lower = line.to_lowercase();
            if names.iter().any(|n| lower.contains(n)) {
                outside.push(format!("{rel}:{}", i + 1));
            }
        }
    }
    assert!(
        outside.is_empty(),
        "the slurm-planned policy named outside its room: {outside:?}"
    );
}
