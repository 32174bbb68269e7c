//! Triangle surfaces of rigid bodies for the frame files: the box's 12 triangles, the closed
//! mesh's own triangles, and the sphere, capsule and cylinder as surfaces of revolution about
//! their z axis (a profile (r, z) from the bottom pole to the top pole revolved in
//! [`SEGMENTS`] steps), placed by the body's shape pose. For display only (the contact uses
//! the exact signed distances).

use diffphd_mpm::rigid::mesh::box_mesh;
use diffphd_mpm::rigid::{RigidBody, Shape};
use nalgebra::{Point3, Vector3};

/// Segments around the axis of revolved shapes.
pub const SEGMENTS: usize = 24;
/// Latitude steps of a hemisphere.
const LATITUDE: usize = 6;

/// A triangle surface: vertices (world) and triangles, counter-clockwise seen from outside.
pub type Surface = (Vec<[f64; 3]>, Vec<[usize; 3]>);

/// Revolve a profile whose first and last points lie on the axis (r = 0).
fn revolve(profile: &[(f64, f64)]) -> Surface {
    let rings = &profile[1..profile.len() - 1];
    let mut v = vec![[0.0, 0.0, profile[0].1]];
    for &(r, z) in rings {
        for s in 0..SEGMENTS {
            let a = 2.0 * std::f64::consts::PI * s as f64 / SEGMENTS as f64;
            v.push([r * a.cos(), r * a.sin(), z]);
        }
    }
    let top = v.len();
    v.push([0.0, 0.0, profile[profile.len() - 1].1]);
    let idx = |ring: usize, s: usize| 1 + ring * SEGMENTS + s % SEGMENTS;
    let mut t = vec![];
    for s in 0..SEGMENTS {
        t.push([0, idx(0, s + 1), idx(0, s)]);
        for ring in 0..rings.len().saturating_sub(1) {
            let (a, b) = (idx(ring, s), idx(ring, s + 1));
            let (c, d) = (idx(ring + 1, s), idx(ring + 1, s + 1));
            t.push([a, b, d]);
            t.push([a, d, c]);
        }
        let last = rings.len() - 1;
        t.push([top, idx(last, s), idx(last, s + 1)]);
    }
    (v, t)
}

/// A hemisphere-capped profile: radius r, the caps' centres at z = ±l.
fn capsule_profile(r: f64, l: f64) -> Vec<(f64, f64)> {
    let mut p = vec![];
    for k in 0..=LATITUDE {
        let th = std::f64::consts::FRAC_PI_2 * k as f64 / LATITUDE as f64;
        p.push((r * th.sin(), -l - r * th.cos()));
    }
    for k in (0..=LATITUDE).rev() {
        let th = std::f64::consts::FRAC_PI_2 * k as f64 / LATITUDE as f64;
        p.push((r * th.sin(), l + r * th.cos()));
    }
    p.dedup();
    p
}

/// The body's surface in world coordinates.
pub fn body_surface(body: &RigidBody) -> Surface {
    let (local, tris): (Vec<Vector3<f64>>, Vec<[usize; 3]>) = match &body.shape {
        Shape::Box { half_extents } => match box_mesh(half_extents) {
            Ok(m) => (m.vertices().to_vec(), m.triangles().to_vec()),
            Err(_) => (vec![], vec![]),
        },
        Shape::Mesh(m) => (m.vertices().to_vec(), m.triangles().to_vec()),
        other => {
            let profile = match other {
                Shape::Sphere { radius } => capsule_profile(*radius, 0.0),
                Shape::Capsule {
                    radius,
                    half_length,
                } => capsule_profile(*radius, *half_length),
                Shape::Cylinder {
                    radius,
                    half_length,
                } => vec![
                    (0.0, -half_length),
                    (*radius, -half_length),
                    (*radius, *half_length),
                    (0.0, *half_length),
                ],
                _ => vec![],
            };
            if profile.len() < 3 {
                (vec![], vec![])
            } else {
                let (v, t) = revolve(&profile);
                (v.into_iter().map(Vector3::from).collect(), t)
            }
        }
    };
    let pose = body.shape_pose();
    let world = local
        .iter()
        .map(|p| {
            let q = pose * Point3::from(*p);
            [q.x, q.y, q.z]
        })
        .collect();
    (world, tris)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nalgebra::Isometry3;

    /// Signed volume Σ det[a b c]/6 of a closed surface.
    fn volume((v, t): &Surface) -> f64 {
        t.iter()
            .map(|f| {
                let [a, b, c] = f.map(|i| Vector3::from(v[i]));
                a.dot(&b.cross(&c)) / 6.0
            })
            .sum()
    }

    /// Every surface is closed and outward: its volume is positive and approaches the
    /// shape's (polygonal approximations from inside, within 5 %), and translating the body
    /// moves it.
    #[test]
    fn revolved_surfaces_are_closed_outward_and_placed_by_the_pose() {
        let pi = std::f64::consts::PI;
        let cases = [
            (Shape::Sphere { radius: 0.5 }, 4.0 / 3.0 * pi * 0.125),
            (
                Shape::Cylinder {
                    radius: 0.5,
                    half_length: 1.0,
                },
                pi * 0.25 * 2.0,
            ),
            (
                Shape::Capsule {
                    radius: 0.5,
                    half_length: 1.0,
                },
                pi * 0.25 * 2.0 + 4.0 / 3.0 * pi * 0.125,
            ),
            (
                Shape::Box {
                    half_extents: Vector3::new(0.1, 0.2, 0.3),
                },
                0.2 * 0.4 * 0.6,
            ),
        ];
        for (shape, exact) in cases {
            let body = RigidBody::new(shape, 1000.0, Isometry3::translation(1.0, 2.0, 3.0))
                .expect("valid body");
            let s = body_surface(&body);
            let vol = volume(&s);
            assert!(
                vol > 0.95 * exact && vol <= exact * (1.0 + 1e-12),
                "{vol} vs {exact}"
            );
            let mean: Vector3<f64> =
                s.0.iter().map(|p| Vector3::from(*p)).sum::<Vector3<f64>>() / s.0.len() as f64;
            assert!((mean - Vector3::new(1.0, 2.0, 3.0)).norm() < 1e-9, "{mean}");
        }
    }
}
