//! What wraps every answer, whatever the version: `meta`, `errors[]`, `warnings[]` and the
//! payload under its key, read in any order ([`decode_envelope`]), with a payload that may be
//! aggregated while it is parsed ([`EachSeed`]).

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::Deserialize;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};

use super::lenient::{EachSeed, Lenient, List, Num, Str};

/// An entry of `errors[]` or `warnings[]`. Field names differ slightly between versions.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Message {
    pub error: Option<String>,
    pub error_number: Option<i64>,
    pub description: Option<String>,
    pub source: Option<String>,
}

impl<'de> Deserialize<'de> for Message {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Default, Deserialize)]
        #[serde(default)]
        struct Raw<'a> {
            #[serde(borrow)]
            error: Str<'a>,
            #[serde(alias = "errno")]
            error_number: Num,
            #[serde(borrow)]
            description: Str<'a>,
            #[serde(borrow)]
            source: Str<'a>,
        }
        let Lenient(raw) = Lenient::<Raw>::deserialize(d)?;
        let text = |s: Str| Some(s.0.into_owned()).filter(|s| !s.is_empty());
        Ok(Message {
            error: text(raw.error),
            error_number: raw.error_number.0,
            description: text(raw.description),
            source: text(raw.source),
        })
    }
}

impl fmt::Display for Message {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let text = [self.description.as_deref(), self.error.as_deref()]
            .into_iter()
            .flatten()
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join(": ");
        f.write_str(if text.is_empty() {
            "unspecified error"
        } else {
            &text
        })?;
        if let Some(n) = self.error_number {
            write!(f, " (error {n})")?;
        }
        if let Some(src) = self.source.as_deref().filter(|s| !s.is_empty()) {
            write!(f, " in {src}")?;
        }
        Ok(())
    }
}

/// The `meta` object. v0.0.38 says `Slurm` with numeric versions, v0.0.40+ `slurm` with
/// string versions; only the release string is kept.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Meta {
    pub release: Option<String>,
}

impl<'de> Deserialize<'de> for Meta {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Default, Deserialize)]
        #[serde(default)]
        struct Slurm<'a> {
            #[serde(borrow)]
            release: Str<'a>,
        }
        #[derive(Default, Deserialize)]
        #[serde(default)]
        struct Raw<'a> {
            #[serde(alias = "Slurm", borrow)]
            slurm: Lenient<Slurm<'a>>,
        }
        let Lenient(raw) = Lenient::<Raw>::deserialize(d)?;
        let release = raw.slurm.0.release.0.into_owned();
        Ok(Meta {
            release: (!release.is_empty()).then_some(release),
        })
    }
}

/// A decoded answer: the data plus everything the envelope said about it. The client only
/// accepts the data when the status is 2xx and `errors` is empty.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Decoded<T> {
    pub data: T,
    pub errors: Vec<Message>,
    pub warnings: Vec<Message>,
    pub release: Option<String>,
    /// slurmctld's last change time (`last_update`), when the answer carries one.
    pub last_update: Option<i64>,
    /// False when the data key was absent: the answer said nothing about the data.
    pub data_present: bool,
}

/// Decodes an answer object whose payload sits under `key`, feeding it to `seed` (which may
/// aggregate while parsing). Envelope fields are read whatever their order.
pub fn decode_envelope<'de, S>(
    bytes: &'de [u8],
    key: &'static str,
    seed: S,
) -> serde_json::Result<Decoded<S::Value>>
where
    S: DeserializeSeed<'de>,
    S::Value: Default,
{
    struct EnvelopeVisitor<S> {
        key: &'static str,
        seed: S,
    }
    impl<'de, S> Visitor<'de> for EnvelopeVisitor<S>
    where
        S: DeserializeSeed<'de>,
        S::Value: Default,
    {
        type Value = Decoded<S::Value>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            write!(f, "a slurmrestd answer with `{}`", self.key)
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut out = Decoded::<S::Value>::default();
            let mut seed = Some(self.seed);
            while let Some(k) = map.next_key::<Cow<'de, str>>()? {
                match &*k {
                    k if k == self.key => match seed.take() {
                        Some(s) => {
                            out.data = map.next_value_seed(s)?;
                            out.data_present = true;
                        }
                        None => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    },
                    "errors" => out.errors = map.next_value::<List<Message>>()?.0,
                    "warnings" => out.warnings = map.next_value::<List<Message>>()?.0,
                    "meta" => out.release = map.next_value::<Meta>()?.release,
                    "last_update" => {
                        out.last_update = map.next_value::<Num>()?.0.filter(|t| *t > 0)
                    }
                    _ => {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
            }
            Ok(out)
        }
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let out = de.deserialize_map(EnvelopeVisitor { key, seed })?;
    de.end()?;
    Ok(out)
}

/// Decodes `key` as a list of `W`, converting each element with `convert`.
pub fn decode_list<'de, W, T>(
    bytes: &'de [u8],
    key: &'static str,
    mut convert: impl FnMut(W) -> Option<T>,
) -> serde_json::Result<Decoded<Vec<T>>>
where
    W: Deserialize<'de> + Default,
{
    let mut items = Vec::new();
    let decoded = decode_envelope(
        bytes,
        key,
        EachSeed::new(|w: Lenient<W>| items.extend(convert(w.0))),
    )?;
    Ok(decoded.map(|()| items))
}

/// Decodes an answer whose payload under `key` is one object `W`.
pub fn decode_object<'de, W>(bytes: &'de [u8], key: &'static str) -> serde_json::Result<Decoded<W>>
where
    W: Deserialize<'de> + Default,
{
    Ok(decode_envelope(bytes, key, PhantomData::<W>)?.map(|w| w))
}

impl<T> Decoded<T> {
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Decoded<U> {
        Decoded {
            data: f(self.data),
            errors: self.errors,
            warnings: self.warnings,
            release: self.release,
            last_update: self.last_update,
            data_present: self.data_present,
        }
    }
}

/// The `errors[]` of any answer (e.g. a 500), or nothing when the body is not JSON.
pub fn decode_errors(bytes: &[u8]) -> Vec<Message> {
    decode_envelope(bytes, "errors-only", PhantomData::<IgnoredAny>)
        .map(|d| d.errors)
        .unwrap_or_default()
}

/// One line summarising messages for logs and errors.
pub fn describe(messages: &[Message]) -> String {
    let mut parts: Vec<String> = messages.iter().take(3).map(ToString::to_string).collect();
    if messages.len() > 3 {
        parts.push(format!("and {} more", messages.len() - 3));
    }
    parts.join("; ")
}
