//! Decoding a `DataArray`'s values: decimal text, or little-endian binary behind VTK's
//! headers, raw or base64, optionally zlib-compressed blocks, every size checked before it is
//! allocated.

use super::grid::{err, VtuReadError, VtuValues};

/// Largest decompressed/compressed ratio accepted (deflate's bound is about 1032:1).
const MAX_ZLIB_RATIO: usize = 1100;

/// Where a `DataArray`'s values are.
pub(super) enum Payload<'a> {
    Ascii(&'a str),
    /// Inline base64 (whitespace removed).
    Inline(Vec<u8>),
    Appended(usize),
}

/// A `DataArray` as declared, not yet decoded.
pub(super) struct Declared<'a> {
    pub(super) name: String,
    pub(super) ty: String,
    pub(super) components: usize,
    pub(super) payload: Payload<'a>,
    pub(super) line: usize,
}

/// How binary arrays are framed.
#[derive(Clone, Copy)]
pub(super) struct Framing<'a> {
    pub(super) header_bytes: usize,
    pub(super) zlib: bool,
    pub(super) appended: Appended<'a>,
}

/// The appended block (the bytes after `_`) and whether it is base64, if the file has one.
pub(super) type Appended<'a> = Option<(&'a [u8], bool)>;

/// Bytes per value of a VTK scalar type name.
pub(super) fn type_size(ty: &str) -> Option<usize> {
    Some(match ty {
        "Int8" | "UInt8" => 1,
        "Int16" | "UInt16" => 2,
        "Int32" | "UInt32" | "Float32" => 4,
        "Int64" | "UInt64" | "Float64" => 8,
        _ => return None,
    })
}

pub(super) fn append(a: &mut VtuValues, b: VtuValues) {
    match (a, b) {
        (VtuValues::Int(a), VtuValues::Int(b)) => a.extend(b),
        (VtuValues::Float(a), VtuValues::Float(b)) => a.extend(b),
        (a, b) => {
            let mut v = a.to_f64();
            v.extend(b.to_f64());
            *a = VtuValues::Float(v);
        }
    }
}

/// An integer array (a float array with integral values is accepted).
pub(super) fn ints(
    d: &Declared<'_>,
    count: Option<usize>,
    f: Framing<'_>,
) -> Result<Vec<i64>, VtuReadError> {
    match decode(d, count, f)? {
        VtuValues::Int(v) => Ok(v),
        VtuValues::Float(v) => v
            .iter()
            .map(|&x| {
                if x.fract() == 0.0 && x.abs() < 9e15 {
                    Ok(x as i64)
                } else {
                    err(
                        d.line,
                        format!("array '{}' holds the non-integer {x}", d.name),
                    )
                }
            })
            .collect(),
    }
}

/// The values of one array; `count` is the number of values the piece declares for it.
pub(super) fn decode(
    d: &Declared<'_>,
    count: Option<usize>,
    f: Framing<'_>,
) -> Result<VtuValues, VtuReadError> {
    let size = type_size(&d.ty).unwrap_or(8);
    let bytes = match &d.payload {
        Payload::Ascii(text) => return ascii(d, text, count),
        Payload::Inline(b64) => stream(d, b64, true, count.map(|c| c * size), f)?,
        Payload::Appended(off) => {
            let Some((block, is_b64)) = f.appended else {
                return err(
                    d.line,
                    format!(
                        "DataArray '{}' is appended but the file has no <AppendedData>",
                        d.name
                    ),
                );
            };
            let Some(rest) = block.get(*off..) else {
                return err(
                    d.line,
                    format!(
                        "DataArray '{}': offset {off} is past the appended data",
                        d.name
                    ),
                );
            };
            stream(d, rest, is_b64, count.map(|c| c * size), f)?
        }
    };
    if !bytes.len().is_multiple_of(size) || count.is_some_and(|c| c * size != bytes.len()) {
        return err(
            d.line,
            format!(
                "DataArray '{}' holds {} bytes, expected {} values of {size} bytes",
                d.name,
                bytes.len(),
                count.map_or("whole".to_string(), |c| c.to_string())
            ),
        );
    }
    Ok(from_le(&d.ty, &bytes))
}

fn ascii(d: &Declared<'_>, text: &str, count: Option<usize>) -> Result<VtuValues, VtuReadError> {
    let toks: Vec<&str> = text.split_ascii_whitespace().collect();
    if let Some(c) = count {
        if toks.len() != c {
            return err(
                d.line,
                format!(
                    "DataArray '{}' has {} values, expected {c}",
                    d.name,
                    toks.len()
                ),
            );
        }
    }
    let bad = |t: &str| VtuReadError {
        line: d.line,
        msg: format!(
            "DataArray '{}': '{}' is not a {}",
            d.name,
            t.chars().take(24).collect::<String>(),
            d.ty
        ),
    };
    if d.ty.starts_with("Float") {
        toks.iter()
            .map(|t| t.parse::<f64>().map_err(|_| bad(t)))
            .collect::<Result<_, _>>()
            .map(VtuValues::Float)
    } else {
        toks.iter()
            .map(|t| t.parse::<i64>().map_err(|_| bad(t)))
            .collect::<Result<_, _>>()
            .map(VtuValues::Int)
    }
}

/// Values of type `ty` from little-endian bytes (a multiple of its size).
fn from_le(ty: &str, b: &[u8]) -> VtuValues {
    macro_rules! conv {
        ($t:ty, $n:expr, $to:expr) => {
            b.chunks_exact($n)
                .map(|c| {
                    let mut a = [0u8; $n];
                    a.copy_from_slice(c);
                    $to(<$t>::from_le_bytes(a))
                })
                .collect()
        };
    }
    match ty {
        "Float32" => VtuValues::Float(conv!(f32, 4, f64::from)),
        "Float64" => VtuValues::Float(conv!(f64, 8, |x| x)),
        "Int8" => VtuValues::Int(conv!(i8, 1, i64::from)),
        "UInt8" => VtuValues::Int(conv!(u8, 1, i64::from)),
        "Int16" => VtuValues::Int(conv!(i16, 2, i64::from)),
        "UInt16" => VtuValues::Int(conv!(u16, 2, i64::from)),
        "Int32" => VtuValues::Int(conv!(i32, 4, i64::from)),
        "UInt32" => VtuValues::Int(conv!(u32, 4, i64::from)),
        // UInt64 values above i64::MAX wrap; they are refused later as out-of-range indices.
        "UInt64" => VtuValues::Int(conv!(u64, 8, |x: u64| x as i64)),
        _ => VtuValues::Int(conv!(i64, 8, |x| x)),
    }
}

/// A source of binary bytes: raw, or base64 text decoded on demand.
struct Source<'a> {
    data: &'a [u8],
    base64: bool,
}

impl Source<'_> {
    /// The first `n` bytes of the stream starting at `at` (a byte offset for raw data, a
    /// character offset for base64), and the position just past them.
    fn take(&self, at: usize, n: usize) -> Option<(Vec<u8>, usize)> {
        if self.base64 {
            let chars = n.div_ceil(3).checked_mul(4)?;
            let text = self.data.get(at..at.checked_add(chars)?)?;
            let mut out = base64_decode(text)?;
            if out.len() < n {
                return None;
            }
            out.truncate(n);
            Some((out, at + chars))
        } else {
            let b = self.data.get(at..at.checked_add(n)?)?;
            Some((b.to_vec(), at + n))
        }
    }

    /// Bytes available from `at`, as decoded bytes (an upper bound for base64).
    fn available(&self, at: usize) -> usize {
        let r = self.data.len().saturating_sub(at);
        if self.base64 {
            r / 4 * 3
        } else {
            r
        }
    }
}

/// The decoded bytes of one binary array (header, then data or zlib blocks).
fn stream(
    d: &Declared<'_>,
    data: &[u8],
    base64: bool,
    expected: Option<usize>,
    f: Framing<'_>,
) -> Result<Vec<u8>, VtuReadError> {
    let src = Source { data, base64 };
    let hb = f.header_bytes;
    let short = |what: &str| VtuReadError {
        line: d.line,
        msg: format!("DataArray '{}': binary data ends inside its {what}", d.name),
    };
    let word = |b: &[u8], k: usize| -> usize {
        let mut a = [0u8; 8];
        a[..hb].copy_from_slice(&b[k * hb..(k + 1) * hb]);
        usize::try_from(u64::from_le_bytes(a)).unwrap_or(usize::MAX)
    };
    if !f.zlib {
        let (h, _) = src.take(0, hb).ok_or_else(|| short("header"))?;
        let n = word(&h, 0);
        if n > src.available(0).saturating_sub(hb) {
            return err(
                d.line,
                format!(
                    "DataArray '{}': byte count {n} is past the end of the data",
                    d.name
                ),
            );
        }
        let (all, _) = if base64 {
            src.take(0, hb + n).ok_or_else(|| short("data"))?
        } else {
            src.take(hb, n)
                .map(|(b, e)| {
                    let mut v = vec![0u8; hb];
                    v.extend(b);
                    (v, e)
                })
                .ok_or_else(|| short("data"))?
        };
        return Ok(all[hb..].to_vec());
    }
    let (h3, _) = src
        .take(0, 3 * hb)
        .ok_or_else(|| short("compression header"))?;
    let (blocks, block, last) = (word(&h3, 0), word(&h3, 1), word(&h3, 2));
    if blocks > src.available(0) / hb {
        return err(
            d.line,
            format!(
                "DataArray '{}': {blocks} compressed blocks is more than the data holds",
                d.name
            ),
        );
    }
    let (h, mut at) = src
        .take(0, (3 + blocks) * hb)
        .ok_or_else(|| short("compression header"))?;
    if !base64 {
        at = (3 + blocks) * hb;
    }
    let total = match blocks {
        0 => 0,
        b => (b - 1)
            .checked_mul(block)
            .and_then(|s| s.checked_add(if last == 0 { block } else { last }))
            .unwrap_or(usize::MAX),
    };
    let compressed: usize = (0..blocks)
        .map(|k| word(&h, 3 + k))
        .fold(0, usize::saturating_add);
    if expected.is_some_and(|e| e != total)
        || total
            > compressed
                .saturating_mul(MAX_ZLIB_RATIO)
                .saturating_add(4096)
        || compressed > src.available(at)
    {
        return err(
            d.line,
            format!(
                "DataArray '{}': compression header declares {total} bytes in {compressed} compressed bytes, expected {}",
                d.name,
                expected.map_or("a plausible size".to_string(), |e| format!("{e} bytes"))
            ),
        );
    }
    let (packed, _) = src
        .take(at, compressed)
        .ok_or_else(|| short("compressed blocks"))?;
    let mut out = Vec::with_capacity(total);
    let mut pos = 0;
    for k in 0..blocks {
        let c = word(&h, 3 + k);
        let want = if k + 1 == blocks && last != 0 {
            last
        } else {
            block
        };
        let part =
            miniz_oxide::inflate::decompress_to_vec_zlib_with_limit(&packed[pos..pos + c], want)
                .map_err(|e| VtuReadError {
                    line: d.line,
                    msg: format!(
                        "DataArray '{}': block {k} is not a valid zlib stream ({:?})",
                        d.name, e.status
                    ),
                })?;
        if part.len() != want {
            return err(
                d.line,
                format!(
                    "DataArray '{}': block {k} holds {} bytes, expected {want}",
                    d.name,
                    part.len()
                ),
            );
        }
        out.extend(part);
        pos += c;
    }
    Ok(out)
}

/// Standard base64 (RFC 4648, with `=` padding) of a whole number of 4-character groups.
fn base64_decode(text: &[u8]) -> Option<Vec<u8>> {
    fn val(c: u8) -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    }
    if !text.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    for g in text.chunks_exact(4) {
        let pad = g.iter().rev().take_while(|&&c| c == b'=').count().min(2);
        let mut acc = 0u32;
        for &c in &g[..4 - pad] {
            acc = (acc << 6) | val(c)?;
        }
        acc <<= 6 * pad as u32;
        let b = acc.to_be_bytes();
        out.extend_from_slice(&b[1..4 - pad]);
    }
    Some(out)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// Base64 of `bytes` (with padding), for the tests.
    pub(crate) fn b64(bytes: &[u8]) -> String {
        const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut s = String::new();
        for c in bytes.chunks(3) {
            let n = c
                .iter()
                .enumerate()
                .fold(0u32, |a, (i, &b)| a | (b as u32) << (16 - 8 * i));
            for k in 0..=c.len() {
                s.push(A[(n >> (18 - 6 * k) & 63) as usize] as char);
            }
            s.push_str(&"=".repeat(3 - c.len()));
        }
        s
    }

    #[test]
    fn base64_decodes_with_and_without_padding() {
        for data in [&b""[..], b"a", b"ab", b"abc", b"\x00\xff\x10\x80"] {
            assert_eq!(base64_decode(b64(data).as_bytes()).unwrap(), data);
        }
        assert!(base64_decode(b"ab$=").is_none());
        assert!(base64_decode(b"abc").is_none());
    }
}
