//! The XML head of a `.vtu`: a scanner of start and end tags with their attributes and
//! 1-based lines, and the unescaping of attribute values.

use super::grid::{err, VtuReadError};

/// One XML start or end tag of the head.
pub(super) struct Tag {
    pub(super) name: String,
    pub(super) attrs: Vec<(String, String)>,
    pub(super) closing: bool,
    pub(super) self_closing: bool,
    /// Byte position just past `>`.
    pub(super) end: usize,
    pub(super) line: usize,
}

impl Tag {
    pub(super) fn attr(&self, key: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// The XML part of the file (everything before the appended block) as a tag stream.
pub(super) struct Scanner<'a> {
    pub(super) text: &'a str,
    pub(super) pos: usize,
}

impl Scanner<'_> {
    pub(super) fn line_at(&self, pos: usize) -> usize {
        1 + self.text.as_bytes()[..pos.min(self.text.len())]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
    }

    /// The next start or end tag, skipping declarations, comments and text.
    pub(super) fn next_tag(&mut self) -> Result<Option<Tag>, VtuReadError> {
        loop {
            let Some(lt) = self.text[self.pos..].find('<').map(|k| self.pos + k) else {
                self.pos = self.text.len();
                return Ok(None);
            };
            let rest = &self.text[lt..];
            let line = self.line_at(lt);
            let skip_to = |close: &str| -> Result<usize, VtuReadError> {
                rest.find(close)
                    .map(|k| lt + k + close.len())
                    .ok_or_else(|| VtuReadError {
                        line,
                        msg: format!("unterminated markup, expected '{close}'"),
                    })
            };
            if rest.starts_with("<?") {
                self.pos = skip_to("?>")?;
                continue;
            }
            if rest.starts_with("<!--") {
                self.pos = skip_to("-->")?;
                continue;
            }
            if rest.starts_with("<!") {
                self.pos = skip_to(">")?;
                continue;
            }
            return self.tag(lt, line).map(Some);
        }
    }

    fn tag(&mut self, lt: usize, line: usize) -> Result<Tag, VtuReadError> {
        let b = self.text.as_bytes();
        let mut i = lt + 1;
        let closing = b.get(i) == Some(&b'/');
        if closing {
            i += 1;
        }
        let start = i;
        while i < b.len() && !b[i].is_ascii_whitespace() && b[i] != b'>' && b[i] != b'/' {
            i += 1;
        }
        let name = self.text[start..i].to_string();
        if name.is_empty() {
            return err(line, "empty XML tag name");
        }
        let mut attrs = Vec::new();
        loop {
            while i < b.len() && b[i].is_ascii_whitespace() {
                i += 1;
            }
            match b.get(i) {
                None => return err(line, format!("unterminated tag <{name}")),
                Some(b'>') => {
                    self.pos = i + 1;
                    return Ok(Tag {
                        name,
                        attrs,
                        closing,
                        self_closing: false,
                        end: i + 1,
                        line,
                    });
                }
                Some(b'/') if b.get(i + 1) == Some(&b'>') => {
                    self.pos = i + 2;
                    return Ok(Tag {
                        name,
                        attrs,
                        closing,
                        self_closing: true,
                        end: i + 2,
                        line,
                    });
                }
                _ => {}
            }
            let k0 = i;
            while i < b.len() && b[i] != b'=' && b[i] != b'>' && !b[i].is_ascii_whitespace() {
                i += 1;
            }
            let key = self.text[k0..i].to_string();
            while i < b.len() && b[i].is_ascii_whitespace() {
                i += 1;
            }
            if b.get(i) != Some(&b'=') {
                return err(line, format!("<{name}>: attribute '{key}' has no value"));
            }
            i += 1;
            while i < b.len() && b[i].is_ascii_whitespace() {
                i += 1;
            }
            let q = match b.get(i) {
                Some(&q @ (b'"' | b'\'')) => q,
                _ => return err(line, format!("<{name}>: attribute '{key}' is not quoted")),
            };
            let v0 = i + 1;
            let Some(len) = b[v0..].iter().position(|&c| c == q) else {
                return err(line, format!("<{name}>: unterminated value of '{key}'"));
            };
            attrs.push((key, unescape(&self.text[v0..v0 + len])));
            i = v0 + len + 1;
        }
    }
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}
