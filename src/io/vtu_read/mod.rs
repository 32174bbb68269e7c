//! Reading VTK XML unstructured grids (`.vtu`) into plain arrays: the inverse of
//! [`super::vtu`], and enough of the format to read what VTK/ParaView, PyVista and meshio write.
//!
//! Accepted: `VTKFile type="UnstructuredGrid"`, `byte_order="LittleEndian"`, `header_type`
//! `UInt32` (the default) or `UInt64`, no compressor or `vtkZLibDataCompressor`; `DataArray`s
//! of any VTK scalar type (`Int8` … `UInt64`, `Float32`, `Float64`) stored `format="ascii"`
//! (decimal text), `"binary"` (inline base64) or `"appended"` (`<AppendedData
//! encoding="raw">` or `"base64"`); several pieces are concatenated (points of piece `k`
//! numbered after those of the pieces before). Binary arrays follow VTK's layout: a header of
//! one integer (the byte count) without compression, or `[blocks, block size, last block
//! size (0 = full), compressed size of each block]` with zlib; in base64 the header is its own
//! base64 stream when compressed and shares the data's stream otherwise (as VTK writes it).
//!
//! Every size is checked before anything is allocated for it: a byte count against the bytes
//! that follow, a decompressed size against the values the piece declares and against
//! deflate's largest ratio (1032:1) times the compressed bytes. Errors carry the 1-based line
//! of the XML tag they concern; malformed input never panics.

mod decode;
mod grid;
mod parse;
mod xml;

pub use grid::{VtuArray, VtuGrid, VtuReadError, VtuValues};
pub use parse::parse_vtu_grid;

#[cfg(test)]
mod tests {
    use super::decode::tests::b64;
    use super::*;
    use crate::io::vtu::{encode_vtu_pieces, VtuEncoding, VtuPiece};

    const TET: [[f64; 3]; 4] = [[0.0; 3], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]];

    /// A file in the style meshio and VTK write inline: base64, UInt32 headers, zlib with the
    /// header as its own base64 stream, Float32 points and Int32 cells, two pieces.
    #[test]
    fn inline_base64_uint32_headers_and_two_pieces_read() {
        let zblock = |data: &[u8]| -> String {
            let c = miniz_oxide::deflate::compress_to_vec_zlib(data, 6);
            let h: Vec<u8> = [1u32, 32768, data.len() as u32, c.len() as u32]
                .iter()
                .flat_map(|w| w.to_le_bytes())
                .collect();
            format!("{}{}", b64(&h), b64(&c))
        };
        let plain = |data: &[u8]| -> String {
            let mut b = (data.len() as u32).to_le_bytes().to_vec();
            b.extend_from_slice(data);
            b64(&b)
        };
        let f32s = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        let i32s = |v: &[i32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        let pts: Vec<f32> = TET.iter().flatten().map(|&x| x as f32 * 2.0).collect();
        let piece = |enc: &dyn Fn(&[u8]) -> String| {
            format!(
                "<Piece NumberOfPoints=\"4\" NumberOfCells=\"1\">\n<CellData><DataArray type=\"Int32\" Name=\"material\" format=\"binary\">\n{}\n</DataArray></CellData>\n<Points><DataArray type=\"Float32\" NumberOfComponents=\"3\" format=\"binary\">{}</DataArray></Points>\n<Cells><DataArray type=\"Int32\" Name=\"connectivity\" format=\"binary\">{}</DataArray>\n<DataArray type=\"Int32\" Name=\"offsets\" format=\"ascii\"> 4 </DataArray>\n<DataArray type=\"UInt8\" Name=\"types\" format=\"binary\">{}</DataArray></Cells></Piece>\n",
                enc(&i32s(&[9])), enc(&f32s(&pts)), enc(&i32s(&[0, 1, 2, 3])), enc(&[10])
            )
        };
        for (zlib, enc) in [(true, &zblock as &dyn Fn(&[u8]) -> String), (false, &plain)] {
            let comp = if zlib {
                " compressor=\"vtkZLibDataCompressor\""
            } else {
                ""
            };
            let xml = format!(
                "<?xml version=\"1.0\"?>\n<!-- a comment -->\n<VTKFile type='UnstructuredGrid' version=\"0.1\" byte_order=\"LittleEndian\"{comp}>\n<UnstructuredGrid>\n{}{}</UnstructuredGrid>\n</VTKFile>\n",
                piece(enc),
                piece(enc)
            );
            let g =
                parse_vtu_grid(xml.as_bytes()).unwrap_or_else(|e| panic!("line {}: {e}", e.line));
            assert_eq!(g.points.len(), 8);
            assert_eq!(g.points[5], [2.0, 0.0, 0.0]);
            assert_eq!(g.connectivity, [0, 1, 2, 3, 4, 5, 6, 7]);
            assert_eq!(g.cells, [0..4, 4..8]);
            assert_eq!(g.cell_data[0].values, VtuValues::Int(vec![9, 9]));
        }
    }

    /// Truncated, corrupted or lying files end in a one-line error with a line number, never
    /// a panic or a huge allocation.
    #[test]
    fn damaged_files_are_errors_with_a_line() {
        let conn = [0, 1, 2, 3];
        let p = VtuPiece::new(10, 4, &conn, &[1], &TET);
        for enc in [VtuEncoding::Ascii, VtuEncoding::Binary, VtuEncoding::Zlib] {
            let good = encode_vtu_pieces(&[p], enc).unwrap();
            assert!(parse_vtu_grid(&good).is_ok());
            for cut in (0..good.len()).step_by(7) {
                if let Err(e) = parse_vtu_grid(&good[..cut]) {
                    assert!(e.line >= 1 && !e.msg.contains('\n'), "{e}");
                }
            }
            for k in (0..good.len()).step_by(3) {
                let mut bad = good.clone();
                bad[k] ^= 0x5a;
                let _ = parse_vtu_grid(&bad);
            }
        }
        let e =
            parse_vtu_grid(b"<?xml version=\"1.0\"?>\n<VTKFile type=\"PolyData\">").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(
            e.msg.contains("only VTKFile type=\"UnstructuredGrid\""),
            "{}",
            e.msg
        );
        let huge = "<VTKFile type=\"UnstructuredGrid\" header_type=\"UInt64\">\n<Piece NumberOfPoints=\"1000000000000\" NumberOfCells=\"0\">\n<Points><DataArray type=\"Float64\" NumberOfComponents=\"3\" format=\"appended\" offset=\"0\"/></Points></Piece>\n<AppendedData encoding=\"raw\">_\u{ff}\u{ff}\u{ff}\u{ff}\u{ff}\u{ff}\u{ff}\u{7f}";
        let e = parse_vtu_grid(huge.as_bytes()).unwrap_err();
        assert_eq!(e.line, 3);
        assert!(e.msg.contains("past the end of the data"), "{}", e.msg);
        let text = "<VTKFile type=\"UnstructuredGrid\">\n<Piece NumberOfPoints=\"4\" NumberOfCells=\"1\">\n<Points><DataArray type=\"Float64\" NumberOfComponents=\"3\" format=\"ascii\">0 0 0 1 0 0 0 1 0 0 0 1</DataArray></Points>\n<Cells><DataArray type=\"Int64\" Name=\"connectivity\" format=\"ascii\">0 1 2 9</DataArray>\n<DataArray type=\"Int64\" Name=\"offsets\" format=\"ascii\">4</DataArray><DataArray type=\"UInt8\" Name=\"types\" format=\"ascii\">10</DataArray></Cells></Piece></VTKFile>";
        let e = parse_vtu_grid(text.as_bytes()).unwrap_err();
        assert_eq!(e.line, 4);
        assert!(
            e.msg.contains("node index 9 is out of range (4 points)"),
            "{}",
            e.msg
        );
        let e = parse_vtu_grid(text.replace("0 1 2 9", "0 1 2").as_bytes()).unwrap_err();
        assert!(
            e.msg.contains("'connectivity' has 3 values, expected 4"),
            "{}",
            e.msg
        );
        let e = parse_vtu_grid(text.replace("1 0 0 0 1", "1 0 x 0 1").as_bytes()).unwrap_err();
        assert!(e.msg.contains("'x' is not a Float64"), "{}", e.msg);
    }
}
