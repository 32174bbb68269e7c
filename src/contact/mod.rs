//! Frictional contact against rigid obstacles (spec §2.9, §6.2 steps 3 and 10–18, §7.4).
//!
//! Per time step ([`ContactSet::build`], spec §6.2 step 3): contact candidates are boundary
//! nodes within a margin of an obstacle; each gets a normal $n_j$ and tangents $t_{1j},t_{2j}$
//! frozen at the step start (evaluated against the obstacle's end-of-step pose), the
//! linearised position-level gap $\delta_n(x)=n_j^Tx_i-d_j$ with
//! $d_j=n_j^Tx_{t,i}-\phi(x_{t,i})$, and the slip $\delta_f(x)=T_j^T(x_i-x_{t,i}-u_{obs})$.
//! [`Delassus`] is the operator $W=JA^{-1}J^T$ (with $X=A^{-1}J^T$) through the persistent
//! factor, in one of two forms (`[contact] solver`, [`ContactSet::iterative`]):
//! - dense ([`DenseDelassus`]): $X$ from one solve per candidate node with a unit spike on its
//!   three DoFs (Dirichlet-reduced) and the dense $W=JX$;
//! - matrix-free ([`iterative::MatrixFree`]): $W v=J\,A^{-1}(J^Tv)$, one solve per product,
//!   nothing of size (rows)² ever formed.
//!
//! Inside every PD iteration ([`solve`], steps 10–18): given the unconstrained global-step
//! position $u=A^{-1}b^k$, find $\lambda$ with $\Phi(\delta(u+X\lambda),\lambda)=0$ (residuals of
//! [`ncp`]) by semismooth Newton on the reduced system $(DW+E)\Delta\lambda=-\Phi$
//! (Eq. 36 generalised to the friction rows; Armijo line search on $\tfrac12\|\Phi\|^2$,
//! warm-started from the previous PD iteration and the previous frame), then
//! $\hat x=u+X\lambda$ (Eq. 37). The Newton system is solved by a dense LU of the coupled rows
//! (dense form) or by GMRES with the matrix-free $W$ and a block-diagonal preconditioner
//! ([`iterative::solve`]). The contact nodes stay free DoFs; $A$ and its factor never change.

pub mod adjoint;
pub mod attachment;
pub mod bodies;
pub mod dense;
pub mod edges;
pub mod initial;
pub mod iterative;
pub mod lu;
pub mod ncp;
pub mod obstacle;
pub mod penalty;

use crate::linalg::{LinalgError, LinearSolver};
use crate::model::{ContactSolver, Model};
use nalgebra::{Matrix3, Vector2, Vector3};
use ncp::{Coulomb, FbParams, Local};
use obstacle::Obstacle;

pub use dense::DenseDelassus;
pub use obstacle::Shape;

/// Per-step contact geometry: one entry per (candidate node, obstacle) pair, with 1 row
/// (frictionless obstacle) or 3 rows (normal, two tangents).
#[derive(Clone, Debug, Default)]
pub struct ContactSet {
    pub node: Vec<usize>,
    pub obstacle: Vec<usize>,
    pub normal: Vec<Vector3<f64>>,
    pub tangent: Vec<[Vector3<f64>; 2]>,
    /// $d_j$: $\delta_n=n_j^Tx_i-d_j$.
    pub gap_offset: Vec<f64>,
    /// Slip anchor $T_j^T(x_{t,i}+u_{obs})$: $\delta_f=T_j^Tx_i-$ anchor.
    pub anchor: Vec<Vector2<f64>>,
    /// FB scale $\kappa_j$ (m/N).
    pub kappa: Vec<f64>,
    /// Coulomb coefficients of the obstacle (or of body–body contact): $\mu_k$, $\mu_s$ and
    /// the transition slip $v_sh$.
    pub mu: Vec<Coulomb>,
    /// Displacement $u_{obs}$ of the obstacle's contact point over the step.
    pub obstacle_motion: Vec<Vector3<f64>>,
    /// Linearisation point $p=x_{t,i}$ of the frame.
    pub origin: Vec<Vector3<f64>>,
    /// Hessian $H=\partial n/\partial p$ of the signed distance at $p$ (for the exact
    /// dependence of the frozen frame on $x_t$ and on the obstacle offset).
    pub hessian: Vec<Matrix3<f64>>,
    /// $\partial t_k/\partial n$ of the tangents.
    pub dtangent: Vec<[Matrix3<f64>; 2]>,
    /// Row offsets (`len() + 1` entries).
    pub offset: Vec<usize>,
    /// Node, direction and right-hand side $d$ of every row ($\delta_r=a_r^Tx_{i_r}-d_r$).
    pub row_node: Vec<usize>,
    pub row_dir: Vec<Vector3<f64>>,
    pub row_d: Vec<f64>,
    /// Body–body contacts ([`bodies`]): the other body's triangle and the barycentric
    /// weights of the closest point, per contact and per row
    /// ($\delta_r=a_r^T(x_i-\sum_kw_kx_{t_k})-d_r$); `None` for obstacle contacts.
    pub tri: Vec<Option<Tri>>,
    pub row_tri: Vec<Option<Tri>>,
    /// Triangle node positions $x_{t,t_k}$ at the step start (body–body contacts; zeros
    /// otherwise).
    pub tri_origin: Vec<[Vector3<f64>; 3]>,
    /// Linear algebra of the solve and of the adjoint (`[contact] solver`).
    pub solver: ContactSolver,
    /// Compliance $c$ (m/N, `[contact] compliance`): the complementarity holds for
    /// $\tilde\delta=\delta(x)+c\lambda$, applied where the law is evaluated
    /// ([`ContactSet::locals`]).
    pub compliance: f64,
}

/// The state a step starts from: time $t$, positions $x_t$ and velocities $v_t$
/// (node-major, `3n`).
#[derive(Clone, Copy, Debug)]
pub struct StepStart<'a> {
    pub t: f64,
    pub x: &'a [f64],
    pub v: &'a [f64],
}

/// With `[contact] solver = "auto"`, steps with at most this many contact rows (candidates,
/// not only active ones) use the dense Delassus matrix and LU; larger ones the matrix-free
/// Newton–Krylov solve.
pub const AUTO_DENSE_ROWS: usize = 96;

/// `obstacle` index of a body–body contact.
pub const BODY: usize = usize::MAX;

/// Stencil of a body–body contact row ([`bodies`]): the row is
/// $a_r^T(\text{lead}\,x_i-\sum_kw_kx_{t_k})$ over the contact's node $i$ and three more nodes.
/// Node–triangle: the triangle's nodes, barycentric weights of the closest point, lead 1.
/// Edge–edge ([`edges`]): $i=a_0$, nodes $(a_1,b_0,b_1)$, weights $(-s,1-t,t)$, lead $1-s$.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tri {
    pub nodes: [usize; 3],
    pub w: [f64; 3],
    /// Coefficient of the contact's own node (1 for node–triangle).
    pub lead: f64,
    pub kind: Stencil,
}

/// Kind of a body–body contact stencil.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Stencil {
    /// Node against a triangle.
    Face,
    /// Edge against edge; `sign` is the held orientation $\sigma$ of [`edges::frame`].
    Edge { sign: f64 },
}

/// Nodes and coefficients of one row of $J$: $(i,1)$ and, for a body–body contact,
/// $(i,\text{lead})$ and $(t_k,-w_k)$ (see [`Tri`]); unused entries have coefficient 0.
#[inline]
fn terms(i: usize, tri: &Option<Tri>) -> [(usize, f64); 4] {
    match tri {
        None => [(i, 1.0), (i, 0.0), (i, 0.0), (i, 0.0)],
        Some(t) => [
            (i, t.lead),
            (t.nodes[0], -t.w[0]),
            (t.nodes[1], -t.w[1]),
            (t.nodes[2], -t.w[2]),
        ],
    }
}

impl ContactSet {
    /// Number of contacts.
    pub fn len(&self) -> usize {
        self.node.len()
    }
    pub fn is_empty(&self) -> bool {
        self.node.is_empty()
    }
    /// Number of rows of $J$.
    pub fn nrows(&self) -> usize {
        self.row_node.len()
    }
    /// Rows of contact `j`.
    pub fn rows(&self, j: usize) -> std::ops::Range<usize> {
        self.offset[j]..self.offset[j + 1]
    }

    /// Whether this step's contact solve and adjoint are matrix-free (see [`AUTO_DENSE_ROWS`]).
    pub fn iterative(&self) -> bool {
        match self.solver {
            ContactSolver::Dense => false,
            ContactSolver::Iterative => true,
            ContactSolver::Auto => self.nrows() > AUTO_DENSE_ROWS,
        }
    }

    /// Candidates and frozen frames of the step from `start` ($t$) to $t+h$ (spec §6.2 step 3). Each node
    /// is a candidate of at most one obstacle, the nearest.
    /// `nodes`: boundary nodes without prescribed DoFs. A node is a candidate of obstacle
    /// $o$ when $\phi_o(x_{t,i})\le$ margin $+2h\|v_{t,i}\|+h^2\|g\|$ (distance at the end-of-step pose).
    pub fn build(
        model: &Model,
        obstacles: &[Obstacle],
        nodes: &[usize],
        kappa: &[f64],
        margin: f64,
        start: &StepStart,
    ) -> ContactSet {
        let (t_start, x_t, v_t) = (start.t, start.x, start.v);
        let h = model.h;
        let t_end = t_start + h;
        let g = Vector3::from(model.gravity).norm();
        let mut s = ContactSet {
            solver: model.contact.solver,
            compliance: model.contact.compliance,
            ..Default::default()
        };
        s.offset.push(0);
        for &i in nodes {
            let p = Vector3::new(x_t[3 * i], x_t[3 * i + 1], x_t[3 * i + 2]);
            let v = Vector3::new(v_t[3 * i], v_t[3 * i + 1], v_t[3 * i + 2]);
            let reach = margin + 2.0 * h * v.norm() + h * h * g;
            // the nearest obstacle only: two frictional contacts on one node give six rows
            // on three DoFs, whose multipliers are not unique when both stick
            let nearest = obstacles
                .iter()
                .enumerate()
                .map(|(o, ob)| (o, ob.query(&p, t_end)))
                .filter(|(_, q)| q.dist <= reach)
                .min_by(|a, b| a.1.dist.total_cmp(&b.1.dist));
            if let Some((o, q)) = nearest {
                let ob = &obstacles[o];
                let n = q.normal;
                let tg = obstacle::tangents(&n);
                // obstacle displacement of the contact point over the step
                let u_obs =
                    ob.point_at(&q.surface_ref, t_end) - ob.point_at(&q.surface_ref, t_start);
                let a = p + u_obs;
                let mu = Coulomb {
                    kinetic: ob.friction,
                    stat: ob.static_friction.unwrap_or(ob.friction),
                    slip: model.contact.stick_slip_speed * h,
                };
                let rows = if mu.max() > 0.0 { 3 } else { 1 };
                s.node.push(i);
                s.obstacle.push(o);
                s.normal.push(n);
                s.tangent.push(tg);
                s.gap_offset.push(n.dot(&p) - q.dist);
                s.anchor.push(Vector2::new(tg[0].dot(&a), tg[1].dot(&a)));
                s.kappa.push(kappa[i]);
                s.mu.push(mu);
                s.obstacle_motion.push(u_obs);
                s.origin.push(p);
                s.hessian.push(ob.hessian(&p, t_end));
                s.dtangent.push(obstacle::tangent_jacobians(&n));
                s.tri.push(None);
                s.tri_origin.push([Vector3::zeros(); 3]);
                let r0 = *s
                    .offset
                    .last()
                    .expect("ContactSet::offset starts with the 0 pushed by its constructor");
                s.offset.push(r0 + rows);
                s.row_node.push(i);
                s.row_dir.push(n);
                s.row_d.push(n.dot(&p) - q.dist);
                s.row_tri.push(None);
                if rows == 3 {
                    for t in &tg {
                        s.row_node.push(i);
                        s.row_dir.push(*t);
                        s.row_d.push(t.dot(&a));
                        s.row_tri.push(None);
                    }
                }
            }
        }
        s
    }

    /// Nodes and coefficients of row `r` (see [`Tri`]).
    pub fn row_terms(&self, r: usize) -> [(usize, f64); 4] {
        terms(self.row_node[r], &self.row_tri[r])
    }

    /// $\delta=Jx-d$ (all rows).
    pub fn delta(&self, x: &[f64]) -> Vec<f64> {
        let mut out = self.apply_j(x);
        for (o, d) in out.iter_mut().zip(&self.row_d) {
            *o -= d;
        }
        out
    }

    /// `delta += c lambda`: the gaps and slips $\tilde\delta=\delta(x)+c\lambda$ the
    /// complementarity conditions hold for (`[contact] compliance` $c$; nothing when 0).
    pub fn comply(&self, lambda: &[f64], delta: &mut [f64]) {
        if self.compliance != 0.0 {
            for (d, l) in delta.iter_mut().zip(lambda) {
                *d += self.compliance * l;
            }
        }
    }

    /// $Jv$ (all rows).
    pub fn apply_j(&self, v: &[f64]) -> Vec<f64> {
        (0..self.nrows())
            .map(|r| {
                let a = &self.row_dir[r];
                self.row_terms(r)
                    .iter()
                    .filter(|(_, c)| *c != 0.0)
                    .map(|&(i, c)| {
                        c * (a[0] * v[3 * i] + a[1] * v[3 * i + 1] + a[2] * v[3 * i + 2])
                    })
                    .sum()
            })
            .collect()
    }

    /// `out += J^T lambda`.
    pub fn add_jt(&self, lambda: &[f64], out: &mut [f64]) {
        for (r, l) in lambda.iter().enumerate() {
            let a = &self.row_dir[r];
            for (i, c) in self.row_terms(r) {
                if c != 0.0 {
                    for d in 0..3 {
                        out[3 * i + d] += c * a[d] * l;
                    }
                }
            }
        }
    }

    /// `out += G^T g` for the force map $F_o=G\lambda=\sum_{r\in o}a_r\lambda_r$ of obstacle `obstacle`
    /// ([`ContactRecord::obstacle_force`]): $g_{\lambda,r}=a_r^Tg$ on the rows of its contacts
    /// (`out`: all rows). The cotangent of the multipliers for a cotangent `g` of the force.
    pub fn add_force_rows(&self, obstacle: usize, g: &Vector3<f64>, out: &mut [f64]) {
        for j in 0..self.len() {
            if self.obstacle[j] != obstacle {
                continue;
            }
            for r in self.rows(j) {
                out[r] += self.row_dir[r].dot(g);
            }
        }
    }

    /// Residual blocks at gaps `delta` ($\delta(x)$) and multipliers `lambda`. With a
    /// compliance $c$ (`[contact] compliance`, docs/contact.md §2e) the law is evaluated at
    /// $\tilde\delta=\delta+c\lambda$ and $E$ is the total $\partial\Phi/\partial\lambda$ at fixed
    /// $\delta$, $E+cD$: every consumer of the blocks (the forward Newton matrix $DW+E$, the
    /// adjoint's $G_c=WD^T+E^T$ and KKT operator, the record) then holds for the compliant
    /// contact, with $W=JA^{-1}J^T$ unchanged.
    pub fn locals(&self, delta: &[f64], lambda: &[f64], fb: &FbParams) -> Vec<Local> {
        let c = self.compliance;
        (0..self.len())
            .map(|j| {
                let r = self.rows(j);
                let (lam, nr) = (&lambda[r.clone()], r.len());
                if c == 0.0 {
                    return ncp::local(&delta[r], lam, self.kappa[j], &self.mu[j], nr, fb);
                }
                let mut d = [0.0; 3];
                for (a, (dk, lk)) in delta[r].iter().zip(lam).enumerate() {
                    d[a] = dk + c * lk;
                }
                let mut l = ncp::local(&d[..nr], lam, self.kappa[j], &self.mu[j], nr, fb);
                l.e += l.d * c;
                l
            })
            .collect()
    }
}

/// The Delassus operator $W=JA^{-1}J^T$ of a step's contact set, dense or matrix-free.
pub enum Delassus {
    Dense(DenseDelassus),
    Free(iterative::MatrixFree),
    /// The dense $W$ of a set whose columns $X=A^{-1}J^T$ an accelerator holds: its resident
    /// PD loop forms $\delta_0$ and applies $X\lambda$ (docs/gpu.md "Contact on the device"),
    /// so [`Delassus::add_x`] has no columns to apply on the host.
    Resident(nalgebra::DMatrix<f64>),
}

/// [`Delassus::add_x`] of a [`Delassus::Resident`] operator: its columns are on the
/// accelerator.
#[derive(Debug, thiserror::Error)]
#[error("the contact columns X = A^-1 J^T are held by the accelerator")]
pub struct ColumnsOnDevice;

impl Delassus {
    /// The form [`ContactSet::iterative`] selects (fails where a solve with `solver` does).
    pub fn new(set: &ContactSet, solver: &dyn LinearSolver) -> Result<Delassus, LinalgError> {
        Ok(if set.iterative() {
            Delassus::Free(iterative::MatrixFree::new(set, solver)?)
        } else {
            Delassus::Dense(DenseDelassus::new(set, solver)?)
        })
    }

    /// `out += X lambda` $=A^{-1}J^T\lambda$ (`solver`: the factor the operator was built on).
    pub fn add_x(
        &self,
        set: &ContactSet,
        solver: &dyn LinearSolver,
        lambda: &[f64],
        out: &mut [f64],
    ) -> Result<(), LinalgError> {
        match self {
            Delassus::Dense(d) => {
                d.add_x(set, lambda, out);
                Ok(())
            }
            Delassus::Free(_) => iterative::add_x(set, solver, lambda, out),
            Delassus::Resident(_) => Err(LinalgError::Backend {
                what: "contact X lambda",
                error: Box::new(ColumnsOnDevice),
            }),
        }
    }
}

/// Settings of the per-iteration contact solve.
#[derive(Clone, Debug)]
pub struct SolveSettings {
    pub fb: FbParams,
    pub tolerance: f64,
    pub max_newton: usize,
    /// Wall-clock cap of one solve (s; `[contact] max_seconds`).
    pub max_seconds: f64,
    /// The caller's token, polled once per Newton iteration ([`crate::cancel`]): a tripped
    /// poll ends the solve with [`LinalgError::Cancelled`].
    pub cancel: crate::cancel::Cancel,
}

impl SolveSettings {
    /// Whether a solve started at `t0` has used up its wall-clock cap.
    pub fn out_of_time(&self, t0: std::time::Instant) -> bool {
        t0.elapsed().as_secs_f64() > self.max_seconds
    }
}

/// Outcome of one contact solve.
#[derive(Clone, Copy, Debug, Default)]
pub struct SolveInfo {
    pub iterations: usize,
    /// Dense LU factorizations (the other iterations were chord steps).
    pub factorizations: usize,
    /// Products with the matrix-free $W$ (solves with the factor; iterative form only).
    pub products: usize,
    pub residual: f64,
    /// The solve stopped at its wall-clock cap ([`SolveSettings::max_seconds`]) before
    /// meeting its tolerance.
    pub timed_out: bool,
    /// The caller's token tripped before this Newton iteration ([`SolveSettings::cancel`]).
    pub cancelled: Option<crate::cancel::Cancelled>,
}

/// LU factor of the last Newton matrix, reused for chord steps while the set of coupled
/// rows does not change (within one time step).
pub struct NewtonCache {
    coupled: Vec<usize>,
    lu: dense::NewtonFactor,
}

pub(crate) fn residual(set: &ContactSet, delta: &[f64], lambda: &[f64], fb: &FbParams) -> Vec<f64> {
    let mut f = vec![0.0; set.nrows()];
    for (j, l) in set.locals(delta, lambda, fb).iter().enumerate() {
        for (a, r) in set.rows(j).enumerate() {
            f[r] = l.phi[a];
        }
    }
    f
}

pub(crate) fn inf_norm(v: &[f64]) -> f64 {
    v.iter().fold(0.0, |m, x| m.max(x.abs()))
}

/// Relative diagonal shift of the dense contact matrices (Newton matrix, adjoint $G_c$).
pub const REGULARIZATION: f64 = 1e-10;

/// Contacts whose $D_j=\partial\Phi_j/\partial\delta_j$ is below this (max-abs; $D$ is
/// dimensionless) are decoupled: their Newton rows read $E_j\Delta\lambda_j=-\Phi_j$.
pub const DECOUPLED: f64 = 1e-10;

/// Solve $\Phi(\delta_0+W\lambda,\lambda)=0$ for $\lambda$ (in/out, warm start), where
/// $\delta_0=Ju-d$ (spec Eqs. 36–37 iterated to $\|\Phi\|_\infty\le$ `s.tolerance`, at least
/// one step unless already within it). Semismooth Newton on
/// $(DW+E)\Delta\lambda=-\Phi$ with Armijo backtracking on $\tfrac12\|\Phi\|^2$. Contacts with
/// $D_j\approx0$ (separated) are eliminated exactly: $\Delta\lambda_j=-E_j^{-1}\Phi_j$, and only
/// the coupled contacts enter the dense LU. The matrix-free form: [`iterative::solve`]
/// (`cache` unused; a failed solve with `solver` is its error).
pub fn solve(
    set: &ContactSet,
    del: &Delassus,
    solver: &dyn LinearSolver,
    u: &[f64],
    lambda: &mut [f64],
    s: &SolveSettings,
    cache: &mut Option<NewtonCache>,
) -> Result<SolveInfo, LinalgError> {
    let info = match del {
        Delassus::Dense(d) => dense::solve(set, d, u, lambda, s, s.tolerance, cache),
        Delassus::Free(f) => iterative::solve(set, f, solver, u, lambda, s, s.tolerance)?,
        Delassus::Resident(w) => {
            dense::solve_w(set, w, set.delta(u), lambda, s, s.tolerance, cache)
        }
    };
    match info.cancelled {
        Some(c) => Err(LinalgError::Cancelled(c)),
        None => Ok(info),
    }
}

/// [`solve`] of a dense $W$ from $\delta_0=Ju-d$ (one entry per row) instead of $u$: the
/// device's contact, whose $u$ stays on the accelerator (docs/gpu.md "Contact on the
/// device"); the same iterates as [`solve`] with the same $W$ and $\delta_0$.
pub fn solve_from_delta(
    set: &ContactSet,
    w: &nalgebra::DMatrix<f64>,
    d0: Vec<f64>,
    lambda: &mut [f64],
    s: &SolveSettings,
    cache: &mut Option<NewtonCache>,
) -> Result<SolveInfo, LinalgError> {
    let info = dense::solve_w(set, w, d0, lambda, s, s.tolerance, cache);
    match info.cancelled {
        Some(c) => Err(LinalgError::Cancelled(c)),
        None => Ok(info),
    }
}

/// Contact state of one contact at the end of a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum State {
    #[default]
    Separated,
    Stick,
    Slide,
}

/// Per-frame contact statistics (logged, spec §10.5 I1/I7).
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct ContactStats {
    /// Contact candidates (node–obstacle pairs) of the step.
    pub candidates: usize,
    /// Contacts on the contact branch of the FB zero set ($\kappa\lambda_n\ge\delta_n$, $\lambda_n>0$).
    pub active: usize,
    pub sticking: usize,
    pub sliding: usize,
    /// Largest penetration $\max(0,-\phi)$ of any boundary node into any obstacle at the end
    /// of the step (true signed distance, m).
    pub max_penetration: f64,
    /// $\|\Phi\|_\infty$ of the complementarity residuals at the end of the step (m).
    pub complementarity: f64,
    /// Largest normal multiplier (N).
    pub max_lambda: f64,
    /// Newton iterations of the contact solves, summed over the PD iterations.
    pub newton_iterations: usize,
    /// Dense LU factorizations among them (the others reused a factor: chord steps).
    pub factorizations: usize,
    /// Products with the matrix-free Delassus operator (one solve with the factor each;
    /// `contact.solver = "iterative"`).
    pub products: usize,
    /// Set-up (candidates + Delassus) and solve time (s).
    pub seconds_setup: f64,
    pub seconds_solve: f64,
    /// The PD (or Newton) iteration of the step whose contact solve hit the wall-clock cap
    /// `contact.max_seconds` (the step then ends non-converged); absent when none did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_limit_iteration: Option<usize>,
}

/// What the backward needs of a step's contacts (spec §6.2 step 27 TAPE): the frozen
/// geometry, the multipliers, and the residual Jacobian blocks at the converged state.
#[derive(Clone, Debug, Default)]
pub struct ContactRecord {
    pub set: ContactSet,
    pub lambda: Vec<f64>,
    /// Gaps/slips at $x_{t+1}$, plus $c\lambda$ with a compliance ([`ContactSet::comply`]):
    /// the $\tilde\delta$ the complementarity holds for.
    pub delta: Vec<f64>,
    /// End-of-step position $x_{t+1,i}$ of every contact's node.
    pub x_end: Vec<Vector3<f64>>,
    /// End-of-step positions of the triangle nodes of body–body contacts (zeros otherwise).
    pub tri_end: Vec<[Vector3<f64>; 3]>,
    /// $D_j,E_j,\partial\Phi_j/\partial\mu$ at $(\delta(x_{t+1}),\lambda)$.
    pub blocks: Vec<Local>,
    pub state: Vec<State>,
    pub stats: ContactStats,
    /// Penalty model: the nodal contact forces of the step (node-major).
    pub penalty_forces: Option<Vec<f64>>,
}

impl ContactRecord {
    /// Record the converged state (`x_next`, `lambda`) of a step.
    pub fn new(set: ContactSet, lambda: Vec<f64>, x_next: &[f64], fb: &FbParams) -> Self {
        let mut delta = set.delta(x_next);
        let blocks = set.locals(&delta, &lambda, fb);
        set.comply(&lambda, &mut delta);
        let x_end = set
            .node
            .iter()
            .map(|&i| Vector3::new(x_next[3 * i], x_next[3 * i + 1], x_next[3 * i + 2]))
            .collect();
        let v = |i: usize| Vector3::new(x_next[3 * i], x_next[3 * i + 1], x_next[3 * i + 2]);
        let tri_end = set
            .tri
            .iter()
            .map(|t| match t {
                Some(t) => t.nodes.map(v),
                None => [Vector3::zeros(); 3],
            })
            .collect();
        let mut stats = ContactStats {
            candidates: set.len(),
            ..Default::default()
        };
        let mut state = Vec::with_capacity(set.len());
        let lmax = (0..set.len())
            .map(|j| lambda[set.offset[j]])
            .fold(0.0, f64::max);
        for (j, b) in blocks.iter().enumerate() {
            let r = set.rows(j);
            let r0 = r.start;
            for a in 0..r.len() {
                stats.complementarity = stats.complementarity.max(b.phi[a].abs());
            }
            let k = set.kappa[j];
            let ln = lambda[r0];
            let st = if ln > 1e-12 * lmax.max(1e-300) && k * ln >= delta[r0] {
                if r.len() == 3 {
                    let lf = Vector2::new(lambda[r0 + 1], lambda[r0 + 2]);
                    let df = Vector2::new(delta[r0 + 1], delta[r0 + 2]);
                    if df.norm() > k * (set.mu[j].at(&df).0 * ln - lf.norm()) {
                        State::Slide
                    } else {
                        State::Stick
                    }
                } else {
                    State::Slide
                }
            } else {
                State::Separated
            };
            match st {
                State::Separated => {}
                State::Stick => {
                    stats.active += 1;
                    stats.sticking += 1;
                }
                State::Slide => {
                    stats.active += 1;
                    if r.len() == 3 {
                        stats.sliding += 1;
                    }
                }
            }
            state.push(st);
        }
        stats.max_lambda = lmax;
        ContactRecord {
            set,
            lambda,
            delta,
            x_end,
            tri_end,
            blocks,
            state,
            stats,
            penalty_forces: None,
        }
    }

    /// The total contact force obstacle `obstacle` exerts on the bodies over the step (N):
    /// $F_o=\sum_{j\in o}J_j^T\lambda_j=\sum_{j\in o}\big(n_j\lambda_{n,j}+\sum_kt_{jk}\lambda_{f,jk}\big)$,
    /// the sum of [`Self::nodal_forces`] over its contacts (body–body contacts have their own
    /// index [`BODY`]). Its derivatives: $\partial F_o/\partial\lambda$ is
    /// [`ContactSet::add_force_rows`]; the frozen directions' dependence on $x_t$ and the
    /// obstacle offset is in [`adjoint::ContactAdjoint::gradients`]. A penalty record carries
    /// forces, not multipliers: zero.
    pub fn obstacle_force(&self, obstacle: usize) -> Vector3<f64> {
        let set = &self.set;
        let mut f = Vector3::zeros();
        if self.penalty_forces.is_some() {
            return f;
        }
        for j in 0..set.len() {
            if set.obstacle[j] != obstacle {
                continue;
            }
            for r in set.rows(j) {
                f += set.row_dir[r] * self.lambda[r];
            }
        }
        f
    }

    /// Contact force on every node, node-major `3n` ($J^T\lambda$, N).
    pub fn nodal_forces(&self, n: usize) -> Vec<f64> {
        if let Some(f) = &self.penalty_forces {
            return f.clone();
        }
        let mut f = vec![0.0; 3 * n];
        self.set.add_jt(&self.lambda, &mut f);
        f
    }
}

/// Whether obstacle contact is DiffPD's explicit penalty force (`[contact] model =
/// "penalty"` with obstacles; [`penalty`]) rather than the NCP solve.
pub fn penalty_enabled(model: &Model) -> bool {
    !model.obstacles.is_empty() && model.contact.model == crate::model::ContactModel::Penalty
}

/// Whether the model has NCP/penalty contact: obstacles, or contact between bodies (or of
/// one body with itself).
pub fn enabled(model: &Model) -> bool {
    !model.obstacles.is_empty()
        || (model.contact.bodies && (model.bodies.len() > 1 || model.contact.self_contact))
}

/// Largest penetration $\max(0,-\phi_o(x_i))$ over `nodes` and obstacles at time `t`.
pub fn max_penetration(obstacles: &[Obstacle], nodes: &[usize], x: &[f64], t: f64) -> f64 {
    let mut worst: f64 = 0.0;
    for &i in nodes {
        let p = Vector3::new(x[3 * i], x[3 * i + 1], x[3 * i + 2]);
        for o in obstacles {
            worst = worst.max(-o.query(&p, t).dist);
        }
    }
    worst
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The force map $F_o=G_o\lambda$ of [`ContactRecord::obstacle_force`] counts the rows of
    /// obstacle $o$'s contacts only, and [`ContactSet::add_force_rows`] is its transpose:
    /// $g^TG_o\lambda=(G_o^Tg)^T\lambda$.
    #[test]
    fn obstacle_force_and_its_transpose() {
        let n = Vector3::new(0.0, 0.6, 0.8);
        let tg = obstacle::tangents(&n);
        let set = ContactSet {
            node: vec![0, 1, 2],
            obstacle: vec![0, 1, 0],
            offset: vec![0, 3, 4, 7],
            row_dir: vec![n, tg[0], tg[1], Vector3::z(), n, tg[0], tg[1]],
            ..Default::default()
        };
        let lambda = vec![2.0, 0.3, -0.1, 5.0, 1.0, -0.2, 0.4];
        let rec = ContactRecord {
            set,
            lambda: lambda.clone(),
            ..Default::default()
        };
        let f0 = rec.obstacle_force(0);
        let want = n * 3.0 + tg[0] * 0.1 + tg[1] * 0.3;
        assert!((f0 - want).norm() < 1e-14, "{f0} vs {want}");
        assert_eq!(rec.obstacle_force(1), Vector3::z() * 5.0);
        assert_eq!(rec.obstacle_force(2), Vector3::zeros());
        let g = Vector3::new(0.7, -1.1, 0.4);
        let mut rows = vec![0.0; 7];
        rec.set.add_force_rows(0, &g, &mut rows);
        let lhs = g.dot(&f0);
        let rhs: f64 = rows.iter().zip(&lambda).map(|(a, b)| a * b).sum();
        assert!((lhs - rhs).abs() < 1e-14 * lhs.abs(), "{lhs} vs {rhs}");
        assert_eq!(rows[3], 0.0, "obstacle 1's row is not obstacle 0's");
    }
}
