//! Reading JSON strictly: a key written twice in one object, at any depth, is refused with its
//! path. serde_json keeps the last of two equal keys without a word, so two readers of one
//! text (a reviewer's tool and the gate, a client and the proxy) could read two different
//! values. Proposal and approval files, audit trail lines and MCP tool lists are read through
//! this first.

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

/// The message of a repeated key starts with this.
pub const DUPLICATE_KEY: &str = "duplicate key `";

/// `Ok` when `text` is JSON with no key repeated in any object; otherwise serde_json's error:
/// for a repeated key, ``duplicate key `$.a[1].b`: a key may appear once in an object`` with
/// its line and column (its message starts with [`DUPLICATE_KEY`]). Walks at most serde_json's
/// nesting limit deep, as parsing does.
///
/// ```
/// use capability::json::no_duplicate_keys;
///
/// assert!(no_duplicate_keys(r#"{"a": [{"b": 1}, {"b": 2}]}"#).is_ok());
/// let error = no_duplicate_keys(r#"{"annotations": {"readOnlyHint": false, "readOnlyHint": true}}"#)
///     .unwrap_err();
/// assert!(error.to_string().starts_with("duplicate key `$.annotations.readOnlyHint`"));
/// ```
pub fn no_duplicate_keys(text: &str) -> Result<(), serde_json::Error> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    Node { path: Path::Root }.deserialize(&mut deserializer)?;
    deserializer.end()
}

/// Where a value is, written out (`$.a[1].b`) only for the error: reading a clean text builds
/// no path string.
#[derive(Clone, Copy)]
enum Path<'p> {
    Root,
    Key(&'p Path<'p>, &'p str),
    Index(&'p Path<'p>, usize),
}

impl fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Path::Root => f.write_str("$"),
            Path::Key(parent, key) => write!(f, "{parent}.{key}"),
            Path::Index(parent, index) => write!(f, "{parent}[{index}]"),
        }
    }
}

/// One JSON value, at this path, read only to check its keys.
struct Node<'p> {
    path: Path<'p>,
}

impl<'de> DeserializeSeed<'de> for Node<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Node<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut index = 0usize;
        loop {
            let path = Path::Index(&self.path, index);
            if seq.next_element_seed(Node { path })?.is_none() {
                return Ok(());
            }
            index += 1;
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = Seen::default();
        while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
            let path = Path::Key(&self.path, &key);
            if seen.contains(&key) {
                return Err(de::Error::custom(format_args!(
                    "{DUPLICATE_KEY}{path}`: a key may appear once in an object"
                )));
            }
            map.next_value_seed(Node { path })?;
            seen.insert(key);
        }
        Ok(())
    }
}

/// The keys of one object read so far: compared one by one while there are few (most objects
/// have a handful, and hashing each costs more than comparing it), hashed past
/// [`Seen::FEW`], so an object of very many keys is still read in linear time.
#[derive(Default)]
struct Seen<'de> {
    few: Vec<Cow<'de, str>>,
    many: HashSet<Cow<'de, str>>,
}

impl<'de> Seen<'de> {
    const FEW: usize = 16;

    fn contains(&self, key: &str) -> bool {
        if self.many.is_empty() {
            self.few.iter().any(|seen| seen == key)
        } else {
            self.many.contains(key)
        }
    }

    fn insert(&mut self, key: Cow<'de, str>) {
        if !self.many.is_empty() {
            self.many.insert(key);
        } else if self.few.len() < Seen::FEW {
            self.few.push(key);
        } else {
            self.many.extend(self.few.drain(..));
            self.many.insert(key);
        }
    }
}

/// A key, borrowed from the text when it has no escapes.
struct Key<'de>(Cow<'de, str>);

impl<'de> de::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_str<E>(self, key: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(key)))
            }
            fn visit_str<E>(self, key: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(key.to_owned())))
            }
            fn visit_string<E>(self, key: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(key)))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::no_duplicate_keys;

    #[test]
    fn repeated_keys_are_found_at_any_depth() {
        assert!(no_duplicate_keys(r#"{"a": [1, {"b": 2, "c": {"b": 3}}], "b": null}"#).is_ok());
        let error = no_duplicate_keys(r#"{"a": [1, {"b": 2, "b": 3}]}"#).expect_err("repeated");
        assert!(
            error.to_string().contains("duplicate key `$.a[1].b`"),
            "{error}"
        );
        let error = no_duplicate_keys(r#"{"x": 1, "x": 1}"#).expect_err("repeated");
        assert!(error.to_string().contains("`$.x`"), "{error}");
        // An escaped key is the same key as its plain spelling.
        let error = no_duplicate_keys(r#"{"a": {"k": 1, "\u006b": 2}}"#).expect_err("repeated");
        assert!(error.to_string().contains("`$.a.k`"), "{error}");
        let error = no_duplicate_keys(r#"[0, [1, {"q\"": 1, "q\"": 2}]]"#).expect_err("repeated");
        assert!(error.to_string().contains(r#"`$[1][1].q"`"#), "{error}");
        assert!(no_duplicate_keys("{").is_err());
        assert!(no_duplicate_keys("{} {}").is_err());
    }

    /// An object of `n` keys `k0`.. and, when given, one more key last.
    fn object(n: usize, last: Option<&str>) -> String {
        let mut keys: Vec<String> = (0..n).map(|i| format!("\"k{i}\": {i}")).collect();
        keys.extend(last.map(|key| format!("\"{key}\": true")));
        format!("{{\"o\": {{{}}}}}", keys.join(", "))
    }

    #[test]
    fn a_repeat_is_found_in_objects_of_few_keys_and_of_many() {
        // Few keys are compared one by one; past sixteen they are hashed. Either way every
        // key is kept, the first one read as much as the last.
        for n in [1, 15, 16, 17, 40, 5_000] {
            assert!(no_duplicate_keys(&object(n, None)).is_ok(), "{n} keys");
            assert!(
                no_duplicate_keys(&object(n, Some("new"))).is_ok(),
                "{n} keys"
            );
            for repeated in ["k0", &format!("k{}", n / 2), &format!("k{}", n - 1)] {
                let error = no_duplicate_keys(&object(n, Some(repeated)))
                    .expect_err(&format!("{repeated} of {n} keys repeated"));
                assert!(
                    error.to_string().contains(&format!("`$.o.{repeated}`")),
                    "{n} keys: {error}"
                );
            }
        }
    }
}
