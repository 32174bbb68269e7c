//! Rigid shapes in their own frame: signed distance with outward normal, closed-form mass
//! properties for the primitives, and the support points used for contact against planes.
//!
//! Primitives are centred at the origin; capsule and cylinder axes are z. Mass properties
//! (uniform density ρ, inertia about the centre of mass):
//! - box, half extents (a, b, c): m = 8ρabc, I = m/3·diag(b² + c², a² + c², a² + b²);
//! - sphere, radius r: m = 4/3·πρr³, I = 2/5·m r²·𝟙;
//! - cylinder, radius r, half length ℓ (h = 2ℓ): m = ρπr²h, I_zz = m r²/2,
//!   I_xx = I_yy = m(3r² + h²)/12;
//! - capsule (cylinder plus two hemispheres): with m_c = ρπr²h and m_s = 4/3·ρπr³,
//!   I_zz = m_c r²/2 + 2/5·m_s r², I_xx = m_c(h²/12 + r²/4) + m_s(2r²/5 + h²/4 + 3hr/8)
//!   (each hemisphere's 83/320·m r² about its own centroid at 3r/8, shifted);
//! - mesh: divergence-theorem integrals ([`super::mesh`]).

use nalgebra::{Matrix3, Rotation3, Vector3};

use super::mesh::TriMesh;
use super::RigidError;

/// A rigid geometry in its own frame.
#[derive(Debug, Clone, PartialEq)]
pub enum Shape {
    /// Box with the given half extents.
    Box {
        /// Half extents (a, b, c) \[m\].
        half_extents: Vector3<f64>,
    },
    /// Sphere.
    Sphere {
        /// Radius \[m\].
        radius: f64,
    },
    /// Capsule along z: the set of points within `radius` of the segment z ∈ \[−ℓ, ℓ\].
    Capsule {
        /// Radius \[m\].
        radius: f64,
        /// Half length ℓ of the axis segment \[m\].
        half_length: f64,
    },
    /// Cylinder along z.
    Cylinder {
        /// Radius \[m\].
        radius: f64,
        /// Half length \[m\].
        half_length: f64,
    },
    /// Closed triangle mesh.
    Mesh(TriMesh),
}

/// Mass properties in the shape frame.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MassProperties {
    /// Volume \[m³\].
    pub volume: f64,
    /// Mass \[kg\].
    pub mass: f64,
    /// Centre of mass (shape frame) \[m\].
    pub com: Vector3<f64>,
    /// Inertia tensor about the centre of mass, shape-frame axes \[kg·m²\].
    pub inertia: Matrix3<f64>,
}

fn positive(what: &'static str, value: f64) -> Result<(), RigidError> {
    if value > 0.0 && value.is_finite() {
        Ok(())
    } else {
        Err(RigidError::InvalidValue { what, value })
    }
}

impl Shape {
    /// Checks the dimensions (meshes are validated at construction).
    pub fn validate(&self) -> Result<(), RigidError> {
        match self {
            Shape::Box { half_extents } => half_extents
                .iter()
                .try_for_each(|&h| positive("box half extent", h)),
            Shape::Sphere { radius } => positive("sphere radius", *radius),
            Shape::Capsule {
                radius,
                half_length,
            } => {
                positive("capsule radius", *radius)?;
                positive("capsule half length", *half_length)
            }
            Shape::Cylinder {
                radius,
                half_length,
            } => {
                positive("cylinder radius", *radius)?;
                positive("cylinder half length", *half_length)
            }
            Shape::Mesh(_) => Ok(()),
        }
    }

    /// A short name for messages.
    pub fn name(&self) -> &'static str {
        match self {
            Shape::Box { .. } => "box",
            Shape::Sphere { .. } => "sphere",
            Shape::Capsule { .. } => "capsule",
            Shape::Cylinder { .. } => "cylinder",
            Shape::Mesh(_) => "mesh",
        }
    }

    /// Mass properties at uniform density (module doc).
    pub fn mass_properties(&self, density: f64) -> Result<MassProperties, RigidError> {
        self.validate()?;
        positive("density", density)?;
        let pi = std::f64::consts::PI;
        let diag = |v: f64, i: Vector3<f64>| MassProperties {
            volume: v,
            mass: density * v,
            com: Vector3::zeros(),
            inertia: Matrix3::from_diagonal(&i),
        };
        Ok(match self {
            Shape::Box { half_extents: h } => {
                let v = 8.0 * h.x * h.y * h.z;
                let m = density * v;
                let (a2, b2, c2) = (h.x * h.x, h.y * h.y, h.z * h.z);
                diag(v, Vector3::new(b2 + c2, a2 + c2, a2 + b2) * (m / 3.0))
            }
            Shape::Sphere { radius: r } => {
                let v = 4.0 / 3.0 * pi * r.powi(3);
                diag(v, Vector3::repeat(0.4 * density * v * r * r))
            }
            Shape::Cylinder {
                radius: r,
                half_length: l,
            } => {
                let h = 2.0 * l;
                let v = pi * r * r * h;
                let m = density * v;
                let ixx = m * (3.0 * r * r + h * h) / 12.0;
                diag(v, Vector3::new(ixx, ixx, 0.5 * m * r * r))
            }
            Shape::Capsule {
                radius: r,
                half_length: l,
            } => {
                let h = 2.0 * l;
                let (vc, vs) = (pi * r * r * h, 4.0 / 3.0 * pi * r.powi(3));
                let (mc, ms) = (density * vc, density * vs);
                let izz = 0.5 * mc * r * r + 0.4 * ms * r * r;
                let ixx = mc * (h * h / 12.0 + r * r / 4.0)
                    + ms * (0.4 * r * r + h * h / 4.0 + 3.0 * h * r / 8.0);
                diag(vc + vs, Vector3::new(ixx, ixx, izz))
            }
            Shape::Mesh(mesh) => {
                let (v, first, second) = mesh.integrals();
                let com = first / v;
                let c = second * density;
                let m = density * v;
                let about_origin = Matrix3::identity() * c.trace() - c;
                let shift = (Matrix3::identity() * com.norm_squared() - com * com.transpose()) * m;
                MassProperties {
                    volume: v,
                    mass: m,
                    com,
                    inertia: about_origin - shift,
                }
            }
        })
    }

    /// Signed distance φ (negative inside) and outward unit normal ∇φ at `p` (shape frame).
    pub fn sdf(&self, p: &Vector3<f64>) -> (f64, Vector3<f64>) {
        match self {
            Shape::Sphere { radius } => {
                let d = p.norm();
                let n = if d > 0.0 { p / d } else { Vector3::z() };
                (d - radius, n)
            }
            Shape::Box { half_extents: h } => {
                let q = p.abs() - h;
                let sgn = p.map(|x| if x < 0.0 { -1.0 } else { 1.0 });
                if q.max() > 0.0 {
                    let out = q.map(|x| x.max(0.0));
                    let d = out.norm();
                    (d, out.component_mul(&sgn) / d)
                } else {
                    let axis = q.imax();
                    (q[axis], Vector3::ith(axis, sgn[axis]))
                }
            }
            Shape::Capsule {
                radius,
                half_length,
            } => {
                let c = Vector3::new(0.0, 0.0, p.z.clamp(-half_length, *half_length));
                let d = p - c;
                let len = d.norm();
                let n = if len > 0.0 { d / len } else { Vector3::x() };
                (len - radius, n)
            }
            Shape::Cylinder {
                radius,
                half_length,
            } => {
                let rho = (p.x * p.x + p.y * p.y).sqrt();
                let u = if rho > 0.0 {
                    Vector3::new(p.x / rho, p.y / rho, 0.0)
                } else {
                    Vector3::x()
                };
                let sz = if p.z < 0.0 { -1.0 } else { 1.0 };
                let (dr, dz) = (rho - radius, p.z.abs() - half_length);
                if dr > 0.0 || dz > 0.0 {
                    let (a, b) = (dr.max(0.0), dz.max(0.0));
                    let d = (a * a + b * b).sqrt();
                    (d, (u * a + Vector3::z() * (sz * b)) / d)
                } else if dr > dz {
                    (dr, u)
                } else {
                    (dz, Vector3::z() * sz)
                }
            }
            Shape::Mesh(mesh) => mesh.sdf(p),
        }
    }

    /// Candidate contact points against a plane whose outward normal is `n` (shape frame):
    /// the points of the shape that can be deepest below the plane. Exact for box, sphere,
    /// capsule and mesh (the deepest point of a polytope is a vertex); for the cylinder the
    /// deepest rim point of each cap plus two more at ±120° on that rim (three points per cap
    /// so a cylinder standing on its cap is supported).
    pub fn plane_support_points(&self, n: &Vector3<f64>) -> Vec<Vector3<f64>> {
        match self {
            Shape::Box { half_extents: h } => (0..8)
                .map(|i| {
                    Vector3::new(
                        if i & 1 == 0 { -h.x } else { h.x },
                        if i & 2 == 0 { -h.y } else { h.y },
                        if i & 4 == 0 { -h.z } else { h.z },
                    )
                })
                .collect(),
            Shape::Sphere { radius } => vec![-n * *radius],
            Shape::Capsule {
                radius,
                half_length,
            } => vec![
                Vector3::new(0.0, 0.0, *half_length) - n * *radius,
                Vector3::new(0.0, 0.0, -half_length) - n * *radius,
            ],
            Shape::Cylinder {
                radius,
                half_length,
            } => {
                let radial = Vector3::new(n.x, n.y, 0.0);
                let d = if radial.norm() > 1e-9 {
                    -radial.normalize()
                } else {
                    Vector3::x()
                };
                let mut out = Vec::with_capacity(6);
                for z in [-half_length, *half_length] {
                    for angle in [
                        0.0,
                        2.0 * std::f64::consts::FRAC_PI_3,
                        -2.0 * std::f64::consts::FRAC_PI_3,
                    ] {
                        let r = Rotation3::from_axis_angle(&Vector3::z_axis(), angle);
                        out.push(r * d * *radius + Vector3::new(0.0, 0.0, z));
                    }
                }
                out
            }
            Shape::Mesh(mesh) => mesh.vertices().to_vec(),
        }
    }

    /// Whether the solid is convex (its signed distance is then a convex function).
    pub fn is_convex(&self) -> bool {
        !matches!(self, Shape::Mesh(_))
    }

    /// Vertices used for vertex-in-shape rigid–rigid contact (box corners, mesh vertices);
    /// `None` for curved shapes.
    pub fn vertices(&self) -> Option<Vec<Vector3<f64>>> {
        match self {
            Shape::Box { .. } => Some(self.plane_support_points(&Vector3::z())),
            Shape::Mesh(mesh) => Some(mesh.vertices().to_vec()),
            _ => None,
        }
    }

    /// Radius of a ball about `centre` (shape frame) containing the shape.
    pub fn bounding_radius(&self, centre: &Vector3<f64>) -> f64 {
        let c = centre.norm();
        match self {
            Shape::Box { half_extents } => half_extents.norm() + c,
            Shape::Sphere { radius } => radius + c,
            Shape::Capsule {
                radius,
                half_length,
            } => radius + half_length + c,
            Shape::Cylinder {
                radius,
                half_length,
            } => (radius * radius + half_length * half_length).sqrt() + c,
            Shape::Mesh(mesh) => mesh
                .vertices()
                .iter()
                .map(|v| (v - centre).norm())
                .fold(0.0, f64::max),
        }
    }
}
