//! Hexadecimal text, written once for the whole workspace: digests, ids, keys and signatures.
//!
//! [`encode`] always writes lowercase digits. [`decode`] reads both cases (a key file a person
//! edited may be in capitals); where the text is a digest that must be in its one canonical
//! form (a descriptor hash, a lockfile hash), check it with [`is_lower_hex`] instead.

const DIGITS: &[u8; 16] = b"0123456789abcdef";

/// The bytes as lowercase hex digits, two per byte.
///
/// ```
/// assert_eq!(capability_rules::hex::encode(&[0x00, 0xab, 0x7f]), "00ab7f");
/// ```
pub fn encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    encode_to(&mut out, bytes);
    out
}

/// Appends the bytes to `out` as lowercase hex digits, two per byte.
pub fn encode_to(out: &mut String, bytes: &[u8]) {
    out.reserve(bytes.len() * 2);
    // Through a byte buffer: pushing `char`s one at a time checks each for its UTF-8 length.
    let mut digits = [0u8; 128];
    for chunk in bytes.chunks(digits.len() / 2) {
        for (pair, &byte) in digits.chunks_exact_mut(2).zip(chunk) {
            pair[0] = DIGITS[usize::from(byte >> 4)];
            pair[1] = DIGITS[usize::from(byte & 0x0f)];
        }
        // Hex digits are ASCII.
        out.push_str(std::str::from_utf8(&digits[..chunk.len() * 2]).unwrap_or_default());
    }
}

/// The bytes that hex text stands for, or `None` when the text has an odd number of digits or a
/// character that is not a hex digit. Upper and lower case are both read.
///
/// ```
/// use capability_rules::hex;
/// assert_eq!(hex::decode("00aB7f"), Some(vec![0x00, 0xab, 0x7f]));
/// assert_eq!(hex::decode("abc"), None);
/// assert_eq!(hex::decode("zz"), None);
/// ```
pub fn decode(text: &str) -> Option<Vec<u8>> {
    let digits = text.as_bytes();
    if !digits.len().is_multiple_of(2) {
        return None;
    }
    digits
        .chunks_exact(2)
        .map(|pair| Some((value(pair[0])? << 4) | value(pair[1])?))
        .collect()
}

/// Exactly `N` bytes from hex text of `2 * N` digits, or `None` (wrong length, or not hex).
///
/// ```
/// use capability_rules::hex;
/// assert_eq!(hex::decode_array::<2>("beef"), Some([0xbe, 0xef]));
/// assert_eq!(hex::decode_array::<2>("beefed"), None);
/// ```
pub fn decode_array<const N: usize>(text: &str) -> Option<[u8; N]> {
    if text.len() != 2 * N {
        return None;
    }
    decode(text)?.try_into().ok()
}

/// Whether `text` is exactly `len` lowercase hex digits (`0-9 a-f`): the one form a digest is
/// written in.
///
/// ```
/// use capability_rules::hex::is_lower_hex;
/// assert!(is_lower_hex("0a1f", 4));
/// assert!(!is_lower_hex("0A1F", 4));
/// assert!(!is_lower_hex("0a1f", 6));
/// ```
pub fn is_lower_hex(text: &str, len: usize) -> bool {
    text.len() == len && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn value(digit: u8) -> Option<u8> {
    match digit {
        b'0'..=b'9' => Some(digit - b'0'),
        b'a'..=b'f' => Some(digit - b'a' + 10),
        b'A'..=b'F' => Some(digit - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_length_is_written_as_two_digits_a_byte() {
        // Across the encoder's inner buffer: shorter, equal, longer, and a part of it left.
        for len in 0..=200usize {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 37 + 11) as u8).collect();
            let reference: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            let mut out = String::from("x");
            encode_to(&mut out, &bytes);
            assert_eq!(out, format!("x{reference}"), "{len} bytes");
        }
    }

    #[test]
    fn every_byte_round_trips() {
        let bytes: Vec<u8> = (0..=255).collect();
        let text = encode(&bytes);
        assert_eq!(text.len(), 512);
        assert!(is_lower_hex(&text, 512));
        assert_eq!(&text[..8], "00010203");
        assert_eq!(&text[text.len() - 4..], "feff");
        assert_eq!(decode(&text), Some(bytes.clone()));
        assert_eq!(decode(&text.to_uppercase()), Some(bytes));
        // Each byte agrees with the standard library's own formatting.
        for byte in 0..=255u8 {
            assert_eq!(encode(&[byte]), format!("{byte:02x}"));
        }
    }

    #[test]
    fn bad_text_is_refused_without_panicking() {
        assert_eq!(decode(""), Some(Vec::new()));
        for bad in [
            "a", "abc", "0g", "g0", " 00", "00 ", "+1", "-1", "0x00", "éé", "é0",
        ] {
            assert_eq!(decode(bad), None, "{bad:?}");
        }
        assert_eq!(decode_array::<1>("0"), None);
        assert_eq!(decode_array::<1>("000"), None);
        assert_eq!(decode_array::<1>("0z"), None);
        assert_eq!(decode_array::<1>("Ff"), Some([0xff]));
        // A multi-byte character of two bytes is the length of one byte's digits.
        assert_eq!(decode_array::<1>("é"), None);
    }

    #[test]
    fn lower_hex_means_exactly_that() {
        assert!(is_lower_hex("", 0));
        assert!(is_lower_hex("0123456789abcdef", 16));
        assert!(!is_lower_hex("0123456789abcdeF", 16));
        assert!(!is_lower_hex("0123456789abcdeg", 16));
        assert!(!is_lower_hex("0123456789abcdef0", 16));
        assert!(!is_lower_hex("0123456789abcde", 16));
        // Length is in bytes: a two-byte character cannot pass for two digits.
        assert!(!is_lower_hex("é", 2));
    }
}
