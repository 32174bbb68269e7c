//! `solver.diffpd_linear = "schwarz"` (issue 38 item 7): DiffPD with every $A^{-1}$
//! application done by conjugate gradients under the two-level additive Schwarz
//! preconditioner (`diffphd::linalg::schwarz`) solves the same steps and adjoints as the
//! prefactorized Cholesky solve, so state and gradient agree to the solve tolerance; the
//! gradient passes a finite-difference check; a bad value is refused naming the key.

use crate::common;

use diffphd::optimize::problem::Problem;
use diffphd::solver::Simulator;

const SCHWARZ: &str = "solver.diffpd_linear=\"schwarz\"";

fn fixture() -> std::path::PathBuf {
    common::repo().join("tests/fixtures/schwarz_beam.toml")
}

fn load(sets: &[&str]) -> diffphd::scene::LoadedScene {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    diffphd::scene::load(&fixture(), &sets).expect("fixture loads")
}

/// Final state of a forward rollout (every step converged) and the PCG statistics summed
/// over its steps (`None` with the Cholesky solve).
fn rollout(sets: &[&str]) -> (Vec<f64>, Option<diffphd::solver::stats::PcgStats>) {
    let ls = load(sets);
    let model = diffphd::solver::Model::from_scene(&ls).unwrap();
    let mut sim = Simulator::new(&model, &ls.scene.solver).unwrap();
    let (mut x, mut v) = (model.x0.clone(), model.v0.clone());
    let mut pcg: Option<diffphd::solver::stats::PcgStats> = None;
    for f in 1..=model.frames {
        let (xn, st) = sim.step(f, &x, &v).unwrap();
        assert!(st.converged, "{sets:?} frame {f}");
        if let Some(p) = st.schwarz {
            pcg.get_or_insert_with(Default::default).merge(&p);
        }
        v = xn.iter().zip(&x).map(|(a, b)| (a - b) / model.h).collect();
        x = xn;
    }
    (x, pcg)
}

fn rel_diff(a: &[f64], b: &[f64]) -> f64 {
    let d: f64 = a.iter().zip(b).map(|(p, q)| (p - q).powi(2)).sum::<f64>();
    let n: f64 = b.iter().map(|q| q * q).sum::<f64>();
    (d / n).sqrt()
}

/// Schwarz-PCG DiffPD equals Cholesky DiffPD: final state to 1e-9 relative (the L-BFGS stop
/// is 1e-11 of the inertial force), loss and gradient to 1e-7; every PCG solve converged
/// (none at the cap) in far fewer iterations than unknowns; and the Schwarz gradient of E
/// matches central differences over 4 decades of step with a non-zero reference.
#[test]
fn diffpd_schwarz_equals_cholesky_and_passes_gradcheck() {
    let (xc, none) = rollout(&[]);
    let (xs, pcg) = rollout(&[SCHWARZ]);
    assert!(none.is_none());
    let pcg = pcg.expect("schwarz statistics");
    let dx = rel_diff(&xs, &xc);
    let x0 = load(&[]);
    let model = diffphd::solver::Model::from_scene(&x0).unwrap();
    let moved = rel_diff(&xc, &model.x0);
    eprintln!("schwarz: state rel.diff {dx:.2e} (displacement {moved:.2e}); pcg {pcg:?}");
    assert!(moved > 1e-3, "the beam did not move: {moved:e}");
    assert!(dx <= 1e-9, "state differs: {dx:e}");
    assert!(pcg.solves > 0 && pcg.not_converged == 0, "{pcg:?}");
    assert!(pcg.max_iterations < 100, "{pcg:?}");

    let eval = |sets: &[&str]| {
        let problem = Problem::new(load(sets)).expect("problem");
        let ev = problem.evaluate(&problem.theta0(), true).expect("evaluate");
        assert!(ev.nonconverged_forward_frames.is_empty(), "{sets:?}");
        assert!(ev.nonconverged_backward_frames.is_empty(), "{sets:?}");
        ev
    };
    let (ec, es) = (eval(&[]), eval(&[SCHWARZ]));
    let (gc, gs) = (ec.gradient[0], es.gradient[0]);
    eprintln!(
        "schwarz: loss {:.9e} / {:.9e}, dL/dlogE {gs:.9e} / {gc:.9e}",
        es.loss, ec.loss
    );
    assert!(gc.abs() > 1e-8, "zero reference gradient {gc:e}");
    assert!((es.loss - ec.loss).abs() <= 1e-7 * ec.loss.abs());
    assert!(
        (gs - gc).abs() <= 1e-7 * gc.abs(),
        "gradient {gs:e} vs {gc:e}"
    );

    let problem = Problem::new(load(&[SCHWARZ])).expect("problem");
    let opts = diffphd::optimize::gradcheck::Options {
        only: vec![],
        eps: None,
        rtol: 1e-5,
        atol: 0.0,
        decades: common::MIN_DECADES,
        expect_zero: vec![],
    };
    let rep = diffphd::optimize::gradcheck::check(&problem, &opts).expect("check runs");
    eprint!("{}", diffphd::optimize::gradcheck::table(&rep));
    common::assert_all_pass("diffpd schwarz", &rep);
}

/// A value that is not a method of `diffpd_linear` is refused with the key named: by the
/// scene loader, and by the CLI with exit 2 and a one-line message.
#[test]
fn bad_diffpd_linear_value_names_the_key() {
    let Err(err) = diffphd::scene::load(&fixture(), &["solver.diffpd_linear=\"lu\"".to_string()])
    else {
        panic!("solver.diffpd_linear = \"lu\" was accepted");
    };
    let err = err.to_string();
    assert!(err.contains("diffpd_linear"), "{err}");
    let text = std::fs::read_to_string(fixture()).unwrap();
    let out = common::run_cli("simulate", &text, &[], &["--set", "solver.diffpd_linear=7"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("diffpd_linear"), "{}", out.stderr);
    assert_eq!(out.stderr.trim().lines().count(), 1, "{}", out.stderr);
}
