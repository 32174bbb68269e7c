//! Cancellation inside the solver's iterations (issue 34 item 5, `diffphd::cancel`): a token
//! that lets k polls pass trips at the (k+1)-th, and the error names the loop and iteration
//! where that happened — inside a PD, Newton or DiffPD step, inside an NCP contact solve,
//! inside the backward's Krylov/fixed-point iterations and between MPM substeps — not only
//! between frames. An untripped token changes no bit, and a simulator whose step was
//! cancelled steps again to the same numbers as a fresh one.

use crate::common::repo;
use diffphd::cancel::{Cancel, Stage};
use diffphd::solver::{Simulator, SolverError};

fn scene(name: &str, sets: &[&str]) -> diffphd::scene::LoadedScene {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    diffphd::scene::load(&repo().join("tests/fixtures").join(name), &sets).expect("scene")
}

fn beam(method: &str) -> diffphd::scene::LoadedScene {
    scene(
        "cancel_beam.toml",
        &[&format!("solver.method=\"{method}\"")],
    )
}

/// One step of `ls`'s model from its initial state with `cancel` on the simulator.
fn step(ls: &diffphd::scene::LoadedScene, cancel: Cancel) -> Result<Vec<f64>, SolverError> {
    let model = diffphd::session::build_model(ls).expect("model");
    let mut sim = Simulator::new(&model, &ls.scene.solver).expect("simulator");
    sim.cancel = cancel;
    sim.step(1, &model.x0, &model.v0).map(|(x, _)| x)
}

/// The (stage, iteration) of the error of a step cancelled after `k` polls.
fn cancelled_at(ls: &diffphd::scene::LoadedScene, k: usize) -> (Stage, usize) {
    match step(ls, Cancel::after_polls(k)) {
        Err(SolverError::Cancelled {
            frame: 1,
            stage,
            iteration,
        }) => (stage, iteration),
        other => panic!("expected a cancelled frame 1 after {k} polls, got {other:?}"),
    }
}

/// PD, Newton and DiffPD: the step ends at the poll of iteration k of its own loop, with
/// exit code 130; the same token untripped gives the uncancelled step bit for bit.
#[test]
fn each_method_is_cancelled_inside_its_step() {
    for (method, stage) in [
        ("diffphd", Stage::Pd),
        ("newton", Stage::Newton),
        ("diffpd", Stage::DiffPd),
    ] {
        let ls = beam(method);
        let counting = Cancel::new();
        let x = step(&ls, counting.clone()).expect("step");
        let polls = counting.polls();
        assert!(polls >= 3, "{method}: only {polls} iterations");
        assert_eq!(x, step(&ls, Cancel::never()).expect("step"), "{method}");
        assert_eq!(cancelled_at(&ls, 1), (stage, 1), "{method}");
        assert_eq!(cancelled_at(&ls, 2), (stage, 2), "{method}");
        let e = step(&ls, Cancel::after_polls(polls / 2)).expect_err("cancelled");
        assert_eq!(e.exit_code(), 130);
        assert!(e.is_cancelled());
        assert!(e.to_string().starts_with("frame 1: cancelled at"), "{e}");
    }
}

/// A cancelled step leaves the simulator usable: stepping it again with a fresh token gives
/// the numbers of a simulator that was never cancelled.
#[test]
fn a_cancelled_simulator_steps_again_to_the_same_numbers() {
    let ls = beam("diffphd");
    let model = diffphd::session::build_model(&ls).expect("model");
    let mut sim = Simulator::new(&model, &ls.scene.solver).expect("simulator");
    sim.cancel = Cancel::after_polls(3);
    assert!(sim.step(1, &model.x0, &model.v0).is_err());
    sim.cancel = Cancel::never();
    let again = sim.step(1, &model.x0, &model.v0).expect("step").0;
    assert_eq!(again, step(&ls, Cancel::never()).expect("step"));
}

/// NCP contact (a block sliding on a frictional plane): among the polls of one step, some
/// fall inside the contact solve's Newton iterations (between two PD iterations), and
/// tripping there ends the step as a contact cancellation.
#[test]
fn the_contact_solve_is_cancelled_inside_its_newton_iterations() {
    let ls = scene("params/sliding_block.toml", &["simulation.frames=1"]);
    let counting = Cancel::new();
    step(&ls, counting.clone()).expect("step");
    let polls = counting.polls();
    let contact = (0..polls.min(200))
        .map(|k| cancelled_at(&ls, k))
        .find(|(stage, _)| *stage == Stage::Contact);
    assert!(
        contact.is_some(),
        "no poll of the first {} fell in a contact solve",
        polls.min(200)
    );
}

/// The backward: a token installed around the reverse sweep (its simulator is built inside
/// and takes it) trips in the adjoint's Krylov iterations, naming the last frame.
#[test]
fn the_backward_is_cancelled_inside_its_krylov_iterations() {
    // about the PD adjoint's Krylov iterations: `backward.adjoint = "auto"` would factor
    let ls = scene(
        "cancel_beam.toml",
        &["solver.method=\"diffphd\"", "backward.adjoint=\"gmres\""],
    );
    let problem = diffphd::session::parameters(ls).expect("problem");
    let theta = problem.theta0();
    let model = problem.model_at(&theta);
    let last = model.frames;
    let tape = diffphd::session::Tape::record(&problem, model, 0, None, last).expect("tape");
    let n3 = tape.model.x0.len();
    let mut dx = vec![0.0; (last + 1) * n3];
    dx[last * n3..]
        .iter_mut()
        .enumerate()
        .for_each(|(i, v)| *v = 1.0 + i as f64 * 1e-3);
    let source = diffphd::solver::cotangent::DenseCotangents {
        start: 0,
        n3,
        x: Some(dx),
        v: None,
    };
    let counting = Cancel::new();
    let g = counting.install(|| tape.gradient(&problem, &theta, &source));
    assert!(g.expect("gradient").dx.iter().any(|v| *v != 0.0));
    let polls = counting.polls();
    assert!(polls >= 4, "{polls} polls");
    let e = Cancel::after_polls(polls / 2)
        .install(|| tape.gradient(&problem, &theta, &source))
        .expect_err("cancelled");
    assert_eq!(e.exit_code(), 130, "{e}");
    match e {
        diffphd::session::SessionError::Solver {
            source:
                SolverError::Cancelled {
                    frame,
                    stage: Stage::Krylov | Stage::Adjoint,
                    ..
                },
            ..
        } => assert!((1..=last).contains(&frame)),
        other => panic!("{other:?}"),
    }
}

/// MPM: the token is polled before every substep; tripping at the second substep of frame 1
/// ends the frame there.
#[test]
fn mpm_is_cancelled_between_substeps() {
    use diffphd::solver::timeloop::TimeStepped;
    let ls = scene("mpm/free_fall.toml", &["mpm.substeps=3"]);
    let (mut system, mut state) = diffphd::mpm::build(&ls, None).expect("build");
    system.cancel = Cancel::after_polls(1);
    match system.advance(1, &mut state) {
        Err(
            e @ diffphd::mpm::MpmStepError::Cancelled {
                substep: 1,
                substeps: 3,
            },
        ) => assert_eq!(e.exit_code(), 130),
        other => panic!("{other:?}"),
    }
}

/// The session: a token tripped during `session::simulate` (under
/// `with_threads_cancellable`) ends it inside frame 1, exit code 130.
#[test]
fn session_simulate_is_cancelled_inside_a_frame() {
    let ls = beam("diffphd");
    let model = diffphd::session::build_model(&ls).expect("model");
    let mut frames = 0;
    let (r, _) = diffphd::session::with_threads_cancellable(1, &Cancel::after_polls(5), || {
        diffphd::session::simulate(&ls, &model, diffphd::gpu::Backend::Cpu, |_| {
            frames += 1;
            true
        })
    })
    .expect("pool");
    let e = r.expect_err("cancelled");
    assert_eq!(e.exit_code(), 130);
    assert_eq!(frames, 1, "only frame 0 was reported");
}
