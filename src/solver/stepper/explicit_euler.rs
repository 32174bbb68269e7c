//! A fourth method, for the tests only: explicit Euler under the external forces,
//! $x_{t+1}=x_t+hv_t+h^2M^{-1}f_{ext}(t)$ with the Dirichlet values of $t+1$ imposed — a
//! [`Stepper`] in one file whose only other line is its `mod` in `stepper/mod.rs`. It
//! proves that the rollout runs any stepper: the time loop's velocity
//! $v_{t+1}=(x_{t+1}-x_t)/h$ and the frame times are the loop's, the step is the stepper's.

use super::Stepper;
use crate::solver::adjoint::backward::StepLinearization;
use crate::solver::context::StepContext;
use crate::solver::records::config::BackwardConfig;
use crate::solver::records::error::SolverError;
use crate::solver::records::stats::{AdjointStats, StepStats};

/// Explicit Euler on $f_{ext}$ (no internal forces).
pub struct ExplicitEuler;

impl Stepper for ExplicitEuler {
    fn step(
        &mut self,
        sim: &mut StepContext<'_>,
        frame: usize,
        x_t: &[f64],
        v_t: &[f64],
    ) -> Result<(Vec<f64>, StepStats), SolverError> {
        let h = sim.model.h;
        let f_ext = sim
            .model
            .external_force((frame - 1) as f64 * h, &sim.derived.mass);
        let mut x = sim.inertial_target(x_t, v_t, &f_ext);
        sim.impose_prescribed(&mut x, &sim.model.dirichlet_values(frame as f64 * h));
        let stats = StepStats {
            converged: true,
            ..Default::default()
        };
        Ok((x, stats))
    }

    fn adjoint(
        &self,
        _: &StepContext<'_>,
        _: &StepLinearization,
        _: (&[f64], &[f64]),
        _: &BackwardConfig,
        _: usize,
    ) -> Result<(Vec<f64>, AdjointStats), SolverError> {
        Err(SolverError::Unsupported(
            "the explicit-Euler test stepper has no adjoint".into(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::ExplicitEuler;
    use crate::mesh::generate::box_hex;
    use crate::model::{ModelBuilder, SolverSettings};
    use crate::solver::rollout::{self, Flow};
    use crate::solver::Simulator;

    /// Three frames of a deformed, clamped bar through the rollout with the explicit-Euler
    /// stepper: every free DoF follows $x_t=x_0+t\,hv_0+\tfrac{t(t+1)}2h^2g$ (the elastic
    /// forces of the deformation are not the stepper's, so the PD method would differ),
    /// clamped DoFs stay at $x_0$, the loop's velocity is $v_0+t\,hg$, and the stepper
    /// stepped once a frame.
    #[test]
    fn a_test_stepper_runs_through_the_rollout() {
        let mesh = box_hex([3, 1, 1], 0.1, [0.0; 3]);
        // a deformation of the free nodes (their elastic forces are not the stepper's)
        let u: Vec<[f64; 3]> = mesh
            .nodes
            .iter()
            .map(|p| [0.0, 0.0, 0.2 * p[0] * p[0]])
            .collect();
        let model = ModelBuilder::new(mesh)
            .fix_where(|p| p[0] == 0.0)
            .displaced(u)
            .velocity([0.5, 0.0, 0.25])
            .steps(0.01, 3)
            .build()
            .unwrap();
        let mut sim = Simulator::new(&model, &SolverSettings::default()).unwrap();
        sim.stepper = Box::new(ExplicitEuler);
        let (h, g) = (model.h, model.gravity);
        let fixed = &model.dirichlet[0].nodes;
        assert!(!fixed.is_empty() && fixed.len() < model.num_nodes());
        let mut seen = vec![];
        let start = (model.x0.clone(), model.v0.clone());
        let end = rollout::run::<std::convert::Infallible>(&mut sim, 0, 3, start, |e| {
            let t = e.frame as f64;
            assert_eq!(e.time, t * h);
            assert_eq!(e.stats.iterations, 0, "the PD method ran, not the stepper");
            for j in 0..e.x.len() {
                let (x0, v0, gj) = (model.x0[j], model.v0[j], g[j % 3]);
                let (want_x, want_v) = if fixed.contains(&(j / 3)) {
                    (x0, 0.0)
                } else {
                    (
                        x0 + t * h * v0 + 0.5 * t * (t + 1.0) * h * h * gj,
                        v0 + t * h * gj,
                    )
                };
                assert!((e.x[j] - want_x).abs() < 1e-14, "frame {t} dof {j}");
                assert!((e.v[j] - want_v).abs() < 1e-11, "frame {t} dof {j}");
            }
            seen.push(e.frame);
            Ok(Flow::Continue)
        })
        .unwrap();
        assert_eq!((end.frame, seen), (3, vec![1, 2, 3]));
        // the same frames by the PD method differ: the deformation's forces act there
        let mut pd = Simulator::new(&model, &SolverSettings::default()).unwrap();
        let (x1, _) = pd.step(1, &model.x0, &model.v0).unwrap();
        let free = (0..model.num_nodes()).find(|i| !fixed.contains(i)).unwrap();
        let j = 3 * free + 2;
        let euler = model.x0[j] + h * model.v0[j] + h * h * g[2];
        assert!((x1[j] - euler).abs() > 1e-9, "{} vs {euler}", x1[j]);
    }
}
