//! The lenient scalars every version's structs are made of: a field that is missing, `null`,
//! of an unexpected type or an enum value never seen reads as a default instead of failing
//! the answer. Numbers may be plain or `{set, infinite, number}`, states a string or an
//! array, strings `null`; keys are matched as raw bytes ([`RawKey`], [`wire_struct!`]).

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// A map key as raw bytes: matching keys this way skips the UTF-8 validation serde's derived
/// field matching does, which is most of the cost of decoding a 100,000-job `/jobs`.
pub struct RawKey<'de>(pub Cow<'de, [u8]>);

impl<'de> Deserialize<'de> for RawKey<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawKey<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_bytes<E>(self, v: &'de [u8]) -> Result<RawKey<'de>, E> {
                Ok(RawKey(Cow::Borrowed(v)))
            }
            fn visit_bytes<E>(self, v: &[u8]) -> Result<RawKey<'de>, E> {
                Ok(RawKey(Cow::Owned(v.to_vec())))
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<RawKey<'de>, E> {
                Ok(RawKey(Cow::Borrowed(v.as_bytes())))
            }
            fn visit_str<E>(self, v: &str) -> Result<RawKey<'de>, E> {
                Ok(RawKey(Cow::Owned(v.as_bytes().to_vec())))
            }
        }
        d.deserialize_bytes(V)
    }
}

/// Length, first and last byte of a key: distinct for nearly all keys of one object.
pub const fn key_signature(k: &[u8]) -> u32 {
    match k {
        [] => 0,
        [first, .., last] => ((k.len() as u32) << 16) | ((*first as u32) << 8) | *last as u32,
        [only] => (1 << 16) | ((*only as u32) << 8) | *only as u32,
    }
}

/// Declares a wire struct whose fields are all lenient types, with a `Deserialize` that
/// matches raw key bytes, ignores unknown keys, keeps the last of duplicate keys, and reads
/// anything that is not an object as the default (a future Slurm may turn an object into a
/// string; that must not lose the rest of the answer). A field's JSON key is its name unless
/// given as `field = "json key": Type`.
macro_rules! wire_struct {
    (@key $field:ident) => { stringify!($field) };
    (@key $field:ident $key:literal) => { $key };
    (@not_a_map $name:ident) => {
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
            Ok($name::default())
        }
        fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> { Ok($name::default()) }
        fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> { Ok($name::default()) }
        fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> { Ok($name::default()) }
        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> { Ok($name::default()) }
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> { Ok($name::default()) }
        fn visit_unit<E>(self) -> Result<Self::Value, E> { Ok($name::default()) }
        fn visit_none<E>(self) -> Result<Self::Value, E> { Ok($name::default()) }
    };
    (@visit_map $name:ident, $($field:ident $(= $key:literal)?),*) => {
        fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            use $crate::slurm::wire::key_signature as sig;
            let mut out = $name::default();
            while let Some($crate::slurm::wire::RawKey(k)) = map.next_key()? {
                let k: &[u8] = &k;
                // Most keys are not ours: compare cheap signatures before bytes.
                let s = sig(k);
                $(
                    if s == const { sig(wire_struct!(@key $field $($key)?).as_bytes()) }
                        && k == wire_struct!(@key $field $($key)?).as_bytes()
                    {
                        out.$field = map.next_value()?;
                        continue;
                    }
                )*
                map.next_value::<serde::de::IgnoredAny>()?;
            }
            Ok(out)
        }
    };
    ($(#[$m:meta])* $vis:vis struct $name:ident<'a> { $($(#[$fm:meta])* $fvis:vis $field:ident $(= $key:literal)? : $ty:ty),* $(,)? }) => {
        $(#[$m])*
        #[derive(Default)]
        $vis struct $name<'a> { $($(#[$fm])* $fvis $field: $ty),* }

        impl<'de: 'a, 'a> serde::Deserialize<'de> for $name<'a> {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V<'a>(std::marker::PhantomData<&'a ()>);
                impl<'de: 'a, 'a> serde::de::Visitor<'de> for V<'a> {
                    type Value = $name<'a>;
                    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                        f.write_str(concat!("a ", stringify!($name), " object"))
                    }
                    wire_struct!(@visit_map $name, $($field $(= $key)?),*);
                    wire_struct!(@not_a_map $name);
                }
                d.deserialize_any(V(std::marker::PhantomData))
            }
        }
    };
    ($(#[$m:meta])* $vis:vis struct $name:ident { $($(#[$fm:meta])* $fvis:vis $field:ident $(= $key:literal)? : $ty:ty),* $(,)? }) => {
        $(#[$m])*
        #[derive(Default)]
        $vis struct $name { $($(#[$fm])* $fvis $field: $ty),* }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl<'de> serde::de::Visitor<'de> for V {
                    type Value = $name;
                    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                        f.write_str(concat!("a ", stringify!($name), " object"))
                    }
                    wire_struct!(@visit_map $name, $($field $(= $key)?),*);
                    wire_struct!(@not_a_map $name);
                }
                d.deserialize_any(V)
            }
        }
    };
}
pub(crate) use wire_struct;

/// The first word of a state that may be a string or an array (`"RUNNING"`,
/// `["RUNNING","COMPLETING"]`), without allocating.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FirstWord<'a>(pub Str<'a>);

impl<'de: 'a, 'a> Deserialize<'de> for FirstWord<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = FirstWord<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string or a list of strings")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<FirstWord<'a>, E> {
                Ok(FirstWord(Str(Cow::Borrowed(v))))
            }
            fn visit_str<E>(self, v: &str) -> Result<FirstWord<'a>, E> {
                Ok(FirstWord(Str(Cow::Owned(v.to_owned()))))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<FirstWord<'a>, A::Error> {
                let first = seq.next_element::<Str<'a>>()?.unwrap_or_default();
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(FirstWord(first))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<FirstWord<'a>, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(FirstWord::default())
            }
            fn visit_i64<E>(self, _: i64) -> Result<FirstWord<'a>, E> {
                Ok(FirstWord::default())
            }
            fn visit_u64<E>(self, _: u64) -> Result<FirstWord<'a>, E> {
                Ok(FirstWord::default())
            }
            fn visit_f64<E>(self, _: f64) -> Result<FirstWord<'a>, E> {
                Ok(FirstWord::default())
            }
            fn visit_bool<E>(self, _: bool) -> Result<FirstWord<'a>, E> {
                Ok(FirstWord::default())
            }
            fn visit_unit<E>(self) -> Result<FirstWord<'a>, E> {
                Ok(FirstWord::default())
            }
            fn visit_none<E>(self) -> Result<FirstWord<'a>, E> {
                Ok(FirstWord::default())
            }
        }
        d.deserialize_any(V(PhantomData))
    }
}

/// A number as any version sends it: plain, `null`, a numeric string, or the
/// `{set, infinite, number}` object of v0.0.40+. Unset and infinite read as `None`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Num(pub Option<i64>);

impl Num {
    /// The value when it is set and not negative (Slurm uses -1 and friends for "none").
    pub fn unsigned(self) -> Option<u64> {
        self.0.and_then(|v| u64::try_from(v).ok())
    }
}

impl<'de> Deserialize<'de> for Num {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Num;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a number, null or {set, infinite, number}")
            }
            fn visit_i64<E>(self, v: i64) -> Result<Num, E> {
                Ok(Num(Some(v)))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Num, E> {
                Ok(Num(Some(i64::try_from(v).unwrap_or(i64::MAX))))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Num, E> {
                Ok(Num(v.is_finite().then_some(v as i64)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Num, E> {
                Ok(Num(v.trim().parse().ok()))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Num, E> {
                Ok(Num(None))
            }
            fn visit_unit<E>(self) -> Result<Num, E> {
                Ok(Num(None))
            }
            fn visit_none<E>(self) -> Result<Num, E> {
                Ok(Num(None))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Num, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Num(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Num, A::Error> {
                let (mut set, mut infinite, mut number) = (true, false, None);
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    match &*key {
                        "set" => set = map.next_value::<Flag>()?.0,
                        "infinite" => infinite = map.next_value::<Flag>()?.0,
                        "number" => number = map.next_value::<Num>()?.0,
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(Num(if set && !infinite { number } else { None }))
            }
        }
        d.deserialize_any(V)
    }
}

/// A boolean that tolerates `null`, numbers and strings.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Flag(pub bool);

impl<'de> Deserialize<'de> for Flag {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Flag;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a boolean")
            }
            fn visit_bool<E>(self, v: bool) -> Result<Flag, E> {
                Ok(Flag(v))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Flag, E> {
                Ok(Flag(v != 0))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Flag, E> {
                Ok(Flag(v != 0))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Flag, E> {
                Ok(Flag(v != 0.0))
            }
            fn visit_str<E>(self, v: &str) -> Result<Flag, E> {
                Ok(Flag(v.eq_ignore_ascii_case("true") || v == "1"))
            }
            fn visit_unit<E>(self) -> Result<Flag, E> {
                Ok(Flag(false))
            }
            fn visit_none<E>(self) -> Result<Flag, E> {
                Ok(Flag(false))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Flag, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Flag(false))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Flag, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Flag(false))
            }
        }
        d.deserialize_any(V)
    }
}

/// A string that borrows from the response when it can; `null` or any non-string reads as "".
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Str<'a>(pub Cow<'a, str>);

impl<'a> Str<'a> {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Str<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Str<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Str<'a>, E> {
                Ok(Str(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Str<'a>, E> {
                Ok(Str(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> Result<Str<'a>, E> {
                Ok(Str(Cow::Owned(v)))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Str<'a>, E> {
                Ok(Str(Cow::Owned(v.to_string())))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Str<'a>, E> {
                Ok(Str(Cow::Owned(v.to_string())))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Str<'a>, E> {
                Ok(Str::default())
            }
            fn visit_bool<E>(self, _: bool) -> Result<Str<'a>, E> {
                Ok(Str::default())
            }
            fn visit_unit<E>(self) -> Result<Str<'a>, E> {
                Ok(Str::default())
            }
            fn visit_none<E>(self) -> Result<Str<'a>, E> {
                Ok(Str::default())
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Str<'a>, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Str::default())
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Str<'a>, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Str::default())
            }
        }
        d.deserialize_any(V(PhantomData))
    }
}

/// A list of words: a JSON array of strings, or one string (`"IDLE"`, `"MIXED+DRAIN"`, `"a,b"`
/// is kept whole), or `null`. Non-string items are skipped.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Words<'a>(pub Vec<Cow<'a, str>>);

impl<'a> Words<'a> {
    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|w| &**w)
    }
    pub fn first(&self) -> &str {
        self.0.first().map(|w| &**w).unwrap_or("")
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Words<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Words<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string or a list of strings")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Words<'a>, E> {
                Ok(Words(vec![Cow::Borrowed(v)]))
            }
            fn visit_str<E>(self, v: &str) -> Result<Words<'a>, E> {
                Ok(Words(vec![Cow::Owned(v.to_owned())]))
            }
            fn visit_unit<E>(self) -> Result<Words<'a>, E> {
                Ok(Words::default())
            }
            fn visit_none<E>(self) -> Result<Words<'a>, E> {
                Ok(Words::default())
            }
            fn visit_i64<E>(self, _: i64) -> Result<Words<'a>, E> {
                Ok(Words::default())
            }
            fn visit_u64<E>(self, _: u64) -> Result<Words<'a>, E> {
                Ok(Words::default())
            }
            fn visit_f64<E>(self, _: f64) -> Result<Words<'a>, E> {
                Ok(Words::default())
            }
            fn visit_bool<E>(self, _: bool) -> Result<Words<'a>, E> {
                Ok(Words::default())
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Words<'a>, A::Error> {
                let mut words = Vec::new();
                while let Some(s) = seq.next_element::<Str<'a>>()? {
                    if !s.0.is_empty() {
                        words.push(s.0);
                    }
                }
                Ok(Words(words))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Words<'a>, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Words::default())
            }
        }
        d.deserialize_any(V(PhantomData))
    }
}

/// A value that must be an object to be decoded as `T`; anything else (null, a string from a
/// future version) reads as `T::default()` instead of failing the whole answer.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Lenient<T>(pub T);

impl<'de, T: Deserialize<'de> + Default> Deserialize<'de> for Lenient<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de> + Default> Visitor<'de> for V<T> {
            type Value = Lenient<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Lenient<T>, A::Error> {
                T::deserialize(de::value::MapAccessDeserializer::new(map)).map(Lenient)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Lenient<T>, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Lenient(T::default()))
            }
            fn visit_str<E>(self, _: &str) -> Result<Lenient<T>, E> {
                Ok(Lenient(T::default()))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Lenient<T>, E> {
                Ok(Lenient(T::default()))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Lenient<T>, E> {
                Ok(Lenient(T::default()))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Lenient<T>, E> {
                Ok(Lenient(T::default()))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Lenient<T>, E> {
                Ok(Lenient(T::default()))
            }
            fn visit_unit<E>(self) -> Result<Lenient<T>, E> {
                Ok(Lenient(T::default()))
            }
            fn visit_none<E>(self) -> Result<Lenient<T>, E> {
                Ok(Lenient(T::default()))
            }
        }
        d.deserialize_any(V(PhantomData))
    }
}

/// A list that never fails: a JSON array of `T` (elements that are not objects read as
/// `T::default()`), and anything else (`null`, a string, an object) as an empty list.
#[derive(Clone, Debug, PartialEq)]
pub struct List<T>(pub Vec<T>);

impl<T> Default for List<T> {
    fn default() -> Self {
        Self(Vec::new())
    }
}

impl<'de, T: Deserialize<'de> + Default> Deserialize<'de> for List<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut out = Vec::new();
        EachSeed::new(|t: T| out.push(t)).deserialize(d)?;
        Ok(List(out))
    }
}

/// GPUs summed over a job's `gres_detail` list (`["gpu:2(IDX:0-1)", "gpu:a100:1(IDX:0)"]`,
/// one entry per node) while decoding it, without keeping the strings.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GresDetailGpus(pub Option<u64>);

impl<'de> Deserialize<'de> for GresDetailGpus {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut total = None::<u64>;
        EachSeed::new(|s: Str<'de>| {
            let gpus = crate::model::gpus(&crate::model::text::parse_gres(s.as_str()));
            total = Some(total.unwrap_or(0).saturating_add(gpus));
        })
        .deserialize(d)?;
        Ok(GresDetailGpus(total))
    }
}

/// MiB (Slurm's memory unit) to bytes.
pub fn mib(v: Option<u64>) -> Option<u64> {
    v.map(|m| m.saturating_mul(1024 * 1024))
}

/// Microseconds (diag's unit) to seconds.
pub fn micros(v: Num) -> Option<f64> {
    v.unsigned().map(|us| us as f64 / 1e6)
}

/// A seed that decodes a JSON array one element at a time and hands each to a callback, so
/// a 100,000-job answer never exists as a Vec of wire structs. `null` or a non-array reads
/// as an empty list; wrap `T` in [`Lenient`] when elements may not be objects.
pub struct EachSeed<T, F> {
    pub each: F,
    pub _item: PhantomData<T>,
}

impl<T, F> EachSeed<T, F> {
    pub fn new(each: F) -> Self {
        Self {
            each,
            _item: PhantomData,
        }
    }
}

impl<'de, T, F> DeserializeSeed<'de> for EachSeed<T, F>
where
    T: Deserialize<'de> + Default,
    F: FnMut(T),
{
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        struct V<T, F>(F, PhantomData<T>);
        impl<'de, T, F> Visitor<'de> for V<T, F>
        where
            T: Deserialize<'de> + Default,
            F: FnMut(T),
        {
            type Value = ();
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list")
            }
            fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
                while let Some(item) = seq.next_element::<T>()? {
                    (self.0)(item);
                }
                Ok(())
            }
            fn visit_unit<E>(self) -> Result<(), E> {
                Ok(())
            }
            fn visit_none<E>(self) -> Result<(), E> {
                Ok(())
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(())
            }
        }
        d.deserialize_any(V(self.each, PhantomData))
    }
}
