//! Credentials in a descriptor (CAP-SCAN-060): known formats, found by their prefixes (hard),
//! and a long, random-looking value after a key name such as `api_key=` (soft).
//!
//! A secret is never repeated: the finding's excerpt shows its first four characters and its
//! length. AWS's documented example key (ending in `EXAMPLE`) is soft.

use std::ops::Range;

use super::finding::Severity;
use super::text::{Folded, Token};

/// A credential found in raw text.
pub(crate) struct Secret {
    pub(crate) severity: Severity,
    pub(crate) span: Range<usize>,
    /// What kind of credential it is.
    pub(crate) kind: &'static str,
}

/// The shortest value a generic secret can have.
const MIN_GENERIC: usize = 16;
/// Bits per character from which a generic value looks random (hex has at most 4, English
/// words about 2.5 to 3.5).
const MIN_ENTROPY: f64 = 3.5;

/// Key names whose value is a secret.
const SECRET_KEYS: &[&str] = &[
    "api_key",
    "apikey",
    "api-key",
    "secret",
    "secret_key",
    "client_secret",
    "access_token",
    "auth_token",
    "token",
    "password",
    "passwd",
    "private_key",
    "access_key",
    "secret_access_key",
    "bearer",
];

/// The shortest token a known format can be (`xoxb-` and ten characters).
const MIN_KNOWN: usize = 15;

/// Every credential in `raw`, found from its words and punctuation (`tokens` of `folded`, the
/// folded `raw`): a long word is tried against the known formats, `BEGIN` after dashes as a
/// private key, `=` and `:` as the separator of a generic secret.
pub(crate) fn scan(raw: &str, folded: &Folded, tokens: &[Token], out: &mut Vec<Secret>) {
    if raw.len() < MIN_GENERIC {
        return; // shorter than any credential the rules know
    }
    let bytes = raw.as_bytes();
    let text = folded.text.as_str();
    let mut next = 0; // the first raw byte not inside a secret found already
    for token in tokens {
        let at = folded.raw_span(token.range()).start;
        if at < next {
            continue;
        }
        let word = token.text(text);
        let found = if token.word && token.end - token.start >= MIN_KNOWN as u32 {
            match bytes[at] {
                b'A' => aws(bytes, at).or_else(|| google(bytes, at)),
                b'g' => github(bytes, at),
                b'x' => known(
                    bytes,
                    at,
                    &["xoxb-", "xoxp-", "xoxa-", "xoxr-", "xoxs-"],
                    10,
                    "a Slack token",
                ),
                b's' | b'r' => known(
                    bytes,
                    at,
                    &["sk_live_", "rk_live_"],
                    16,
                    "a Stripe secret key",
                )
                .or_else(|| known(bytes, at, &["sk-"], 32, "an API secret key (sk-...)")),
                _ => None,
            }
        } else if token.word && word == "begin" && at >= 5 && &bytes[at - 5..at] == b"-----" {
            private_key(raw, at - 5)
        } else if !token.word && matches!(word, "=" | ":") {
            generic(bytes, at)
        } else {
            None
        };
        if let Some(secret) = found {
            next = secret.span.end;
            out.push(secret);
        }
    }
}

/// The length of the run of bytes from `at` that `allowed` takes.
fn run(bytes: &[u8], at: usize, allowed: impl Fn(u8) -> bool) -> usize {
    bytes[at.min(bytes.len())..]
        .iter()
        .take_while(|b| allowed(**b))
        .count()
}

fn ends_word(bytes: &[u8], at: usize) -> bool {
    bytes.get(at).is_none_or(|b| !b.is_ascii_alphanumeric())
}

fn aws(bytes: &[u8], i: usize) -> Option<Secret> {
    let prefix = bytes.get(i..i + 4)?;
    if !matches!(prefix, b"AKIA" | b"ASIA" | b"ABIA" | b"ACCA") {
        return None;
    }
    let n = run(bytes, i + 4, |b| {
        b.is_ascii_uppercase() || b.is_ascii_digit()
    });
    if n != 16 || !ends_word(bytes, i + 20) {
        return None;
    }
    let example = bytes[i + 13..i + 20] == *b"EXAMPLE";
    Some(Secret {
        severity: if example {
            Severity::Soft
        } else {
            Severity::Hard
        },
        span: i..i + 20,
        kind: if example {
            "AWS's documented example access key id"
        } else {
            "an AWS access key id"
        },
    })
}

fn google(bytes: &[u8], i: usize) -> Option<Secret> {
    known(bytes, i, &["AIza"], 35, "a Google API key")
}

fn github(bytes: &[u8], i: usize) -> Option<Secret> {
    known(
        bytes,
        i,
        &["ghp_", "gho_", "ghu_", "ghs_", "ghr_"],
        36,
        "a GitHub token",
    )
    .or_else(|| known(bytes, i, &["github_pat_"], 22, "a GitHub token"))
}

/// A token that starts with one of `prefixes` and goes on for `min` characters or more.
fn known(
    bytes: &[u8],
    i: usize,
    prefixes: &[&str],
    min: usize,
    kind: &'static str,
) -> Option<Secret> {
    let prefix = prefixes
        .iter()
        .find(|p| bytes[i..].starts_with(p.as_bytes()))?;
    let start = i + prefix.len();
    let n = run(bytes, start, |b| {
        b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
    });
    (n >= min).then(|| Secret {
        severity: Severity::Hard,
        span: i..start + n,
        kind,
    })
}

fn private_key(raw: &str, i: usize) -> Option<Secret> {
    let rest = raw.get(i..)?;
    let header = rest.strip_prefix("-----BEGIN ")?;
    let line_end = header.find("-----")?;
    if !header[..line_end].ends_with("PRIVATE KEY") {
        return None;
    }
    let after_header = i + "-----BEGIN ".len() + line_end + 5;
    let end = raw[after_header..]
        .find("-----END ")
        .and_then(|at| {
            let from = after_header + at + "-----END ".len();
            raw[from..].find("-----").map(|close| from + close + 5)
        })
        .unwrap_or(after_header);
    Some(Secret {
        severity: Severity::Hard,
        span: i..end,
        kind: "a private key",
    })
}

/// `key = value`, `"key": "value"`: a secret key name before the separator at `i`, and after
/// it a long value that looks random.
fn generic(bytes: &[u8], i: usize) -> Option<Secret> {
    let mut k = i;
    while k > 0 && matches!(bytes[k - 1], b' ' | b'"' | b'\'') {
        k -= 1;
    }
    let key_len = bytes[..k]
        .iter()
        .rev()
        .take_while(|b| b.is_ascii_alphanumeric() || **b == b'_' || **b == b'-')
        .count();
    let key = std::str::from_utf8(&bytes[k - key_len..k]).ok()?;
    if !SECRET_KEYS.iter().any(|s| key.eq_ignore_ascii_case(s)) {
        return None;
    }
    let mut start = i + 1;
    start += run(bytes, start, |b| matches!(b, b' ' | b'"' | b'\''));
    let n = run(bytes, start, |b| {
        b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'_' | b'-' | b'.' | b'=')
    });
    let value = &bytes[start..start + n];
    (n >= MIN_GENERIC && entropy(value) >= MIN_ENTROPY).then(|| Secret {
        severity: Severity::Soft,
        span: start..start + n,
        kind: "a value that looks like a secret",
    })
}

/// Shannon entropy, in bits per byte.
pub(crate) fn entropy(value: &[u8]) -> f64 {
    let mut counts = [0u32; 256];
    for b in value {
        counts[*b as usize] += 1;
    }
    let len = value.len() as f64;
    counts
        .iter()
        .filter(|c| **c > 0)
        .map(|c| {
            let p = f64::from(*c) / len;
            -p * p.log2()
        })
        .sum()
}

/// A secret as it may be shown: its first four characters and its length.
pub(crate) fn masked(raw: &str, span: &Range<usize>) -> String {
    let secret = raw.get(span.clone()).unwrap_or_default();
    let head: String = secret.chars().take(4).collect();
    format!("{head}… ({} characters)", secret.chars().count())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(raw: &str) -> Vec<Secret> {
        let mut folded = Folded::default();
        folded.fold(raw);
        let mut tokens = Vec::new();
        super::super::text::tokenize(&folded.text, &mut tokens);
        let mut out = Vec::new();
        scan(raw, &folded, &tokens, &mut out);
        out
    }

    fn kinds(raw: &str) -> Vec<(&'static str, Severity)> {
        let out = found(raw);
        out.iter().map(|s| (s.kind, s.severity)).collect()
    }

    #[test]
    fn known_formats_are_hard() {
        assert_eq!(
            kinds("key AKIAZ3MHQ7R2LX4PWN5K here"),
            [("an AWS access key id", Severity::Hard)]
        );
        assert_eq!(
            kinds("AKIAIOSFODNN7EXAMPLE"),
            [("AWS's documented example access key id", Severity::Soft)]
        );
        assert_eq!(
            kinds("token ghp_4Fq9ZkPz1wXc8mR2tL6vN0bJ3hY7sD5gA1eK"),
            [("a GitHub token", Severity::Hard)]
        );
        let pem =
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaA==\n-----END OPENSSH PRIVATE KEY-----";
        let out = found(pem);
        assert_eq!(out[0].span, 0..pem.len());
    }

    #[test]
    fn a_random_value_after_a_secret_key_name_is_soft() {
        assert_eq!(
            kinds("api_key=\"q8Xv2LmP0zR7tY4wK9sB3nF6\""),
            [("a value that looks like a secret", Severity::Soft)]
        );
        assert!(kinds("api_key=your-api-key-goes-here").is_empty());
        assert!(kinds("token: the token the server gave you").is_empty());
    }
}
