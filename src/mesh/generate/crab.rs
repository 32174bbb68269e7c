//! The Crab of the paper's §5.2 as a procedural shell–joint composite (no mesh of the
//! paper's is public): a flattened-ellipsoid carapace whose outer layer is a shell, eight
//! walking legs and two claws made of capsule segments joined by ball joints, voxelized on
//! one grid ([`crate::mesh::solids`]) and split into Kuhn tets (or kept as hexes).
//!
//! **Geometry** (metres; x across the body, y forward, z up; the feet stand on z = 0):
//! - carapace: the ellipsoid with semi-axes (0.05, 0.035, 0.015) centred at (0, 0, 0.034);
//!   its cells within `max(4 mm, dx)` of the outside (by 6-neighbour erosion) are the
//!   shell [`CRAB_SHELL`], the rest the body [`CRAB_BODY`];
//! - walking legs, four a side at the rim angles −55°, −25°, 5°, 35° (from the ±x axis
//!   towards +y): hip on the carapace rim, a femur rising 14 mm over 32 mm outward to the
//!   knee, a tibia 34 mm further out down to the ground; radius `r = max(4.5 mm, 0.9 dx)`;
//! - claws at the rim angle 62°: an arm forward-outward to the elbow, a hand (radius
//!   1.4 r) forward to the wrist, and two fingers (a fixed finger and the dactyl) from the
//!   wrist, 24 mm long, spread ±20° about the hand's axis;
//! - joints: balls of radius 1.35× the segment radius at every hip, knee, elbow and wrist;
//!   cells in a joint ball outside the carapace are [`CRAB_JOINT`], other limb cells
//!   [`CRAB_SEGMENT`]. The radius factor makes a joint cut its limb's whole cross-section,
//!   so stiff segments touch each other (and the shell) only through joint cells.
//!
//! **Resolution.** `resolution` = cells across the carapace's width (0.1 m): `dx = 0.1 /
//! resolution`, from [`CRAB_MIN_RESOLUTION`] (legs one or two cells thick) to
//! [`CRAB_MAX_RESOLUTION`]. Element counts (tet4) are in docs/paper-scenes.md; the
//! paper's 172,587 elements are near resolution 55 (178,938), its 2,235,655 DoF near 155
//! (2,227,536).

use crate::mesh::solids::{segment_distance2, tagged_cells_mesh, VoxelGrid};
use crate::mesh::{ElementKind, Mesh, MeshError};

/// Region tag of the carapace's outer layer (stiff in the heterogeneous crab).
pub const CRAB_SHELL: i64 = 0;
/// Region tag of the carapace's inside (soft tissue).
pub const CRAB_BODY: i64 = 1;
/// Region tag of the leg and claw segments (stiff exoskeleton).
pub const CRAB_SEGMENT: i64 = 2;
/// Region tag of the joints (soft).
pub const CRAB_JOINT: i64 = 3;
/// Coarsest resolution (cells across the carapace) at which every limb stays connected.
pub const CRAB_MIN_RESOLUTION: usize = 12;
/// Finest resolution (≈ 8 M tets; the ≈ 2.2 M-DoF scaling run is resolution 155).
pub const CRAB_MAX_RESOLUTION: usize = 200;

const CENTRE: [f64; 3] = [0.0, 0.0, 0.034];
const SEMI: [f64; 3] = [0.05, 0.035, 0.015];
const WIDTH: f64 = 2.0 * SEMI[0];

/// One limb: a polyline of segment end points with a radius per segment; joints (balls) at
/// every point but the last.
struct Limb {
    points: Vec<[f64; 3]>,
    radii: Vec<f64>,
}

/// A joint ball: centre and radius.
type Ball = ([f64; 3], f64);

/// Several segments leaving the same joint share its ball (the claw's two fingers).
struct Branch {
    from: [f64; 3],
    to: [f64; 3],
    radius: f64,
}

fn add(a: [f64; 3], b: [f64; 3], s: f64) -> [f64; 3] {
    [a[0] + s * b[0], a[1] + s * b[1], a[2] + s * b[2]]
}

fn unit(v: [f64; 3]) -> [f64; 3] {
    let l = (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]).sqrt();
    [v[0] / l, v[1] / l, v[2] / l]
}

/// Point on the carapace rim (92 % of the semi-axes) at `angle` (degrees from ±x towards
/// +y on side `s`), `dz` below the centre plane.
fn rim(s: f64, angle: f64, dz: f64) -> [f64; 3] {
    let t = angle.to_radians();
    [
        s * 0.92 * SEMI[0] * t.cos(),
        0.92 * SEMI[1] * t.sin(),
        CENTRE[2] - dz,
    ]
}

/// The limbs (legs and claws' arm + hand) and the fingers, for segment radius `r`.
fn limbs(r: f64) -> (Vec<Limb>, Vec<Branch>, Vec<Ball>) {
    let mut limbs = Vec::new();
    let mut branches = Vec::new();
    let mut extra_joints = Vec::new();
    for s in [-1.0, 1.0] {
        for angle in [-55.0f64, -25.0, 5.0, 35.0] {
            let t = angle.to_radians();
            let u = [s * t.cos(), t.sin(), 0.0];
            let hip = rim(s, angle, 0.004);
            let knee = add(add(hip, u, 0.032), [0.0, 0.0, 1.0], 0.014);
            let mut foot = add(knee, u, 0.034);
            foot[2] = r;
            limbs.push(Limb {
                points: vec![hip, knee, foot],
                radii: vec![r, r],
            });
        }
        let t = 70f64.to_radians();
        let hip = rim(s, 62.0, 0.002);
        let elbow = add(
            add(hip, [s * t.cos(), t.sin(), 0.0], 0.03),
            [0.0, 0.0, 1.0],
            0.006,
        );
        let axis = unit([s * 0.15, 1.0, -0.1]);
        let wrist = add(elbow, axis, 0.03);
        let hand = 1.4 * r;
        limbs.push(Limb {
            points: vec![hip, elbow, wrist],
            radii: vec![r, hand],
        });
        extra_joints.push((wrist, 1.35 * hand));
        let spread = 20f64.to_radians();
        for sign in [-1.0, 1.0] {
            let a = sign * spread;
            let dir = [
                axis[0] * a.cos() - axis[1] * a.sin(),
                axis[0] * a.sin() + axis[1] * a.cos(),
                axis[2],
            ];
            branches.push(Branch {
                from: wrist,
                to: add(wrist, dir, 0.024),
                radius: 0.9 * r,
            });
        }
    }
    (limbs, branches, extra_joints)
}

/// The crab at `resolution` cells across the carapace (see the module docs), with region
/// tags [`CRAB_SHELL`], [`CRAB_BODY`], [`CRAB_SEGMENT`], [`CRAB_JOINT`]; the largest
/// face-connected piece of cells is kept (at the allowed resolutions that is the whole
/// crab). Errors for a resolution outside
/// [`CRAB_MIN_RESOLUTION`]..=[`CRAB_MAX_RESOLUTION`].
pub fn crab(resolution: usize, kind: ElementKind) -> Result<Mesh, MeshError> {
    if !(CRAB_MIN_RESOLUTION..=CRAB_MAX_RESOLUTION).contains(&resolution) {
        return Err(MeshError::Invalid(format!(
            "crab resolution {resolution} outside {CRAB_MIN_RESOLUTION}..={CRAB_MAX_RESOLUTION} (cells across the carapace)"
        )));
    }
    let dx = WIDTH / resolution as f64;
    let r = (0.0045f64).max(0.9 * dx);
    let (limbs, branches, extra_joints) = limbs(r);
    let mut joints: Vec<Ball> = extra_joints;
    let mut segments: Vec<([f64; 3], [f64; 3], f64)> = Vec::new();
    for l in &limbs {
        for (i, w) in l.points.windows(2).enumerate() {
            segments.push((w[0], w[1], l.radii[i]));
            joints.push((w[0], 1.35 * l.radii[i]));
        }
    }
    segments.extend(branches.iter().map(|b| (b.from, b.to, b.radius)));
    // Grid: z from the ground up, x and y centred on the crab's extent.
    let (lo, hi) = ([-0.135, -0.10, 0.0], [0.135, 0.135, 0.062]);
    let cells: [usize; 3] = std::array::from_fn(|d| ((hi[d] - lo[d]) / dx).ceil() as usize);
    let origin = [
        -0.5 * cells[0] as f64 * dx,
        0.5 * (lo[1] + hi[1]) - 0.5 * cells[1] as f64 * dx,
        0.0,
    ];
    let grid = VoxelGrid { cells, dx, origin };
    // Cell centres mirrored exactly about x = 0 (origin + dx (i + ½) is symmetric only up
    // to rounding, which split boundary cells unevenly between the sides): x snapped to
    // its half-cell multiple, an integer times dx/2.
    let mirror_exact = |p: [f64; 3]| [(2.0 * p[0] / dx).round() * (0.5 * dx), p[1], p[2]];
    let in_carapace = |p: [f64; 3]| {
        (0..3)
            .map(|d| ((p[d] - CENTRE[d]) / SEMI[d]).powi(2))
            .sum::<f64>()
            <= 1.0
    };
    let mut tags = grid.classify(|p| {
        let p = mirror_exact(p);
        if in_carapace(p) {
            return Some(CRAB_SHELL);
        }
        if joints
            .iter()
            .any(|(c, rj)| (0..3).map(|d| (p[d] - c[d]).powi(2)).sum::<f64>() <= rj * rj)
        {
            return Some(CRAB_JOINT);
        }
        segments
            .iter()
            .any(|(a, b, rs)| segment_distance2(p, *a, *b) <= rs * rs)
            .then_some(CRAB_SEGMENT)
    });
    // Erode the carapace by `layers` 6-neighbour steps: what survives is the body.
    let layers = ((0.004 / dx).round() as usize).max(1);
    let mut inner: Vec<bool> = (0..grid.len())
        .map(|c| {
            let [nx, ny, _] = cells;
            let (i, j, k) = (c % nx, (c / nx) % ny, c / (nx * ny));
            in_carapace(mirror_exact(grid.centre(i, j, k)))
        })
        .collect();
    for _ in 0..layers {
        let prev = inner.clone();
        for (c, v) in inner.iter_mut().enumerate() {
            if *v {
                let full = grid.neighbours(c).count() == 6;
                *v = full && grid.neighbours(c).all(|n| prev[n]);
            }
        }
    }
    for (t, &body) in tags.iter_mut().zip(&inner) {
        if body {
            *t = Some(CRAB_BODY);
        }
    }
    Ok(tagged_cells_mesh(&grid, &tags, kind))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Face-connected pieces of the elements with tag in `set` (hex mesh: one element per
    /// cell; two cells are face neighbours when they share 4 nodes).
    fn pieces(m: &Mesh, set: &[i64]) -> usize {
        use std::collections::HashMap;
        let cells: Vec<usize> = (0..m.num_elements())
            .filter(|&e| set.contains(&m.tags[e]))
            .collect();
        let mut faces: HashMap<[usize; 4], Vec<usize>> = HashMap::new();
        const FACES: [[usize; 4]; 6] = [
            [0, 2, 4, 6],
            [1, 3, 5, 7],
            [0, 1, 4, 5],
            [2, 3, 6, 7],
            [0, 1, 2, 3],
            [4, 5, 6, 7],
        ];
        for (ci, &e) in cells.iter().enumerate() {
            let el = m.element(e);
            for f in FACES {
                let mut key = f.map(|a| el[a]);
                key.sort_unstable();
                faces.entry(key).or_default().push(ci);
            }
        }
        let mut parent: Vec<usize> = (0..cells.len()).collect();
        fn find(p: &mut [usize], mut i: usize) -> usize {
            while p[i] != i {
                p[i] = p[p[i]];
                i = p[i];
            }
            i
        }
        for v in faces.values() {
            if v.len() == 2 {
                let (a, b) = (find(&mut parent, v[0]), find(&mut parent, v[1]));
                parent[a] = b;
            }
        }
        (0..cells.len())
            .filter(|&i| find(&mut parent, i) == i)
            .count()
    }

    /// At the coarsest and a finer resolution the crab is one piece with all four tags, and
    /// its stiff parts are separate pieces joined only through soft joints: the shell, 8 legs
    /// × 2 segments, and per claw the arm, the hand and two fingers — 1 + 16 + 8 = 25, less
    /// where two stiff parts touch (each claw's fingers at the coarsest resolution: 23).
    #[test]
    fn crab_is_one_piece_of_separate_stiff_segments() {
        for res in [CRAB_MIN_RESOLUTION, 24] {
            let m = crab(res, ElementKind::Hex8).unwrap();
            for tag in [CRAB_SHELL, CRAB_BODY, CRAB_SEGMENT, CRAB_JOINT] {
                assert!(m.tags.contains(&tag), "resolution {res}: no tag {tag}");
            }
            assert_eq!(pieces(&m, &[0, 1, 2, 3]), 1, "resolution {res}");
            // 25 when every stiff part is separate; at resolution 12 each claw's two fingers
            // touch (23), at 24 one pair of stiff parts touches (24, not yet located)
            let stiff = pieces(&m, &[CRAB_SHELL, CRAB_SEGMENT]);
            assert!(
                (23..=25).contains(&stiff),
                "resolution {res}: {stiff} stiff pieces"
            );
            let (lo, hi) = m.bounding_box();
            assert_eq!(lo[2], 0.0, "feet on the ground");
            assert!(hi[2] < 0.062 && hi[0] - lo[0] > 0.2, "{lo:?} {hi:?}");
            // left–right mirror symmetry of the cell count per tag (the cells of a middle
            // column, centroid x = 0 up to rounding, belong to neither side)
            for tag in 0..4 {
                let side = |s: f64| {
                    (0..m.num_elements())
                        .filter(|&e| m.tags[e] == tag && m.centroid(e)[0] * s > 1e-9)
                        .count()
                };
                assert_eq!(side(1.0), side(-1.0), "tag {tag} asymmetric");
            }
        }
    }

    #[test]
    fn tets_and_hexes_cover_the_same_cells() {
        let h = crab(CRAB_MIN_RESOLUTION, ElementKind::Hex8).unwrap();
        let t = crab(CRAB_MIN_RESOLUTION, ElementKind::Tet4).unwrap();
        assert_eq!(t.num_elements(), 6 * h.num_elements());
        assert_eq!(t.nodes, h.nodes);
        assert!((0..h.num_elements()).all(|e| t.tags[6 * e] == h.tags[e]));
    }

    #[test]
    fn resolution_outside_range_is_refused() {
        for res in [0, CRAB_MIN_RESOLUTION - 1, CRAB_MAX_RESOLUTION + 1] {
            let e = crab(res, ElementKind::Tet4).unwrap_err().to_string();
            assert!(e.contains("crab resolution"), "{e}");
        }
    }
}
