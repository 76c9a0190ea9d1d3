//! A proposal's arguments as the one JSON value that is signed, checked for a faithful round
//! trip: what executes is rebuilt from exactly the signed canonical JSON, so arguments that JSON
//! cannot carry faithfully are refused when the proposal is made, naming the field.
//!
//! Refused: non-finite floats (serde_json writes `NaN` and infinities as `null`, so
//! `Some(f64::NAN)` would sign like `None`); `-0.0` (canonical JSON, RFC 8785, writes it as `0`,
//! so it would sign like `0.0`); a key written twice in one object (a `#[serde(flatten)]` map
//! shadowing a named field: two argument sets, one JSON object); and any value whose
//! deserialization does not give back the same JSON. A `#[serde(skip)]` field is invisible to
//! serialization: it is never signed, and the executed value has its default, never the value
//! given to the proposal.

use std::collections::HashSet;
use std::fmt;

use serde::de::DeserializeOwned;
use serde::ser::{self, Serialize};
use serde_json::Value;

use crate::error::GateError;

/// The arguments' JSON value, after checking that `T` survives the trip through canonical JSON.
pub(crate) fn signable<T: Serialize + DeserializeOwned>(args: &T) -> Result<Value, GateError> {
    let refused = |path: &str, why: String| GateError::Unsignable {
        path: path.to_owned(),
        why,
    };
    let mut walk = Walk { path: Vec::new() };
    if let Err(Refused { path, why }) = args.serialize(&mut walk) {
        return Err(refused(&path, why));
    }
    let value = serde_json::to_value(args).map_err(|e| refused("$", e.to_string()))?;
    let back: T = from_canonical(&value)
        .map_err(|e| refused("$", format!("the arguments do not deserialize: {e}")))?;
    let again = serde_json::to_value(&back).map_err(|e| refused("$", e.to_string()))?;
    if let Some(path) = first_difference(&value, &again, "$") {
        return Err(refused(
            &path,
            "the value differs after a round trip through JSON".to_owned(),
        ));
    }
    Ok(value)
}

/// `T` deserialized from exactly the canonical JSON text of `value`: the bytes that were hashed.
pub(crate) fn from_canonical<T: DeserializeOwned>(value: &Value) -> Result<T, serde_json::Error> {
    serde_json::from_str(&capability_core::json::to_canonical_json(value))
}

/// The path (from `path`, `$` for the whole) of the first place where `a` and `b` differ.
fn first_difference(a: &Value, b: &Value, path: &str) -> Option<String> {
    let here = || {
        Some(if path.is_empty() {
            "$".to_owned()
        } else {
            path.to_owned()
        })
    };
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            keys.into_iter().find_map(|k| {
                let inner = format!("{path}.{k}");
                match (x.get(k), y.get(k)) {
                    (Some(p), Some(q)) => first_difference(p, q, &inner),
                    _ => Some(inner),
                }
            })
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (p, q))| first_difference(p, q, &format!("{path}[{i}]"))),
        (Value::Number(x), Value::Number(y)) => {
            let text = |v| capability_core::json::to_canonical_json(&Value::Number(v));
            (text(x.clone()) != text(y.clone())).then(here).flatten()
        }
        _ => (a != b).then(here).flatten(),
    }
}

/// Why a value cannot be signed, and where.
#[derive(Debug)]
struct Refused {
    path: String,
    why: String,
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}`: {}", self.path, self.why)
    }
}

impl std::error::Error for Refused {}

impl ser::Error for Refused {
    fn custom<M: fmt::Display>(msg: M) -> Self {
        Refused {
            path: String::new(),
            why: msg.to_string(),
        }
    }
}

/// A serializer that writes nothing: it walks the value, keeping the path, and refuses
/// non-finite floats, `-0.0` and repeated keys.
struct Walk {
    path: Vec<String>,
}

impl Walk {
    fn path(&self) -> String {
        format!("${}", self.path.concat())
    }

    fn refuse(&self, why: impl Into<String>) -> Refused {
        Refused {
            path: self.path(),
            why: why.into(),
        }
    }

    fn float(&mut self, v: f64) -> Result<(), Refused> {
        if !v.is_finite() {
            Err(self.refuse(format!(
                "`{v}` is not a JSON number (it would be written as `null`)"
            )))
        } else if v == 0.0 && v.is_sign_negative() {
            Err(self.refuse(
                "`-0.0` is written as `0` in canonical JSON and would sign like `0.0`; use `0.0`",
            ))
        } else {
            Ok(())
        }
    }

    fn compound(&mut self) -> Compound<'_> {
        Compound {
            walk: self,
            index: 0,
            keys: HashSet::new(),
            pending: None,
        }
    }
}

/// A sequence, tuple, map or struct being walked.
struct Compound<'a> {
    walk: &'a mut Walk,
    index: usize,
    keys: HashSet<String>,
    pending: Option<String>,
}

impl Compound<'_> {
    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Refused> {
        self.walk.path.push(format!("[{}]", self.index));
        self.index += 1;
        value.serialize(&mut *self.walk)?;
        self.walk.path.pop();
        Ok(())
    }

    fn field<T: Serialize + ?Sized>(&mut self, key: String, value: &T) -> Result<(), Refused> {
        self.walk.path.push(format!(".{key}"));
        if !self.keys.insert(key) {
            return Err(self.walk.refuse(
                "the key is written twice in one object (a `#[serde(flatten)]` map shadowing a \
                 field?): JSON keeps one of them",
            ));
        }
        value.serialize(&mut *self.walk)?;
        self.walk.path.pop();
        Ok(())
    }

    fn key<K: Serialize + ?Sized>(&self, key: &K) -> Result<String, Refused> {
        match serde_json::to_value(key) {
            Ok(Value::String(text)) => Ok(text),
            Ok(other) => Ok(other.to_string()),
            Err(e) => Err(self.walk.refuse(format!("a map key is not JSON: {e}"))),
        }
    }
}

macro_rules! leaf {
    ($($method:ident($($ty:ty)?)),* $(,)?) => {
        $(fn $method(self $(, _: $ty)?) -> Result<(), Refused> { Ok(()) })*
    };
}

impl<'a> ser::Serializer for &'a mut Walk {
    type Ok = ();
    type Error = Refused;
    type SerializeSeq = Compound<'a>;
    type SerializeTuple = Compound<'a>;
    type SerializeTupleStruct = Compound<'a>;
    type SerializeTupleVariant = Compound<'a>;
    type SerializeMap = Compound<'a>;
    type SerializeStruct = Compound<'a>;
    type SerializeStructVariant = Compound<'a>;

    leaf!(
        serialize_bool(bool),
        serialize_i8(i8),
        serialize_i16(i16),
        serialize_i32(i32),
        serialize_i64(i64),
        serialize_i128(i128),
        serialize_u8(u8),
        serialize_u16(u16),
        serialize_u32(u32),
        serialize_u64(u64),
        serialize_u128(u128),
        serialize_char(char),
        serialize_str(&str),
        serialize_bytes(&[u8]),
        serialize_none(),
        serialize_unit(),
    );

    fn serialize_f32(self, v: f32) -> Result<(), Refused> {
        self.float(f64::from(v))
    }
    fn serialize_f64(self, v: f64) -> Result<(), Refused> {
        self.float(v)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Refused> {
        value.serialize(self)
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), Refused> {
        Ok(())
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
    ) -> Result<(), Refused> {
        Ok(())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<(), Refused> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), Refused> {
        self.compound().field(variant.to_owned(), value)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Compound<'a>, Refused> {
        Ok(self.compound())
    }
    fn serialize_tuple(self, _: usize) -> Result<Compound<'a>, Refused> {
        Ok(self.compound())
    }
    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Compound<'a>, Refused> {
        Ok(self.compound())
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Compound<'a>, Refused> {
        self.path.push(format!(".{variant}"));
        Ok(self.compound())
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Compound<'a>, Refused> {
        Ok(self.compound())
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Compound<'a>, Refused> {
        Ok(self.compound())
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Compound<'a>, Refused> {
        self.path.push(format!(".{variant}"));
        Ok(self.compound())
    }
}

impl ser::SerializeSeq for Compound<'_> {
    type Ok = ();
    type Error = Refused;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Refused> {
        self.element(value)
    }
    fn end(self) -> Result<(), Refused> {
        Ok(())
    }
}

impl ser::SerializeTuple for Compound<'_> {
    type Ok = ();
    type Error = Refused;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Refused> {
        self.element(value)
    }
    fn end(self) -> Result<(), Refused> {
        Ok(())
    }
}

impl ser::SerializeTupleStruct for Compound<'_> {
    type Ok = ();
    type Error = Refused;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Refused> {
        self.element(value)
    }
    fn end(self) -> Result<(), Refused> {
        Ok(())
    }
}

impl ser::SerializeTupleVariant for Compound<'_> {
    type Ok = ();
    type Error = Refused;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Refused> {
        self.element(value)
    }
    fn end(self) -> Result<(), Refused> {
        self.walk.path.pop();
        Ok(())
    }
}

impl ser::SerializeMap for Compound<'_> {
    type Ok = ();
    type Error = Refused;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Refused> {
        // `#[serde(flatten)]` sends keys and values apart: the key waits for its value.
        self.pending = Some(self.key(key)?);
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Refused> {
        match self.pending.take() {
            Some(key) => self.field(key, value),
            None => self.element(value),
        }
    }
    fn serialize_entry<K: Serialize + ?Sized, V: Serialize + ?Sized>(
        &mut self,
        key: &K,
        value: &V,
    ) -> Result<(), Refused> {
        let key = self.key(key)?;
        self.field(key, value)
    }
    fn end(self) -> Result<(), Refused> {
        Ok(())
    }
}

impl ser::SerializeStruct for Compound<'_> {
    type Ok = ();
    type Error = Refused;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Refused> {
        self.field(key.to_owned(), value)
    }
    fn end(self) -> Result<(), Refused> {
        Ok(())
    }
}

impl ser::SerializeStructVariant for Compound<'_> {
    type Ok = ();
    type Error = Refused;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Refused> {
        self.field(key.to_owned(), value)
    }
    fn end(self) -> Result<(), Refused> {
        self.walk.path.pop();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    use super::signable;
    use crate::error::GateError;

    /// Deserializes to something other than what it serialized: `"safe"` reads back as
    /// `"unsafe"`.
    #[derive(Serialize)]
    struct Lies {
        inner: Vec<Word>,
    }

    #[derive(Serialize)]
    struct Word(String);

    impl<'de> Deserialize<'de> for Lies {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            #[derive(Deserialize)]
            struct Raw {
                inner: Vec<String>,
            }
            let raw = Raw::deserialize(d)?;
            Ok(Lies {
                inner: raw
                    .inner
                    .into_iter()
                    .map(|_| Word("unsafe".into()))
                    .collect(),
            })
        }
    }

    #[test]
    fn a_value_that_reads_back_differently_is_refused_at_its_path() {
        let lies = Lies {
            inner: vec![Word("unsafe".into()), Word("safe".into())],
        };
        match signable(&lies) {
            Err(GateError::Unsignable { path, why }) => {
                assert_eq!(path, "$.inner[1]", "{why}");
                assert!(why.contains("round trip"), "{why}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn keys_that_write_the_same_are_refused() {
        // Two map keys, one JSON key: `1` (a number) and `"1"` (a string).
        struct Pair;
        impl Serialize for Pair {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                use serde::ser::SerializeMap;
                let mut map = s.serialize_map(Some(2))?;
                map.serialize_entry(&1u8, &1u8)?;
                map.serialize_entry("1", &2u8)?;
                map.end()
            }
        }
        let mut walk = super::Walk { path: Vec::new() };
        let refused = Pair.serialize(&mut walk).expect_err("twice");
        assert_eq!(refused.path, "$.1");
    }
}
