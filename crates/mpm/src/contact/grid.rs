//! The per-substep convex contact problem over grid nodes (seed Eq. 8) and its
//! block-diagonal quasi-Newton solver (seed Algorithm 1, Eq. 9–10).
//!
//!   v = argmin ℓ_p(v),  ℓ_p(v) = ½ Σ_k (v_k − v*_k)ᵀ M_k (v_k − v*_k) + Σ_c ℓ_c(v_c),
//!   v_c = R_cᵀ (Σ_k w_ck v_k) − b_c,
//!
//! with M_k = diag(m_k) the lumped node mass (3 values per node), the contact's stencil
//! {(k, w_ck)} (for MPM the B-spline weights from the contact particle to its grid nodes,
//! so J_c = R_cᵀ\[… w_ck·I …\]), R_c = \[t₁ t₂ n̂\] the contact frame and b_c the rigid bias
//! velocity in the contact frame (the rigid point velocity, b_c = R_cᵀ J_r v_r, so v_c is the
//! particle's velocity relative to the rigid body). γ_c = −∂ℓ_c/∂v_c is the impulse *on the
//! grid side*; the rigid body receives −R_c γ_c at the contact point.
//!
//! Quasi-Newton (Algorithm 1): ∇ℓ_p = M(v − v*) − Σ_c J_cᵀ γ_c; H = the 3×3 block-diagonal
//! part of M + Σ_c J_cᵀ G_c J_c, i.e. H_k = M_k + Σ_c w_ck² R_c G_c R_cᵀ; Δv_k = −H_k⁻¹ ∇_k
//! (independent 3×3 Cholesky solves); α from the exact line search; stop when
//!
//!   ‖D ∇ℓ_p‖ < ε_a + ε_r · max(‖D M v‖, ‖D Jᵀγ‖),  D = diag(M)^{-1/2}
//!
//! (SAP's scaled test, Castro et al. 2022 §V; notes §1.4). H ≻ 0 as a principal block of an
//! SPD matrix, so the method converges globally at a linear rate (seed Theorem 1).

use nalgebra::{Matrix3, Vector3};

use super::line_search::exact_line_search;
use super::model::LaggedContact;
use super::ContactError;

/// One contact of the grid problem.
#[derive(Debug, Clone, PartialEq)]
pub struct GridContact {
    /// Stencil (node index, weight w_ck): the contact point's velocity is Σ w_ck v_k.
    pub nodes: Vec<(usize, f64)>,
    /// Contact frame R_c = \[t₁ t₂ n̂\] (columns, world), n̂ out of the rigid geometry.
    pub frame: Matrix3<f64>,
    /// Rigid bias velocity b_c in the contact frame (the rigid point velocity, R_cᵀ v_rigid).
    pub bias: Vector3<f64>,
    /// The registered lagged contact model.
    pub model: LaggedContact,
    /// Rigid body this contact pushes against (None for a fixed collider such as the ground).
    pub body: Option<usize>,
    /// Contact point minus the body's centre of mass (world), for the torque on the body.
    pub lever: Vector3<f64>,
}

/// The convex problem over grid nodes.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GridProblem {
    /// Lumped mass per node, 3 values (one per axis).
    pub mass: Vec<Vector3<f64>>,
    /// Free-motion velocities v* per node.
    pub v_star: Vec<Vector3<f64>>,
    /// The contacts.
    pub contacts: Vec<GridContact>,
}

/// Solver settings; defaults are the seed's (ε_r = 5e-2, ε_a = machine epsilon).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SolverOptions {
    /// Relative tolerance ε_r of the scaled stopping test.
    pub rel_tol: f64,
    /// Absolute tolerance ε_a of the scaled stopping test.
    pub abs_tol: f64,
    /// Maximum outer iterations.
    pub max_iterations: usize,
    /// Line search: stop when |φ′(α)| ≤ this · |φ′(0)|.
    pub line_search_rel_tol: f64,
    /// Line search: maximum Newton/bisection iterations.
    pub line_search_max_iterations: usize,
}

impl Default for SolverOptions {
    fn default() -> Self {
        Self {
            rel_tol: 5.0e-2,
            abs_tol: f64::EPSILON,
            max_iterations: 1000,
            line_search_rel_tol: 1.0e-10,
            line_search_max_iterations: 100,
        }
    }
}

/// Convergence record of a solve.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SolveStats {
    /// Outer iterations (updates of v) performed.
    pub iterations: usize,
    /// Final scaled residual ‖D∇ℓ_p‖.
    pub residual: f64,
    /// The tolerance ε_a + ε_r·max(‖DMv‖, ‖DJᵀγ‖) at the final iterate.
    pub tolerance: f64,
    /// ℓ_p at the initial guess and after every update (recorded only where the solve
    /// says so: [`GridProblem::solve_quasi_newton`] does, the workspace form on request).
    pub objective: Vec<f64>,
    /// (φ′, φ″) evaluations of the exact line searches, summed over the iterations.
    pub line_search_evaluations: usize,
}

/// Solution of a grid problem.
#[derive(Debug, Clone, PartialEq)]
pub struct Solution {
    /// Post-contact node velocities.
    pub v: Vec<Vector3<f64>>,
    /// γ_c per contact, contact frame (impulse on the grid side; \[t₁, t₂, n\]).
    pub impulses: Vec<Vector3<f64>>,
    /// Convergence record.
    pub stats: SolveStats,
}

/// A spatial impulse (or force) on a rigid body: linear part and moment about the COM (world).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Wrench {
    /// Linear impulse \[N·s\] (or force \[N\]).
    pub force: Vector3<f64>,
    /// Angular impulse about the centre of mass \[N·m·s\] (or torque \[N·m\]).
    pub torque: Vector3<f64>,
}

impl std::ops::AddAssign for Wrench {
    fn add_assign(&mut self, rhs: Self) {
        self.force += rhs.force;
        self.torque += rhs.torque;
    }
}

impl GridProblem {
    /// Number of nodes.
    pub fn num_nodes(&self) -> usize {
        self.mass.len()
    }

    /// Checks lengths, masses and stencils; errors name the node or contact.
    pub fn validate(&self) -> Result<(), ContactError> {
        if self.v_star.len() != self.mass.len() {
            return Err(ContactError::DimensionMismatch {
                what: "v_star",
                got: self.v_star.len(),
                expected: self.mass.len(),
            });
        }
        for (node, m) in self.mass.iter().enumerate() {
            for &mi in m.iter() {
                if !(mi > 0.0 && mi.is_finite()) {
                    return Err(ContactError::NonPositiveMass { node, mass: mi });
                }
            }
        }
        let n = self.num_nodes();
        for (contact, c) in self.contacts.iter().enumerate() {
            for &(node, _) in &c.nodes {
                if node >= n {
                    return Err(ContactError::NodeOutOfRange {
                        contact,
                        node,
                        num_nodes: n,
                    });
                }
            }
        }
        Ok(())
    }

    /// v_c = R_cᵀ Σ w_ck v_k − b_c for every contact.
    pub fn contact_velocities(&self, v: &[Vector3<f64>]) -> Vec<Vector3<f64>> {
        self.contacts
            .iter()
            .map(|c| c.frame.tr_mul(&gather(&c.nodes, v)) - c.bias)
            .collect()
    }

    /// ℓ_p(v) (allocation-free: the contact velocities are formed one at a time).
    pub fn objective(&self, v: &[Vector3<f64>]) -> f64 {
        let mut e = 0.0;
        for k in 0..v.len() {
            let dv = v[k] - self.v_star[k];
            e += 0.5 * dv.component_mul(&self.mass[k]).dot(&dv);
        }
        e + self
            .contacts
            .iter()
            .map(|c| {
                c.model
                    .cost(&(c.frame.tr_mul(&gather(&c.nodes, v)) - c.bias))
            })
            .sum::<f64>()
    }

    /// ∇ℓ_p(v) = M(v − v*) − Σ_c J_cᵀ γ_c, together with Jᵀγ (world, per node) and γ per contact.
    #[allow(clippy::type_complexity)]
    pub fn gradient(
        &self,
        v: &[Vector3<f64>],
    ) -> (Vec<Vector3<f64>>, Vec<Vector3<f64>>, Vec<Vector3<f64>>) {
        self.gradient_with(v, &self.contact_velocities(v))
    }

    /// [`Self::gradient`] with the contact velocities v_c(v) already known.
    #[allow(clippy::type_complexity)]
    fn gradient_with(
        &self,
        v: &[Vector3<f64>],
        vc: &[Vector3<f64>],
    ) -> (Vec<Vector3<f64>>, Vec<Vector3<f64>>, Vec<Vector3<f64>>) {
        let gamma: Vec<Vector3<f64>> = self
            .contacts
            .iter()
            .zip(vc)
            .map(|(c, vc)| c.model.impulse(vc))
            .collect();
        let mut jt_gamma = vec![Vector3::zeros(); v.len()];
        for (c, g) in self.contacts.iter().zip(&gamma) {
            scatter(&c.nodes, &(c.frame * g), &mut jt_gamma);
        }
        let grad = (0..v.len())
            .map(|k| (v[k] - self.v_star[k]).component_mul(&self.mass[k]) - jt_gamma[k])
            .collect();
        (grad, jt_gamma, gamma)
    }

    /// Solves by the block-diagonal quasi-Newton method (module doc), starting from `v0`
    /// (v* when `None`). Errors: invalid problem, a non-SPD block (non-finite input),
    /// or no convergence within `max_iterations`. Records ℓ_p after every update
    /// (`stats.objective`); [`Self::solve_quasi_newton_in`] is the allocation-free form.
    pub fn solve_quasi_newton(
        &self,
        v0: Option<&[Vector3<f64>]>,
        opts: &SolverOptions,
    ) -> Result<Solution, ContactError> {
        let mut ws = QnWorkspace {
            record_objective: true,
            ..QnWorkspace::default()
        };
        let stats = self.solve_quasi_newton_in(v0, opts, &mut ws)?;
        Ok(Solution {
            v: ws.v,
            impulses: ws.impulses,
            stats,
        })
    }

    /// [`Self::solve_quasi_newton`] in the caller's buffers (plan once, execute every
    /// substep): nothing is allocated once `ws` has grown to the problem's size. On success
    /// `ws.v` holds the solution and `ws.impulses` γ_c at it.
    ///
    /// Only the nodes in some contact's stencil ("touched") are iterated: every other node is
    /// decoupled, with the exact minimiser v*_k (H_k = M_k, ∇_k = M_k(v_k − v*_k)), and is set
    /// to it. Sums run over the touched nodes in ascending order (the other nodes' terms are
    /// exactly zero), ‖DMv‖ over all nodes, so a solve from v* is bitwise the same as
    /// iterating every node.
    pub fn solve_quasi_newton_in(
        &self,
        v0: Option<&[Vector3<f64>]>,
        opts: &SolverOptions,
        ws: &mut QnWorkspace,
    ) -> Result<SolveStats, ContactError> {
        self.validate()?;
        let n = self.num_nodes();
        let nc = self.contacts.len();
        ws.v.clear();
        match v0 {
            Some(v0) if v0.len() != n => {
                return Err(ContactError::DimensionMismatch {
                    what: "initial guess",
                    got: v0.len(),
                    expected: n,
                })
            }
            Some(v0) => ws.v.extend_from_slice(v0),
            None => ws.v.extend_from_slice(&self.v_star),
        }
        ws.mark.clear();
        ws.mark.resize(n, false);
        for c in &self.contacts {
            for &(k, _) in &c.nodes {
                ws.mark[k] = true;
            }
        }
        ws.touched.clear();
        for k in 0..n {
            if ws.mark[k] {
                ws.touched.push(k);
            } else {
                ws.v[k] = self.v_star[k];
            }
        }
        for buf in [&mut ws.jt_gamma, &mut ws.grad, &mut ws.dv] {
            buf.clear();
            buf.resize(n, Vector3::zeros());
        }
        ws.blocks.clear();
        ws.blocks.resize(n, Matrix3::zeros());
        for buf in [&mut ws.vc, &mut ws.dvc, &mut ws.impulses] {
            buf.clear();
            buf.resize(nc, Vector3::zeros());
        }
        let mut stats = SolveStats::default();
        if ws.record_objective {
            stats.objective.push(self.objective(&ws.v));
        }
        loop {
            // v_c, γ_c, Jᵀγ and ∇ℓ_p at v.
            for (i, c) in self.contacts.iter().enumerate() {
                ws.vc[i] = c.frame.tr_mul(&gather(&c.nodes, &ws.v)) - c.bias;
                ws.impulses[i] = c.model.impulse(&ws.vc[i]);
            }
            for &k in &ws.touched {
                ws.jt_gamma[k] = Vector3::zeros();
            }
            for (c, g) in self.contacts.iter().zip(&ws.impulses) {
                scatter(&c.nodes, &(c.frame * g), &mut ws.jt_gamma);
            }
            for &k in &ws.touched {
                ws.grad[k] =
                    (ws.v[k] - self.v_star[k]).component_mul(&self.mass[k]) - ws.jt_gamma[k];
            }
            let (residual, tolerance) = self.stopping_test(ws, opts);
            stats.residual = residual;
            stats.tolerance = tolerance;
            if residual < tolerance {
                return Ok(stats);
            }
            if stats.iterations >= opts.max_iterations {
                return Err(ContactError::NotConverged {
                    solver: "block-diagonal quasi-Newton",
                    iterations: stats.iterations,
                    residual,
                    tolerance,
                });
            }
            // H_k = M_k + Σ_c w² R G Rᵀ.
            for &k in &ws.touched {
                ws.blocks[k] = Matrix3::from_diagonal(&self.mass[k]);
            }
            for (c, vc) in self.contacts.iter().zip(&ws.vc) {
                let rgr = c.frame * c.model.hessian(vc) * c.frame.transpose();
                for &(k, w) in &c.nodes {
                    ws.blocks[k] += rgr * (w * w);
                }
            }
            let mut dphi0 = 0.0;
            for &k in &ws.touched {
                let chol = ws.blocks[k]
                    .cholesky()
                    .ok_or(ContactError::NotPositiveDefinite { node: k })?;
                ws.dv[k] = -chol.solve(&ws.grad[k]);
                dphi0 += ws.grad[k].dot(&ws.dv[k]);
            }
            let (alpha, evaluations) = self.line_search(ws, dphi0, opts);
            stats.line_search_evaluations += evaluations;
            if alpha == 0.0 {
                // No descent left at round-off: report the stopping test as it stands.
                return Err(ContactError::NotConverged {
                    solver: "block-diagonal quasi-Newton (stalled)",
                    iterations: stats.iterations,
                    residual,
                    tolerance,
                });
            }
            for &k in &ws.touched {
                ws.v[k] += ws.dv[k] * alpha;
            }
            stats.iterations += 1;
            if ws.record_objective {
                stats.objective.push(self.objective(&ws.v));
            }
        }
    }

    /// The scaled residual ‖D∇ℓ_p‖ and the tolerance ε_a + ε_r·max(‖DMv‖, ‖DJᵀγ‖) at `ws.v`
    /// (∇ℓ_p and Jᵀγ in `ws`, zero off the touched nodes).
    fn stopping_test(&self, ws: &QnWorkspace, opts: &SolverOptions) -> (f64, f64) {
        let (mut r2, mut p2, mut j2) = (0.0, 0.0, 0.0);
        for &k in &ws.touched {
            for i in 0..3 {
                let m = self.mass[k][i];
                r2 += ws.grad[k][i] * ws.grad[k][i] / m;
                j2 += ws.jt_gamma[k][i] * ws.jt_gamma[k][i] / m;
            }
        }
        for (v, m) in ws.v.iter().zip(&self.mass) {
            for i in 0..3 {
                p2 += m[i] * v[i] * v[i];
            }
        }
        (
            r2.sqrt(),
            opts.abs_tol + opts.rel_tol * p2.sqrt().max(j2.sqrt()),
        )
    }

    /// Exact line search along Δv = `ws.dv` from v = `ws.v` (contact velocities `ws.vc` and
    /// impulses `ws.impulses` at v, `dphi0` = ∇ℓ_p·Δv): the root of the convex φ′ (no
    /// objective comparison: near the optimum φ(α) − φ(0) is below the round-off of ℓ_p and
    /// would reject good steps). Returns α and the (φ′, φ″) evaluations spent.
    /// φ′(α) = φ′(0) + α·ΔvᵀMΔv − Σ_c (γ_c(α) − γ_c(0))·Δv_c is evaluated in this difference
    /// form: near the optimum M(v − v*) and Jᵀγ nearly cancel, and forming them separately
    /// would lose the sign of φ′.
    fn line_search(&self, ws: &mut QnWorkspace, dphi0: f64, opts: &SolverOptions) -> (f64, usize) {
        let mut a = 0.0;
        for &k in &ws.touched {
            a += ws.dv[k].component_mul(&self.mass[k]).dot(&ws.dv[k]);
        }
        for (i, c) in self.contacts.iter().enumerate() {
            ws.dvc[i] = c.frame.tr_mul(&gather(&c.nodes, &ws.dv));
        }
        let (vc, dvc, gamma0) = (&ws.vc, &ws.dvc, &ws.impulses);
        let dphi = |alpha: f64| {
            let (mut d, mut dd) = (dphi0 + alpha * a, a);
            for (((c, vc), dvc), g0) in self.contacts.iter().zip(vc).zip(dvc).zip(gamma0) {
                let x = vc + dvc * alpha;
                d -= (c.model.impulse(&x) - g0).dot(dvc);
                dd += dvc.dot(&(c.model.hessian(&x) * dvc));
            }
            (d, dd)
        };
        let r = exact_line_search(
            dphi,
            dphi0,
            opts.line_search_rel_tol,
            opts.line_search_max_iterations,
        );
        (r.alpha, r.evaluations)
    }
}

/// Buffers of the quasi-Newton solve, sized to the largest problem seen and reused (plan
/// once, execute every substep): [`GridProblem::solve_quasi_newton_in`] allocates nothing
/// once they have grown. After a successful solve `v` and `impulses` hold the solution.
#[derive(Debug, Clone, Default)]
pub struct QnWorkspace {
    /// Node velocities (the problem's node order): the solution after a successful solve.
    pub v: Vec<Vector3<f64>>,
    /// γ_c per contact at `v` (contact frame, impulse on the grid side).
    pub impulses: Vec<Vector3<f64>>,
    /// Record ℓ_p after every update in `SolveStats::objective` (one more pass over nodes
    /// and contacts per iteration, and a growing vector; for tests).
    pub record_objective: bool,
    vc: Vec<Vector3<f64>>,
    dvc: Vec<Vector3<f64>>,
    jt_gamma: Vec<Vector3<f64>>,
    grad: Vec<Vector3<f64>>,
    dv: Vec<Vector3<f64>>,
    blocks: Vec<Matrix3<f64>>,
    /// Nodes in some contact's stencil, ascending, and the per-node flag that builds it.
    touched: Vec<usize>,
    mark: Vec<bool>,
}

impl Solution {
    /// The impulse each contact applies to its rigid body, summed per body: the body gets
    /// −R_c γ_c at its contact point. Contacts with `body: None` or `body ≥ num_bodies`
    /// are skipped (fixed colliders).
    pub fn body_wrenches(&self, problem: &GridProblem, num_bodies: usize) -> Vec<Wrench> {
        let mut out = vec![Wrench::default(); num_bodies];
        for (c, g) in problem.contacts.iter().zip(&self.impulses) {
            if let Some(b) = c.body.filter(|&b| b < num_bodies) {
                let f = -(c.frame * g);
                out[b] += Wrench {
                    force: f,
                    torque: c.lever.cross(&f),
                };
            }
        }
        out
    }
}

/// Σ_k w_k v_k over a stencil.
fn gather(nodes: &[(usize, f64)], v: &[Vector3<f64>]) -> Vector3<f64> {
    nodes
        .iter()
        .fold(Vector3::zeros(), |acc, &(k, w)| acc + v[k] * w)
}

/// out_k += w_k f over a stencil.
fn scatter(nodes: &[(usize, f64)], f: &Vector3<f64>, out: &mut [Vector3<f64>]) {
    for &(k, w) in nodes {
        out[k] += f * w;
    }
}
