//! Mutations: bytes (with postcard varints and IEEE doubles in mind), text
//! tokens (UAI), JSON trees (any serde type: the typed structure of binary
//! files, or JSON files directly) and PNG chunks (CRCs recomputed).

use rand::{Rng, RngExt};
use serde_json::Value;

/// Integers that break size arithmetic: boundaries of `u8`…`u64`, the region
/// limit `2^28`, and `2^53` (the largest exact double).
pub const INTERESTING_INTS: [u64; 22] = [
    0,
    1,
    2,
    3,
    7,
    8,
    16,
    255,
    256,
    65_535,
    65_536,
    1 << 28,
    (1 << 28) + 1,
    (1 << 31) - 1,
    1 << 31,
    (1 << 32) - 1,
    1 << 32,
    1 << 53,
    1 << 62,
    (1 << 63) - 1,
    1 << 63,
    u64::MAX,
];

/// Doubles that break numerics: signed zeros, subnormals, extremes, NaN, infinities.
pub const INTERESTING_FLOATS: [f64; 12] =
    [0.0, -0.0, 5e-324, 1e-308, 0.5, -1.0, 1e300, 1e308, -1e308, f64::NAN, f64::INFINITY, f64::NEG_INFINITY];

/// Text tokens for number fields: the above, plus spellings parsers disagree on.
pub const INTERESTING_TOKENS: [&str; 21] = [
    "0",
    "-0",
    "1",
    "-1",
    "2",
    "nan",
    "NaN",
    "inf",
    "-inf",
    "infinity",
    "1e308",
    "1e309",
    "5e-324",
    "0x10",
    "+1",
    "1.5",
    "268435456",
    "4294967296",
    "18446744073709551615",
    "18446744073709551616",
    "99999999999999999999999999",
];

fn pick<T: Copy>(rng: &mut impl Rng, items: &[T]) -> T {
    items[rng.random_range(0..items.len())]
}

/// A random interesting integer, sometimes off by one.
pub fn interesting_int(rng: &mut impl Rng) -> u64 {
    let v = pick(rng, &INTERESTING_INTS);
    match rng.random_range(0..4) {
        0 => v.wrapping_add(1),
        1 => v.wrapping_sub(1),
        _ => v,
    }
}

/// LEB128, postcard's encoding of unsigned integers and lengths.
pub fn varint(mut v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return out;
        }
        out.push(b | 0x80);
    }
}

/// One random byte-level mutation of `data`; `others` are other seeds to splice from.
pub fn mutate_bytes(rng: &mut impl Rng, data: &mut Vec<u8>, others: &[Vec<u8>]) {
    let len = data.len();
    let pos = |rng: &mut dyn rand::Rng| if len == 0 { 0 } else { rng.random_range(0..len) };
    match rng.random_range(0..11) {
        0 if len > 0 => {
            let i = pos(rng);
            data[i] ^= 1 << rng.random_range(0..8);
        }
        1 if len > 0 => {
            let i = pos(rng);
            data[i] = pick(rng, &[0u8, 1, 0x7f, 0x80, 0xff, b'0', b' ']);
        }
        2 => {
            let i = pos(rng);
            let n = rng.random_range(1..=8);
            let bytes: Vec<u8> = (0..n).map(|_| rng.random()).collect();
            data.splice(i..i, bytes);
        }
        3 if len > 0 => {
            let i = pos(rng);
            let n = rng.random_range(1..=16.min(len - i).max(1));
            data.drain(i..(i + n).min(len));
        }
        4 => {
            let i = pos(rng);
            data.truncate(i);
        }
        5 if len > 0 => {
            let i = pos(rng);
            let n = rng.random_range(1..=32.min(len - i).max(1));
            let copy = data[i..(i + n).min(len)].to_vec();
            let j = pos(rng);
            data.splice(j..j, copy);
        }
        6 => {
            // A postcard length or integer replaced by an interesting one.
            let i = pos(rng);
            let v = varint(interesting_int(rng));
            let end = (i + rng.random_range(1..=3)).min(len);
            data.splice(i..end, v);
        }
        7 if len >= 8 => {
            let i = rng.random_range(0..=len - 8);
            data[i..i + 8].copy_from_slice(&pick(rng, &INTERESTING_FLOATS).to_le_bytes());
        }
        8 if len >= 4 => {
            let i = rng.random_range(0..=len - 4);
            data[i..i + 4].copy_from_slice(&(interesting_int(rng) as u32).to_le_bytes());
        }
        9 if !others.is_empty() => {
            let other = &others[rng.random_range(0..others.len())];
            let i = pos(rng);
            let j = if other.is_empty() { 0 } else { rng.random_range(0..other.len()) };
            data.truncate(i);
            data.extend_from_slice(&other[j..]);
        }
        _ => {
            if len > 0 {
                let i = pos(rng);
                data[i] = rng.random();
            }
        }
    }
}

/// One random token-level mutation of whitespace-separated text (UAI).
pub fn mutate_tokens(rng: &mut impl Rng, text: &str) -> String {
    let mut tokens: Vec<String> = text.split_whitespace().map(str::to_string).collect();
    let n = tokens.len();
    let at = |rng: &mut dyn rand::Rng| if n == 0 { 0 } else { rng.random_range(0..n) };
    match rng.random_range(0..9) {
        0 | 1 if n > 0 => {
            let i = at(rng);
            tokens[i] = pick(rng, &INTERESTING_TOKENS).to_string();
        }
        2 if n > 0 => {
            let i = at(rng);
            tokens[i] = interesting_int(rng).to_string();
        }
        3 if n > 0 => {
            tokens.remove(at(rng));
        }
        4 if n > 0 => {
            let i = at(rng);
            let t = tokens[i].clone();
            tokens.insert(at(rng), t);
        }
        5 if n > 1 => {
            let (i, j) = (at(rng), at(rng));
            tokens.swap(i, j);
        }
        6 => {
            let i = at(rng);
            tokens.truncate(i);
        }
        7 if n > 0 => {
            // A count one off: the classic table-size / scope-size mistake.
            let i = at(rng);
            if let Ok(v) = tokens[i].parse::<i64>() {
                tokens[i] = (v + if rng.random() { 1 } else { -1 }).to_string();
            }
        }
        _ => {
            let i = at(rng);
            tokens.insert(i, pick(rng, &INTERESTING_TOKENS).to_string());
        }
    }
    let sep = if rng.random_range(0..4) == 0 { " " } else { "\n" };
    tokens.join(sep)
}

/// A uniformly random node of a JSON tree, as a path of indices and keys
/// (reservoir sampling over one walk: the path is copied about `ln n` times).
fn random_path(rng: &mut impl Rng, v: &Value, prefix: &mut Vec<Step>, seen: &mut u64, chosen: &mut Vec<Step>) {
    *seen += 1;
    if rng.random_range(0..*seen) == 0 {
        chosen.clone_from(prefix);
    }
    match v {
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                prefix.push(Step::Index(i));
                random_path(rng, item, prefix, seen, chosen);
                prefix.pop();
            }
        }
        Value::Object(map) => {
            for (k, item) in map {
                prefix.push(Step::Key(k.clone()));
                random_path(rng, item, prefix, seen, chosen);
                prefix.pop();
            }
        }
        _ => {}
    }
}

#[derive(Debug, Clone)]
enum Step {
    Index(usize),
    Key(String),
}

fn node<'v>(v: &'v mut Value, path: &[Step]) -> &'v mut Value {
    path.iter().fold(v, |v, step| match step {
        Step::Index(i) => &mut v[*i],
        Step::Key(k) => &mut v[k.as_str()],
    })
}

/// One random structure-aware mutation of a JSON tree: a number becomes an
/// interesting one, an array loses, repeats or swaps elements, a string or a
/// key changes, or a node changes type.
pub fn mutate_json(rng: &mut impl Rng, root: &mut Value) {
    let mut path = Vec::new();
    random_path(rng, root, &mut Vec::new(), &mut 0, &mut path);
    let v = node(root, &path);
    let retype = rng.random_range(0..8) == 0;
    match v {
        _ if retype => {
            *v = match rng.random_range(0..5) {
                0 => Value::Null,
                1 => Value::from(-1),
                2 => Value::from(""),
                3 => Value::Array(Vec::new()),
                _ => Value::Object(serde_json::Map::new()),
            };
        }
        Value::Number(_) => {
            *v = match rng.random_range(0..4) {
                0 => Value::from(-((interesting_int(rng) >> 1) as i64).max(1)),
                1 => {
                    let f = pick(rng, &INTERESTING_FLOATS);
                    if f.is_finite() { Value::from(f) } else { Value::from(1e308) }
                }
                _ => Value::from(interesting_int(rng)),
            };
        }
        Value::Array(items) => {
            let n = items.len();
            match rng.random_range(0..5) {
                0 if n > 0 => {
                    items.remove(rng.random_range(0..n));
                }
                1 if n > 0 => {
                    let item = items[rng.random_range(0..n)].clone();
                    let copies = rng.random_range(1..=4);
                    for _ in 0..copies {
                        items.insert(rng.random_range(0..=items.len()), item.clone());
                    }
                }
                2 if n > 1 => {
                    let (i, j) = (rng.random_range(0..n), rng.random_range(0..n));
                    items.swap(i, j);
                }
                3 => items.clear(),
                _ => items.truncate(rng.random_range(0..=n)),
            }
        }
        Value::String(s) => {
            *s = match rng.random_range(0..5) {
                0 => String::new(),
                1 => "x".repeat(rng.random_range(1..300)),
                2 => "ε–🙂\u{0}".to_string(),
                3 => format!("{s}{s}"),
                _ => s.chars().rev().collect(),
            };
        }
        Value::Object(map) => {
            if rng.random() && !map.is_empty() {
                let k = map.keys().nth(rng.random_range(0..map.len())).cloned().unwrap_or_default();
                map.remove(&k);
            } else {
                map.insert("unexpected".into(), Value::from(1));
            }
        }
        Value::Bool(b) => *b = !*b,
        Value::Null => *v = Value::from(0),
    }
}

/// Standard CRC-32 (PNG chunk checksums).
pub fn crc32(bytes: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in bytes {
        c ^= u32::from(b);
        for _ in 0..8 {
            c = if c & 1 != 0 { 0xEDB8_8320 ^ (c >> 1) } else { c >> 1 };
        }
    }
    !c
}

/// One mutation inside a PNG chunk (the header's width, height, depth and
/// colour type most often), with the chunk's CRC recomputed so the decoder
/// reaches the mutated contents. Not a PNG: a byte mutation.
pub fn mutate_png(rng: &mut impl Rng, data: &mut Vec<u8>) {
    const SIGNATURE: usize = 8;
    let mut chunks = Vec::new();
    let mut at = SIGNATURE;
    while at + 12 <= data.len() {
        let len = u32::from_be_bytes([data[at], data[at + 1], data[at + 2], data[at + 3]]) as usize;
        if at + 12 + len > data.len() {
            break;
        }
        chunks.push((at, len));
        at += 12 + len;
    }
    if chunks.is_empty() {
        mutate_bytes(rng, data, &[]);
        return;
    }
    let (start, len) = if rng.random_range(0..2) == 0 { chunks[0] } else { chunks[rng.random_range(0..chunks.len())] };
    let body = start + 8..start + 8 + len;
    let mut contents = data[body.clone()].to_vec();
    if start == SIGNATURE && len >= 13 && rng.random() {
        // IHDR: width, height (u32 big endian), bit depth, colour type.
        match rng.random_range(0..3) {
            0 => contents[0..4].copy_from_slice(&(interesting_int(rng) as u32).to_be_bytes()),
            1 => contents[4..8].copy_from_slice(&(interesting_int(rng) as u32).to_be_bytes()),
            _ => contents[8 + rng.random_range(0..5)] = pick(rng, &[0u8, 1, 2, 3, 4, 6, 8, 16, 255]),
        }
    } else {
        mutate_bytes(rng, &mut contents, &[]);
    }
    let mut chunk = Vec::with_capacity(contents.len() + 12);
    chunk.extend_from_slice(&(contents.len() as u32).to_be_bytes());
    chunk.extend_from_slice(&data[start + 4..start + 8]);
    chunk.extend_from_slice(&contents);
    chunk.extend_from_slice(
        &crc32(&data[start + 4..start + 8].iter().chain(&contents).copied().collect::<Vec<_>>()).to_be_bytes(),
    );
    data.splice(start..body.end + 4, chunk);
}
