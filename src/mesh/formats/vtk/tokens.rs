//! The token stream of a legacy VTK file body and its sections: `CELLS` (classic and VTK 5
//! layouts) and the `CELL_DATA`/`POINT_DATA` attributes, which are skipped except for the
//! region-tag array. See [`crate::mesh::vtk`] for the accepted subset.

use crate::mesh::lexer::{clip, int_tag, num, SMALL_COUNT};
use crate::mesh::MeshError;

/// Cell-data array names taken as the region tag, compared case-insensitively.
pub const TAG_ARRAY_NAMES: [&str; 7] = [
    "tag",
    "region",
    "gmsh:physical",
    "medit:ref",
    "cellentityids",
    "material",
    "materialids",
];

pub const VTK_TETRA: u8 = 10;
pub const VTK_VOXEL: u8 = 11;
pub const VTK_HEXAHEDRON: u8 = 12;

/// Name of a VTK volume cell type that is not supported, if `t` is one.
pub fn other_cell(t: i64) -> Option<&'static str> {
    Some(match t {
        13 => "wedge",
        14 => "pyramid",
        15 => "pentagonal prism",
        16 => "hexagonal prism",
        24 => "quadratic tetrahedron",
        25 => "quadratic hexahedron",
        26 => "quadratic wedge",
        27 => "quadratic pyramid",
        29 => "triquadratic hexahedron",
        42 => "polyhedron",
        71..=81 => "Lagrange or Bezier cell",
        _ => return None,
    })
}

/// Token stream of a legacy VTK file body (from line 4), with line numbers.
pub struct Tokens<'a> {
    pub path: &'a str,
    pub toks: Vec<(usize, &'a str)>,
    pub pos: usize,
}

impl<'a> Tokens<'a> {
    pub fn err(&self, line: usize, msg: impl std::fmt::Display) -> MeshError {
        MeshError::Parse {
            path: self.path.to_string(),
            line,
            msg: msg.to_string(),
        }
    }

    /// Line of the current position (or of the last token at the end).
    pub fn line(&self) -> usize {
        self.toks
            .get(self.pos)
            .or(self.toks.last())
            .map_or(3, |t| t.0)
    }

    pub fn peek(&self) -> Option<&'a str> {
        self.toks.get(self.pos).map(|t| t.1)
    }

    pub fn next(&mut self, what: &str) -> Result<(usize, &'a str), MeshError> {
        match self.toks.get(self.pos) {
            Some(&t) => {
                self.pos += 1;
                Ok(t)
            }
            None => Err(self.err(
                self.line(),
                format!("unexpected end of file, expected {what}"),
            )),
        }
    }

    pub fn parse<T, E: std::fmt::Display>(
        &mut self,
        what: &str,
        f: impl Fn(&str, &str) -> Result<T, E>,
    ) -> Result<T, MeshError> {
        let (ln, t) = self.next(what)?;
        f(t, what).map_err(|m| self.err(ln, m.to_string()))
    }

    pub fn count(&mut self, what: &str) -> Result<usize, MeshError> {
        self.parse(what, num::<usize>)
    }

    /// A count of records of `per` tokens each, refused (before anything is allocated for
    /// it) when the rest of the file has fewer tokens than that (counts up to
    /// [`SMALL_COUNT`] pass, and end of file then names the missing record).
    pub fn records(&mut self, what: &str, per: usize) -> Result<usize, MeshError> {
        let ln = self.line();
        let n = self.count(what)?;
        let left = self.toks.len() - self.pos;
        if n > SMALL_COUNT && n.saturating_mul(per) > left {
            return Err(self.err(
                ln,
                format!(
                    "{what} is {n}, but only {left} values follow in the file ({per} per entry needed)"
                ),
            ));
        }
        Ok(n)
    }

    /// Skips `n` value tokens (checking that they are not keywords of a new section).
    pub fn skip_values(&mut self, n: usize, what: &str) -> Result<(), MeshError> {
        for i in 0..n {
            let (ln, t) = self.next(&format!("value {} of {n} of {what}", i + 1))?;
            if t.starts_with(|c: char| c.is_ascii_alphabetic()) && !is_number_word(t) {
                return Err(self.err(
                    ln,
                    format!(
                        "expected value {} of {n} of {what}, found '{}' (count too large?)",
                        i + 1,
                        clip(t)
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Reads a data type token and rejects string data, whose token count is not fixed.
    pub fn data_type(&mut self, what: &str) -> Result<(), MeshError> {
        let (ln, t) = self.next(&format!("data type of {what}"))?;
        if t.eq_ignore_ascii_case("string") || t.eq_ignore_ascii_case("utf8_string") {
            return Err(self.err(ln, format!("string arrays are not supported ({what})")));
        }
        Ok(())
    }

    /// Skips a VTK 5 `METADATA` block (`COMPONENT_NAMES` with `ncomp` names, `INFORMATION n`
    /// with `n` `NAME`/`DATA` line pairs) if one starts here.
    pub fn skip_metadata(&mut self, ncomp: usize) -> Result<(), MeshError> {
        if !self
            .peek()
            .is_some_and(|t| t.eq_ignore_ascii_case("METADATA"))
        {
            return Ok(());
        }
        self.pos += 1;
        loop {
            match self.peek() {
                Some(t) if t.eq_ignore_ascii_case("COMPONENT_NAMES") => {
                    self.pos += 1;
                    for _ in 0..ncomp {
                        self.next("component name")?;
                    }
                }
                Some(t) if t.eq_ignore_ascii_case("INFORMATION") => {
                    self.pos += 1;
                    let n = self.count("number of INFORMATION entries")?;
                    // Each entry is a `NAME ... LOCATION ...` line and a `DATA ...` line.
                    for _ in 0..n.saturating_mul(2) {
                        let (ln, _) = self.next("INFORMATION entry")?;
                        while self.toks.get(self.pos).is_some_and(|t| t.0 == ln) {
                            self.pos += 1;
                        }
                    }
                }
                _ => return Ok(()),
            }
        }
    }
}

/// `nan`, `inf`, `infinity` (any case): words that are values, not keywords.
fn is_number_word(t: &str) -> bool {
    let t = t.trim_start_matches(['+', '-']);
    t.eq_ignore_ascii_case("nan")
        || t.eq_ignore_ascii_case("inf")
        || t.eq_ignore_ascii_case("infinity")
}

/// Cell connectivity as read: `(start, len)` into `conn` per cell.
pub struct Cells {
    pub conn: Vec<usize>,
    pub ranges: Vec<(usize, usize)>,
    pub line: usize,
}

pub fn read_cells(tk: &mut Tokens, version_major: u32, nn: usize) -> Result<Cells, MeshError> {
    let line = tk.line();
    let a = tk.records("number of cells (or offsets) after CELLS", 1)?;
    let b = tk.records("connectivity size after CELLS", 1)?;
    let idx = |tk: &mut Tokens, what: &str| -> Result<usize, MeshError> {
        let (ln, t) = tk.next(what)?;
        let i: usize = num(t, what).map_err(|m| tk.err(ln, m))?;
        if i >= nn {
            return Err(tk.err(
                ln,
                format!("point index {i} out of range (file has {nn} points)"),
            ));
        }
        Ok(i)
    };
    let new_layout =
        version_major >= 5 && tk.peek().is_some_and(|t| t.eq_ignore_ascii_case("OFFSETS"));
    let mut conn = Vec::with_capacity(b.min(1 << 20));
    let mut ranges = Vec::new();
    if new_layout {
        tk.pos += 1;
        tk.data_type("OFFSETS")?;
        let mut offsets = Vec::with_capacity(a.min(1 << 22));
        for i in 0..a {
            let (ln, t) = tk.next(&format!("offset {} of {a}", i + 1))?;
            let o: usize = num(t, "offset").map_err(|m| tk.err(ln, m))?;
            if o > b || offsets.last().is_some_and(|&p| o < p) || (i == 0 && o != 0) {
                return Err(tk.err(
                    ln,
                    format!("offset {o} is not a non-decreasing index into {b} connectivity entries starting at 0"),
                ));
            }
            offsets.push(o);
        }
        if offsets.last().is_some_and(|&o| o != b) {
            return Err(tk.err(
                tk.line(),
                format!("last offset must equal the connectivity size {b}"),
            ));
        }
        let (ln, t) = tk.next("'CONNECTIVITY'")?;
        if !t.eq_ignore_ascii_case("CONNECTIVITY") {
            return Err(tk.err(ln, format!("expected 'CONNECTIVITY', found '{}'", clip(t))));
        }
        tk.data_type("CONNECTIVITY")?;
        for i in 0..b {
            conn.push(idx(tk, &format!("connectivity entry {} of {b}", i + 1))?);
        }
        ranges.extend(offsets.windows(2).map(|w| (w[0], w[1] - w[0])));
    } else {
        let mut read = 0usize;
        for c in 0..a {
            let (ln, t) = tk.next(&format!("cell {} of {a}", c + 1))?;
            let k: usize = num(t, "number of points of a cell").map_err(|m| tk.err(ln, m))?;
            read = read.saturating_add(k).saturating_add(1);
            if read > b {
                return Err(tk.err(
                    ln,
                    format!("cells use more than the {b} values declared after CELLS"),
                ));
            }
            ranges.push((conn.len(), k));
            for i in 0..k {
                conn.push(idx(
                    tk,
                    &format!("point {} of {k} of cell {}", i + 1, c + 1),
                )?);
            }
        }
        if read != b {
            return Err(tk.err(
                tk.line(),
                format!("CELLS declares {b} values but the {a} cells use {read}"),
            ));
        }
    }
    Ok(Cells { conn, ranges, line })
}

/// Skips one attribute section or returns the region tags if it is a tag array.
/// `n` is the number of points or cells of the enclosing `*_DATA` block.
pub fn attribute(
    tk: &mut Tokens,
    key: &str,
    n: usize,
    cell: bool,
) -> Result<Option<Vec<i64>>, MeshError> {
    let is_tag = |name: &str| cell && TAG_ARRAY_NAMES.iter().any(|t| t.eq_ignore_ascii_case(name));
    let read_tags = |tk: &mut Tokens, name: &str| -> Result<Vec<i64>, MeshError> {
        let mut v = Vec::with_capacity(n.min(tk.toks.len() - tk.pos));
        for i in 0..n {
            let (ln, t) = tk.next(&format!("value {} of {n} of '{}'", i + 1, clip(name)))?;
            v.push(int_tag(t, "region tag").map_err(|m| tk.err(ln, m))?);
        }
        Ok(v)
    };
    match key.to_ascii_uppercase().as_str() {
        "SCALARS" => {
            let (_, name) = tk.next("array name after SCALARS")?;
            tk.data_type(name)?;
            let mut ncomp = 1;
            if tk.peek().is_some_and(|t| t.parse::<usize>().is_ok()) {
                ncomp = tk.count("number of components")?;
                if !(1..=4).contains(&ncomp) {
                    return Err(tk.err(
                        tk.line(),
                        format!("SCALARS must have 1 to 4 components, found {ncomp}"),
                    ));
                }
            }
            if tk
                .peek()
                .is_some_and(|t| t.eq_ignore_ascii_case("LOOKUP_TABLE"))
            {
                tk.pos += 1;
                tk.next("lookup table name")?;
            }
            let out = if is_tag(name) && ncomp == 1 {
                Some(read_tags(tk, name)?)
            } else {
                tk.skip_values(n.saturating_mul(ncomp), name)?;
                None
            };
            tk.skip_metadata(ncomp)?;
            Ok(out)
        }
        k @ ("VECTORS" | "NORMALS" | "TENSORS" | "TENSORS6") => {
            let (_, name) = tk.next(&format!("array name after {k}"))?;
            tk.data_type(name)?;
            let w = match k {
                "TENSORS" => 9,
                "TENSORS6" => 6,
                _ => 3,
            };
            tk.skip_values(n.saturating_mul(w), name)?;
            tk.skip_metadata(w)?;
            Ok(None)
        }
        "TEXTURE_COORDINATES" => {
            let (_, name) = tk.next("array name")?;
            let dim = tk.count("texture dimension")?;
            tk.data_type(name)?;
            tk.skip_values(n.saturating_mul(dim), name)?;
            tk.skip_metadata(dim)?;
            Ok(None)
        }
        "COLOR_SCALARS" => {
            let (_, name) = tk.next("array name")?;
            let w = tk.count("number of color components")?;
            tk.skip_values(n.saturating_mul(w), name)?;
            Ok(None)
        }
        "LOOKUP_TABLE" => {
            let (_, name) = tk.next("lookup table name")?;
            let size = tk.count("lookup table size")?;
            tk.skip_values(size.saturating_mul(4), name)?;
            Ok(None)
        }
        "GLOBAL_IDS" | "PEDIGREE_IDS" => {
            let (_, name) = tk.next("array name")?;
            tk.data_type(name)?;
            tk.skip_values(n, name)?;
            tk.skip_metadata(1)?;
            Ok(None)
        }
        "FIELD" => {
            tk.next("field name")?;
            let arrays = tk.count("number of field arrays")?;
            let mut found = None;
            for _ in 0..arrays {
                let (_, name) = tk.next("field array name")?;
                let nc = tk.count("number of components")?;
                let nt = tk.count("number of tuples")?;
                tk.data_type(name)?;
                if found.is_none() && is_tag(name) && nc == 1 && nt == n {
                    found = Some(read_tags(tk, name)?);
                } else {
                    tk.skip_values(nc.saturating_mul(nt), name)?;
                }
                tk.skip_metadata(nc)?;
            }
            Ok(found)
        }
        _ => Err(tk.err(
            tk.toks.get(tk.pos.saturating_sub(1)).map_or(1, |t| t.0),
            format!("unknown or unsupported keyword '{}'", clip(key)),
        )),
    }
}
