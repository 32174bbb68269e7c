//! The shared lexer of the text mesh readers (TetGen, gmsh, MEDIT, legacy VTK, and the
//! triangle-surface readers): reading a file with the input size limit, line and token
//! cursors that remember line numbers, and number parsing with messages that quote the
//! offending token.
//!
//! Every reader reports syntax problems as [`MeshError::Parse`] with the 1-based line and
//! what was expected there. Counts read from headers are checked against the length of the
//! file before anything is allocated for them ([`Cursor::plausible`]): a header that declares
//! more records than the file could possibly hold is refused at once.

use crate::mesh::MeshError;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// A path as it appears in error messages.
pub fn display(path: &Path) -> String {
    path.display().to_string()
}

/// `path` with `suffix` appended to the file name (`out.1` + `.node` → `out.1.node`).
pub fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut s: OsString = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// The bytes of `path`, read under the input size limit of [`crate::io::input`].
pub fn read_bytes(path: &Path) -> Result<Vec<u8>, MeshError> {
    crate::io::input::read_input(path).map_err(|err| MeshError::Io {
        path: display(path),
        err,
    })
}

/// The text of `path` (invalid UTF-8 replaced, so binary garbage ends in an ordinary parse
/// error), read under the input size limit.
pub fn read_text(path: &Path) -> Result<String, MeshError> {
    let bytes = read_bytes(path)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// A token for an error message: at most 40 characters, control characters escaped.
pub fn clip(tok: &str) -> String {
    let mut s: String = tok.chars().take(40).flat_map(char::escape_debug).collect();
    if tok.chars().count() > 40 {
        s.push('…');
    }
    s
}

/// A token (or a declared count) that does not read as what the format says; the caller
/// names the file and line ([`Cursor::at`]). `token` is [`clip`]ped.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum TokenError {
    #[error("expected {what}, found '{token}'")]
    Expected { what: String, token: String },
    #[error("{what} must be finite, found '{token}'")]
    NotFinite { what: String, token: String },
    #[error("expected integer {what}, found '{token}'")]
    NotInteger { what: String, token: String },
    /// A record count that the rest of the file cannot hold ([`check_count`]).
    #[error("the file declares {n} {what}, more than its {len} bytes can hold (at least {min_bytes} bytes each)")]
    Count {
        n: usize,
        what: String,
        len: usize,
        min_bytes: usize,
    },
}

pub fn num<T: FromStr>(tok: &str, what: &str) -> Result<T, TokenError> {
    tok.parse::<T>().map_err(|_| TokenError::Expected {
        what: what.into(),
        token: clip(tok),
    })
}

pub fn real(tok: &str, what: &str) -> Result<f64, TokenError> {
    let v: f64 = num(tok, what)?;
    if v.is_finite() {
        Ok(v)
    } else {
        Err(TokenError::NotFinite {
            what: what.into(),
            token: clip(tok),
        })
    }
}

pub fn point(t: &[&str]) -> Result<[f64; 3], TokenError> {
    Ok([
        real(t[0], "x coordinate")?,
        real(t[1], "y coordinate")?,
        real(t[2], "z coordinate")?,
    ])
}

/// An integer tag written as an integer or as an integral real (`2`, `2.0`, `-1e0`).
pub fn int_tag(tok: &str, what: &str) -> Result<i64, TokenError> {
    if let Ok(v) = tok.parse::<i64>() {
        return Ok(v);
    }
    match tok.parse::<f64>() {
        Ok(v) if v.is_finite() && v.fract() == 0.0 && v.abs() <= 9.0e15 => Ok(v as i64),
        _ => Err(TokenError::NotInteger {
            what: what.into(),
            token: clip(tok),
        }),
    }
}

/// "1 value" / "3 values".
pub fn values(n: usize) -> String {
    if n == 1 {
        "1 value".into()
    } else {
        format!("{n} values")
    }
}

/// Line reader over a whole file that skips blank (and comment) lines and remembers line
/// numbers; it also hands out single tokens for the free-format parts of MEDIT.
pub struct Cursor<'a> {
    path: &'a str,
    /// Length of the whole text in bytes (bounds plausible record counts).
    len: usize,
    lines: std::iter::Enumerate<std::str::Lines<'a>>,
    comment: Option<char>,
    /// Line number of the last line read (0 before the first).
    pub last: usize,
    /// Unconsumed tokens of the current line in token mode.
    toks: Vec<&'a str>,
    pos: usize,
}

pub type Line<'a> = (usize, Vec<&'a str>);

impl<'a> Cursor<'a> {
    pub fn new(text: &'a str, path: &'a str, comment: Option<char>) -> Self {
        Cursor {
            path,
            len: text.len(),
            lines: text.lines().enumerate(),
            comment,
            last: 0,
            toks: Vec::new(),
            pos: 0,
        }
    }

    pub fn err(&self, line: usize, msg: impl std::fmt::Display) -> MeshError {
        MeshError::Parse {
            path: self.path.to_string(),
            line,
            msg: msg.to_string(),
        }
    }

    /// `r`'s error as a parse error at `line` (its message as the error's text).
    pub fn at<T, E: std::fmt::Display>(
        &self,
        line: usize,
        r: Result<T, E>,
    ) -> Result<T, MeshError> {
        r.map_err(|m| self.err(line, m.to_string()))
    }

    pub fn eof(&self, what: &str) -> MeshError {
        self.err(
            self.last.max(1),
            format!("unexpected end of file, expected {what}"),
        )
    }

    /// Next line with at least one token (after removing comments), with its number.
    /// Drops any unconsumed tokens of the current line.
    pub fn line(&mut self) -> Option<Line<'a>> {
        self.toks.clear();
        self.pos = 0;
        for (i, l) in self.lines.by_ref() {
            self.last = i + 1;
            let l = match self.comment {
                Some(c) => l.split(c).next().unwrap_or(""),
                None => l,
            };
            let t: Vec<&str> = l.split_whitespace().collect();
            if !t.is_empty() {
                return Some((i + 1, t));
            }
        }
        None
    }

    /// Next line, or an "unexpected end of file, expected {what}" error.
    pub fn need(&mut self, what: impl FnOnce() -> String) -> Result<Line<'a>, MeshError> {
        match self.line() {
            Some(l) => Ok(l),
            None => Err(self.eof(&what())),
        }
    }

    /// Next line, which must have exactly `n` tokens.
    pub fn need_n(&mut self, n: usize, what: &str) -> Result<Line<'a>, MeshError> {
        let (ln, t) = self.need(|| what.to_string())?;
        if t.len() != n {
            return Err(self.err(
                ln,
                format!("expected {what} ({}), found {}", values(n), values(t.len())),
            ));
        }
        Ok((ln, t))
    }

    /// Next token, possibly from a following line.
    pub fn token(&mut self) -> Option<(usize, &'a str)> {
        loop {
            if let Some(&t) = self.toks.get(self.pos) {
                self.pos += 1;
                return Some((self.last, t));
            }
            let (_, t) = self.line()?;
            self.toks = t;
        }
    }

    /// The first unconsumed token of the current line, if any.
    pub fn leftover(&self) -> Option<&'a str> {
        self.toks.get(self.pos).copied()
    }

    /// Refuses a count `n` read at `line` when `n` records of at least `min_bytes` bytes each
    /// cannot fit in the file, before anything is allocated for them.
    pub fn plausible(
        &self,
        line: usize,
        n: usize,
        min_bytes: usize,
        what: &str,
    ) -> Result<(), MeshError> {
        check_count(n, min_bytes, self.len, what).map_err(|m| self.err(line, m))
    }
}

/// Counts up to this are not checked against the file length: reading such a file to its
/// end costs nothing, and the reader then names the line where the records run out.
pub const SMALL_COUNT: usize = 4096;

/// Checks that `n` records of at least `min_bytes` bytes each fit in `len` bytes (counts up
/// to [`SMALL_COUNT`] pass).
pub fn check_count(n: usize, min_bytes: usize, len: usize, what: &str) -> Result<(), TokenError> {
    if n > SMALL_COUNT && n.saturating_mul(min_bytes) > len {
        return Err(TokenError::Count {
            n,
            what: what.into(),
            len,
            min_bytes,
        });
    }
    Ok(())
}
