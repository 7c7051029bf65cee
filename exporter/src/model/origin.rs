//! Where a job comes from: a batch job, or a placeholder that Kubernetes pods were
//! scheduled through. Slinky's slurm-bridge submits one placeholder per pod group, with an
//! admin comment `{"pods":["namespace/name", ...]}` (and, from API v0.0.43, the
//! `EXTERNAL_JOB` flag); CoreWeave's SUNK and home-grown bridges leave no public mark, so a
//! site says how to recognise theirs with [`OriginRules`] (`comment:sunk-*`,
//! `account:k8s`...). Recognising never fails: what does not match is a batch job, and an
//! admin comment that looks like JSON but is not a pod list is counted as malformed.

use std::fmt;
use std::str::FromStr;

use serde::Deserialize;

use super::record::JobRecord;

#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Deserialize,
    serde::Serialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Origin {
    Batch,
    Kubernetes,
}

impl Origin {
    pub const ALL: [Origin; 2] = [Self::Batch, Self::Kubernetes];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Batch => "batch",
            Self::Kubernetes => "kubernetes",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Origin {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "batch" => Ok(Self::Batch),
            "kubernetes" => Ok(Self::Kubernetes),
            other => Err(format!(
                "unknown job origin {other:?} (batch or kubernetes)"
            )),
        }
    }
}

/// The job field a site rule looks at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    Comment,
    AdminComment,
    Name,
    Wckey,
    Account,
    McsLabel,
}

/// `FIELD:PATTERN`: a job whose field matches the pattern (`*` matches anything, case
/// counts) is Kubernetes work. `comment:sunk-pod*`, `account:kubernetes`, `name:k8s-*`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    pub field: Field,
    pub pattern: String,
}

impl FromStr for Rule {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (field, pattern) = s
            .split_once(':')
            .ok_or_else(|| format!("{s:?}: a rule is FIELD:PATTERN, e.g. comment:sunk-*"))?;
        let field = match field.trim().to_ascii_lowercase().replace('-', "_").as_str() {
            "comment" => Field::Comment,
            "admin_comment" => Field::AdminComment,
            "name" => Field::Name,
            "wckey" => Field::Wckey,
            "account" => Field::Account,
            "mcs_label" => Field::McsLabel,
            other => {
                return Err(format!(
                    "{other:?}: the field is one of comment, admin_comment, name, wckey, account, mcs_label"
                ));
            }
        };
        if pattern.is_empty() {
            return Err(format!("{s:?}: the pattern is empty"));
        }
        Ok(Self {
            field,
            pattern: pattern.to_string(),
        })
    }
}

impl Rule {
    fn matches(&self, r: &JobRecord<'_>) -> bool {
        let value = match self.field {
            Field::Comment => r.comment,
            Field::AdminComment => r.admin_comment,
            Field::Name => r.name,
            Field::Wckey => r.wckey,
            Field::Account => r.account,
            Field::McsLabel => r.mcs_label,
        };
        glob(&self.pattern, value)
    }
}

/// A site's rules, beside the built-in recognition of slurm-bridge.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OriginRules(pub Vec<Rule>);

/// What a job is, and how many pods it stands for (0 when not told).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Classified {
    pub kubernetes: bool,
    pub pods: u64,
    /// An admin comment that looked like a pod list but was not one.
    pub malformed: bool,
}

impl Classified {
    pub fn origin(&self) -> Origin {
        if self.kubernetes {
            Origin::Kubernetes
        } else {
            Origin::Batch
        }
    }
}

#[derive(Deserialize)]
struct BridgeComment {
    pods: Vec<String>,
}

impl OriginRules {
    pub fn classify(&self, r: &JobRecord<'_>) -> Classified {
        let mut c = Classified::default();
        let admin = r.admin_comment.trim();
        if admin.starts_with('{') {
            match serde_json::from_str::<BridgeComment>(admin) {
                Ok(b) if !b.pods.is_empty() && b.pods.iter().all(|p| is_pod_name(p)) => {
                    c.kubernetes = true;
                    c.pods = b.pods.len() as u64;
                    return c;
                }
                _ => c.malformed = true,
            }
        }
        c.kubernetes = r.external || self.0.iter().any(|rule| rule.matches(r));
        c
    }
}

/// `namespace/name`, both non-empty.
fn is_pod_name(s: &str) -> bool {
    s.split_once('/')
        .is_some_and(|(ns, name)| !ns.is_empty() && !name.is_empty() && !name.contains('/'))
}

/// `*` matches any run of characters; everything else itself.
fn glob(pattern: &str, value: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = value.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for p in middle {
        match rest.find(p) {
            Some(i) => rest = &rest[i + p.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job<'a>(admin: &'a str, comment: &'a str) -> JobRecord<'a> {
        JobRecord {
            admin_comment: admin,
            comment,
            ..Default::default()
        }
    }

    #[test]
    fn slurm_bridge_placeholders_are_kubernetes_with_their_pods() {
        let rules = OriginRules::default();
        let c = rules.classify(&job(r#"{"pods":["default/web-0","default/web-1"]}"#, ""));
        assert_eq!(
            (c.origin(), c.pods, c.malformed),
            (Origin::Kubernetes, 2, false)
        );
        // The flag alone (v0.0.43 on) says so too, without a pod count.
        let c = rules.classify(&JobRecord {
            external: true,
            ..Default::default()
        });
        assert_eq!((c.origin(), c.pods), (Origin::Kubernetes, 0));
        assert_eq!(rules.classify(&job("", "")).origin(), Origin::Batch);
        assert_eq!(
            rules.classify(&job("ticket 4711", "")).origin(),
            Origin::Batch
        );
    }

    #[test]
    fn a_garbage_admin_comment_is_a_batch_job_counted_as_malformed() {
        let rules = OriginRules::default();
        for garbage in [
            "{not json",
            r#"{"pods":[]}"#,
            r#"{"pods":["no-namespace"]}"#,
            r#"{"pods":"default/a"}"#,
            "{}",
        ] {
            let c = rules.classify(&job(garbage, ""));
            assert_eq!(
                (c.origin(), c.malformed),
                (Origin::Batch, true),
                "{garbage}"
            );
        }
    }

    #[test]
    fn site_rules_recognise_other_bridges() {
        let rules = OriginRules(vec![
            "comment:sunk-pod*".parse().unwrap(),
            "account:k8s".parse().unwrap(),
        ]);
        assert!(rules.classify(&job("", "sunk-pod-ns/a")).kubernetes);
        assert!(!rules.classify(&job("", "a sunk-pod")).kubernetes);
        let acct = JobRecord {
            account: "k8s",
            ..Default::default()
        };
        assert!(rules.classify(&acct).kubernetes);
        assert!("colour:red".parse::<Rule>().is_err());
        assert!("comment".parse::<Rule>().is_err());
        assert!("comment:".parse::<Rule>().is_err());
    }

    #[test]
    fn glob_matches_stars_anywhere() {
        assert!(glob("a*", "abc"));
        assert!(glob("*c", "abc"));
        assert!(glob("a*c", "abc"));
        assert!(glob("a*b*c", "axxbyyc"));
        assert!(glob("abc", "abc"));
        assert!(!glob("abc", "abcd"));
        assert!(!glob("a*d", "abc"));
        assert!(glob("*", ""));
    }
}
