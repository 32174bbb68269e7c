//! Analytic closed triangle surfaces (for voxelization tests and the generated meshes in
//! `meshes/`). Both are watertight 2-manifolds with outward, counter-clockwise triangles.

use crate::mesh::trisurf::TriSurface;
use std::collections::HashMap;
use std::f64::consts::PI;

/// Icosphere: the regular icosahedron inscribed in the sphere of `radius` around `center`,
/// with every triangle split into four `subdivisions` times and the new vertices projected
/// onto the sphere. `20 * 4^s` triangles, `10 * 4^s + 2` vertices. Enclosed volume of the
/// sphere: `4/3 π r³` (the polyhedron is slightly smaller: relative deficit about 0.6 % at
/// `s = 3`, 0.16 % at `s = 4`).
pub fn icosphere(radius: f64, center: [f64; 3], subdivisions: u32) -> TriSurface {
    let t = (1.0 + 5f64.sqrt()) / 2.0;
    let mut v: Vec<[f64; 3]> = vec![
        [-1.0, t, 0.0],
        [1.0, t, 0.0],
        [-1.0, -t, 0.0],
        [1.0, -t, 0.0],
        [0.0, -1.0, t],
        [0.0, 1.0, t],
        [0.0, -1.0, -t],
        [0.0, 1.0, -t],
        [t, 0.0, -1.0],
        [t, 0.0, 1.0],
        [-t, 0.0, -1.0],
        [-t, 0.0, 1.0],
    ];
    let mut f: Vec<[usize; 3]> = vec![
        [0, 11, 5],
        [0, 5, 1],
        [0, 1, 7],
        [0, 7, 10],
        [0, 10, 11],
        [1, 5, 9],
        [5, 11, 4],
        [11, 10, 2],
        [10, 7, 6],
        [7, 1, 8],
        [3, 9, 4],
        [3, 4, 2],
        [3, 2, 6],
        [3, 6, 8],
        [3, 8, 9],
        [4, 9, 5],
        [2, 4, 11],
        [6, 2, 10],
        [8, 6, 7],
        [9, 8, 1],
    ];
    let unit = |p: [f64; 3]| {
        let l = (p[0] * p[0] + p[1] * p[1] + p[2] * p[2]).sqrt();
        p.map(|c| c / l)
    };
    for p in &mut v {
        *p = unit(*p);
    }
    for _ in 0..subdivisions {
        let mut mid: HashMap<(usize, usize), usize> = HashMap::new();
        let mut next = Vec::with_capacity(4 * f.len());
        for tri in &f {
            let mut m = [0usize; 3];
            for k in 0..3 {
                let (a, b) = (tri[k], tri[(k + 1) % 3]);
                m[k] = *mid.entry((a.min(b), a.max(b))).or_insert_with(|| {
                    let p = [0, 1, 2].map(|d| 0.5 * (v[a][d] + v[b][d]));
                    v.push(unit(p));
                    v.len() - 1
                });
            }
            next.push([tri[0], m[0], m[2]]);
            next.push([tri[1], m[1], m[0]]);
            next.push([tri[2], m[2], m[1]]);
            next.push(m);
        }
        f = next;
    }
    TriSurface {
        vertices: v
            .into_iter()
            .map(|p| [0, 1, 2].map(|d| center[d] + radius * p[d]))
            .collect(),
        triangles: f,
    }
}

/// Torus around the z axis through `center`: tube centre circle of radius `major`, tube
/// radius `minor < major`, `n_major x n_minor` parameter quads split into two triangles each.
/// Vertex `(i, j)` sits at `u = 2πi/n_major`, `v = 2πj/n_minor`:
/// `((R + r cos v) cos u, (R + r cos v) sin u, r sin v)`. Enclosed volume of the smooth torus:
/// `2 π² R r²`.
pub fn torus(
    major: f64,
    minor: f64,
    center: [f64; 3],
    n_major: usize,
    n_minor: usize,
) -> TriSurface {
    let (nu, nv) = (n_major.max(3), n_minor.max(3));
    let mut vertices = Vec::with_capacity(nu * nv);
    for i in 0..nu {
        let u = 2.0 * PI * i as f64 / nu as f64;
        for j in 0..nv {
            let v = 2.0 * PI * j as f64 / nv as f64;
            let rho = major + minor * v.cos();
            vertices.push([
                center[0] + rho * u.cos(),
                center[1] + rho * u.sin(),
                center[2] + minor * v.sin(),
            ]);
        }
    }
    let id = |i: usize, j: usize| (i % nu) * nv + (j % nv);
    let mut triangles = Vec::with_capacity(2 * nu * nv);
    for i in 0..nu {
        for j in 0..nv {
            // d/du × d/dv points outward, so (i,j) → (i+1,j) → (i+1,j+1) is counter-clockwise
            // seen from outside.
            let (a, b, c, d) = (id(i, j), id(i + 1, j), id(i + 1, j + 1), id(i, j + 1));
            triangles.push([a, b, c]);
            triangles.push([a, c, d]);
        }
    }
    TriSurface {
        vertices,
        triangles,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mesh::trisurf::topology;

    #[test]
    fn icosphere_is_closed_outward_and_close_to_the_sphere() {
        let s = icosphere(2.0, [1.0, -1.0, 0.5], 3);
        assert_eq!(s.triangles.len(), 20 * 64);
        assert_eq!(s.vertices.len(), 10 * 64 + 2);
        let t = topology(&s);
        assert!(t.is_watertight(), "{t:?}");
        assert_eq!(t.inconsistent_edges, 0);
        let exact = 4.0 / 3.0 * PI * 8.0;
        let v = s.signed_volume();
        assert!(v > 0.0 && (exact - v) / exact < 0.01, "{v} vs {exact}");
    }

    #[test]
    fn torus_is_closed_outward_and_close_to_the_torus() {
        let s = torus(1.0, 0.4, [0.0; 3], 64, 32);
        let t = topology(&s);
        assert!(t.is_watertight(), "{t:?}");
        assert_eq!(t.inconsistent_edges, 0);
        let exact = 2.0 * PI * PI * 1.0 * 0.16;
        let v = s.signed_volume();
        assert!(v > 0.0 && (exact - v) / exact < 0.01, "{v} vs {exact}");
    }
}
