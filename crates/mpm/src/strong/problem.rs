//! The convex problem of one strongly coupled step (module doc of [`super`]) and its exact
//! derivatives: E(x), ∇E(x) and the sparse Hessian ∇²E(x), x = (grid velocities of the active
//! nodes, dynamic rigid DoFs).
//!
//!   E(x) = ½ Σ_i m_i ‖v_i − v*_i‖² + Σ_p V⁰_p ψ_p(F_p(v)) + ½ (u − ũ)ᵀ M_r (u − ũ)
//!          + Σ_c ℓ_c(v_c(x)),
//!   F_p(v) = F_pⁿ + Δt Σ_i v_i g_ipᵀ,  g_ip = F_pⁿᵀ ∇w_ip,  ∇w_ip = (4/h²) w_ip (x_i − x_p)
//!   (the MLS-MPM gradient, so F_p(v) is exactly the F that G2P writes),
//!   ψ_p(F) = μ ‖ε‖² + (λ/2) (tr ε)²,  ε = sym(R_pᵀF) − I,  R_p = polar rotation of F_pⁿ
//!   (the corotated linear energy with the rotation lagged at the step start, Müller et al.
//!   2002; quadratic and convex in F; it does not resist an infinitesimal rotation RᵀδF skew),
//!   v_c = Σ_i w_ci R_cᵀ v_i − Σ_r c_cr u_r − b_c.
//!
//! Derivatives (P = ∂ψ/∂F = R (2μ ε + λ tr ε I), γ_c = −∂ℓ_c/∂v_c, G_c = ∂²ℓ_c/∂v_c²):
//!   ∂E/∂v_i = m_i (v_i − v*_i) + Σ_p V⁰ Δt P_p g_ip − Σ_c w_ci R_c γ_c,
//!   ∂E/∂u   = M_r (u − ũ) + Σ_c c_crᵀ γ_c,
//!   ∂²E/∂v_i∂v_j = δ_ij m_i I
//!                  + Σ_p V⁰ Δt² [μ ((g_ip·g_jp) I + (R g_jp)(R g_ip)ᵀ) + λ (R g_ip)(R g_jp)ᵀ]
//!                  + Σ_c w_ci w_cj R_c G_c R_cᵀ,
//!   ∂²E/∂v_i∂u_r = −Σ_c w_ci R_c G_c c_cr,   ∂²E/∂u_r∂u_s = M_r,rs + Σ_c c_crᵀ G_c c_cs.
//! The elastic and inertial parts are quadratic (their Hessian is assembled once per step);
//! only the contact part changes between Newton iterations.

use faer::sparse::Triplet;
use nalgebra::{DMatrix, DVector, Matrix3, Vector3};

use crate::contact::LaggedContact;

/// Node pairs are stored per node in a 5×5×5 offset window: two nodes of one quadratic
/// B-spline stencil differ by at most 2 in each grid coordinate.
pub(crate) const WINDOW: usize = 125;

/// Slot of node `b` in the window of node `a` (coordinates differ by ≤ 2 per axis).
fn slot(a: &[i64; 3], b: &[i64; 3]) -> Option<usize> {
    let mut s = 0usize;
    for d in (0..3).rev() {
        let o = b[d] - a[d] + 2;
        if !(0..5).contains(&o) {
            return None;
        }
        s = s * 5 + o as usize;
    }
    Some(s)
}

/// One particle's elastic term: stencil (compact node, g_ip = F_pⁿᵀ∇w_ip), F_pⁿ, the lagged
/// rotation R_p, V⁰_p and the Lamé parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct ElasticTerm {
    pub nodes: Vec<(usize, Vector3<f64>)>,
    pub f0: Matrix3<f64>,
    pub rotation: Matrix3<f64>,
    pub volume: f64,
    pub mu: f64,
    pub lambda: f64,
}

impl ElasticTerm {
    /// F_p(v) = F_pⁿ + Δt Σ_i v_i g_ipᵀ.
    fn deformation(&self, v: &[f64], dt: f64) -> Matrix3<f64> {
        let mut f = self.f0;
        for (k, g) in &self.nodes {
            let vi = Vector3::new(v[3 * k], v[3 * k + 1], v[3 * k + 2]);
            f += dt * vi * g.transpose();
        }
        f
    }

    /// ε = sym(RᵀF) − I.
    fn strain(&self, f: &Matrix3<f64>) -> Matrix3<f64> {
        let a = self.rotation.tr_mul(f);
        (a + a.transpose()) * 0.5 - Matrix3::identity()
    }

    /// ψ(F) = μ‖ε‖² + (λ/2)(tr ε)².
    pub fn energy_density(&self, f: &Matrix3<f64>) -> f64 {
        let e = self.strain(f);
        let t = e.trace();
        self.mu * e.norm_squared() + 0.5 * self.lambda * t * t
    }

    /// P = ∂ψ/∂F = R (2μ ε + λ tr ε I).
    pub fn stress(&self, f: &Matrix3<f64>) -> Matrix3<f64> {
        let e = self.strain(f);
        self.rotation * (e * (2.0 * self.mu) + Matrix3::identity() * (self.lambda * e.trace()))
    }
}

/// One particle–geometry contact: v_c = Σ w R_cᵀ v_i − Σ_r c_r u_r − bias.
#[derive(Debug, Clone, PartialEq)]
pub struct StrongContact {
    /// (compact node, B-spline weight).
    pub nodes: Vec<(usize, f64)>,
    /// R_c = \[t₁ t₂ n̂\] (world).
    pub frame: Matrix3<f64>,
    /// (dynamic rigid DoF, c_r): the contact-frame velocity of the body's point per unit of
    /// that DoF's velocity.
    pub rigid: Vec<(usize, Vector3<f64>)>,
    /// R_cᵀ × the body point's velocity from its prescribed DoFs (0 for half-spaces).
    pub bias: Vector3<f64>,
    pub model: LaggedContact,
    /// The rigid body (None: a half-space) and the lever x_p − x_com, for its wrench.
    pub body: Option<usize>,
    pub lever: Vector3<f64>,
}

/// The problem of one strongly coupled step (module doc).
#[derive(Debug, Clone, PartialEq)]
pub struct StrongProblem {
    /// Step Δt.
    pub dt: f64,
    /// Lumped masses m_i of the active nodes.
    pub mass: Vec<f64>,
    /// v*_i = (APIC momentum)_i / m_i + Δt g.
    pub v_star: Vec<Vector3<f64>>,
    /// Grid coordinates of the active nodes (for the Hessian's node-pair window).
    pub coords: Vec<[i64; 3]>,
    pub elastic: Vec<ElasticTerm>,
    /// Mass matrix of the dynamic rigid DoFs (block diagonal over bodies) and their target ũ.
    pub rigid_mass: DMatrix<f64>,
    pub rigid_target: DVector<f64>,
    pub contacts: Vec<StrongContact>,
    /// held\[3i + a\]: component a of active node i is held at zero by a sticky or slip wall
    /// (`Grid::held_components`). Newton solves on the other unknowns (equality constraints);
    /// E and its derivatives above are those of the unconstrained problem.
    pub held: Vec<bool>,
}

/// Gradient and the per-contact impulses at a point.
#[derive(Debug, Clone, PartialEq)]
pub struct Gradient {
    /// ∇E.
    pub total: DVector<f64>,
    /// ∇ of the elastic and contact parts only (−(generalised impulses); stopping scale).
    pub forces: DVector<f64>,
    /// γ_c per contact (contact frame).
    pub impulses: Vec<Vector3<f64>>,
}

/// The quadratic part of the Hessian (inertia + elasticity), node-pair blocks in the 5×5×5
/// window of each node.
#[derive(Debug, Clone)]
pub(crate) struct QuadraticHessian {
    /// blocks\[a·WINDOW + s\] = ∂²E/∂v_a∂v_b for the node b in slot s of a.
    pub blocks: Vec<Matrix3<f64>>,
    /// neighbour\[a·WINDOW + s\] = b, or usize::MAX.
    pub neighbour: Vec<usize>,
}

impl StrongProblem {
    pub fn num_nodes(&self) -> usize {
        self.mass.len()
    }

    pub fn num_rigid(&self) -> usize {
        self.rigid_target.len()
    }

    /// Unknowns: 3 per active node, then the dynamic rigid DoFs.
    pub fn num_dofs(&self) -> usize {
        3 * self.num_nodes() + self.num_rigid()
    }

    /// The starting point x₀ = (v*, ũ).
    pub fn initial_guess(&self) -> DVector<f64> {
        let n = self.num_nodes();
        let mut x = DVector::zeros(self.num_dofs());
        for (i, v) in self.v_star.iter().enumerate() {
            x.fixed_rows_mut::<3>(3 * i).copy_from(v);
        }
        x.rows_mut(3 * n, self.num_rigid())
            .copy_from(&self.rigid_target);
        x
    }

    /// v_c of contact `c` at x.
    pub fn contact_velocity(&self, c: &StrongContact, x: &DVector<f64>) -> Vector3<f64> {
        let n3 = 3 * self.num_nodes();
        let mut world = Vector3::zeros();
        for &(k, w) in &c.nodes {
            world += w * Vector3::new(x[3 * k], x[3 * k + 1], x[3 * k + 2]);
        }
        let mut vc = c.frame.tr_mul(&world) - c.bias;
        for (r, col) in &c.rigid {
            vc -= col * x[n3 + r];
        }
        vc
    }

    /// E(x) (module doc).
    pub fn objective(&self, x: &DVector<f64>) -> f64 {
        let n = self.num_nodes();
        let mut e = 0.0;
        for i in 0..n {
            let d = x.fixed_rows::<3>(3 * i) - self.v_star[i];
            e += 0.5 * self.mass[i] * d.norm_squared();
        }
        let xs = x.as_slice();
        for t in &self.elastic {
            e += t.volume * t.energy_density(&t.deformation(xs, self.dt));
        }
        let du = x.rows(3 * n, self.num_rigid()) - &self.rigid_target;
        e += 0.5 * du.dot(&(&self.rigid_mass * &du));
        for c in &self.contacts {
            e += c.model.cost(&self.contact_velocity(c, x));
        }
        e
    }

    /// ∇E(x) with the contact impulses (module doc).
    pub fn gradient(&self, x: &DVector<f64>) -> Gradient {
        let n = self.num_nodes();
        let n3 = 3 * n;
        let mut forces = DVector::zeros(self.num_dofs());
        let xs = x.as_slice();
        for t in &self.elastic {
            let p = t.stress(&t.deformation(xs, self.dt)) * (t.volume * self.dt);
            for (k, g) in &t.nodes {
                let f = p * g;
                for a in 0..3 {
                    forces[3 * k + a] += f[a];
                }
            }
        }
        let mut impulses = Vec::with_capacity(self.contacts.len());
        for c in &self.contacts {
            let gamma = c.model.impulse(&self.contact_velocity(c, x));
            let world = c.frame * gamma;
            for &(k, w) in &c.nodes {
                for a in 0..3 {
                    forces[3 * k + a] -= w * world[a];
                }
            }
            for (r, col) in &c.rigid {
                forces[n3 + r] += col.dot(&gamma);
            }
            impulses.push(gamma);
        }
        let mut total = forces.clone();
        for i in 0..n {
            let d = x.fixed_rows::<3>(3 * i) - self.v_star[i];
            for a in 0..3 {
                total[3 * i + a] += self.mass[i] * d[a];
            }
        }
        let du = x.rows(n3, self.num_rigid()) - &self.rigid_target;
        let mdu = &self.rigid_mass * du;
        for r in 0..self.num_rigid() {
            total[n3 + r] += mdu[r];
        }
        Gradient {
            total,
            forces,
            impulses,
        }
    }

    /// The inertia + elasticity blocks (constant over a step).
    pub(crate) fn quadratic_hessian(&self) -> QuadraticHessian {
        let n = self.num_nodes();
        let mut q = QuadraticHessian {
            blocks: vec![Matrix3::zeros(); n * WINDOW],
            neighbour: vec![usize::MAX; n * WINDOW],
        };
        let centre = slot(&[0; 3], &[0; 3]).unwrap_or(62);
        for a in 0..n {
            q.blocks[a * WINDOW + centre] += Matrix3::identity() * self.mass[a];
            q.neighbour[a * WINDOW + centre] = a;
        }
        let dt2 = self.dt * self.dt;
        let mut rg = Vec::with_capacity(27);
        for t in &self.elastic {
            rg.clear();
            rg.extend(t.nodes.iter().map(|(_, g)| t.rotation * g));
            for (i, (a, ga)) in t.nodes.iter().enumerate() {
                for (j, (b, gb)) in t.nodes.iter().enumerate() {
                    let Some(s) = slot(&self.coords[*a], &self.coords[*b]) else {
                        continue;
                    };
                    let block = (Matrix3::identity() * ga.dot(gb) + rg[j] * rg[i].transpose())
                        * t.mu
                        + rg[i] * rg[j].transpose() * t.lambda;
                    q.blocks[a * WINDOW + s] += block * (t.volume * dt2);
                    q.neighbour[a * WINDOW + s] = *b;
                }
            }
        }
        q
    }

    /// The lower triangle (row ≥ column, each entry once) of ∇²E(x), given the quadratic part.
    pub(crate) fn hessian_lower(
        &self,
        x: &DVector<f64>,
        q: &QuadraticHessian,
    ) -> Vec<Triplet<usize, usize, f64>> {
        let n = self.num_nodes();
        let nr = self.num_rigid();
        let n3 = 3 * n;
        let mut blocks = q.blocks.clone();
        let mut neighbour = q.neighbour.clone();
        let mut node_rigid = vec![0.0; n3 * nr];
        let mut rigid = self.rigid_mass.clone();
        for c in &self.contacts {
            let g = c.model.hessian(&self.contact_velocity(c, x));
            let rgr = c.frame * g * c.frame.transpose();
            for &(a, wa) in &c.nodes {
                for &(b, wb) in &c.nodes {
                    if let Some(s) = slot(&self.coords[a], &self.coords[b]) {
                        blocks[a * WINDOW + s] += rgr * (wa * wb);
                        neighbour[a * WINDOW + s] = b;
                    }
                }
                for (r, col) in &c.rigid {
                    let h = -(c.frame * (g * col)) * wa;
                    for d in 0..3 {
                        node_rigid[(3 * a + d) * nr + r] += h[d];
                    }
                }
            }
            for (r, cr) in &c.rigid {
                for (s, cs) in &c.rigid {
                    rigid[(*r, *s)] += cr.dot(&(g * cs));
                }
            }
        }
        let mut out = Vec::with_capacity(n * 63 * 9 + n3 * nr + nr * nr);
        for a in 0..n {
            for s in 0..WINDOW {
                let b = neighbour[a * WINDOW + s];
                if b == usize::MAX || b < a {
                    continue;
                }
                // blocks[a, s] is ∂²E/∂v_a∂v_b: rows 3a.., columns 3b..; store the transpose's
                // lower part (rows 3b + r ≥ columns 3a + c).
                let m = &blocks[a * WINDOW + s];
                for r in 0..3 {
                    for cc in 0..3 {
                        if b == a && r < cc {
                            continue;
                        }
                        out.push(Triplet::new(3 * b + r, 3 * a + cc, m[(cc, r)]));
                    }
                }
            }
        }
        for i in 0..n3 {
            for r in 0..nr {
                out.push(Triplet::new(n3 + r, i, node_rigid[i * nr + r]));
            }
        }
        for r in 0..nr {
            for s in 0..=r {
                out.push(Triplet::new(n3 + r, n3 + s, rigid[(r, s)]));
            }
        }
        out
    }

    /// ∇²E(x)·d from the same lower-triangle entries the factorisation uses.
    pub fn hessian_times(&self, x: &DVector<f64>, d: &DVector<f64>) -> DVector<f64> {
        let q = self.quadratic_hessian();
        let mut out = DVector::zeros(self.num_dofs());
        for t in self.hessian_lower(x, &q) {
            out[t.row] += t.val * d[t.col];
            if t.row != t.col {
                out[t.col] += t.val * d[t.row];
            }
        }
        out
    }

    /// dᵀ(inertia + elasticity + rigid inertia)d: the quadratic part's curvature along d.
    pub(crate) fn quadratic_curvature(&self, d: &DVector<f64>) -> f64 {
        let n = self.num_nodes();
        let mut q = 0.0;
        for i in 0..n {
            q += self.mass[i] * d.fixed_rows::<3>(3 * i).norm_squared();
        }
        let ds = d.as_slice();
        for t in &self.elastic {
            let mut df = Matrix3::zeros();
            for (k, g) in &t.nodes {
                df += Vector3::new(ds[3 * k], ds[3 * k + 1], ds[3 * k + 2]) * g.transpose();
            }
            let a = t.rotation.tr_mul(&df) * self.dt;
            let sym = (a + a.transpose()) * 0.5;
            let tr = a.trace();
            q += t.volume * (2.0 * t.mu * sym.norm_squared() + t.lambda * tr * tr);
        }
        let du = d.rows(3 * n, self.num_rigid());
        q + du.dot(&(&self.rigid_mass * du))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_slots_are_unique_and_bounded() {
        let a = [10, 10, 10];
        let mut seen = [false; WINDOW];
        for dz in -2..=2 {
            for dy in -2..=2 {
                for dx in -2..=2 {
                    let s = slot(&a, &[10 + dx, 10 + dy, 10 + dz]).unwrap();
                    assert!(!seen[s]);
                    seen[s] = true;
                }
            }
        }
        assert!(slot(&a, &[13, 10, 10]).is_none());
        assert_eq!(slot(&a, &a), Some(62));
    }
}
