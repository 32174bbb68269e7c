//! A set of rigid bodies and fixed half-spaces stepped with the lagged compliant contact model
//! on the rigid DoFs (seed Eq. 3's rigid part: M_r(v_r⁺ − v_r) = Δt k_r + J_rrᵀγ_r + external
//! impulses), solved as the convex problem of [`crate::contact::dense`] by full Newton — "a
//! small dense Newton, as Drake's SAP does".
//!
//! One step of length h:
//! 1. **Free motion** per body: v* = v + h g + (h F + P)/m, L* = I_w ω + h τ + P_τ with (P, P_τ)
//!    an external impulse (e.g. the MPM impulses accumulated over the substeps), ω* = I_w⁻¹L*.
//!    Prescribed DoFs take their drive's value; the remaining DoFs' target is shifted by
//!    −M_FF⁻¹M_FP(v_P − v*_P) so that minimising over the free DoFs is the constrained problem.
//! 2. **Contacts** registered at the step-start pose: plane vs the shape's support points
//!    ([`Shape::plane_support_points`]); sphere vs any shape (the sphere centre against the
//!    other's signed distance, less the radius); box/mesh vs box/mesh by vertex-in-shape both
//!    ways (misses edge–edge contact); capsule vs box/capsule/cylinder by the capsule axis against
//!    the other's convex distance (`capsule_contacts`). Other rigid–rigid pairs (cylinder vs
//!    box/cylinder/mesh, capsule vs mesh) are refused with [`RigidError::Unsupported`] unless
//!    the pair is excluded.
//!    Normal n̂ out of body B (or the plane) into body A; v_c = R_cᵀ(v_A(p) − v_B(p)).
//!    Pair parameters combine as Drake's point contact does: k = k₁k₂/(k₁+k₂),
//!    d = (k₂d₁ + k₁d₂)/(k₁+k₂), μ = 2μ₁μ₂/(μ₁+μ₂); v_s and σ from body A.
//! 3. **Contact solve** over the dynamic DoFs: argmin ½‖v − v*‖²_M + Σ ℓ_c(J v − b).
//! 4. **Drift**: x += h v, rotation by [`RigidBody::drift`].

use nalgebra::{DMatrix, DVector, Matrix3, Matrix3xX, Matrix6, Vector3, Vector6};

use super::body::{Drive, RigidBody};
use super::shape::Shape;
use super::RigidError;
use crate::contact::grid::{SolverOptions, Wrench};
use crate::contact::model::contact_frame;
use crate::contact::{DenseContact, DenseProblem, LaggedContact, LaggedParams};

/// A fixed half-space {x : n̂·x ≤ offset} (the ground, an incline, a wall).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HalfSpace {
    /// Outward unit normal.
    pub normal: Vector3<f64>,
    /// n̂·x on the surface.
    pub offset: f64,
    /// Surface contact parameters against rigid bodies.
    pub contact: LaggedParams,
    /// Surface contact parameters against MPM particles (default
    /// [`LaggedParams::mpm_default`]; see [`RigidBody::mpm_contact`]).
    pub mpm_contact: LaggedParams,
}

impl HalfSpace {
    /// The half-space below the plane through `point` with outward `normal` (normalised);
    /// `contact` is for rigid bodies, MPM particles get [`LaggedParams::mpm_default`].
    pub fn new(
        normal: Vector3<f64>,
        point: Vector3<f64>,
        contact: LaggedParams,
    ) -> Result<Self, RigidError> {
        let len = normal.norm();
        if !(len > 0.0 && len.is_finite()) {
            return Err(RigidError::InvalidValue {
                what: "half-space normal length",
                value: len,
            });
        }
        let n = normal / len;
        Ok(Self {
            normal: n,
            offset: n.dot(&point),
            contact,
            mpm_contact: LaggedParams::mpm_default(),
        })
    }

    /// The same half-space with `params` for its contacts with MPM particles.
    pub fn with_mpm_contact(self, params: LaggedParams) -> Self {
        Self {
            mpm_contact: params,
            ..self
        }
    }

    /// Signed distance n̂·p − offset.
    pub fn sdf(&self, p: &Vector3<f64>) -> f64 {
        self.normal.dot(p) - self.offset
    }
}

/// The constrained free motion of one body over a step ([`RigidWorld::free_motion_targets`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FreeMotionTarget {
    /// (v, ω): the shifted free-motion target on dynamic DoFs, the drive's value on the others.
    pub target: Vector6<f64>,
    /// diag(m I₃, I_w) at the step-start pose.
    pub mass: Matrix6<f64>,
    /// Which of the six DoFs are dynamic (not velocity- or position-driven).
    pub dynamic: [bool; 6],
}

/// One rigid contact of a step, with its impulse.
#[derive(Debug, Clone, PartialEq)]
pub struct RigidContact {
    /// The body whose point is in contact (receives +impulse).
    pub body_a: usize,
    /// The other body (receives −impulse), or `None` for a half-space.
    pub body_b: Option<usize>,
    /// The half-space index when `body_b` is `None`.
    pub plane: Option<usize>,
    /// Contact point (world).
    pub point: Vector3<f64>,
    /// Unit normal out of B (or the plane) into A.
    pub normal: Vector3<f64>,
    /// Step-start signed distance (negative: penetration).
    pub phi0: f64,
    /// Impulse on A (world) \[N·s\].
    pub impulse: Vector3<f64>,
    params: LaggedParams,
}

/// What a step did.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RigidStepReport {
    /// Contacts with their impulses.
    pub contacts: Vec<RigidContact>,
    /// Newton iterations of the contact solve.
    pub iterations: usize,
}

/// Rigid bodies, fixed half-spaces and the contact step.
#[derive(Debug, Clone)]
pub struct RigidWorld {
    /// The bodies.
    pub bodies: Vec<RigidBody>,
    /// Fixed half-spaces.
    pub planes: Vec<HalfSpace>,
    /// Gravity \[m/s²\].
    pub gravity: Vector3<f64>,
    /// Whether body–body contact is on.
    pub rigid_rigid_contact: bool,
    /// Body pairs (i, j) excluded from body–body contact.
    pub excluded_pairs: Vec<(usize, usize)>,
    /// Contact-solve settings (tight by default: the rigid problem is small).
    pub solver: SolverOptions,
    /// Simulated time \[s\].
    pub time: f64,
}

impl Default for RigidWorld {
    fn default() -> Self {
        Self {
            bodies: Vec::new(),
            planes: Vec::new(),
            gravity: Vector3::new(0.0, 0.0, -9.81),
            rigid_rigid_contact: true,
            excluded_pairs: Vec::new(),
            solver: SolverOptions {
                rel_tol: 1e-8,
                max_iterations: 200,
                ..SolverOptions::default()
            },
            time: 0.0,
        }
    }
}

/// Drake's point-contact parameter combination (module doc).
pub fn combine(a: &LaggedParams, b: &LaggedParams) -> LaggedParams {
    let k = a.stiffness * b.stiffness / (a.stiffness + b.stiffness);
    let d =
        (b.stiffness * a.dissipation + a.stiffness * b.dissipation) / (a.stiffness + b.stiffness);
    let mu = if a.friction + b.friction > 0.0 {
        2.0 * a.friction * b.friction / (a.friction + b.friction)
    } else {
        0.0
    };
    LaggedParams {
        stiffness: k,
        dissipation: d,
        friction: mu,
        ..*a
    }
}

/// J_b = [I, −\[r\]×]: maps (v, ω) to the velocity of the point at lever r.
fn point_jacobian(r: &Vector3<f64>) -> nalgebra::Matrix3x6<f64> {
    let mut j = nalgebra::Matrix3x6::zeros();
    j.fixed_view_mut::<3, 3>(0, 0)
        .copy_from(&Matrix3::identity());
    j.fixed_view_mut::<3, 3>(0, 3)
        .copy_from(&(-r.cross_matrix()));
    j
}

impl RigidWorld {
    fn pair_excluded(&self, i: usize, j: usize) -> bool {
        self.excluded_pairs
            .iter()
            .any(|&(a, b)| (a, b) == (i, j) || (a, b) == (j, i))
    }

    /// Contacts at the current poses (step start); impulses zero.
    pub fn detect_contacts(&self) -> Result<Vec<RigidContact>, RigidError> {
        let mut out = Vec::new();
        let make = |a, b, plane, point, normal: Vector3<f64>, phi0, params| RigidContact {
            body_a: a,
            body_b: b,
            plane,
            point,
            normal,
            phi0,
            impulse: Vector3::zeros(),
            params,
        };
        for (a, body) in self.bodies.iter().enumerate() {
            let shape_pose = body.shape_pose();
            for (pi, plane) in self.planes.iter().enumerate() {
                let n_shape = shape_pose.rotation.inverse() * plane.normal;
                for p in body.shape.plane_support_points(&n_shape) {
                    let pw = shape_pose.transform_point(&p.into()).coords;
                    let phi = plane.sdf(&pw);
                    if phi < 0.0 {
                        let params = combine(&body.contact, &plane.contact);
                        out.push(make(a, None, Some(pi), pw, plane.normal, phi, params));
                    }
                }
            }
        }
        if !self.rigid_rigid_contact {
            return Ok(out);
        }
        for i in 0..self.bodies.len() {
            for j in i + 1..self.bodies.len() {
                if self.pair_excluded(i, j) {
                    continue;
                }
                let (bi, bj) = (&self.bodies[i], &self.bodies[j]);
                let params = combine(&bi.contact, &bj.contact);
                // Sphere against anything: the sphere's centre against the other's distance.
                let sphere = match (&bi.shape, &bj.shape) {
                    (Shape::Sphere { radius }, _) => Some((i, j, *radius)),
                    (_, Shape::Sphere { radius }) => Some((j, i, *radius)),
                    _ => None,
                };
                if let Some((s, o, r)) = sphere {
                    let c = self.bodies[s].com();
                    let (phi, n) = self.bodies[o].sdf(&c);
                    let phi = phi - r;
                    if phi < 0.0 {
                        out.push(make(
                            s,
                            Some(o),
                            None,
                            c - n * (r + 0.5 * phi),
                            n,
                            phi,
                            params,
                        ));
                    }
                    continue;
                }
                // Capsule against a convex shape: the capsule's axis against the other's
                // (convex) distance; see `capsule_contacts`.
                let capsule = match (&bi.shape, &bj.shape) {
                    (
                        Shape::Capsule {
                            radius,
                            half_length,
                        },
                        other,
                    ) if other.is_convex() => Some((i, j, *radius, *half_length)),
                    (
                        other,
                        Shape::Capsule {
                            radius,
                            half_length,
                        },
                    ) if other.is_convex() => Some((j, i, *radius, *half_length)),
                    _ => None,
                };
                if let Some((s, o, r, half_length)) = capsule {
                    for (point, normal, phi) in self.capsule_contacts(s, o, r, half_length) {
                        out.push(make(s, Some(o), None, point, normal, phi, params));
                    }
                    continue;
                }
                let (Some(vi), Some(vj)) = (bi.shape.vertices(), bj.shape.vertices()) else {
                    return Err(RigidError::Unsupported {
                        what: format!(
                            "rigid–rigid contact between body {i} ({}) and body {j} ({}); supported: \
                             sphere–any, capsule–box/capsule/cylinder, box/mesh–box/mesh \
                             (exclude the pair to disable it)",
                            bi.shape.name(),
                            bj.shape.name()
                        ),
                    });
                };
                let (ri, rj) = (
                    bi.shape.bounding_radius(&Vector3::zeros()),
                    bj.shape.bounding_radius(&Vector3::zeros()),
                );
                let (ci, cj) = (
                    bi.shape_pose().translation.vector,
                    bj.shape_pose().translation.vector,
                );
                if (ci - cj).norm() > ri + rj {
                    continue;
                }
                for (a, b, verts) in [(i, j, vi), (j, i, vj)] {
                    let pose = self.bodies[a].shape_pose();
                    for v in verts {
                        let pw = pose.transform_point(&v.into()).coords;
                        let (phi, n) = self.bodies[b].sdf(&pw);
                        if phi < 0.0 {
                            out.push(make(a, Some(b), None, pw, n, phi, params));
                        }
                    }
                }
            }
        }
        Ok(out)
    }

    /// Contacts of capsule body `s` (radius r, axis segment ±ℓ) against the convex body `o`:
    /// the capsule is the set of points within r of its axis segment a→b, so its deepest point
    /// against `o` lies at the minimiser of the convex f(t) = φ_o(a + t(b − a)), t ∈ [0, 1]
    /// (φ of a convex set is convex). Candidates: both ends (two contacts support a capsule
    /// lying on a face, where f is flat) and the interior minimiser found by golden-section
    /// search when it is deeper than both ends. Each candidate c with φ = φ_o(c) − r < 0 gives
    /// the contact point c − n̂(r + φ/2) with n̂ = ∇φ_o(c). Returns (point, normal, φ).
    fn capsule_contacts(
        &self,
        s: usize,
        o: usize,
        r: f64,
        half_length: f64,
    ) -> Vec<(Vector3<f64>, Vector3<f64>, f64)> {
        let pose = self.bodies[s].shape_pose();
        let a = pose
            .transform_point(&Vector3::new(0.0, 0.0, -half_length).into())
            .coords;
        let b = pose
            .transform_point(&Vector3::new(0.0, 0.0, half_length).into())
            .coords;
        let other = &self.bodies[o];
        let f = |t: f64| other.sdf(&(a + (b - a) * t)).0;
        let (f0, f1) = (f(0.0), f(1.0));
        let mut ts = vec![0.0, 1.0];
        let g = 0.5 * (5f64.sqrt() - 1.0);
        let (mut lo, mut hi) = (0.0, 1.0);
        let (mut x1, mut x2) = (hi - g * (hi - lo), lo + g * (hi - lo));
        let (mut y1, mut y2) = (f(x1), f(x2));
        for _ in 0..60 {
            if y1 < y2 {
                hi = x2;
                (x2, y2) = (x1, y1);
                x1 = hi - g * (hi - lo);
                y1 = f(x1);
            } else {
                lo = x1;
                (x1, y1) = (x2, y2);
                x2 = lo + g * (hi - lo);
                y2 = f(x2);
            }
        }
        let t_min = 0.5 * (lo + hi);
        if f(t_min) < f0.min(f1) - 1e-12 * (b - a).norm() {
            ts.push(t_min);
        }
        ts.into_iter()
            .filter_map(|t| {
                let c = a + (b - a) * t;
                let (phi_o, n) = other.sdf(&c);
                let phi = phi_o - r;
                (phi < 0.0).then(|| (c - n * (r + 0.5 * phi), n, phi))
            })
            .collect()
    }

    /// Step 1 of [`RigidWorld::step`] (module doc) for a step of length `h` from the current
    /// time, per body: the free-motion target of the dynamic DoFs (shifted by
    /// −M_FF⁻¹M_FP(v_P − v*_P)) and the prescribed values of the driven DoFs, the 6×6 mass
    /// diag(m I, I_w) and which DoFs are dynamic. Minimising ½(u − target)ᵀM(u − target) over
    /// the dynamic DoFs with the others at their values is the constrained free motion. The
    /// strongly coupled step (`crate::strong`) poses the rigid part of its problem with it.
    pub fn free_motion_targets(&self, h: f64, external: &[Wrench]) -> Vec<FreeMotionTarget> {
        let t0 = self.time;
        let t1 = t0 + h;
        let mut out = Vec::with_capacity(self.bodies.len());
        for (b, body) in self.bodies.iter().enumerate() {
            let ext = external.get(b).copied().unwrap_or_default();
            let m = body.mass();
            let iw = body.inertia_world();
            let mut force = ext.force;
            let mut torque_impulse = ext.torque;
            for i in 0..3 {
                if let Drive::Force(p) = &body.drives[i] {
                    force[i] += h * p.eval(t0);
                }
                if let Drive::Force(p) = &body.drives[3 + i] {
                    torque_impulse[i] += h * p.eval(t0);
                }
            }
            let v_free = body.velocity + self.gravity * h + force / m;
            let l_free = iw * body.angular_velocity + torque_impulse;
            let w_free = iw.try_inverse().unwrap_or_else(Matrix3::zeros) * l_free;
            let mut u = Vector6::zeros();
            u.fixed_rows_mut::<3>(0).copy_from(&v_free);
            u.fixed_rows_mut::<3>(3).copy_from(&w_free);
            let mut mb = Matrix6::zeros();
            mb.fixed_view_mut::<3, 3>(0, 0)
                .copy_from(&(Matrix3::identity() * m));
            mb.fixed_view_mut::<3, 3>(3, 3).copy_from(&iw);
            // Prescribed values and the shift of the dynamic targets.
            let mut value = u;
            let mut dyn_mask = [true; 6];
            for i in 0..6 {
                match &body.drives[i] {
                    Drive::Velocity(p) => {
                        value[i] = p.eval(t1);
                        dyn_mask[i] = false;
                    }
                    Drive::Position(p) => {
                        value[i] = (p.eval(t1) - body.com()[i]) / h;
                        dyn_mask[i] = false;
                    }
                    _ => {}
                }
            }
            let free: Vec<usize> = (0..6).filter(|&i| dyn_mask[i]).collect();
            let fixed: Vec<usize> = (0..6).filter(|&i| !dyn_mask[i]).collect();
            if !free.is_empty() && !fixed.is_empty() {
                let mff = DMatrix::from_fn(free.len(), free.len(), |r, c| mb[(free[r], free[c])]);
                let mfp = DMatrix::from_fn(free.len(), fixed.len(), |r, c| mb[(free[r], fixed[c])]);
                let dp = DVector::from_fn(fixed.len(), |r, _| value[fixed[r]] - u[fixed[r]]);
                let shift = mff
                    .cholesky()
                    .map(|ch| ch.solve(&(mfp * dp)))
                    .unwrap_or_else(|| DVector::zeros(free.len()));
                for (r, &i) in free.iter().enumerate() {
                    value[i] -= shift[r];
                }
            }
            out.push(FreeMotionTarget {
                target: value,
                mass: mb,
                dynamic: dyn_mask,
            });
        }
        out
    }

    /// Advances by `h` with `external` impulses per body (empty slice: none). See the module doc.
    pub fn step(&mut self, h: f64, external: &[Wrench]) -> Result<RigidStepReport, RigidError> {
        if !(h > 0.0 && h.is_finite()) {
            return Err(RigidError::InvalidValue {
                what: "time step",
                value: h,
            });
        }
        let nb = self.bodies.len();
        if !external.is_empty() && external.len() != nb {
            return Err(RigidError::WrenchCount {
                got: external.len(),
                expected: nb,
            });
        }
        for (b, body) in self.bodies.iter().enumerate() {
            body.validate_drives(b)?;
        }
        let t1 = self.time + h;
        let mut contacts = self.detect_contacts()?;

        // 1. Free motion: unconstrained targets u*, prescribed values, masses per body.
        let free = self.free_motion_targets(h, external);
        let targets: Vec<Vector6<f64>> = free.iter().map(|t| t.target).collect();
        let masses: Vec<Matrix6<f64>> = free.iter().map(|t| t.mass).collect();
        let dynamic: Vec<[bool; 6]> = free.iter().map(|t| t.dynamic).collect();

        // DoF map of the reduced problem.
        let mut index = vec![[usize::MAX; 6]; nb];
        let mut n = 0;
        for b in 0..nb {
            for i in 0..6 {
                if dynamic[b][i] {
                    index[b][i] = n;
                    n += 1;
                }
            }
        }
        let mut mass = DMatrix::zeros(n, n);
        let mut v_star = DVector::zeros(n);
        for b in 0..nb {
            for i in 0..6 {
                if index[b][i] == usize::MAX {
                    continue;
                }
                v_star[index[b][i]] = targets[b][i];
                for j in 0..6 {
                    if index[b][j] != usize::MAX {
                        mass[(index[b][i], index[b][j])] = masses[b][(i, j)];
                    }
                }
            }
        }

        // 2. Contact Jacobians, biases and models.
        let mut dense_contacts = Vec::with_capacity(contacts.len());
        let mut frames = Vec::with_capacity(contacts.len());
        for c in &contacts {
            let frame = contact_frame(&c.normal);
            let mut jac = Matrix3xX::zeros(n);
            let mut bias = Vector3::zeros();
            let mut vn0 = 0.0;
            let mut w = Matrix3::zeros();
            let sides = [(Some(c.body_a), 1.0), (c.body_b, -1.0)];
            for (body, sign) in sides {
                let Some(b) = body else { continue };
                let r = c.point - self.bodies[b].com();
                let jb = frame.transpose() * point_jacobian(&r) * sign;
                vn0 += sign * c.normal.dot(&self.bodies[b].point_velocity(&c.point));
                if let Some(minv) = masses[b].try_inverse() {
                    w += jb * minv * jb.transpose();
                }
                for i in 0..6 {
                    let col = jb.column(i);
                    if index[b][i] != usize::MAX {
                        let mut dst = jac.column_mut(index[b][i]);
                        dst += col;
                    } else {
                        bias -= col * targets[b][i];
                    }
                }
            }
            let w_rms = w.diagonal().norm() / 3f64.sqrt();
            let delassus = (0.5 * (w[(0, 0)] + w[(1, 1)])).max(w_rms);
            let model = LaggedContact::new(&c.params, h, c.phi0, vn0, delassus)?;
            dense_contacts.push(DenseContact {
                jacobian: jac,
                bias,
                model,
            });
            frames.push(frame);
        }
        let problem = DenseProblem {
            mass,
            v_star,
            contacts: dense_contacts,
        };
        let solution = problem.solve_newton(None, &self.solver)?;

        // 3. Write back velocities, report impulses, 4. drift.
        for b in 0..nb {
            let mut u = targets[b];
            for i in 0..6 {
                if index[b][i] != usize::MAX {
                    u[i] = solution.v[index[b][i]];
                }
            }
            let body = &mut self.bodies[b];
            body.velocity = u.fixed_rows::<3>(0).into_owned();
            body.angular_velocity = u.fixed_rows::<3>(3).into_owned();
        }
        for ((c, g), frame) in contacts.iter_mut().zip(&solution.impulses).zip(&frames) {
            c.impulse = frame * g;
        }
        for body in &mut self.bodies {
            body.drift(h);
        }
        self.time = t1;
        Ok(RigidStepReport {
            contacts,
            iterations: solution.stats.iterations,
        })
    }
}
