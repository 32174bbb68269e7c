//! The body–body contact broad phase on a [`Device`] (issue 38 item 6; docs/gpu.md "Contact
//! on the device"): the uniform grid of `contact::bodies` (each boundary triangle's box,
//! padded by the reach, inserted into every cell it overlaps; a node's candidates are the
//! triangles of its cell) as a sort by cell key with the device sort of the MPM substep
//! ([`KeyValueSort`], `kernels/sort.cu`) and a binary search per node, in place of the host's
//! hash map. The lists are the host grid's ([`crate::contact::bodies::grid_cell_lists`]),
//! entry for entry and in the same order (unit test): the stable sort keeps each cell's
//! triangles in ascending order, the order in which the host inserts them.
//!
//! Per call: four uploads (positions, triangles, offsets, nodes), three downloads (the
//! cell ranges, for the offsets' prefix sum on the host; the nodes' ranges; the sorted
//! triangles) and $\lceil\log_2 P\rceil+5$ launches for $P$ (cell, triangle) pairs.

use super::device::{Arg, Device};
use super::kernels::Kernel;
use super::sort::{download_index32, KeyValueSort};
use super::GpuError;

/// The triangles in the cell of each of `nodes` (positions `x`, node-major), with each
/// triangle of `tris` covering the cells of its nodes' box padded by `pad`, cell size
/// `cell`. `None` where the grid's cells or pairs do not fit 32-bit keys (the host's grid
/// then runs).
pub fn cell_lists<D: Device>(
    dev: &D,
    x: &[f64],
    tris: &[[usize; 3]],
    (pad, cell): (f64, f64),
    nodes: &[usize],
) -> Result<Option<Vec<Vec<u32>>>, GpuError> {
    let nt = tris.len();
    if nt == 0 || nodes.is_empty() {
        return Ok(Some(vec![Vec::new(); nodes.len()]));
    }
    let xd = dev.upload(x)?;
    let tv: Vec<f64> = tris.iter().flatten().map(|&k| k as f64).collect();
    let td = dev.upload(&tv)?;
    let mut ranges = dev.zeros(6 * nt)?;
    dev.launch(
        Kernel::GridTriCells,
        nt,
        &mut [
            Arg::Real(cell),
            Arg::Real(pad),
            Arg::In(&td),
            Arg::In(&xd),
            Arg::Out(&mut ranges),
        ],
    )?;
    let r = dev.download(&ranges)?;
    let mut lo = [f64::INFINITY; 3];
    let mut hi = [f64::NEG_INFINITY; 3];
    for t in r.chunks(6) {
        for d in 0..3 {
            lo[d] = lo[d].min(t[d]);
            hi[d] = hi[d].max(t[3 + d]);
        }
    }
    let limit = i32::MAX as f64;
    let dims = [0, 1, 2].map(|d| hi[d] - lo[d] + 1.0);
    if !dims.iter().all(|v| v.is_finite()) || dims.iter().product::<f64>() >= limit {
        return Ok(None);
    }
    let mut offs = Vec::with_capacity(nt);
    let mut total = 0.0;
    for t in r.chunks(6) {
        offs.push(total);
        total += (0..3).map(|d| t[3 + d] - t[d] + 1.0).product::<f64>();
    }
    if total >= limit {
        return Ok(None);
    }
    let pairs = total as usize;
    let offs = dev.upload(&offs)?;
    let mut sort = KeyValueSort::new(dev, pairs)?;
    let (keys, vals) = sort.pairs_mut();
    dev.launch(
        Kernel::GridTriPairs,
        nt,
        &mut [
            Arg::Int(lo[0] as i64),
            Arg::Int(lo[1] as i64),
            Arg::Int(lo[2] as i64),
            Arg::Int(dims[0] as i64),
            Arg::Int(dims[1] as i64),
            Arg::In(&ranges),
            Arg::In(&offs),
            Arg::Index32Out(keys),
            Arg::Index32Out(vals),
        ],
    )?;
    sort.sort(dev)?;
    let nv: Vec<f64> = nodes.iter().map(|&i| i as f64).collect();
    let nd = dev.upload(&nv)?;
    let mut out = dev.zeros(2 * nodes.len())?;
    dev.launch(
        Kernel::GridNodeRanges,
        nodes.len(),
        &mut [
            Arg::Real(cell),
            Arg::Int(lo[0] as i64),
            Arg::Int(lo[1] as i64),
            Arg::Int(lo[2] as i64),
            Arg::Int(dims[0] as i64),
            Arg::Int(dims[1] as i64),
            Arg::Int(dims[2] as i64),
            Arg::Int(pairs as i64),
            Arg::In(&nd),
            Arg::In(&xd),
            Arg::Index32(sort.keys()),
            Arg::Out(&mut out),
        ],
    )?;
    let se = dev.download(&out)?;
    let sorted = download_index32(dev, sort.values(), pairs)?;
    Ok(Some(
        se.chunks(2)
            .map(|c| {
                sorted[c[0] as usize..c[1] as usize]
                    .iter()
                    .map(|&t| t as u32)
                    .collect()
            })
            .collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::Emulator;

    /// The device's lists equal the host grid's, entry for entry, on the boundary of three
    /// jittered boxes (cells of one to several triangles, nodes outside every box's cells),
    /// for a fine and a coarse cell.
    #[test]
    fn device_broad_phase_lists_are_the_host_grid_lists() {
        let mut x = Vec::new();
        let mut tris = Vec::new();
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        let mut rand = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        };
        // three 4x4 grids of nodes (quads split in two triangles), offset and jittered
        for (b, off) in [[0.0, 0.0, 0.0], [0.31, 0.07, 0.05], [-0.2, 0.5, -0.12]]
            .iter()
            .enumerate()
        {
            let n0 = 16 * b;
            for j in 0..4 {
                for i in 0..4 {
                    x.extend([
                        off[0] + 0.1 * i as f64 + 0.01 * rand(),
                        off[1] + 0.1 * j as f64 + 0.01 * rand(),
                        off[2] + 0.02 * rand(),
                    ]);
                }
            }
            for j in 0..3 {
                for i in 0..3 {
                    let p = n0 + 4 * j + i;
                    tris.push([p, p + 1, p + 5]);
                    tris.push([p, p + 5, p + 4]);
                }
            }
        }
        x.extend([5.0, 5.0, 5.0, -3.0, 0.1, 0.0]);
        let nodes: Vec<usize> = (0..x.len() / 3).collect();
        for (pad, cell) in [(0.01, 0.03), (0.02, 0.25)] {
            let want = crate::contact::bodies::grid_cell_lists(&x, &tris, (pad, cell), &nodes);
            let got = cell_lists(&Emulator, &x, &tris, (pad, cell), &nodes)
                .unwrap()
                .unwrap();
            assert_eq!(got, want, "pad {pad}, cell {cell}");
            assert!(want.iter().any(|l| l.len() > 2) && want.iter().any(|l| l.is_empty()));
        }
    }
}
