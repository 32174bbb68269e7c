//! A rigid body: shape, mass and principal inertia, pose (centre of mass + unit quaternion),
//! velocity, per-DoF drives, and the free-rotation integrator.
//!
//! **Frames.** The *body frame* sits at the centre of mass with axes along the principal axes of
//! inertia, so the body-frame inertia is diag(I₁, I₂, I₃). `body_in_shape` places it in the
//! shape's frame (identity for the centred primitives; the mesh's centroid and eigenvectors
//! otherwise). The pose maps body to world: x_w = x + R x_b.
//!
//! **Velocities** are world-frame: v (centre of mass) and ω. The six DoFs are
//! (v_x, v_y, v_z, ω_x, ω_y, ω_z), each with a [`Drive`].
//!
//! **Rotation integrator (gyroscopic term).** Torque-free rotation conserves the world angular
//! momentum L = R I Rᵀ ω exactly; the gyroscopic term ω × Iω only appears when written in ω. We
//! integrate with L as the state: impulses change L (kicks), and the drift over a step is the
//! symplectic splitting of the free rigid body by Dullweber, Leimkuhler and McLachlan (J. Chem.
//! Phys. 107, 1997): with body momentum Π = RᵀL and kinetic energy T = Σ_i Π_i²/(2I_i), each
//! T_i's flow is an exact rotation about body axis e_i by θ = τ·Π_i/I_i (Π ← exp(−θ\[e_i\]×)Π,
//! R ← R·exp(θ\[e_i\]×)), composed as T₁(h/2) T₂(h/2) T₃(h) T₂(h/2) T₁(h/2). It preserves |L| and
//! L itself to round-off, is explicit and unconditionally stable, and has bounded O(h²) energy
//! error with no drift (it is symplectic). When an angular DoF is prescribed the rotation is
//! R ← exp(h\[ω\]×)R with the prescribed/solved ω instead.

use std::fmt;
use std::sync::Arc;

use nalgebra::{Isometry3, Matrix3, Translation3, UnitQuaternion, Vector3};

use super::shape::Shape;
use super::RigidError;
use crate::contact::LaggedParams;

/// A scalar function of time for drives.
#[derive(Clone)]
pub enum Profile {
    /// c.
    Constant(f64),
    /// start + rate·t.
    Linear {
        /// Value at t = 0.
        start: f64,
        /// Slope per second.
        rate: f64,
    },
    /// offset + amplitude·sin(2π·frequency·t + phase).
    Sine {
        /// Mean value.
        offset: f64,
        /// Amplitude.
        amplitude: f64,
        /// Frequency \[Hz\].
        frequency: f64,
        /// Phase \[rad\].
        phase: f64,
    },
    /// Piecewise linear through (t, value) keyframes with strictly increasing t; held
    /// constant outside.
    Keyframes(Vec<(f64, f64)>),
    /// Any function of time.
    Custom(Arc<dyn Fn(f64) -> f64 + Send + Sync>),
}

impl fmt::Debug for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Profile::Constant(c) => write!(f, "Constant({c})"),
            Profile::Linear { start, rate } => write!(f, "Linear {{ start: {start}, rate: {rate} }}"),
            Profile::Sine { offset, amplitude, frequency, phase } => write!(
                f,
                "Sine {{ offset: {offset}, amplitude: {amplitude}, frequency: {frequency}, phase: {phase} }}"
            ),
            Profile::Keyframes(k) => write!(f, "Keyframes({k:?})"),
            Profile::Custom(_) => write!(f, "Custom(..)"),
        }
    }
}

impl Profile {
    /// The value at time t.
    pub fn eval(&self, t: f64) -> f64 {
        match self {
            Profile::Constant(c) => *c,
            Profile::Linear { start, rate } => start + rate * t,
            Profile::Sine {
                offset,
                amplitude,
                frequency,
                phase,
            } => offset + amplitude * (2.0 * std::f64::consts::PI * frequency * t + phase).sin(),
            Profile::Keyframes(k) => {
                let Some(&(t0, v0)) = k.first() else {
                    return 0.0;
                };
                if t <= t0 {
                    return v0;
                }
                for w in k.windows(2) {
                    let ((ta, va), (tb, vb)) = (w[0], w[1]);
                    if t <= tb {
                        return va + (vb - va) * (t - ta) / (tb - ta);
                    }
                }
                k[k.len() - 1].1
            }
            Profile::Custom(f) => f(t),
        }
    }

    fn is_valid(&self) -> bool {
        match self {
            Profile::Keyframes(k) => {
                !k.is_empty()
                    && k.iter().all(|(t, v)| t.is_finite() && v.is_finite())
                    && k.windows(2).all(|w| w[1].0 > w[0].0)
            }
            _ => true,
        }
    }
}

/// How one DoF moves.
#[derive(Debug, Clone, Default)]
pub enum Drive {
    /// Dynamics: gravity (linear DoFs), contact and external impulses.
    #[default]
    Free,
    /// Prescribed velocity \[m/s or rad/s\] (kinematic: contact does not change it).
    Velocity(Profile),
    /// Prescribed position of the centre of mass along a world axis \[m\] (linear DoFs only):
    /// the step velocity is (p(t + h) − x)/h.
    Position(Profile),
    /// Free, plus a force \[N\] (linear) or torque \[N·m\] (angular) about the world axis.
    Force(Profile),
}

impl Drive {
    /// Whether contact and forces change this DoF.
    pub fn is_dynamic(&self) -> bool {
        matches!(self, Drive::Free | Drive::Force(_))
    }
}

/// A rigid body.
#[derive(Debug, Clone)]
pub struct RigidBody {
    /// The geometry.
    pub shape: Shape,
    mass: f64,
    /// Principal moments (body frame).
    inertia: Vector3<f64>,
    /// The body frame (centre of mass, principal axes) in the shape frame.
    body_in_shape: Isometry3<f64>,
    /// Body-to-world pose: translation = centre of mass, rotation = principal axes.
    pub pose: Isometry3<f64>,
    /// Centre-of-mass velocity (world) \[m/s\].
    pub velocity: Vector3<f64>,
    /// Angular velocity (world) \[rad/s\].
    pub angular_velocity: Vector3<f64>,
    /// Drives of (v_x, v_y, v_z, ω_x, ω_y, ω_z).
    pub drives: [Drive; 6],
    /// Contact parameters of this body's surface against other rigid bodies and half-spaces
    /// (default: Drake's point-contact defaults, [`LaggedParams::default`]).
    pub contact: LaggedParams,
    /// Contact parameters of this body's surface against MPM particles, one contact per
    /// particle (default: [`LaggedParams::mpm_default`], which keeps the block-diagonal
    /// quasi-Newton solve short on gram-scale grid nodes; docs/mpm.md).
    pub mpm_contact: LaggedParams,
}

impl RigidBody {
    /// A free body of uniform `density` whose *shape frame* is at `shape_pose` (world).
    pub fn new(shape: Shape, density: f64, shape_pose: Isometry3<f64>) -> Result<Self, RigidError> {
        let mp = shape.mass_properties(density)?;
        let off = mp.inertia - Matrix3::from_diagonal(&mp.inertia.diagonal());
        let (inertia, rotation) = if off.norm() <= 1e-14 * mp.inertia.trace() {
            (mp.inertia.diagonal(), UnitQuaternion::identity())
        } else {
            let eig = mp.inertia.symmetric_eigen();
            let mut axes = eig.eigenvectors;
            if axes.determinant() < 0.0 {
                axes.set_column(2, &(-axes.column(2)));
            }
            let rot = nalgebra::Rotation3::from_matrix_unchecked(axes);
            (eig.eigenvalues, UnitQuaternion::from_rotation_matrix(&rot))
        };
        let body_in_shape = Isometry3::from_parts(Translation3::from(mp.com), rotation);
        Ok(Self {
            shape,
            mass: mp.mass,
            inertia,
            body_in_shape,
            pose: shape_pose * body_in_shape,
            velocity: Vector3::zeros(),
            angular_velocity: Vector3::zeros(),
            drives: Default::default(),
            contact: LaggedParams::default(),
            mpm_contact: LaggedParams::mpm_default(),
        })
    }

    /// Mass \[kg\].
    pub fn mass(&self) -> f64 {
        self.mass
    }

    /// Principal moments of inertia (body frame) \[kg·m²\].
    pub fn principal_inertia(&self) -> Vector3<f64> {
        self.inertia
    }

    /// World-frame inertia about the centre of mass, R diag(I) Rᵀ.
    pub fn inertia_world(&self) -> Matrix3<f64> {
        let r = self.pose.rotation.to_rotation_matrix();
        r.matrix() * Matrix3::from_diagonal(&self.inertia) * r.matrix().transpose()
    }

    /// Centre of mass (world).
    pub fn com(&self) -> Vector3<f64> {
        self.pose.translation.vector
    }

    /// The shape frame's world pose.
    pub fn shape_pose(&self) -> Isometry3<f64> {
        self.pose * self.body_in_shape.inverse()
    }

    /// Velocity of the body-fixed point currently at world position `p`: v + ω × (p − x).
    pub fn point_velocity(&self, p: &Vector3<f64>) -> Vector3<f64> {
        self.velocity + self.angular_velocity.cross(&(p - self.com()))
    }

    /// World angular momentum L = I_w ω.
    pub fn angular_momentum(&self) -> Vector3<f64> {
        self.inertia_world() * self.angular_velocity
    }

    /// Kinetic energy ½m|v|² + ½ωᵀI_wω.
    pub fn kinetic_energy(&self) -> f64 {
        0.5 * self.mass * self.velocity.norm_squared()
            + 0.5
                * self
                    .angular_velocity
                    .dot(&(self.inertia_world() * self.angular_velocity))
    }

    /// Signed distance and outward unit normal of the shape at world point `p`.
    pub fn sdf(&self, p: &Vector3<f64>) -> (f64, Vector3<f64>) {
        let shape_pose = self.shape_pose();
        let (phi, n) = self
            .shape
            .sdf(&shape_pose.inverse_transform_point(&(*p).into()).coords);
        (phi, shape_pose.rotation * n)
    }

    /// Checks drives: keyframes well formed, no position drive on an angular DoF.
    pub fn validate_drives(&self, body: usize) -> Result<(), RigidError> {
        for (dof, d) in self.drives.iter().enumerate() {
            match d {
                Drive::Position(_) if dof >= 3 => {
                    return Err(RigidError::Unsupported {
                        what: format!(
                            "body {body} DoF {dof}: position drives on angular DoFs (use a velocity drive)"
                        ),
                    })
                }
                Drive::Velocity(p) | Drive::Position(p) | Drive::Force(p) if !p.is_valid() => {
                    return Err(RigidError::InvalidProfile { body, dof })
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Advances the pose over `h` with the current (end-of-step) velocities: x += h·v, and the
    /// rotation by the splitting drift (module doc) when all angular DoFs are dynamic, else by
    /// exp(h\[ω\]×).
    pub fn drift(&mut self, h: f64) {
        self.pose.translation.vector += self.velocity * h;
        if self.drives[3..].iter().all(Drive::is_dynamic) {
            let l = self.angular_momentum();
            let mut r = self.pose.rotation;
            let mut pi = r.inverse() * l;
            for (axis, tau) in [
                (0, 0.5 * h),
                (1, 0.5 * h),
                (2, h),
                (1, 0.5 * h),
                (0, 0.5 * h),
            ] {
                let e = Vector3::ith_axis(axis);
                let theta = tau * pi[axis] / self.inertia[axis];
                pi = UnitQuaternion::from_axis_angle(&e, -theta) * pi;
                r *= UnitQuaternion::from_axis_angle(&e, theta);
            }
            r.renormalize_fast();
            self.pose.rotation = r;
            self.angular_velocity = r * pi.component_div(&self.inertia);
        } else {
            let w = self.angular_velocity * h;
            self.pose.rotation = UnitQuaternion::from_scaled_axis(w) * self.pose.rotation;
            self.pose.rotation.renormalize_fast();
        }
    }
}
