//! Building the strongly coupled problem from an MLS-MPM [`Simulation`] and a [`RigidWorld`],
//! its Newton solve with a sparse Cholesky factorisation (faer), and the end of the step.

use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::cholesky::llt::factor::LltRegularization;
use faer::sparse::linalg::cholesky::{
    factorize_symbolic_cholesky, CholeskySymbolicParams, LltRef, SymbolicCholesky,
    SymmetricOrdering,
};
use faer::sparse::{SparseColMat, Triplet};
use faer::{Conj, MatMut, Par, Side};
use nalgebra::{DMatrix, DVector, Vector3};

use super::problem::{ElasticTerm, StrongContact, StrongProblem};
use crate::contact::grid::SolveStats;
use crate::contact::line_search::exact_line_search;
use crate::contact::ContactError;
use crate::contact::{
    assemble_substep_problem, CoupledStepReport, CouplingError, SolverOptions, SubstepProblem,
    Wrench,
};
use crate::mpm::svd::rotation_svd;
use crate::mpm::Simulation;
use crate::rigid::RigidWorld;

/// Newton's result.
#[derive(Debug, Clone, PartialEq)]
pub struct StrongSolution {
    /// (grid velocities of the active nodes, dynamic rigid DoFs).
    pub x: DVector<f64>,
    /// γ_c per contact (contact frame).
    pub impulses: Vec<Vector3<f64>>,
    pub stats: SolveStats,
}

/// What [`StrongProblem::solve_newton`]'s stopping test measures at x: (‖D∇E‖,
/// ε_a + ε_r·max(‖D·M·x‖, ‖D·∇(elastic + contact)‖)), D = diag(M)^{-1/2} with M the node masses
/// and the diagonal of the rigid mass (SAP's scaled test, as the weak coupling's solve).
fn residual(
    p: &StrongProblem,
    x: &DVector<f64>,
    g: &super::problem::Gradient,
    o: &SolverOptions,
) -> (f64, f64) {
    let n = p.num_nodes();
    let (mut res, mut mom, mut imp) = (0.0, 0.0, 0.0);
    for i in 0..n {
        let m = p.mass[i];
        for a in 0..3 {
            let k = 3 * i + a;
            res += g.total[k] * g.total[k] / m;
            mom += m * x[k] * x[k];
            imp += g.forces[k] * g.forces[k] / m;
        }
    }
    let u = x.rows(3 * n, p.num_rigid());
    let mu = &p.rigid_mass * u;
    for r in 0..p.num_rigid() {
        let m = p.rigid_mass[(r, r)];
        let k = 3 * n + r;
        res += g.total[k] * g.total[k] / m;
        mom += mu[r] * mu[r] / m;
        imp += g.forces[k] * g.forces[k] / m;
    }
    (
        res.sqrt(),
        o.abs_tol + o.rel_tol * mom.sqrt().max(imp.sqrt()),
    )
}

/// Solves H x = rhs in place by a serial sparse Cholesky factorisation of `h` (lower triangle
/// stored). The symbolic analysis (AMD ordering, elimination tree) is computed on the first
/// call and reused: the Hessian's pattern is fixed within a step (the node pairs of the
/// particles' and contacts' stencils, the rigid rows).
fn cholesky_solve(
    h: &SparseColMat<usize, f64>,
    symbolic: &mut Option<SymbolicCholesky<usize>>,
    rhs: &mut [f64],
) -> Result<(), ContactError> {
    let n = rhs.len();
    if symbolic.is_none() {
        let s = factorize_symbolic_cholesky(
            h.symbolic(),
            Side::Lower,
            SymmetricOrdering::Amd,
            CholeskySymbolicParams::default(),
        )
        .map_err(|_| ContactError::DimensionMismatch {
            what: "strong-coupling Hessian (symbolic factorisation failed)",
            got: n,
            expected: n,
        })?;
        *symbolic = Some(s);
    }
    let Some(sym) = symbolic.as_ref() else {
        return Err(ContactError::NotPositiveDefinite { node: 0 });
    };
    let mut values = vec![0.0; sym.len_val()];
    let mut mem = MemBuffer::new(
        sym.factorize_numeric_llt_scratch::<f64>(Par::Seq, Default::default())
            .or(sym.solve_in_place_scratch::<f64>(1, Par::Seq)),
    );
    sym.factorize_numeric_llt(
        &mut values,
        h.as_ref(),
        Side::Lower,
        LltRegularization::default(),
        Par::Seq,
        MemStack::new(&mut mem),
        Default::default(),
    )
    .map_err(|e| match e {
        faer::linalg::solvers::LltError::NonPositivePivot { index } => {
            ContactError::NotPositiveDefinite { node: index / 3 }
        }
    })?;
    LltRef::new(sym, &values).solve_in_place_with_conj(
        Conj::No,
        MatMut::from_column_major_slice_mut(rhs, n, 1),
        Par::Seq,
        MemStack::new(&mut mem),
    );
    Ok(())
}

impl StrongProblem {
    /// Newton's method on E (module doc of [`super`]): the step Δx = −∇²E⁻¹∇E from a sparse
    /// Cholesky factorisation of the full Hessian (faer, AMD ordering, serial; the symbolic
    /// analysis once per step, the numeric factorisation every iteration), then the exact
    /// line search of the weak coupling's solver on φ(α) = E(x + αΔx); stop when
    /// ‖D∇E‖ < ε_a + ε_r·max(‖DMx‖, ‖D∇(E_el + Σℓ_c)‖). Starts from (v*, ũ).
    ///
    /// Held components (`held`, the sticky and slip walls) stay at zero: their gradient
    /// entries are dropped and their Hessian rows and columns replaced by the node mass on
    /// the diagonal, so Δx is zero there and Newton runs on E restricted to the free unknowns.
    pub fn solve_newton(&self, options: &SolverOptions) -> Result<StrongSolution, ContactError> {
        let ndof = self.num_dofs();
        let quadratic = self.quadratic_hessian();
        let held = |k: usize| self.held.get(k).copied().unwrap_or(false);
        let mut x = self.initial_guess();
        for k in (0..ndof).filter(|&k| held(k)) {
            x[k] = 0.0;
        }
        let mut symbolic = None;
        let mut stats = SolveStats {
            objective: vec![self.objective(&x)],
            ..Default::default()
        };
        loop {
            let mut g = self.gradient(&x);
            for k in (0..ndof).filter(|&k| held(k)) {
                g.total[k] = 0.0;
            }
            let (res, tol) = residual(self, &x, &g, options);
            stats.residual = res;
            stats.tolerance = tol;
            if res < tol || ndof == 0 {
                return Ok(StrongSolution {
                    x,
                    impulses: g.impulses,
                    stats,
                });
            }
            if stats.iterations >= options.max_iterations {
                return Err(ContactError::NotConverged {
                    solver: "strong-coupling Newton",
                    iterations: stats.iterations,
                    residual: res,
                    tolerance: tol,
                });
            }
            let mut triplets = self.hessian_lower(&x, &quadratic);
            if self.held.iter().any(|&b| b) {
                triplets.retain(|t| !held(t.row) && !held(t.col));
                triplets.extend(
                    (0..ndof)
                        .filter(|&k| held(k))
                        .map(|k| Triplet::new(k, k, self.mass[k / 3])),
                );
            }
            let h = SparseColMat::<usize, f64>::try_new_from_triplets(ndof, ndof, &triplets)
                .map_err(|_| ContactError::DimensionMismatch {
                    what: "strong-coupling Hessian entries",
                    got: triplets.len(),
                    expected: ndof,
                })?;
            let mut dx: Vec<f64> = g.total.iter().map(|v| -v).collect();
            cholesky_solve(&h, &mut symbolic, &mut dx)?;
            let dx = DVector::from_vec(dx);
            // Exact line search in difference form (as the weak coupling's solver).
            let dphi0 = g.total.dot(&dx);
            let curvature = self.quadratic_curvature(&dx);
            let rates: Vec<Vector3<f64>> = self
                .contacts
                .iter()
                .map(|c| self.contact_velocity(c, &dx) + c.bias)
                .collect();
            let vc0: Vec<Vector3<f64>> = self
                .contacts
                .iter()
                .map(|c| self.contact_velocity(c, &x))
                .collect();
            let dphi = |alpha: f64| {
                let mut d = dphi0 + alpha * curvature;
                let mut dd = curvature;
                for ((c, r), (v0, g0)) in self
                    .contacts
                    .iter()
                    .zip(&rates)
                    .zip(vc0.iter().zip(&g.impulses))
                {
                    let vc = v0 + r * alpha;
                    d -= (c.model.impulse(&vc) - g0).dot(r);
                    dd += r.dot(&(c.model.hessian(&vc) * r));
                }
                (d, dd)
            };
            let ls = exact_line_search(
                dphi,
                dphi0,
                options.line_search_rel_tol,
                options.line_search_max_iterations,
            );
            if ls.alpha == 0.0 {
                // No descent left at round-off: accept the current point if it is close.
                return Err(ContactError::NotConverged {
                    solver: "strong-coupling Newton (no descent)",
                    iterations: stats.iterations,
                    residual: res,
                    tolerance: tol,
                });
            }
            x += dx * ls.alpha;
            stats.iterations += 1;
            stats.objective.push(self.objective(&x));
        }
    }
}

/// Builds the problem of one strongly coupled step of length `dt` after
/// `sim.substep_free_motion(dt)` (which supplies the node masses and the particle stencils;
/// its v*, which holds the explicit stress, is not used). `damping` scales v* (grid damping
/// e^{−cΔt}; 1 = none). Returns the problem and the grid index of each active node.
pub fn build_problem(
    world: &RigidWorld,
    sim: &Simulation,
    dt: f64,
    damping: f64,
) -> Result<(StrongProblem, Vec<usize>), CouplingError> {
    let SubstepProblem {
        problem: grid_problem,
        active,
    } = assemble_substep_problem(world, sim, dt)?;
    let grid = sim.grid();
    let h = grid.spec().h;
    let n = active.len();
    let mut compact = vec![usize::MAX; grid.mass().len()];
    for (c, &k) in active.iter().enumerate() {
        compact[k] = c;
    }
    let mass: Vec<f64> = active.iter().map(|&k| grid.mass()[k]).collect();
    let held: Vec<bool> = active
        .iter()
        .flat_map(|&k| grid.held_components(k))
        .collect();
    let coords: Vec<[i64; 3]> = active
        .iter()
        .map(|&k| grid.coords(k).map(|c| c as i64))
        .collect();
    // APIC momentum without stress, and the elastic terms.
    let particles = sim.particles();
    let materials = sim.materials();
    let mut momentum = vec![Vector3::zeros(); n];
    let mut elastic = Vec::with_capacity(particles.len());
    for p in 0..particles.len() {
        let (xp, vp, cp, fp) = (
            particles.x[p],
            particles.v[p],
            particles.c[p],
            particles.f[p],
        );
        let mp = particles.mass()[p];
        let material = &materials[particles.material()[p] as usize];
        let (mu, lambda) = material.lame();
        let (u, _, vt) = rotation_svd(&fp);
        let mut nodes = Vec::with_capacity(27);
        for (k, w) in sim.particle_stencil(p) {
            if w == 0.0 {
                continue;
            }
            let c = compact[k];
            if c == usize::MAX {
                return Err(CouplingError::BadStencil {
                    particle: p,
                    node: k,
                });
            }
            let dx = grid.node_position(k) - xp;
            momentum[c] += w * mp * (vp + cp * dx);
            nodes.push((c, fp.tr_mul(&(dx * (4.0 * w / (h * h))))));
        }
        elastic.push(ElasticTerm {
            nodes,
            f0: fp,
            rotation: u * vt,
            volume: particles.volume()[p],
            mu,
            lambda,
        });
    }
    let gravity = sim.params().gravity;
    let v_star: Vec<Vector3<f64>> = momentum
        .iter()
        .zip(&mass)
        .map(|(mv, m)| (mv / *m + dt * gravity) * damping)
        .collect();
    // Rigid DoFs: the dynamic ones of every body, with their constrained free motion.
    let targets = world.free_motion_targets(dt, &[]);
    let mut index = vec![[usize::MAX; 6]; targets.len()];
    let mut nr = 0;
    for (b, t) in targets.iter().enumerate() {
        for i in 0..6 {
            if t.dynamic[i] {
                index[b][i] = nr;
                nr += 1;
            }
        }
    }
    let mut rigid_mass = DMatrix::zeros(nr, nr);
    let mut rigid_target = DVector::zeros(nr);
    for (b, t) in targets.iter().enumerate() {
        for i in 0..6 {
            if index[b][i] == usize::MAX {
                continue;
            }
            rigid_target[index[b][i]] = t.target[i];
            for j in 0..6 {
                if index[b][j] != usize::MAX {
                    rigid_mass[(index[b][i], index[b][j])] = t.mass[(i, j)];
                }
            }
        }
    }
    let contacts = grid_problem
        .contacts
        .into_iter()
        .map(|c| {
            let mut rigid = Vec::new();
            let mut bias = Vector3::zeros();
            if let Some(b) = c.body {
                // Columns of R_cᵀ[I, −[r]×]: the body point's velocity per unit DoF velocity.
                for i in 0..6 {
                    let mut e = Vector3::zeros();
                    if i < 3 {
                        e[i] = 1.0;
                    } else {
                        let mut axis = Vector3::zeros();
                        axis[i - 3] = 1.0;
                        e = axis.cross(&c.lever);
                    }
                    let col = c.frame.tr_mul(&e);
                    if index[b][i] != usize::MAX {
                        rigid.push((index[b][i], col));
                    } else {
                        bias += col * targets[b].target[i];
                    }
                }
            } else {
                bias = c.bias;
            }
            StrongContact {
                nodes: c.nodes,
                frame: c.frame,
                rigid,
                bias,
                model: c.model,
                body: c.body,
                lever: c.lever,
            }
        })
        .collect();
    Ok((
        StrongProblem {
            dt,
            mass,
            v_star,
            coords,
            elastic,
            rigid_mass,
            rigid_target,
            contacts,
            held,
        },
        active,
    ))
}

/// One strongly coupled step of length `dt` (module doc of [`super`]): P2G, the one convex
/// problem over grid velocities and dynamic rigid DoFs solved by Newton, G2P with the F
/// update and the return mapping, then the rigid step with the converged MPM impulses
/// (which reproduces the solved rigid velocities; rigid–rigid and rigid–obstacle contact are
/// resolved there). `damping` as in [`build_problem`]. The report has one "substep".
pub fn strong_step(
    world: &mut RigidWorld,
    sim: &mut Simulation,
    dt: f64,
    options: &SolverOptions,
    damping: f64,
) -> Result<CoupledStepReport, CouplingError> {
    if !(dt > 0.0 && dt.is_finite()) {
        return Err(CouplingError::InvalidStep { dt, substeps: 1 });
    }
    let grid_err = |source| CouplingError::Grid { substep: 0, source };
    sim.substep_free_motion(dt).map_err(grid_err)?;
    let (problem, active) = build_problem(world, sim, dt, damping)?;
    let solution = problem
        .solve_newton(options)
        .map_err(|source| CouplingError::Contact { substep: 0, source })?;
    let nb = world.bodies.len();
    let mut impulses = vec![Wrench::default(); nb];
    for (c, g) in problem.contacts.iter().zip(&solution.impulses) {
        if let Some(b) = c.body.filter(|&b| b < nb) {
            let f = -(c.frame * g);
            impulses[b] += Wrench {
                force: f,
                torque: c.lever.cross(&f),
            };
        }
    }
    let mut v = vec![Vector3::zeros(); sim.grid().mass().len()];
    for (c, &k) in active.iter().enumerate() {
        v[k] = solution.x.fixed_rows::<3>(3 * c).into_owned();
    }
    sim.grid().apply_walls(&mut v);
    sim.finish_substep_with(&v).map_err(grid_err)?;
    let rigid = world.step(dt, &impulses)?;
    Ok(CoupledStepReport {
        body_impulses: impulses,
        contacts_per_substep: vec![problem.contacts.len()],
        iterations_per_substep: vec![solution.stats.iterations],
        rigid,
    })
}
