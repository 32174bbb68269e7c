//! The contact block of the adjoint (spec §7.2 steps 3–4, §7.4, Eq. 38).
//!
//! With the converged residual Jacobians $D=\partial\Phi/\partial\delta$, $E=\partial\Phi/\partial\lambda$
//! (block diagonal, per contact), the adjoint of one step is
//! $$\begin{bmatrix}K&J^TD^T\\-J&E^T\end{bmatrix}\begin{bmatrix}z\\\zeta\end{bmatrix}=\begin{bmatrix}g\\0\end{bmatrix},
//! \qquad\frac{d\mathcal L}{d\theta}=-z^T\frac{\partial\mathcal R_x}{\partial\theta}-\zeta^T\frac{\partial\Phi}{\partial\theta}.$$
//! Eliminating $z=w-X\mu$ with $w=A^{-1}(g+\Delta Az)$, $\mu=D^T\zeta$, $X=A^{-1}J^T$, $W=JX$:
//! $G_c\,\zeta=Jw$ with $G_c=WD^T+E^T$ (spec's $\mathcal J_{\mathcal A}A^{-1}\mathcal J_{\mathcal A}^T+R_{\mathcal A}$
//! with $R=E^TD^{-T}$ where $D$ is invertible; this form also covers sliding and separated
//! contacts, whose $D$ is singular). Hard active rows ($D=1$, $E=0$) are exact constraints
//! $J_jz=0$; separated rows ($D=0$) decouple; smoothed rows are compliant. $G_c$ is
//! non-symmetric with friction. Dense form: $G_c$ is assembled from the dense $W$ and factored
//! by LU once per step. Iterative form ([`ContactSet::iterative`](super::ContactSet::iterative)):
//! $G_c\zeta=b$ is solved by GMRES with the matrix-free $W$ (one solve with the factor per
//! product), preconditioned by the blocks $s_jD_j^T+E_j^T$ of [`super::iterative`], and
//! warm-started from the previous solve of the step (the backward's fixed point calls it once
//! per iteration with slowly changing right-hand sides).
//!
//! A loss on the multipliers themselves (the total contact force of an obstacle, a load
//! cell: [`ContactAdjoint::set_force_cotangent`]) makes the right-hand side
//! $\begin{bmatrix}g\\g_\lambda\end{bmatrix}$ with $g_\lambda=G^Tg_F$ ($F=G\lambda$): then
//! $G_c\zeta=g_\lambda+Jw$, and the projection [`ContactAdjoint::project`] is affine,
//! $\Pi w+z_c$; [`ContactAdjoint::project_linear`] is its linear part.

use super::iterative::{self, apply_blocks, block_inverse, MatrixFree};
use super::{ContactRecord, DenseDelassus};
use crate::linalg::krylov::{try_gmres, GmresSettings};
use crate::linalg::{LinalgError, LinearSolver};
use nalgebra::{Matrix3, Vector3};
use std::sync::Mutex;

/// Contacts with $\max|D_j|$ below this are dropped from the adjoint: $\mu_j=D_j^T\zeta_j\approx0$
/// and their $\zeta_j$ does not couple to other rows ($WD^T$ has zero columns there).
pub const DROP: f64 = 1e-13;

/// Relative GMRES tolerance of the iterative $G_c\zeta=b$ solves.
pub const KRYLOV_TOL: f64 = 1e-12;

/// Factored contact block of one step.
pub struct ContactAdjoint<'s> {
    pub rec: ContactRecord,
    /// The factor $W$ is applied with.
    solver: &'s dyn LinearSolver,
    /// Dense form: $X$, $W$.
    del: Option<DenseDelassus>,
    /// Rows of the kept (coupled) contacts.
    keep: Vec<usize>,
    /// Position of every row in `keep` (`usize::MAX` for dropped contacts).
    pos: Vec<usize>,
    lu: Option<super::lu::DenseLu>,
    /// $1/(G_c)_{kk}$ on the kept rows (1 where the diagonal vanishes): the block-Jacobi
    /// preconditioner of the contact rows (iterative form: of its block approximation).
    diag_inv: Vec<f64>,
    /// Iterative form: inverse preconditioner blocks $(s_jD_j^T+E_j^T+\sigma I)^{-1}$ per
    /// contact (all contacts; dropped ones unused), the shift $\sigma$, and the last $\zeta$
    /// (kept rows) as the next warm start.
    pinv: Vec<Matrix3<f64>>,
    shift: f64,
    warm: Mutex<Vec<f64>>,
    /// A loss's cotangents of the obstacles' total contact forces, `(obstacle, dL/dF)`
    /// (empty: none), and the multipliers' cotangent $g_\lambda$ they make on the kept rows.
    force: Vec<(usize, Vector3<f64>)>,
    rhs: Vec<f64>,
}

/// Contact contributions to the parameter gradients of one step.
pub struct ContactGradients {
    /// $d\mathcal L/d\mu_o$ per obstacle ($\mu_s$ and $\mu_k$ moved together).
    pub friction: Vec<f64>,
    /// $d\mathcal L/d\mu_{s,o}$ per obstacle ($\mu_k$ fixed).
    pub static_friction: Vec<f64>,
    /// $d\mathcal L/d\tau_o$ (obstacle translation) per obstacle.
    pub offset: Vec<Vector3<f64>>,
    /// $d\mathcal L/dx_t$ through the friction anchors (node-major `3n`).
    pub x_t: Vec<f64>,
    /// $d\mathcal L/d\mu$ of body–body contacts (`contact.body_friction`; not a declared
    /// parameter kind yet).
    pub body_friction: f64,
    /// $d\mathcal L/d\mu_s$ of body–body contacts ($\mu_k$ fixed).
    pub body_static_friction: f64,
}

impl<'s> ContactAdjoint<'s> {
    /// Dense form: build $X$, $W$ (from the persistent factor) and factor $G_c=WD^T+E^T$ on
    /// the coupled contacts. Iterative form: only the preconditioner blocks. Fails where a
    /// solve with `solver` does.
    pub fn new(rec: &ContactRecord, solver: &'s dyn LinearSolver) -> Result<Self, LinalgError> {
        let set = &rec.set;
        let m = set.nrows();
        let mut keep = Vec::new();
        for j in 0..set.len() {
            let rows = set.rows(j);
            let nr = rows.len();
            let b = &rec.blocks[j];
            let dmax = (0..nr)
                .flat_map(|a| (0..nr).map(move |c| (a, c)))
                .fold(0.0f64, |mx, (a, c)| mx.max(b.d[(a, c)].abs()));
            if dmax > DROP {
                keep.extend(rows);
            }
        }
        let mut pos = vec![usize::MAX; m];
        for (k, &r) in keep.iter().enumerate() {
            pos[r] = k;
        }
        let na = keep.len();
        if set.iterative() {
            return Self::new_iterative(rec, solver, keep, pos);
        }
        let del = DenseDelassus::new(set, solver)?;
        let mut g = faer::Mat::<f64>::zeros(na, na);
        for j in 0..set.len() {
            let rows = set.rows(j);
            let o = rows.start;
            if pos[o] == usize::MAX {
                continue;
            }
            let nr = rows.len();
            let b = &rec.blocks[j];
            for s in 0..nr {
                // column o+s of W D^T: sum_b W[:, o+b] D[s, b]
                let ks = pos[o + s];
                for (kr, &r) in keep.iter().enumerate() {
                    let mut v = 0.0;
                    for bb in 0..nr {
                        v += del.w[(r, o + bb)] * b.d[(s, bb)];
                    }
                    g[(kr, ks)] = v;
                }
                for a in 0..nr {
                    g[(pos[o + a], ks)] += b.e[(s, a)];
                }
            }
        }
        // relative shift against redundant (linearly dependent) constraint rows
        let shift =
            super::REGULARIZATION * 1e-2 * (0..na).fold(0.0f64, |m, k| m.max(g[(k, k)].abs()));
        for k in 0..na {
            g[(k, k)] += shift;
        }
        let dmax = (0..na).fold(0.0f64, |m, k| m.max(g[(k, k)].abs()));
        let diag_inv = (0..na)
            .map(|k| {
                let d = g[(k, k)];
                if d.abs() > 1e-14 * dmax {
                    1.0 / d
                } else {
                    1.0
                }
            })
            .collect();
        let lu = (na > 0).then(|| super::lu::DenseLu::new(g));
        Ok(ContactAdjoint {
            rec: rec.clone(),
            solver,
            del: Some(del),
            keep,
            pos,
            lu,
            diag_inv,
            pinv: Vec::new(),
            shift: 0.0,
            warm: Mutex::new(Vec::new()),
            force: Vec::new(),
            rhs: Vec::new(),
        })
    }

    fn new_iterative(
        rec: &ContactRecord,
        solver: &'s dyn LinearSolver,
        keep: Vec<usize>,
        pos: Vec<usize>,
    ) -> Result<Self, LinalgError> {
        let set = &rec.set;
        let (pinv, shift, diag_inv) = if keep.is_empty() {
            (Vec::new(), 0.0, Vec::new())
        } else {
            let mf = MatrixFree::new(set, solver)?;
            let blocks: Vec<Matrix3<f64>> = (0..set.len())
                .map(|j| {
                    let b = &rec.blocks[j];
                    (b.d * mf.scale[j] + b.e).transpose()
                })
                .collect();
            let dmax = (0..set.len())
                .filter(|&j| pos[set.offset[j]] != usize::MAX)
                .flat_map(|j| (0..set.rows(j).len()).map(move |a| (j, a)))
                .fold(0.0f64, |mx, (j, a)| mx.max(blocks[j][(a, a)].abs()));
            let shift = super::REGULARIZATION * 1e-2 * dmax;
            let mut diag_inv = vec![1.0; keep.len()];
            let pinv = blocks
                .iter()
                .enumerate()
                .map(|(j, b)| {
                    let rows = set.rows(j);
                    let nr = rows.len();
                    let mut p = b + Matrix3::identity() * shift;
                    for a in 0..nr {
                        let k = pos[rows.start + a];
                        if k != usize::MAX && p[(a, a)].abs() > 1e-14 * dmax {
                            diag_inv[k] = 1.0 / p[(a, a)];
                        }
                    }
                    for a in nr..3 {
                        for c in 0..3 {
                            p[(a, c)] = 0.0;
                            p[(c, a)] = 0.0;
                        }
                        p[(a, a)] = 1.0;
                    }
                    block_inverse(&p, nr)
                })
                .collect();
            (pinv, shift, diag_inv)
        };
        Ok(ContactAdjoint {
            rec: rec.clone(),
            solver,
            del: None,
            keep,
            pos,
            lu: None,
            diag_inv,
            pinv,
            shift,
            warm: Mutex::new(Vec::new()),
            force: Vec::new(),
            rhs: Vec::new(),
        })
    }

    /// $G_c\zeta_k$ on the kept rows with the matrix-free $W$ (iterative form).
    fn apply_gc(&self, zeta_k: &[f64], out: &mut [f64]) -> Result<(), LinalgError> {
        let set = &self.rec.set;
        let (zeta, mu) = self.expand(zeta_k);
        let wmu = iterative::apply_w(set, self.solver, &mu)?;
        for j in 0..set.len() {
            let rows = set.rows(j);
            let o = rows.start;
            if self.pos[o] == usize::MAX {
                continue;
            }
            let nr = rows.len();
            let b = &self.rec.blocks[j];
            for a in 0..nr {
                let ete: f64 = (0..nr).map(|s| b.e[(s, a)] * zeta[o + s]).sum();
                let k = self.pos[o + a];
                out[k] = wmu[o + a] + ete + self.shift * zeta_k[k];
            }
        }
        Ok(())
    }

    /// Solve $G_c\zeta_k=b$ on the kept rows (iterative form), warm-started.
    fn solve_gc(&self, b: &[f64]) -> Result<Vec<f64>, LinalgError> {
        let set = &self.rec.set;
        let na = self.keep.len();
        let mut x = {
            let w = self.warm.lock().unwrap_or_else(|p| p.into_inner());
            if w.len() == na {
                w.clone()
            } else {
                vec![0.0; na]
            }
        };
        let mut op = |v: &[f64], out: &mut [f64]| self.apply_gc(v, out);
        let m = set.nrows();
        let mut pre = |v: &[f64], out: &mut [f64]| {
            // block preconditioner on all rows, restricted to the kept ones
            let mut full = vec![0.0; m];
            for (k, &r) in self.keep.iter().enumerate() {
                full[r] = v[k];
            }
            let mut y = vec![0.0; m];
            apply_blocks(set, &self.pinv, false, &full, &mut y);
            for (k, &r) in self.keep.iter().enumerate() {
                out[k] = y[r];
            }
            Ok(())
        };
        try_gmres(
            &mut op,
            &mut pre,
            b,
            &mut x,
            &GmresSettings {
                restart: iterative::RESTART,
                rel_tol: KRYLOV_TOL,
                abs_tol: 0.0,
                max_iter: 4 * iterative::MAX_KRYLOV,
            },
        )?;
        *self.warm.lock().unwrap_or_else(|p| p.into_inner()) = x.clone();
        Ok(x)
    }

    /// Set a loss's cotangents of the obstacles' total contact forces over the step,
    /// `(obstacle, dL/dF_o)` ([`ContactRecord::obstacle_force`](super::ContactRecord::obstacle_force)):
    /// the adjoint's right-hand side gets $g_\lambda=\sum_oG_o^T\,dL/dF_o$ on the contact rows
    /// (only the kept rows enter: a dropped contact is separated, $\lambda_j=0$ whatever
    /// the parameters), and [`Self::gradients`] the frozen directions' terms.
    pub fn set_force_cotangent(&mut self, force: Vec<(usize, Vector3<f64>)>) {
        let set = &self.rec.set;
        let mut rows = vec![0.0; set.nrows()];
        for (o, g) in &force {
            set.add_force_rows(*o, g, &mut rows);
        }
        self.rhs = self.keep.iter().map(|&r| rows[r]).collect();
        if self.rhs.iter().all(|v| *v == 0.0) {
            self.rhs.clear();
        }
        self.force = force;
    }

    /// The force cotangents of `other` (the same step's contact block on another factor).
    pub fn with_force_of(mut self, other: &ContactAdjoint) -> Self {
        self.set_force_cotangent(other.force.clone());
        self
    }

    /// Whether the right-hand side has a contact part $g_\lambda\ne0$ ([`Self::set_force_cotangent`]).
    pub fn has_rhs(&self) -> bool {
        !self.rhs.is_empty()
    }

    /// $g_\lambda$ on the kept rows (zeros without a force cotangent): the contact part of
    /// the KKT right-hand side.
    pub fn rhs_kept(&self) -> Vec<f64> {
        if self.rhs.is_empty() {
            vec![0.0; self.keep.len()]
        } else {
            self.rhs.clone()
        }
    }

    /// $\|J^TD^TG_c^{-1}g_\lambda\|$: the size of the force the contact part of the right-hand
    /// side puts on the $z$ rows (0 without one), a scale for the adjoint's residual when $g$
    /// is small or zero. Fails where a solve with the factor does.
    pub fn rhs_scale(&self, n3: usize) -> Result<f64, LinalgError> {
        if self.rhs.is_empty() {
            return Ok(0.0);
        }
        let mut w = vec![0.0; n3];
        let (_, _, mu) = self.eliminate(&mut w, Some(&self.rhs))?;
        let mut f = vec![0.0; n3];
        self.rec.set.add_jt(&mu, &mut f);
        Ok(f.iter().map(|v| v * v).sum::<f64>().sqrt())
    }

    /// Number of contact unknowns $\zeta$ of the KKT form (the rows of the coupled contacts).
    pub fn num_kept(&self) -> usize {
        self.keep.len()
    }

    /// Spread $\zeta$ on the kept rows to all rows and form $\mu=D^T\zeta$ per contact.
    fn expand(&self, zeta_k: &[f64]) -> (Vec<f64>, Vec<f64>) {
        let set = &self.rec.set;
        let m = set.nrows();
        let mut zeta = vec![0.0; m];
        for (k, &r) in self.keep.iter().enumerate() {
            zeta[r] = zeta_k[k];
        }
        let mut mu = vec![0.0; m];
        for j in 0..set.len() {
            let rows = set.rows(j);
            let o = rows.start;
            let nr = rows.len();
            let b = &self.rec.blocks[j];
            for a in 0..nr {
                mu[o + a] = (0..nr).map(|c| b.d[(c, a)] * zeta[o + c]).sum();
            }
        }
        (zeta, mu)
    }

    /// Contact blocks of the KKT operator of the step adjoint,
    /// $\begin{bmatrix}K&J^TD^T\\-J&E^T\end{bmatrix}$: `out_z += J^T D^T zeta`,
    /// `out_c = -J z + E^T zeta` (kept rows; `zeta_k` and `out_c` have [`Self::num_kept`]
    /// entries; with a contact compliance $E$ is $E+cD$, [`super::ContactSet::locals`]).
    pub fn apply_kkt(&self, z: &[f64], zeta_k: &[f64], out_z: &mut [f64], out_c: &mut [f64]) {
        let set = &self.rec.set;
        let (zeta, mu) = self.expand(zeta_k);
        set.add_jt(&mu, out_z);
        let jz = set.apply_j(z);
        let pos = &self.pos;
        for j in 0..set.len() {
            let rows = set.rows(j);
            let o = rows.start;
            if pos[o] == usize::MAX {
                continue;
            }
            let nr = rows.len();
            let b = &self.rec.blocks[j];
            for a in 0..nr {
                let ete: f64 = (0..nr).map(|s| b.e[(s, a)] * zeta[o + s]).sum();
                out_c[pos[o + a]] = -jz[o + a] + ete;
            }
        }
    }

    /// Woodbury (block-elimination) preconditioner of the KKT operator (Zeng et al. 2026
    /// §4.4, Eq. 27, in the form that needs neither $E^{-1}$ nor $D^{-1}$): the exact inverse
    /// of $\begin{bmatrix}A&J^TD^T\\-J&E^T\end{bmatrix}$, i.e. $K$ with $\Delta A$ dropped,
    /// $$u=A^{-1}r_z,\quad G_c\zeta=r_c+Ju,\quad z=u-XD^T\zeta,$$
    /// with the persistent factor for $A^{-1}$, $X=A^{-1}J^T$ and $G_c=WD^T+E^T$ factored once
    /// per step (the cached Delassus $W=JX$). For smoothed compliant rows ($E$ invertible) this
    /// is $(A+J^TD^TE^{-T}J)^{-1}$ by the Woodbury identity; hard rows ($E=0$) make it the
    /// $A$-orthogonal projection onto $Jz=0$ composed with $A^{-1}$.
    pub fn woodbury(
        &self,
        solver: &dyn LinearSolver,
        r_z: &[f64],
        r_c: &[f64],
        z: &mut [f64],
        zeta_k: &mut [f64],
    ) -> Result<(), LinalgError> {
        solver.solve_homogeneous(r_z, z)?;
        let (zk, _, _) = self.eliminate(z, Some(r_c))?;
        zeta_k[..zk.len()].copy_from_slice(&zk);
        Ok(())
    }

    /// Block-diagonal ("mass-aligned" + Jacobi) preconditioner of the KKT operator:
    /// $z=A^{-1}r_z$, $\zeta_k=r_{c,k}/(G_c)_{kk}$. The baseline against [`Self::woodbury`]:
    /// it ignores the coupling of the contact rows through $J$ (Zeng et al. 2026 §5: the
    /// $A^{-1}$-preconditioned solve oscillates with stiff contact).
    pub fn block_jacobi(
        &self,
        solver: &dyn LinearSolver,
        r_z: &[f64],
        r_c: &[f64],
        z: &mut [f64],
        zeta_k: &mut [f64],
    ) -> Result<(), LinalgError> {
        solver.solve_homogeneous(r_z, z)?;
        for (k, d) in self.diag_inv.iter().enumerate() {
            zeta_k[k] = r_c[k] * d;
        }
        Ok(())
    }

    /// Project $w=A^{-1}(g+\Delta Az)$: $\zeta=G_c^{-1}(g_\lambda+Jw)$, $\mu=D^T\zeta$,
    /// $w\leftarrow w-X\mu$ ($g_\lambda$ of [`Self::set_force_cotangent`], else 0: then
    /// linear). Returns $(\zeta,\mu)$ (zero on dropped contacts); fails where a solve with
    /// the factor does.
    pub fn project(&self, w: &mut [f64]) -> Result<(Vec<f64>, Vec<f64>), LinalgError> {
        let rhs = (!self.rhs.is_empty()).then_some(&self.rhs[..]);
        let (_, zeta, mu) = self.eliminate(w, rhs)?;
        Ok((zeta, mu))
    }

    /// The linear part of [`Self::project`] ($g_\lambda=0$): $\zeta=G_c^{-1}Jw$.
    pub fn project_linear(&self, w: &mut [f64]) -> Result<(Vec<f64>, Vec<f64>), LinalgError> {
        let (_, zeta, mu) = self.eliminate(w, None)?;
        Ok((zeta, mu))
    }

    /// $\zeta=G_c^{-1}(r_c+Jw)$ on the kept rows ($r_c=0$ when `None`), $\mu=D^T\zeta$,
    /// $w\leftarrow w-X\mu$. Returns $\zeta$ on the kept rows, and $(\zeta,\mu)$ on all rows.
    #[allow(clippy::type_complexity)]
    fn eliminate(
        &self,
        w: &mut [f64],
        r_c: Option<&[f64]>,
    ) -> Result<(Vec<f64>, Vec<f64>, Vec<f64>), LinalgError> {
        let set = &self.rec.set;
        let m = set.nrows();
        if self.keep.is_empty() {
            return Ok((vec![], vec![0.0; m], vec![0.0; m]));
        }
        let (Some(lu), Some(del)) = (&self.lu, &self.del) else {
            let jw = set.apply_j(w);
            let b: Vec<f64> = (0..self.keep.len())
                .map(|k| jw[self.keep[k]] + r_c.map_or(0.0, |r| r[k]))
                .collect();
            let zeta_k = self.solve_gc(&b)?;
            let (zeta, mu) = self.expand(&zeta_k);
            let neg: Vec<f64> = mu.iter().map(|v| -v).collect();
            iterative::add_x(set, self.solver, &neg, w)?;
            return Ok((zeta_k, zeta, mu));
        };
        let jw = set.apply_j(w);
        let mut x = faer::Mat::from_fn(self.keep.len(), 1, |k, _| {
            jw[self.keep[k]] + r_c.map_or(0.0, |r| r[k])
        });
        lu.solve_in_place(x.as_mut());
        let zeta_k: Vec<f64> = (0..self.keep.len()).map(|k| x[(k, 0)]).collect();
        let (zeta, mu) = self.expand(&zeta_k);
        let neg: Vec<f64> = mu.iter().map(|v| -v).collect();
        del.add_x(set, &neg, w);
        Ok((zeta_k, zeta, mu))
    }

    /// `out += J^T mu`.
    pub fn add_jt(&self, mu: &[f64], out: &mut [f64]) {
        self.rec.set.add_jt(mu, out)
    }

    /// Gradient contributions from $\zeta$, $\mu$ (spec §7.5 rows "friction coefficient",
    /// "obstacle offsets", "previous position"): $d\mathcal L/d\theta=-\zeta^T\partial\Phi/\partial\theta
    /// =-\mu^T\partial\delta/\partial\theta$ for the geometry and $-\zeta^T\partial\Phi/\partial\mu$ for μ.
    /// The frozen frame is differentiated exactly (not frozen, unlike spec §7.5): with
    /// $p=x_{t,i}$, $H=\partial n/\partial p$, $v=x_{t+1,i}-p$,
    /// $\delta_n=\phi(p)+n^Tv$: $\partial\delta_n/\partial p=Hv$, $\partial\delta_n/\partial\tau=-Hv-n$;
    /// $\delta_{f,k}=t_k^T(v-u_{obs})$: $\partial\delta_{f,k}/\partial p=H^T(\partial t_k/\partial n)^T(v-u_{obs})-t_k$,
    /// $\partial\delta_{f,k}/\partial\tau=-H^T(\partial t_k/\partial n)^T(v-u_{obs})$
    /// (exact for static and translating obstacles; a rotating obstacle's $u_{obs}(p)$ is held).
    /// The force directions move with the frame too: $\mathcal R_x\ni-J^T\lambda$ with
    /// $J_i^T\lambda=n\lambda_n+\sum_kt_k\lambda_{f,k}$, so $-z^T\partial\mathcal R_x/\partial p
    /// =H^T(\lambda_nz_i+\sum_k\lambda_{f,k}(\partial t_k/\partial n)^Tz_i)$ and the opposite for $\tau$.
    pub fn gradients(
        &self,
        z: &[f64],
        zeta: &[f64],
        mu: &[f64],
        n_obstacles: usize,
        n: usize,
    ) -> ContactGradients {
        let set = &self.rec.set;
        let mut out = ContactGradients {
            friction: vec![0.0; n_obstacles],
            static_friction: vec![0.0; n_obstacles],
            offset: vec![Vector3::zeros(); n_obstacles],
            x_t: vec![0.0; 3 * n],
            body_friction: 0.0,
            body_static_friction: 0.0,
        };
        let v3 = |x: &[f64], i: usize| Vector3::new(x[3 * i], x[3 * i + 1], x[3 * i + 2]);
        // a loss on the obstacles' total forces F_o = Σ_j J_j^T λ_j: its directions move with
        // the frame exactly as the force term of R_x, so dL/dF_o joins z_i below
        let mut g_force = vec![Vector3::zeros(); n_obstacles];
        for (o, g) in &self.force {
            if let Some(t) = g_force.get_mut(*o) {
                *t += g;
            }
        }
        for j in 0..set.len() {
            let rows = set.rows(j);
            let o = rows.start;
            let ob = set.obstacle[j];
            let b = &self.rec.blocks[j];
            if let Some(tri) = &set.tri[j] {
                // body–body contact (super::bodies): no obstacle parameters; the frame
                // depends on x_t of the node and of the triangle's nodes
                if rows.len() == 3 {
                    out.body_friction -= (0..3).map(|a| zeta[o + a] * b.dmu[a]).sum::<f64>();
                    out.body_static_friction -=
                        (0..3).map(|a| zeta[o + a] * b.dmu_s[a]).sum::<f64>();
                }
                let i = set.node[j];
                let nodes = [i, tri.nodes[0], tri.nodes[1], tri.nodes[2]];
                let t0 = &self.rec.tri_end[j];
                let x_end = [self.rec.x_end[j], t0[0], t0[1], t0[2]];
                let zs = nodes.map(|k| v3(z, k));
                let q = set.tri_origin[j];
                let gr = super::bodies::stencil_gradient(
                    tri,
                    &set.origin[j],
                    &q,
                    &x_end,
                    &zs,
                    &self.rec.lambda[rows.clone()],
                    &mu[rows.clone()],
                );
                for (a, &k) in nodes.iter().enumerate() {
                    for d in 0..3 {
                        out.x_t[3 * k + d] += gr[3 * a + d];
                    }
                }
                continue;
            }
            let h = &set.hessian[j];
            let v = self.rec.x_end[j] - set.origin[j];
            let nrm = &set.normal[j];
            let hv = h * v;
            let i = set.node[j];
            let zi = Vector3::new(z[3 * i], z[3 * i + 1], z[3 * i + 2]) + g_force[ob];
            let lam = &self.rec.lambda;
            // normal row: gap and force direction
            let mut gp = -hv * mu[o];
            let mut gt = (hv + nrm) * mu[o];
            let mut dir = zi * lam[o];
            if rows.len() == 3 {
                out.friction[ob] -= (0..3).map(|a| zeta[o + a] * b.dmu[a]).sum::<f64>();
                out.static_friction[ob] -= (0..3).map(|a| zeta[o + a] * b.dmu_s[a]).sum::<f64>();
                let vf = v - set.obstacle_motion[j];
                for k in 0..2 {
                    let g = h.transpose() * (set.dtangent[j][k].transpose() * vf);
                    let m = mu[o + 1 + k];
                    gp -= (g - set.tangent[j][k]) * m;
                    gt += g * m;
                    dir += set.dtangent[j][k].transpose() * zi * lam[o + 1 + k];
                }
            }
            let hdir = h.transpose() * dir;
            gp += hdir;
            gt -= hdir;
            out.offset[ob] += gt;
            for d in 0..3 {
                out.x_t[3 * i + d] += gp[d];
            }
        }
        out
    }
}
