//! Voxel solids: procedural meshes made of the cells of a regular grid that a shape keeps,
//! each kept cell carrying a region tag. The generators of the paper's scenes (the crab of
//! [`crate::mesh::crab`], the Oreo's wafers and filling, the Dice's rounded cube) are shapes
//! over this one grid.
//!
//! **Grid.** `cells = [nx, ny, nz]` cubes of edge `dx` with the minimum corner at `origin`;
//! cell `(i, j, k)` has index `i + nx·(j + ny·k)` and centre `origin + dx·(i+½, j+½, k+½)`.
//! A shape is a function of the cell centre returning `Some(tag)` (kept, with that region
//! tag) or `None`.
//!
//! **Output** ([`tagged_cells_mesh`]). Only the largest face-connected (6-neighbour)
//! component of kept cells is meshed (ties: the one with the lowest cell index), as in
//! `mesh voxelize`; nodes are the grid corners used by a kept cell, in grid order (x
//! fastest); elements are the kept cells in grid order, as `Hex8` in lexicographic corner
//! order or split into the six conforming Kuhn tets of [`KUHN_TETS`] (element `6v + t`,
//! every tet of volume `dx³/6`, positively oriented).

use crate::mesh::generate::KUHN_TETS;
use crate::mesh::{ElementKind, Mesh, MeshError};

/// Largest number of grid cells a voxel solid of [`VoxelGrid::covering`] may scan (for
/// scale: the crab's grid at its finest resolution, 200, has 3.1e7 cells).
pub const MAX_SOLID_CELLS: usize = 60_000_000;

/// A regular grid of cubic cells (see the module docs for numbering).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct VoxelGrid {
    pub cells: [usize; 3],
    pub dx: f64,
    pub origin: [f64; 3],
}

impl VoxelGrid {
    /// The grid of cubes of edge `dx` that covers the box `[lo, hi]` (at least one cell per
    /// axis; an extent within 1e-9 of a whole number of cells is that many cells), centred on
    /// the box, or an error when it would have more than
    /// [`MAX_SOLID_CELLS`] cells or `dx` is not a positive finite number.
    pub fn covering(lo: [f64; 3], hi: [f64; 3], dx: f64) -> Result<VoxelGrid, MeshError> {
        if !(dx.is_finite() && dx > 0.0) {
            return Err(MeshError::Invalid(format!(
                "cell size dx = {dx} must be a positive finite number"
            )));
        }
        let mut cells = [0usize; 3];
        let mut origin = [0.0; 3];
        let mut total = 1.0f64;
        for d in 0..3 {
            // a relative 1e-9 of slack: an extent of exactly n cells stays n cells
            let n = ((hi[d] - lo[d]) / dx * (1.0 - 1e-9)).ceil().max(1.0);
            total *= n;
            if !n.is_finite() || total > MAX_SOLID_CELLS as f64 {
                return Err(MeshError::Invalid(format!(
                    "dx = {dx} asks for more than {MAX_SOLID_CELLS} grid cells"
                )));
            }
            cells[d] = n as usize;
            origin[d] = 0.5 * (lo[d] + hi[d]) - 0.5 * n * dx;
        }
        Ok(VoxelGrid { cells, dx, origin })
    }

    /// Number of cells.
    pub fn len(&self) -> usize {
        self.cells.iter().product()
    }

    /// Whether the grid has no cell.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Centre of cell `(i, j, k)`.
    pub fn centre(&self, i: usize, j: usize, k: usize) -> [f64; 3] {
        [
            self.origin[0] + self.dx * (i as f64 + 0.5),
            self.origin[1] + self.dx * (j as f64 + 0.5),
            self.origin[2] + self.dx * (k as f64 + 0.5),
        ]
    }

    /// The tag of every cell under `shape` (cells x fastest).
    pub fn classify(&self, shape: impl Fn([f64; 3]) -> Option<i64>) -> Vec<Option<i64>> {
        let [nx, ny, nz] = self.cells;
        let mut out = Vec::with_capacity(self.len());
        for k in 0..nz {
            for j in 0..ny {
                for i in 0..nx {
                    out.push(shape(self.centre(i, j, k)));
                }
            }
        }
        out
    }

    /// The face neighbours (6-neighbourhood) of cell `c` inside the grid.
    pub fn neighbours(&self, c: usize) -> impl Iterator<Item = usize> {
        let [nx, ny, nz] = self.cells;
        let (i, j, k) = (c % nx, (c / nx) % ny, c / (nx * ny));
        let stride = [1, nx, nx * ny];
        let at = [i, j, k];
        let n = [nx, ny, nz];
        (0..6).filter_map(move |s| {
            let d = s / 2;
            if s % 2 == 0 {
                (at[d] > 0).then(|| c - stride[d])
            } else {
                (at[d] + 1 < n[d]).then(|| c + stride[d])
            }
        })
    }
}

/// Keep only the largest face-connected component of the kept cells (ties: lowest cell
/// index); returns the number of components found.
pub fn keep_largest_component(grid: &VoxelGrid, tags: &mut [Option<i64>]) -> usize {
    let mut label = vec![u32::MAX; tags.len()];
    let mut sizes: Vec<usize> = Vec::new();
    let mut stack = Vec::new();
    for start in 0..tags.len() {
        if tags[start].is_none() || label[start] != u32::MAX {
            continue;
        }
        let id = sizes.len() as u32;
        let mut size = 0;
        label[start] = id;
        stack.push(start);
        while let Some(c) = stack.pop() {
            size += 1;
            for n in grid.neighbours(c) {
                if tags[n].is_some() && label[n] == u32::MAX {
                    label[n] = id;
                    stack.push(n);
                }
            }
        }
        sizes.push(size);
    }
    if let Some(best) = (0..sizes.len()).max_by_key(|&i| (sizes[i], usize::MAX - i)) {
        for (t, &l) in tags.iter_mut().zip(&label) {
            if l != best as u32 {
                *t = None;
            }
        }
    }
    sizes.len()
}

/// The mesh of the kept cells of `grid` (`tags[c] = Some(tag)`), after
/// [`keep_largest_component`]; see the module docs for the numbering.
pub fn tagged_cells_mesh(grid: &VoxelGrid, tags: &[Option<i64>], kind: ElementKind) -> Mesh {
    let mut tags = tags.to_vec();
    keep_largest_component(grid, &mut tags);
    let [nx, ny, nz] = grid.cells;
    let (px, py) = (nx + 1, ny + 1);
    let corner = |c: usize, a: usize| {
        let (i, j, k) = (c % nx, (c / nx) % ny, c / (nx * ny));
        (i + (a & 1)) + px * ((j + ((a >> 1) & 1)) + py * (k + ((a >> 2) & 1)))
    };
    let mut map = vec![u32::MAX; px * py * (nz + 1)];
    for (c, t) in tags.iter().enumerate() {
        if t.is_some() {
            for a in 0..8 {
                map[corner(c, a)] = 0;
            }
        }
    }
    let mut nodes = Vec::new();
    for (g, m) in map.iter_mut().enumerate() {
        if *m == 0 {
            *m = nodes.len() as u32;
            let (i, j, k) = (g % px, (g / px) % py, g / (px * py));
            nodes.push([
                grid.origin[0] + grid.dx * i as f64,
                grid.origin[1] + grid.dx * j as f64,
                grid.origin[2] + grid.dx * k as f64,
            ]);
        }
    }
    let mut elements = Vec::new();
    let mut out_tags = Vec::new();
    for (c, t) in tags.iter().enumerate() {
        let Some(tag) = *t else { continue };
        let cube: [usize; 8] = std::array::from_fn(|a| map[corner(c, a)] as usize);
        match kind {
            ElementKind::Hex8 => {
                elements.extend_from_slice(&cube);
                out_tags.push(tag);
            }
            ElementKind::Tet4 => {
                for t in &KUHN_TETS {
                    elements.extend(t.iter().map(|&a| cube[a]));
                    out_tags.push(tag);
                }
            }
        }
    }
    Mesh {
        kind,
        nodes,
        elements,
        tags: out_tags,
    }
}

/// Squared distance from `p` to the segment `[a, b]`.
pub fn segment_distance2(p: [f64; 3], a: [f64; 3], b: [f64; 3]) -> f64 {
    let ab = [b[0] - a[0], b[1] - a[1], b[2] - a[2]];
    let ap = [p[0] - a[0], p[1] - a[1], p[2] - a[2]];
    let l2 = ab[0] * ab[0] + ab[1] * ab[1] + ab[2] * ab[2];
    let t = if l2 > 0.0 {
        ((ap[0] * ab[0] + ap[1] * ab[1] + ap[2] * ab[2]) / l2).clamp(0.0, 1.0)
    } else {
        0.0
    };
    (0..3).map(|d| (ap[d] - t * ab[d]).powi(2)).sum()
}

/// Voxel cylinder about the z axis: the cells of a grid of edge `dx` (covering the
/// cylinder, centred on it) whose centres satisfy $x^2+y^2\le r^2$ and $|z|\le h/2$ about
/// `center`; all tags 0. Errors for non-positive sizes or more than [`MAX_SOLID_CELLS`]
/// cells.
pub fn cylinder(
    radius: f64,
    height: f64,
    dx: f64,
    center: [f64; 3],
    kind: ElementKind,
) -> Result<Mesh, MeshError> {
    for (name, v) in [("radius", radius), ("height", height)] {
        if !(v.is_finite() && v > 0.0) {
            return Err(MeshError::Invalid(format!(
                "cylinder {name} = {v} must be a positive finite number"
            )));
        }
    }
    let (r, h) = (radius, 0.5 * height);
    let lo = [center[0] - r, center[1] - r, center[2] - h];
    let hi = [center[0] + r, center[1] + r, center[2] + h];
    let grid = VoxelGrid::covering(lo, hi, dx)?;
    let tags = grid.classify(|p| {
        let (x, y, z) = (p[0] - center[0], p[1] - center[1], p[2] - center[2]);
        (x * x + y * y <= r * r && z.abs() <= h).then_some(0)
    });
    Ok(tagged_cells_mesh(&grid, &tags, kind))
}

/// Voxel rounded box: the cells of a grid of edge `dx` (covering the box, centred on it)
/// whose centres lie in the box of edge lengths `size` centred on `center` with its edges
/// and corners rounded by `radius` (the Minkowski sum of the box shrunk by `radius` and a
/// ball of that radius: distance to the inner box ≤ `radius`); all tags 0.
pub fn rounded_box(
    size: [f64; 3],
    radius: f64,
    dx: f64,
    center: [f64; 3],
    kind: ElementKind,
) -> Result<Mesh, MeshError> {
    let half_min = 0.5 * size.iter().copied().fold(f64::INFINITY, f64::min);
    if !(size.iter().all(|s| s.is_finite() && *s > 0.0)) {
        return Err(MeshError::Invalid(format!(
            "rounded box size {size:?} must be positive and finite"
        )));
    }
    if !(radius.is_finite() && radius >= 0.0 && radius <= half_min) {
        return Err(MeshError::Invalid(format!(
            "rounding radius {radius} must lie in [0, {half_min}] (half the shortest edge)"
        )));
    }
    let lo: [f64; 3] = std::array::from_fn(|d| center[d] - 0.5 * size[d]);
    let hi: [f64; 3] = std::array::from_fn(|d| center[d] + 0.5 * size[d]);
    let grid = VoxelGrid::covering(lo, hi, dx)?;
    let inner: [f64; 3] = std::array::from_fn(|d| 0.5 * size[d] - radius);
    let tags = grid.classify(|p| {
        let d2: f64 = (0..3)
            .map(|d| ((p[d] - center[d]).abs() - inner[d]).max(0.0).powi(2))
            .sum();
        let inside = (0..3).all(|d| (p[d] - center[d]).abs() <= 0.5 * size[d]);
        (inside && d2 <= radius * radius).then_some(0)
    });
    Ok(tagged_cells_mesh(&grid, &tags, kind))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mesh::validate::element_volume;

    fn volume(m: &Mesh) -> f64 {
        (0..m.num_elements()).map(|e| element_volume(m, e)).sum()
    }

    #[test]
    fn largest_component_is_kept() {
        let grid = VoxelGrid {
            cells: [5, 1, 1],
            dx: 1.0,
            origin: [0.0; 3],
        };
        // cells 0 | 2 3 4 : two components, the second larger
        let mut tags = vec![Some(1), None, Some(2), Some(2), Some(3)];
        assert_eq!(keep_largest_component(&grid, &mut tags), 2);
        assert_eq!(tags, vec![None, None, Some(2), Some(2), Some(3)]);
        let m = tagged_cells_mesh(&grid, &tags, ElementKind::Hex8);
        assert_eq!(m.num_elements(), 3);
        assert_eq!(m.num_nodes(), 16);
        assert_eq!(m.tags, vec![2, 2, 3]);
    }

    #[test]
    fn tagged_tets_are_conforming_kuhn_cells() {
        let grid = VoxelGrid {
            cells: [2, 2, 1],
            dx: 0.5,
            origin: [1.0, 0.0, 0.0],
        };
        let tags = grid.classify(|p| (p[0] < 1.5 || p[1] < 0.5).then_some(7));
        let m = tagged_cells_mesh(&grid, &tags, ElementKind::Tet4);
        assert_eq!(m.num_elements(), 18);
        assert!(m.tags.iter().all(|&t| t == 7));
        for e in 0..m.num_elements() {
            assert!((element_volume(&m, e) - 0.125 / 6.0).abs() < 1e-15);
        }
        let mut used = vec![false; m.num_nodes()];
        m.elements.iter().for_each(|&i| used[i] = true);
        assert!(used.iter().all(|&u| u));
    }

    #[test]
    fn cylinder_and_rounded_box_volumes() {
        let c = cylinder(0.03, 0.01, 0.001, [0.0, 0.0, 0.005], ElementKind::Hex8).unwrap();
        let exact = std::f64::consts::PI * 0.03f64.powi(2) * 0.01;
        assert!((volume(&c) / exact - 1.0).abs() < 0.02, "{}", volume(&c));
        let (lo, hi) = c.bounding_box();
        assert!((lo[2] - 0.0).abs() < 1e-12 && (hi[2] - 0.01).abs() < 1e-12);
        let b = rounded_box([0.02; 3], 0.004, 0.001, [0.0; 3], ElementKind::Tet4).unwrap();
        // cube minus what rounding removes: 12 edges × (4 − π)r²·(L − 2r)/4·… exactly:
        let (l, r) = (0.02f64, 0.004f64);
        let li = l - 2.0 * r;
        let exact = li.powi(3)
            + 6.0 * li * li * r
            + 3.0 * std::f64::consts::PI * r * r * li
            + 4.0 / 3.0 * std::f64::consts::PI * r.powi(3);
        assert!((volume(&b) / exact - 1.0).abs() < 0.03, "{}", volume(&b));
        assert!(rounded_box([0.02; 3], 0.02, 0.001, [0.0; 3], ElementKind::Hex8).is_err());
        assert!(cylinder(-1.0, 0.01, 0.001, [0.0; 3], ElementKind::Hex8).is_err());
        assert!(cylinder(1.0, 1.0, 1e-4, [0.0; 3], ElementKind::Hex8).is_err());
    }
}
