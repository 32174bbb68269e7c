//! The convex contact problem over a dense SPD mass matrix, solved by full Newton with the
//! exact Hessian and a dense Cholesky factorisation (the SAP iteration of Castro et al. 2022
//! without its supernodal solver):
//!
//!   v = argmin ½ (v − v*)ᵀ M (v − v*) + Σ_c ℓ_c(J_c v − b_c),
//!   ∇ = M(v − v*) − Σ_c J_cᵀ γ_c,   H = M + Σ_c J_cᵀ G_c J_c,   Δv = −H⁻¹∇,
//!
//! with the same exact line search and the same scaled stopping test as the grid solver
//! (D = diag(M)^{-1/2}). Two uses: the reference solution of a [`GridProblem`] (via
//! [`GridProblem::to_dense`]) and the rigid–rigid / rigid–ground contact solve over the rigid
//! DoFs (a small dense Newton, as Drake's SAP does).

use nalgebra::{DMatrix, DVector, Matrix3xX, Vector3};

use super::grid::{GridProblem, SolveStats, SolverOptions};
use super::line_search::exact_line_search;
use super::model::LaggedContact;
use super::ContactError;

/// One contact of a dense problem: v_c = J v − b (3 rows, contact frame \[t₁, t₂, n\]).
#[derive(Debug, Clone, PartialEq)]
pub struct DenseContact {
    /// The 3×n contact Jacobian.
    pub jacobian: Matrix3xX<f64>,
    /// The bias b (contact frame).
    pub bias: Vector3<f64>,
    /// The registered lagged contact model.
    pub model: LaggedContact,
}

/// The dense convex problem.
#[derive(Debug, Clone, PartialEq)]
pub struct DenseProblem {
    /// SPD mass matrix (n×n).
    pub mass: DMatrix<f64>,
    /// Free-motion velocities v*.
    pub v_star: DVector<f64>,
    /// The contacts.
    pub contacts: Vec<DenseContact>,
}

/// Solution of a dense problem.
#[derive(Debug, Clone, PartialEq)]
pub struct DenseSolution {
    /// Post-contact velocities.
    pub v: DVector<f64>,
    /// γ_c per contact, contact frame.
    pub impulses: Vec<Vector3<f64>>,
    /// Convergence record.
    pub stats: SolveStats,
}

impl GridProblem {
    /// The same problem with M and J assembled densely (DoF 3k+i is node k, axis i).
    pub fn to_dense(&self) -> Result<DenseProblem, ContactError> {
        self.validate()?;
        let n = 3 * self.num_nodes();
        let mut mass = DMatrix::zeros(n, n);
        let mut v_star = DVector::zeros(n);
        for k in 0..self.num_nodes() {
            for i in 0..3 {
                mass[(3 * k + i, 3 * k + i)] = self.mass[k][i];
                v_star[3 * k + i] = self.v_star[k][i];
            }
        }
        let contacts = self
            .contacts
            .iter()
            .map(|c| {
                let mut jacobian = Matrix3xX::zeros(n);
                let rt = c.frame.transpose();
                for &(k, w) in &c.nodes {
                    let mut block = jacobian.fixed_view_mut::<3, 3>(0, 3 * k);
                    block += rt * w;
                }
                DenseContact {
                    jacobian,
                    bias: c.bias,
                    model: c.model,
                }
            })
            .collect();
        Ok(DenseProblem {
            mass,
            v_star,
            contacts,
        })
    }
}

impl DenseProblem {
    /// Number of DoFs.
    pub fn num_dofs(&self) -> usize {
        self.v_star.len()
    }

    /// Checks shapes and the mass diagonal; errors name the offending array or DoF.
    pub fn validate(&self) -> Result<(), ContactError> {
        let n = self.num_dofs();
        if self.mass.nrows() != n || self.mass.ncols() != n {
            return Err(ContactError::DimensionMismatch {
                what: "mass matrix",
                got: self.mass.nrows(),
                expected: n,
            });
        }
        for i in 0..n {
            let m = self.mass[(i, i)];
            if !(m > 0.0 && m.is_finite()) {
                return Err(ContactError::NonPositiveMass { node: i, mass: m });
            }
        }
        for c in &self.contacts {
            if c.jacobian.ncols() != n {
                return Err(ContactError::DimensionMismatch {
                    what: "contact Jacobian columns",
                    got: c.jacobian.ncols(),
                    expected: n,
                });
            }
        }
        Ok(())
    }

    /// ℓ_p(v).
    pub fn objective(&self, v: &DVector<f64>) -> f64 {
        let dv = v - &self.v_star;
        0.5 * dv.dot(&(&self.mass * &dv))
            + self
                .contacts
                .iter()
                .map(|c| c.model.cost(&(&c.jacobian * v - c.bias)))
                .sum::<f64>()
    }

    /// Full Newton from `v0` (v* when `None`); see the module doc.
    pub fn solve_newton(
        &self,
        v0: Option<&DVector<f64>>,
        opts: &SolverOptions,
    ) -> Result<DenseSolution, ContactError> {
        self.validate()?;
        let n = self.num_dofs();
        let mut v = match v0 {
            Some(v0) if v0.len() != n => {
                return Err(ContactError::DimensionMismatch {
                    what: "initial guess",
                    got: v0.len(),
                    expected: n,
                })
            }
            Some(v0) => v0.clone(),
            None => self.v_star.clone(),
        };
        let dscale = DVector::from_fn(n, |i, _| 1.0 / self.mass[(i, i)].sqrt());
        let mut stats = SolveStats {
            objective: vec![self.objective(&v)],
            ..Default::default()
        };
        loop {
            let vc: Vec<Vector3<f64>> = self
                .contacts
                .iter()
                .map(|c| &c.jacobian * &v - c.bias)
                .collect();
            let gamma: Vec<Vector3<f64>> = self
                .contacts
                .iter()
                .zip(&vc)
                .map(|(c, x)| c.model.impulse(x))
                .collect();
            let mut jt_gamma = DVector::zeros(n);
            for (c, g) in self.contacts.iter().zip(&gamma) {
                jt_gamma += c.jacobian.tr_mul(g);
            }
            let grad = &self.mass * (&v - &self.v_star) - &jt_gamma;
            let residual = grad.component_mul(&dscale).norm();
            let p = (&self.mass * &v).component_mul(&dscale).norm();
            let j = jt_gamma.component_mul(&dscale).norm();
            let tolerance = opts.abs_tol + opts.rel_tol * p.max(j);
            stats.residual = residual;
            stats.tolerance = tolerance;
            if residual < tolerance {
                return Ok(DenseSolution {
                    v,
                    impulses: gamma,
                    stats,
                });
            }
            if stats.iterations >= opts.max_iterations {
                return Err(ContactError::NotConverged {
                    solver: "dense Newton",
                    iterations: stats.iterations,
                    residual,
                    tolerance,
                });
            }
            let mut h = self.mass.clone();
            for (c, x) in self.contacts.iter().zip(&vc) {
                let gj = c.model.hessian(x) * &c.jacobian;
                h += c.jacobian.tr_mul(&gj);
            }
            let chol = h
                .cholesky()
                .ok_or(ContactError::NotPositiveDefinite { node: 0 })?;
            let dv = -chol.solve(&grad);
            let alpha = self.line_search(&vc, &gamma, &dv, grad.dot(&dv), opts);
            if alpha == 0.0 {
                return Err(ContactError::NotConverged {
                    solver: "dense Newton (stalled)",
                    iterations: stats.iterations,
                    residual,
                    tolerance,
                });
            }
            v += dv * alpha;
            stats.iterations += 1;
            stats.objective.push(self.objective(&v));
        }
    }

    /// The exact line search in the difference form of [`GridProblem`]'s (round-off safe).
    fn line_search(
        &self,
        vc: &[Vector3<f64>],
        gamma0: &[Vector3<f64>],
        dv: &DVector<f64>,
        dphi0: f64,
        opts: &SolverOptions,
    ) -> f64 {
        let a = (&self.mass * dv).dot(dv);
        let dvc: Vec<Vector3<f64>> = self.contacts.iter().map(|c| &c.jacobian * dv).collect();
        let models: Vec<&LaggedContact> = self.contacts.iter().map(|c| &c.model).collect();
        let dphi = |alpha: f64| {
            let (mut d, mut dd) = (dphi0 + alpha * a, a);
            for (((m, x0), dx), g0) in models.iter().zip(vc).zip(&dvc).zip(gamma0) {
                let x = x0 + dx * alpha;
                d -= (m.impulse(&x) - g0).dot(dx);
                dd += dx.dot(&(m.hessian(&x) * dx));
            }
            (d, dd)
        };
        exact_line_search(
            dphi,
            dphi0,
            opts.line_search_rel_tol,
            opts.line_search_max_iterations,
        )
        .alpha
    }
}
