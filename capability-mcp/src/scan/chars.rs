//! Character classes the rules share: which characters print as nothing (and of what kind),
//! and a small map of Cyrillic and Greek letters that look like Latin ones.

/// The kind of an invisible character.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Invisible {
    /// U+E0000-E007F: spells ASCII (U+E0041 is `A`).
    Tag,
    /// Embeddings, overrides and isolates (`strong`), or the marks LRM, RLM, ALM.
    Bidi { strong: bool },
    /// Zero-width space, joiners, word joiner, byte order mark, Mongolian vowel separator.
    ZeroWidth,
    /// Variation selectors (U+FE00-FE0F, U+E0100-E01EF).
    Variation,
    /// Any other character that prints as nothing.
    Format,
}

/// The kind of `c` when it prints as nothing; `None` for anything visible (and for white space,
/// which the rules treat as text).
pub(crate) fn invisible(c: char) -> Option<Invisible> {
    let u = c as u32;
    if u < 0xAD {
        return None; // the common case: ASCII and Latin-1 up to the soft hyphen
    }
    Some(match u {
        0xE0000..=0xE007F => Invisible::Tag,
        0x202A..=0x202E | 0x2066..=0x2069 => Invisible::Bidi { strong: true },
        0x200E | 0x200F | 0x061C => Invisible::Bidi { strong: false },
        0x200B..=0x200D | 0x2060 | 0xFEFF | 0x180E => Invisible::ZeroWidth,
        0xFE00..=0xFE0F | 0xE0100..=0xE01EF => Invisible::Variation,
        0xAD
        | 0x034F
        | 0x115F
        | 0x1160
        | 0x17B4
        | 0x17B5
        | 0x180B..=0x180D
        | 0x180F
        | 0x2061..=0x2064
        | 0x206A..=0x206F
        | 0x3164
        | 0xFFA0
        | 0xFFF9..=0xFFFB
        | 0x1BCA0..=0x1BCA3
        | 0x1D173..=0x1D17A => Invisible::Format,
        _ => return None,
    })
}

/// The lowercase Latin letter a Cyrillic or Greek letter (or a Latin look-alike outside ASCII)
/// passes for; `None` for any other character. Small on purpose: the letters that are
/// indistinguishable from Latin ones in common fonts, not Unicode's whole confusables table.
pub(crate) fn latin_look_alike(c: char) -> Option<char> {
    Some(match c {
        // Cyrillic
        'а' | 'А' => 'a',
        'в' | 'В' | 'Ь' => 'b',
        'с' | 'С' | 'ϲ' | 'Ϲ' => 'c',
        'ԁ' => 'd',
        'е' | 'Е' | 'ё' | 'Ё' => 'e',
        'һ' | 'Н' | 'Һ' => 'h',
        'і' | 'І' | 'ї' | 'Ї' | 'ӏ' | 'Ӏ' => 'i',
        'ј' | 'Ј' => 'j',
        'к' | 'К' => 'k',
        'м' | 'М' => 'm',
        'о' | 'О' => 'o',
        'р' | 'Р' => 'p',
        'ԛ' | 'Ԛ' => 'q',
        'ѕ' | 'Ѕ' => 's',
        'т' | 'Т' => 't',
        'у' | 'У' | 'Ү' | 'ү' => 'y',
        'ԝ' | 'Ԝ' => 'w',
        'х' | 'Х' => 'x',
        // Greek
        'α' | 'Α' => 'a',
        'β' | 'Β' => 'b',
        'ε' | 'Ε' => 'e',
        'Ζ' => 'z',
        'Η' => 'h',
        'ι' | 'Ι' => 'i',
        'κ' | 'Κ' => 'k',
        'Μ' => 'm',
        'ν' | 'Ν' => 'n',
        'ο' | 'Ο' => 'o',
        'ρ' | 'Ρ' => 'p',
        'τ' | 'Τ' => 't',
        'υ' | 'Υ' => 'y',
        'χ' | 'Χ' => 'x',
        // Latin letters outside ASCII that NFKC keeps
        'ı' => 'i',
        'ɑ' => 'a',
        'ɡ' => 'g',
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ascii_is_never_invisible() {
        assert!((0u8..=0x7F).all(|b| invisible(b as char).is_none()));
    }

    #[test]
    fn look_alikes_are_lowercase_ascii() {
        for c in ['а', 'Е', 'ο', 'Ρ', 'і'] {
            let latin = latin_look_alike(c).expect("mapped");
            assert!(latin.is_ascii_lowercase(), "{c} -> {latin}");
        }
        assert_eq!(latin_look_alike('a'), None);
    }
}
