//! Rigid shapes: mass properties against independent integrals, signed distances against each
//! other and against their own finite-difference gradients, mesh validation errors.

use diffphd_mpm::rigid::mesh::box_mesh;
use diffphd_mpm::rigid::{RigidBody, RigidError, Shape, TriMesh};
use nalgebra::{Isometry3, Rotation3, Translation3, UnitQuaternion, Vector3};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
    fn range(&mut self, a: f64, b: f64) -> f64 {
        a + (b - a) * self.next()
    }
    fn point(&mut self, s: f64) -> Vector3<f64> {
        Vector3::new(self.range(-s, s), self.range(-s, s), self.range(-s, s))
    }
}

fn rel(a: f64, b: f64) -> f64 {
    (a - b).abs() / b.abs()
}

/// Volume and inertia of a solid of revolution about z with radius profile ρ(z) on [z0, z1],
/// by composite Simpson (independent of the closed forms): dV = πρ²dz,
/// dI_zz = πρ⁴/2 dz, dI_xx = (πρ⁴/4 + πρ²z²) dz.
fn revolution_integrals(profile: &dyn Fn(f64) -> f64, z0: f64, z1: f64) -> (f64, f64, f64) {
    let n = 20_000;
    let h = (z1 - z0) / n as f64;
    let pi = std::f64::consts::PI;
    let (mut v, mut izz, mut ixx) = (0.0, 0.0, 0.0);
    for i in 0..=n {
        let z = z0 + i as f64 * h;
        let w = if i == 0 || i == n {
            1.0
        } else if i % 2 == 1 {
            4.0
        } else {
            2.0
        };
        let r = profile(z);
        v += w * pi * r * r;
        izz += w * pi * r.powi(4) / 2.0;
        ixx += w * (pi * r.powi(4) / 4.0 + pi * r * r * z * z);
    }
    (v * h / 3.0, izz * h / 3.0, ixx * h / 3.0)
}

#[test]
fn capsule_and_cylinder_mass_properties_match_slice_integrals() {
    let (r, l, rho) = (0.07, 0.12, 1300.0);
    let mp = Shape::Capsule {
        radius: r,
        half_length: l,
    }
    .mass_properties(rho)
    .unwrap();
    let capsule = move |z: f64| {
        let d = (z.abs() - l).max(0.0);
        (r * r - d * d).max(0.0).sqrt()
    };
    let (v, izz, ixx) = revolution_integrals(&capsule, -l - r, l + r);
    assert!(
        rel(mp.volume, v) < 1e-6,
        "capsule volume {} vs {v}",
        mp.volume
    );
    assert!(rel(mp.inertia[(2, 2)], rho * izz) < 1e-6);
    assert!(
        rel(mp.inertia[(0, 0)], rho * ixx) < 1e-6,
        "{} vs {}",
        mp.inertia[(0, 0)],
        rho * ixx
    );
    assert!(rel(mp.inertia[(1, 1)], rho * ixx) < 1e-6);

    let mp = Shape::Cylinder {
        radius: r,
        half_length: l,
    }
    .mass_properties(rho)
    .unwrap();
    let (v, izz, ixx) = revolution_integrals(&|_| r, -l, l);
    assert!(rel(mp.volume, v) < 1e-9);
    assert!(rel(mp.inertia[(2, 2)], rho * izz) < 1e-9);
    assert!(rel(mp.inertia[(0, 0)], rho * ixx) < 1e-9);

    let mp = Shape::Sphere { radius: r }.mass_properties(rho).unwrap();
    let (v, izz, _) = revolution_integrals(&|z: f64| (r * r - z * z).max(0.0).sqrt(), -r, r);
    assert!(rel(mp.volume, v) < 1e-6);
    assert!(rel(mp.inertia[(2, 2)], rho * izz) < 1e-6);
}

#[test]
fn mesh_integrals_match_box_closed_form_and_transform_covariantly() {
    let h = Vector3::new(0.1, 0.2, 0.35);
    let rho = 700.0;
    let boxed = Shape::Box { half_extents: h }.mass_properties(rho).unwrap();
    let mesh = Shape::Mesh(box_mesh(&h).unwrap())
        .mass_properties(rho)
        .unwrap();
    assert!(rel(mesh.volume, boxed.volume) < 1e-14);
    assert!(mesh.com.norm() < 1e-15);
    assert!((mesh.inertia - boxed.inertia).norm() < 1e-13 * boxed.inertia.norm());
    // Rigidly moved mesh: com = t, inertia = R I Rᵀ.
    let rot = Rotation3::from_euler_angles(0.3, -0.7, 1.1);
    let t = Vector3::new(0.5, -0.25, 2.0);
    let base = box_mesh(&h).unwrap();
    let moved = TriMesh::new(
        base.vertices().iter().map(|v| rot * v + t).collect(),
        base.triangles().to_vec(),
    )
    .unwrap();
    let mp = Shape::Mesh(moved).mass_properties(rho).unwrap();
    assert!((mp.com - t).norm() < 1e-13);
    let expected = rot.matrix() * boxed.inertia * rot.matrix().transpose();
    assert!((mp.inertia - expected).norm() < 1e-12 * expected.norm());
    // The body built from it recovers the principal moments and places the COM at t.
    let body = RigidBody::new(
        Shape::Mesh(box_mesh(&h).unwrap()),
        rho,
        Isometry3::identity(),
    )
    .unwrap();
    let mut moments: Vec<f64> = body.principal_inertia().iter().copied().collect();
    moments.sort_by(f64::total_cmp);
    let mut expected_m: Vec<f64> = boxed.inertia.diagonal().iter().copied().collect();
    expected_m.sort_by(f64::total_cmp);
    for (a, b) in moments.iter().zip(&expected_m) {
        assert!(rel(*a, *b) < 1e-12);
    }
}

#[test]
fn mesh_body_frame_is_principal_and_sdf_is_pose_invariant() {
    let rot = Rotation3::from_euler_angles(0.3, -0.7, 1.1);
    let t = Vector3::new(0.5, -0.25, 2.0);
    let h = Vector3::new(0.1, 0.2, 0.35);
    let base = box_mesh(&h).unwrap();
    let moved = TriMesh::new(
        base.vertices().iter().map(|v| rot * v + t).collect(),
        base.triangles().to_vec(),
    )
    .unwrap();
    let pose = Isometry3::from_parts(
        Translation3::new(1.0, 2.0, 3.0),
        UnitQuaternion::from_euler_angles(0.1, 0.2, 0.3),
    );
    let body = RigidBody::new(Shape::Mesh(moved.clone()), 500.0, pose).unwrap();
    // World COM = pose * t.
    assert!((body.com() - pose.transform_point(&t.into()).coords).norm() < 1e-12);
    // World inertia equals the pose-rotated mesh inertia.
    let mp = Shape::Mesh(moved.clone()).mass_properties(500.0).unwrap();
    let rw = pose.rotation.to_rotation_matrix();
    let expected = rw.matrix() * mp.inertia * rw.matrix().transpose();
    assert!((body.inertia_world() - expected).norm() < 1e-12 * expected.norm());
    // World sdf equals the shape sdf at the pulled-back point.
    let mut rng = Rng(1);
    for _ in 0..50 {
        let p = body.com() + rng.point(0.5);
        let (phi, n) = body.sdf(&p);
        let local = pose.inverse_transform_point(&p.into()).coords;
        let (phi_l, n_l) = moved.sdf(&local);
        assert!((phi - phi_l).abs() < 1e-12);
        assert!((n - pose.rotation * n_l).norm() < 1e-9);
    }
}

#[test]
fn box_sdf_agrees_with_box_mesh_sdf() {
    let h = Vector3::new(0.1, 0.2, 0.3);
    let prim = Shape::Box { half_extents: h };
    let mesh = box_mesh(&h).unwrap();
    let mut rng = Rng(5);
    for _ in 0..400 {
        let p = rng.point(0.5);
        let (a, na) = prim.sdf(&p);
        let (b, nb) = mesh.sdf(&p);
        assert!((a - b).abs() < 1e-12, "φ {a} vs {b} at {p:?}");
        if a > 1e-6 {
            // Outside the normal is unique.
            assert!((na - nb).norm() < 1e-9, "normal at {p:?}");
        }
    }
}

#[test]
fn sdf_normal_is_the_finite_difference_gradient_and_sign_is_right() {
    let shapes = [
        Shape::Box {
            half_extents: Vector3::new(0.1, 0.2, 0.3),
        },
        Shape::Sphere { radius: 0.2 },
        Shape::Capsule {
            radius: 0.1,
            half_length: 0.2,
        },
        Shape::Cylinder {
            radius: 0.15,
            half_length: 0.2,
        },
        Shape::Mesh(box_mesh(&Vector3::new(0.2, 0.1, 0.15)).unwrap()),
    ];
    let mut rng = Rng(9);
    for shape in &shapes {
        let mut checked = 0;
        for _ in 0..400 {
            let p = rng.point(0.45);
            let (phi, n) = shape.sdf(&p);
            assert!(
                (n.norm() - 1.0).abs() < 1e-12,
                "{}: |n| = {}",
                shape.name(),
                n.norm()
            );
            let e = 1e-6;
            let grad = Vector3::from_fn(|i, _| {
                let d = Vector3::ith(i, e);
                (shape.sdf(&(p + d)).0 - shape.sdf(&(p - d)).0) / (2.0 * e)
            });
            // Skip the medial set / edges, where φ has a kink within ±e.
            if (grad.norm() - 1.0).abs() > 1e-6 {
                continue;
            }
            assert!(
                (grad - n).norm() < 1e-6,
                "{}: ∇φ {grad:?} vs n {n:?} at {p:?}",
                shape.name()
            );
            checked += 1;
            // Sign: φ < 0 exactly for points inside (|p| below the inscribed radius 0.1).
            if p.norm() < 0.1 {
                assert!(phi < 0.0, "{}: φ = {phi} at interior {p:?}", shape.name());
            }
        }
        assert!(
            checked > 200,
            "{}: only {checked} smooth samples",
            shape.name()
        );
        assert!(
            shape.sdf(&Vector3::new(0.01, -0.02, 0.015)).0 < 0.0,
            "{} centre inside",
            shape.name()
        );
    }
    // Known values.
    let cap = Shape::Capsule {
        radius: 0.1,
        half_length: 0.2,
    };
    assert!((cap.sdf(&Vector3::new(0.0, 0.0, 0.5)).0 - 0.2).abs() < 1e-15);
    assert!((cap.sdf(&Vector3::new(0.3, 0.0, 0.1)).0 - 0.2).abs() < 1e-15);
    let cyl = Shape::Cylinder {
        radius: 0.15,
        half_length: 0.2,
    };
    assert!(
        (cyl.sdf(&Vector3::new(0.3, 0.4, 0.6)).0 - (0.35f64.powi(2) + 0.4f64.powi(2)).sqrt()).abs()
            < 1e-15
    );
    assert!((cyl.sdf(&Vector3::new(0.1, 0.0, 0.0)).0 + 0.05).abs() < 1e-15);
}

#[test]
fn open_and_inconsistent_meshes_are_refused_with_the_first_bad_edge() {
    let base = box_mesh(&Vector3::new(0.1, 0.1, 0.1)).unwrap();
    let (v, t) = (base.vertices().to_vec(), base.triangles().to_vec());
    // Drop triangle 1 ([1, 2, 3]): the first triangle with an unmatched edge is 0 ([0, 2, 1]),
    // whose edge 2→1 lost its opposite 1→2.
    let mut open = t.clone();
    open.remove(1);
    assert_eq!(
        TriMesh::new(v.clone(), open),
        Err(RigidError::OpenEdge {
            a: 2,
            b: 1,
            triangle: 0
        })
    );
    // Flip triangle 3: its edges now run in the same direction as their neighbours'.
    let mut flipped = t.clone();
    flipped[3].swap(1, 2);
    assert!(matches!(
        TriMesh::new(v.clone(), flipped),
        Err(RigidError::NonManifoldEdge { triangle: 3, .. })
    ));
    // Wound inward: negative volume.
    let inward: Vec<[usize; 3]> = t.iter().map(|&[a, b, c]| [a, c, b]).collect();
    assert!(matches!(
        TriMesh::new(v.clone(), inward),
        Err(RigidError::NonPositiveVolume { .. })
    ));
    let mut bad = t.clone();
    bad[4][2] = 8;
    assert_eq!(
        TriMesh::new(v.clone(), bad),
        Err(RigidError::VertexOutOfRange {
            triangle: 4,
            vertex: 8,
            num_vertices: 8
        })
    );
    let mut degenerate = t;
    degenerate[2] = [4, 4, 6];
    assert_eq!(
        TriMesh::new(v, degenerate),
        Err(RigidError::DegenerateTriangle { triangle: 2 })
    );
    assert!(matches!(
        Shape::Sphere { radius: -1.0 }.mass_properties(1.0),
        Err(RigidError::InvalidValue {
            what: "sphere radius",
            ..
        })
    ));
    assert!(matches!(
        Shape::Sphere { radius: 1.0 }.mass_properties(0.0),
        Err(RigidError::InvalidValue {
            what: "density",
            ..
        })
    ));
}
