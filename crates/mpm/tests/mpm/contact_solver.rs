//! The convex grid contact problem: the block-diagonal quasi-Newton solver (seed Algorithm 1)
//! against full Newton with the exact Hessian and a dense Cholesky solve, objective
//! monotonicity, optimality of the returned impulses, and the scaled stopping test.

use diffphd_mpm::contact::model::contact_frame;
use diffphd_mpm::contact::{
    ContactError, GridContact, GridProblem, LaggedContact, LaggedParams, SolverOptions,
};
use nalgebra::Vector3;

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
    fn unit(&mut self) -> Vector3<f64> {
        Vector3::new(
            self.range(-1.0, 1.0),
            self.range(-1.0, 1.0),
            self.range(-1.0, 1.0),
        )
        .normalize()
    }
}

/// Quadratic B-spline stencil (node index, weight) of a particle at `x` (grid units) on an
/// `nx × ny × nz` node grid with spacing 1 (x must keep all 27 nodes inside).
fn bspline_stencil(x: [f64; 3], dims: [usize; 3]) -> Vec<(usize, f64)> {
    let mut w = [[0.0; 3]; 3];
    let mut base = [0usize; 3];
    for a in 0..3 {
        let b = (x[a] - 0.5).floor();
        base[a] = b as usize;
        let f = x[a] - b;
        w[a] = [
            0.5 * (1.5 - f).powi(2),
            0.75 - (f - 1.0).powi(2),
            0.5 * (f - 0.5).powi(2),
        ];
    }
    let mut out = Vec::with_capacity(27);
    for i in 0..3 {
        for j in 0..3 {
            for k in 0..3 {
                let g = [base[0] + i, base[1] + j, base[2] + k];
                if g[0] < dims[0] && g[1] < dims[1] && g[2] < dims[2] {
                    out.push((
                        g[0] + dims[0] * (g[1] + dims[1] * g[2]),
                        w[0][i] * w[1][j] * w[2][k],
                    ));
                }
            }
        }
    }
    out
}

/// A random problem shaped like an MPM substep: a 5×5×4 = 100-node grid of ~1 g nodes
/// (h = 1 cm, ρ = 1000), `contacts` particles at random positions with their 27-node quadratic
/// B-spline stencils, substep 1e-4 s, random friction, penetrations, contact normals and rigid
/// biases. `params` sets stiffness, dissipation and stiction tolerance.
fn random_problem_with(seed: u64, contacts: usize, base: LaggedParams) -> GridProblem {
    let mut rng = Rng(seed);
    let dims = [5, 5, 4];
    let nodes = dims[0] * dims[1] * dims[2];
    let dt = 1.0e-4;
    let mass: Vec<Vector3<f64>> = (0..nodes)
        .map(|_| Vector3::repeat(rng.range(0.2e-3, 2.0e-3)))
        .collect();
    let v_star = (0..nodes)
        .map(|_| rng.unit() * rng.range(0.0, 1.0))
        .collect();
    let contacts = (0..contacts)
        .map(|_| {
            let x = [
                rng.range(1.0, 3.49),
                rng.range(1.0, 3.49),
                rng.range(1.0, 2.49),
            ];
            let stencil = bspline_stencil(x, dims);
            let params = LaggedParams {
                friction: rng.range(0.1, 1.0),
                ..base
            };
            let w: f64 = stencil.iter().map(|&(k, w)| w * w / mass[k].x).sum();
            let model =
                LaggedContact::new(&params, dt, rng.range(-1e-3, 0.0), rng.range(-0.5, 0.1), w)
                    .unwrap();
            GridContact {
                nodes: stencil,
                frame: contact_frame(&rng.unit()),
                bias: rng.unit() * rng.range(0.0, 0.5),
                model,
                body: Some(0),
                lever: rng.unit() * 0.05,
            }
        })
        .collect();
    GridProblem {
        mass,
        v_star,
        contacts,
    }
}

/// The regime of the tight-tolerance tests: k = 1e4 N/m, d = 10 s/m, v_s = 1e-2 m/s, σ = 1e-3.
/// (With Drake's point-contact defaults on gram-scale nodes the contact Hessian is ~10⁴× the
/// node mass and the linear rate needs ≫ 10⁴ iterations to reach ε_r = 1e-10; see docs/mpm.md.)
fn random_problem(seed: u64, nodes: usize, contacts: usize) -> GridProblem {
    assert_eq!(nodes, 100);
    let base = LaggedParams {
        stiffness: 1.0e4,
        dissipation: 10.0,
        stiction_tolerance: 1.0e-2,
        sigma: 1.0e-3,
        ..LaggedParams::default()
    };
    random_problem_with(seed, contacts, base)
}

fn tight() -> SolverOptions {
    SolverOptions {
        rel_tol: 1e-10,
        max_iterations: 20_000,
        ..SolverOptions::default()
    }
}

#[test]
fn quasi_newton_agrees_with_full_newton_at_tight_tolerance() {
    for seed in 0..3 {
        let problem = random_problem(seed, 100, 30);
        let qn = problem.solve_quasi_newton(None, &tight()).unwrap();
        let newton = problem
            .to_dense()
            .unwrap()
            .solve_newton(None, &tight())
            .unwrap();
        let vmax = qn.v.iter().map(|v| v.amax()).fold(0.0, f64::max);
        let mut err = 0.0f64;
        for k in 0..problem.num_nodes() {
            for i in 0..3 {
                err = err.max((qn.v[k][i] - newton.v[3 * k + i]).abs());
            }
        }
        eprintln!(
            "seed {seed}: QN {} its, Newton {} its, max |v_qn − v_newton| = {err:.3e}",
            qn.stats.iterations, newton.stats.iterations
        );
        assert!(
            err <= 1e-8 * vmax.max(1.0),
            "seed {seed}: max |v_qn − v_newton| = {err:.3e}"
        );
        // Impulses agree as well (relative to the largest one).
        let gmax = newton.impulses.iter().map(|g| g.amax()).fold(0.0, f64::max);
        assert!(gmax > 0.0, "the problem must have active contacts");
        let gerr = qn
            .impulses
            .iter()
            .zip(&newton.impulses)
            .map(|(a, b)| (a - b).amax())
            .fold(0.0, f64::max);
        assert!(
            gerr <= 1e-6 * gmax,
            "seed {seed}: impulse mismatch {gerr:.3e} of {gmax:.3e}"
        );
        assert!(
            qn.stats.iterations > newton.stats.iterations,
            "QN is linear, Newton quadratic"
        );
    }
}

#[test]
fn quasi_newton_objective_never_increases() {
    for seed in 10..13 {
        let problem = random_problem(seed, 100, 30);
        let qn = problem.solve_quasi_newton(None, &tight()).unwrap();
        let obj = &qn.stats.objective;
        assert!(obj.len() > 2);
        for w in obj.windows(2) {
            assert!(
                w[1] <= w[0] + 1e-14 * w[0].abs(),
                "objective rose: {} -> {}",
                w[0],
                w[1]
            );
        }
        assert!(
            obj.last().unwrap() < &obj[0],
            "the solve must make progress"
        );
    }
}

#[test]
fn solution_satisfies_momentum_balance_with_the_returned_impulses() {
    // M(v − v*) = Jᵀγ at the optimum, and the rigid side receives exactly −Σ R γ.
    let problem = random_problem(42, 100, 30);
    let sol = problem.solve_quasi_newton(None, &tight()).unwrap();
    let mut momentum = Vector3::zeros();
    for k in 0..problem.num_nodes() {
        momentum += (sol.v[k] - problem.v_star[k]).component_mul(&problem.mass[k]);
    }
    let wrench = sol.body_wrenches(&problem, 1)[0];
    let scale = sol.impulses.iter().map(|g| g.norm()).sum::<f64>();
    // Stencil weights sum to 1, so Σ_k (Jᵀγ)_k = Σ_c R_c γ_c.
    assert!(
        (momentum + wrench.force).norm() <= 1e-8 * scale,
        "{momentum:?} vs {:?}",
        wrench.force
    );
}

#[test]
fn default_tolerance_converges_in_few_iterations_and_is_close() {
    let problem = random_problem(5, 100, 30);
    let loose = problem
        .solve_quasi_newton(None, &SolverOptions::default())
        .unwrap();
    let exact = problem.solve_quasi_newton(None, &tight()).unwrap();
    assert!(loose.stats.iterations < exact.stats.iterations);
    assert!(loose.stats.residual < loose.stats.tolerance);
    // Objective gap is small relative to the total decrease.
    let (f0, fl, fe) = (
        exact.stats.objective[0],
        problem.objective(&loose.v),
        problem.objective(&exact.v),
    );
    assert!(fl >= fe - 1e-14 * fe.abs());
    assert!(
        (fl - fe) <= 0.05 * (f0 - fe),
        "loose solve too far from optimum"
    );
}

#[test]
fn no_contacts_returns_free_motion_and_bad_input_is_named() {
    let mut problem = random_problem(1, 100, 0);
    let sol = problem
        .solve_quasi_newton(None, &SolverOptions::default())
        .unwrap();
    assert_eq!(sol.v, problem.v_star);
    assert_eq!(sol.stats.iterations, 0);
    problem.mass[3].y = 0.0;
    assert!(matches!(
        problem.solve_quasi_newton(None, &SolverOptions::default()),
        Err(ContactError::NonPositiveMass { node: 3, .. })
    ));
    let mut problem = random_problem(2, 100, 3);
    problem.contacts[2].nodes[0].0 = 199;
    assert!(matches!(
        problem.solve_quasi_newton(None, &SolverOptions::default()),
        Err(ContactError::NodeOutOfRange {
            contact: 2,
            node: 199,
            num_nodes: 100
        })
    ));
}

#[test]
fn exact_line_search_finds_the_root_of_a_convex_derivative() {
    use diffphd_mpm::contact::line_search::exact_line_search;
    // φ(α) = (α − 3)² + 0.1·e^α: root of φ′ = 2(α − 3) + 0.1e^α beyond the first bracket [0, 1].
    let dphi = |a: f64| (2.0 * (a - 3.0) + 0.1 * a.exp(), 2.0 + 0.1 * a.exp());
    let r = exact_line_search(dphi, dphi(0.0).0, 1e-14, 100);
    assert!(dphi(r.alpha).0.abs() < 1e-12, "φ′(α) = {}", dphi(r.alpha).0);
    assert!(r.alpha > 2.0 && r.evaluations < 20);
    // Kinked φ′ (φ″ jumps at α = 0.4): Newton overshoots, bisection keeps the bracket.
    let kinked = |a: f64| {
        if a < 0.4 {
            (10.0 * (a - 0.4) - 0.01, 10.0)
        } else {
            (0.1 * (a - 0.4) - 0.01, 0.1)
        }
    };
    let r = exact_line_search(kinked, kinked(0.0).0, 1e-12, 200);
    assert!((r.alpha - 0.5).abs() < 1e-9, "α = {}", r.alpha);
    // No descent: α = 0.
    assert_eq!(exact_line_search(dphi, 1.0, 1e-12, 10).alpha, 0.0);
}
