//! Sources of cotangents for the reverse sweep ([`crate::solver::rollout::backward`]): the partial
//! derivatives $\partial\mathcal L/\partial x_t$ and $\partial\mathcal L/\partial v_t$ of a
//! caller's scalar loss $\mathcal L(x_0, v_0, \dots, x_T, v_T)$ with respect to the states of
//! any frame $t$ (spec §7.1, where $\mathcal L=\sum_t\ell_t(x_t,v_t)$).
//!
//! **Which velocity.** $v_t$ is the state velocity the rollout reports in
//! [`crate::solver::rollout::FrameEvent::v`]: $v_t=(x_t-x_{t-1})/h$ for $t\ge1$ (the implicit-Euler
//! update of the time loop, spec §3) and the model's initial velocity $v_0$ at the start
//! frame. The sweep treats $v_t$ as its own variable and chains it into $x_t$ and $x_{t-1}$
//! itself, so a source gives the *partial* derivatives: $\partial\ell/\partial x_t$ at fixed
//! $v_t$ and $\partial\ell/\partial v_t$ at fixed $x_t$.
//!
//! A source answers for every frame of the rollout, the start frame included; `None` means
//! zero (and adds nothing, so the sweep of the scene's TOML [`Loss`] is bitwise the one it
//! was before sources existed). Implementations: the TOML [`Loss`], the dense per-frame
//! arrays [`DenseCotangents`] (what Python's autograd hands back), and [`SumOf`] two sources.

use crate::contact::ContactRecord;
use crate::solver::adjoint::loss::Loss;
use nalgebra::Vector3;

/// The states of frame `frame` as the reverse sweep sees them.
#[derive(Clone, Copy)]
pub struct CotangentFrame<'a> {
    /// Frame index `t` (absolute: the start frame of a rollout from frame `s` is `s`).
    pub frame: usize,
    /// The rollout's last frame `T`.
    pub last: usize,
    /// Positions $x_t$ and $x_{t-1}$ (at the start frame `x_prev` is `x`).
    pub x: &'a [f64],
    pub x_prev: &'a [f64],
    /// Time step `h`.
    pub h: f64,
}

/// $(\partial\mathcal L/\partial x_t,\ \partial\mathcal L/\partial v_t)$ of one frame, node-major
/// (`3·node + axis`); `None` is zero.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FrameCotangent {
    pub x: Option<Vec<f64>>,
    pub v: Option<Vec<f64>>,
}

/// A source of cotangents $\partial\mathcal L/\partial x_t$, $\partial\mathcal L/\partial v_t$.
pub trait CotangentSource: Sync {
    /// The cotangents of frame `f.frame` (see the module doc for which $v_t$).
    fn frame(&self, f: &CotangentFrame) -> FrameCotangent;

    /// $\partial\mathcal L/\partial F_{t,o}$ of the total contact force of obstacles $o$ over
    /// the step into frame `frame` (N; [`crate::solver::loss::contact_force`]), given that
    /// step's contact record: `(obstacle, cotangent)` pairs, empty for none (the default).
    fn contact_force(&self, _frame: usize, _rec: &ContactRecord) -> Vec<(usize, Vector3<f64>)> {
        Vec::new()
    }
}

/// The scene's `[loss]`: $\partial\ell_t/\partial x_t$ on frames `1..=T`
/// ([`Loss::frame_gradient`]); its velocity terms read $v_T$ only, so $\partial\ell_t/\partial v_t$
/// is given at the last frame and `None` elsewhere; nothing at frame 0 (the loss sums
/// frames `1..=T`).
impl CotangentSource for Loss {
    fn frame(&self, f: &CotangentFrame) -> FrameCotangent {
        if f.frame == 0 {
            return FrameCotangent::default();
        }
        let (dx, dv) = self.frame_gradient(f.frame, f.last, f.x, f.x_prev, f.h);
        FrameCotangent {
            x: Some(dx),
            v: (f.frame == f.last).then_some(dv),
        }
    }

    fn contact_force(&self, frame: usize, rec: &ContactRecord) -> Vec<(usize, Vector3<f64>)> {
        self.force_cotangent(frame, rec)
    }
}

/// Dense cotangents: for frames `start..=start + K`, $\partial\mathcal L/\partial x_t$ and
/// $\partial\mathcal L/\partial v_t$ as flat arrays `(K+1)·3n` (frame-major, then
/// node-major), either absent (zero). Frames outside the range get `None`.
#[derive(Clone, Debug)]
pub struct DenseCotangents {
    /// First frame of the arrays.
    pub start: usize,
    /// `3n` (values per frame).
    pub n3: usize,
    pub x: Option<Vec<f64>>,
    pub v: Option<Vec<f64>>,
}

impl DenseCotangents {
    /// The rows of frame `t`, if within the arrays.
    fn row<'a>(&self, a: &'a Option<Vec<f64>>, t: usize) -> Option<&'a [f64]> {
        let k = t.checked_sub(self.start)?;
        a.as_ref()?.get(k * self.n3..(k + 1) * self.n3)
    }
}

impl CotangentSource for DenseCotangents {
    fn frame(&self, f: &CotangentFrame) -> FrameCotangent {
        FrameCotangent {
            x: self.row(&self.x, f.frame).map(<[f64]>::to_vec),
            v: self.row(&self.v, f.frame).map(<[f64]>::to_vec),
        }
    }
}

/// The sum of two sources ($\mathcal L=\mathcal L_a+\mathcal L_b$).
pub struct SumOf<'a>(pub &'a dyn CotangentSource, pub &'a dyn CotangentSource);

fn add(a: Option<Vec<f64>>, b: Option<Vec<f64>>) -> Option<Vec<f64>> {
    match (a, b) {
        (Some(mut a), Some(b)) => {
            a.iter_mut().zip(&b).for_each(|(p, q)| *p += q);
            Some(a)
        }
        (a, None) => a,
        (None, b) => b,
    }
}

impl CotangentSource for SumOf<'_> {
    fn frame(&self, f: &CotangentFrame) -> FrameCotangent {
        let (a, b) = (self.0.frame(f), self.1.frame(f));
        FrameCotangent {
            x: add(a.x, b.x),
            v: add(a.v, b.v),
        }
    }

    fn contact_force(&self, frame: usize, rec: &ContactRecord) -> Vec<(usize, Vector3<f64>)> {
        let mut out = self.0.contact_force(frame, rec);
        out.extend(self.1.contact_force(frame, rec));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Dense rows land on their frames (offset by `start`), a sum adds them, absent is zero.
    #[test]
    fn dense_rows_and_sums() {
        let d = DenseCotangents {
            start: 2,
            n3: 3,
            x: Some((0..9).map(f64::from).collect()),
            v: None,
        };
        let at = |t| CotangentFrame {
            frame: t,
            last: 4,
            x: &[0.0; 3],
            x_prev: &[0.0; 3],
            h: 0.1,
        };
        assert_eq!(d.frame(&at(1)), FrameCotangent::default());
        assert_eq!(d.frame(&at(3)).x, Some(vec![3.0, 4.0, 5.0]));
        assert_eq!(d.frame(&at(5)), FrameCotangent::default());
        let s = SumOf(&d, &d);
        assert_eq!(s.frame(&at(4)).x, Some(vec![12.0, 14.0, 16.0]));
        assert_eq!(s.frame(&at(4)).v, None);
    }

    use crate::model::{Model, ModelBuilder, SolverSettings};
    use crate::solver::adjoint::loss::seeded_uniform;
    use crate::solver::records::config::BackwardConfig;
    use crate::solver::rollout;
    use crate::solver::Simulator;

    /// A clamped corotated bar falling under gravity with Rayleigh damping, 4 frames.
    fn bar() -> Model {
        ModelBuilder::new(crate::mesh::generate::box_tet([3, 1, 1], 0.1, [0.0; 3]))
            .youngs_modulus(1e5)
            .poisson_ratio(0.3)
            .density(1000.0)
            .damping(0.5, 0.01)
            .steps(0.01, 4)
            .fix_where(|p| p[0] == 0.0)
            .build()
            .expect("a clamped bar")
    }

    fn tight() -> SolverSettings {
        SolverSettings {
            residual_tol: 1e-13,
            ..SolverSettings::default()
        }
    }

    /// $\langle c, s\rangle$ over frames 0..=T of every state (x and v) of `m`'s rollout.
    fn pairing(m: &Model, c: &DenseCotangents) -> f64 {
        let mut sim = Simulator::new(m, &tight()).expect("simulator");
        let ro = rollout::forward(&mut sim, m.frames, 1, &Loss::default()).expect("rollout");
        let dot = |a: &Option<Vec<f64>>, k: usize, s: &[f64]| -> f64 {
            a.as_ref().map_or(0.0, |a| {
                a[k * c.n3..(k + 1) * c.n3]
                    .iter()
                    .zip(s)
                    .map(|(p, q)| p * q)
                    .sum()
            })
        };
        ro.kept
            .iter()
            .map(|(&t, (x, v))| dot(&c.x, t, x) + dot(&c.v, t, v))
            .sum()
    }

    /// The adjoint of caller-supplied cotangents (random dL/dx_t and dL/dv_t on frames 1, 3
    /// and 4 of 4) against central differences of $\langle c, s(\theta)\rangle$ along three
    /// directions — per-element Young's modulus, the initial positions (the clamped nodes'
    /// prescribed values follow them) and the initial velocities — over five decades of step:
    /// the best agrees to 1e-6 relative, two neighbouring steps within 1e-5, and the
    /// reference is far from zero. Without checkpoints and with `checkpoint_every` 2 and 3
    /// (recomputed segments; frame 3 a segment boundary for 3).
    #[test]
    fn caller_cotangents_match_central_differences() {
        let base = bar();
        let n3 = base.x0.len();
        let frames = base.frames;
        let mut cx = vec![0.0; (frames + 1) * n3];
        let mut cv = vec![0.0; (frames + 1) * n3];
        for (i, t) in [1usize, 3, 4].into_iter().enumerate() {
            cx[t * n3..(t + 1) * n3].copy_from_slice(&seeded_uniform(10 + i as u64, n3));
            cv[t * n3..(t + 1) * n3].copy_from_slice(&seeded_uniform(20 + i as u64, n3));
        }
        let c = DenseCotangents {
            start: 0,
            n3,
            x: Some(cx),
            v: Some(cv),
        };
        let ne = base.num_elements();
        let de = seeded_uniform(31, ne);
        let dx = seeded_uniform(32, n3);
        let dv = seeded_uniform(33, n3);
        let cfg = BackwardConfig::gmres(1e-14, 2000, 200, tight().anderson_gamma_max);
        let mut adjoints = vec![];
        for k in [1, 2, 3] {
            let mut sim = Simulator::new(&base, &tight()).expect("simulator");
            let ro = rollout::forward(&mut sim, frames, k, &Loss::default()).expect("rollout");
            let br = rollout::backward(&mut sim, &ro, &c, &cfg).expect("backward");
            assert!(br.nonconverged().is_empty());
            let g = &br.grads;
            let e: f64 = (0..ne)
                .map(|i| g.youngs[i] * de[i] * base.params.youngs[i])
                .sum();
            let x: f64 = g.x0.iter().zip(&dx).map(|(a, b)| a * b).sum();
            let v: f64 = g.v0.iter().zip(&dv).map(|(a, b)| a * b).sum();
            // from frame 0 the start state is the model's: the same cotangents, plus (on the
            // clamped DoFs only) the prescribed values' dependence on x0
            assert_eq!(br.v_start, g.v0);
            let clamped = |k: usize| sim.prescribed.contains(&k);
            assert!((0..n3).all(|k| clamped(k) || br.x_start[k] == g.x0[k]));
            assert!((0..n3).any(|k| clamped(k) && br.x_start[k] != g.x0[k]));
            adjoints.push([e, x, v]);
        }
        let perturbed = |which: usize, s: f64| -> f64 {
            let mut m = base.clone();
            match which {
                0 => (0..ne).for_each(|i| m.params.youngs[i] *= 1.0 + s * de[i]),
                1 => {
                    m.x0.iter_mut()
                        .zip(&dx)
                        .for_each(|(a, b)| *a += 1e-2 * s * b)
                }
                _ => m.v0.iter_mut().zip(&dv).for_each(|(a, b)| *a += s * b),
            }
            pairing(&m, &c)
        };
        for which in 0..3 {
            // the x0 direction has length 1e-2 per unit step
            let unit = if which == 1 { 1e-2 } else { 1.0 };
            let steps = [1e-3, 1e-4, 1e-5, 1e-6, 1e-7];
            let fd: Vec<f64> = steps
                .iter()
                .map(|&s| (perturbed(which, s) - perturbed(which, -s)) / (2.0 * s))
                .collect();
            for (k, a) in adjoints.iter().enumerate() {
                let reference = a[which] * unit;
                assert!(reference.abs() > 1e-3, "direction {which}: {reference}");
                let rel: Vec<f64> = fd
                    .iter()
                    .map(|f| (f - reference).abs() / reference.abs())
                    .collect();
                let best = rel.iter().copied().fold(f64::INFINITY, f64::min);
                let pair = rel
                    .windows(2)
                    .map(|w| w[0].max(w[1]))
                    .fold(f64::INFINITY, f64::min);
                assert!(
                    best < 1e-6 && pair < 1e-5,
                    "direction {which}, checkpoint case {k}: adjoint {reference}, fd {fd:?}, rel {rel:?}"
                );
            }
        }
        // the checkpointed sweeps agree with the full tape to the forward tolerance
        for a in &adjoints[1..] {
            for d in 0..3 {
                assert!((a[d] - adjoints[0][d]).abs() <= 1e-8 * adjoints[0][d].abs());
            }
        }
    }
}
