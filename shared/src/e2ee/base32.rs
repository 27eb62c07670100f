//! Crockford's base32 (<https://www.crockford.com/base32.html>) for byte strings whose bit
//! length is a multiple of five: the bytes as one big-endian bit string, five bits a symbol.
//! Its alphabet has no I, L, O or U, so what a person reads back cannot be mistaken, and its
//! lowercase form is a valid note id.

const ALPHABET: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/// Upper-case symbols of `bytes`; `bytes.len() * 8` must be a multiple of 5.
pub(crate) fn encode_upper(bytes: &[u8]) -> String {
    debug_assert!((bytes.len() * 8).is_multiple_of(5), "whole symbols only");
    let mut out = String::with_capacity(bytes.len() * 8 / 5);
    let (mut acc, mut bits) = (0u32, 0u32);
    for &b in bytes {
        acc = (acc << 8) | u32::from(b);
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            out.push(ALPHABET[((acc >> bits) & 31) as usize] as char);
        }
        acc &= (1 << bits) - 1;
    }
    out
}

/// Lower-case symbols of `bytes`: the form ids take.
pub(crate) fn encode_lower(bytes: &[u8]) -> String {
    encode_upper(bytes).to_ascii_lowercase()
}

/// The value of one symbol as a person may type it: either case, `O` read as `0`, `I` and `L`
/// as `1`. `None` for anything else (`U` included).
pub(crate) fn symbol_value(c: char) -> Option<u8> {
    let c = match c.to_ascii_uppercase() {
        'O' => '0',
        'I' | 'L' => '1',
        c => c,
    };
    ALPHABET
        .iter()
        .position(|&a| a as char == c)
        .map(|v| v as u8)
}

/// Bytes of `values` (each 0..32), whose count times five must be a multiple of 8.
pub(crate) fn decode_values(values: &[u8]) -> Vec<u8> {
    debug_assert!((values.len() * 5).is_multiple_of(8), "whole bytes only");
    let mut out = Vec::with_capacity(values.len() * 5 / 8);
    let (mut acc, mut bits) = (0u32, 0u32);
    for &v in values {
        acc = (acc << 5) | u32::from(v & 31);
        bits += 5;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
        acc &= (1 << bits) - 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_encodings_and_round_trips() {
        // Five bytes are eight symbols; every value of a symbol appears in this sequence.
        assert_eq!(encode_upper(&[0, 0, 0, 0, 0]), "00000000");
        assert_eq!(encode_upper(&[0xff; 5]), "ZZZZZZZZ");
        assert_eq!(encode_upper(&[0x08, 0x86, 0x42, 0x98, 0xe8]), "12345678");
        assert_eq!(encode_lower(b"hello"), "d1jprv3f");
        for bytes in [vec![1u8, 2, 3, 4, 5], (0..=39).collect::<Vec<u8>>()] {
            let text = encode_upper(&bytes);
            let values: Vec<u8> = text.chars().map(|c| symbol_value(c).unwrap()).collect();
            assert_eq!(decode_values(&values), bytes);
        }
    }

    #[test]
    fn symbols_a_person_may_type() {
        assert_eq!(symbol_value('o'), Some(0));
        assert_eq!(symbol_value('O'), Some(0));
        assert_eq!(symbol_value('i'), Some(1));
        assert_eq!(symbol_value('L'), Some(1));
        assert_eq!(symbol_value('z'), Some(31));
        assert_eq!(symbol_value('U'), None);
        assert_eq!(symbol_value('-'), None);
        assert_eq!(symbol_value('é'), None);
    }
}
