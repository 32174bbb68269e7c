//! Scalar losses of a rollout and their derivatives with respect to the states
//! (spec §7.1: $\mathcal L=\sum_t\ell_t(x_t,v_t)$). Terms are weighted and summed.
//!
//! - tracking: $\tfrac12\sum_{t}\sum_{i\in S}\|x_{t,i}-\hat x_{t,i}\|^2$ over the frames that have a
//!   reference (DiffPD's convention for Plant/Bouncing Ball);
//! - centre of mass: $\tfrac12\|c(x_T)-c^*\|^2$ with $c$ the *volume*-weighted centroid of a body's
//!   nodes (lumped rest volumes), so the target does not move with the density parameter;
//! - centre of mass along a direction: $\hat d\cdot c(x_T)$ (with weight −1: maximize the
//!   forward position, DiffPD's locomotion loss);
//! - node target: $\tfrac12\|\tfrac1{|S|}\sum_{i\in S}x_{T,i}-x^*\|^2$;
//! - random linear: $(c_x^Tx_T+c_v^Tv_T)/\sqrt{3n}$ with seeded $c_x,c_v\in[-1,1]$ (DiffPD's timing loss);
//! - chamfer (captured geometry, Real2Sim): for every captured point set $C$ mapped to frame $t$
//!   and the simulated surface nodes $S$ (positions $y_i=x_{t,i}$), the bidirectional chamfer
//!   distance of squared nearest distances
//!   $$D(S,C)=\frac1{|S|}\sum_{i\in S}\min_{c\in C}\|y_i-c\|^2+\frac1{|C|}\sum_{c\in C}\min_{i\in S}\|c-y_i\|^2$$
//!   (`mean`; `sum` drops the two normalisations). Its gradient holds the nearest-neighbour
//!   assignment fixed: $\partial D/\partial y_i=\tfrac2{|S|}(y_i-c_{\nu(i)})+\tfrac2{|C|}\sum_{c:\,\nu(c)=i}(y_i-c)$.
//!   $D$ is a minimum of smooth functions, so this is its exact derivative wherever every
//!   nearest neighbour is unique (almost everywhere); where a nearest neighbour switches, $D$
//!   is continuous but only piecewise smooth. Nearest neighbours come from 3-d trees
//!   ([`crate::mesh::kdtree`]): one over each capture, built once, and one over $S$ per
//!   evaluated frame, $O((|S|+|C|)\log)$ per frame.
//! - contact force (a load cell on a scripted obstacle, Real2Sim): for every measured frame $t$,
//!   $\tfrac12\|F_{t,o}-\hat F_{t,o}\|^2$ (N²) with $F_{t,o}=\sum_{j\in o}J_j^T\lambda_j
//!   =\sum_{j\in o}\big(n_j\lambda_{n,j}+\sum_kt_{jk}\lambda_{f,jk}\big)$ the total contact force
//!   obstacle $o$ exerts on the bodies over the step into frame $t$ (the multipliers $\lambda$ of
//!   the step's NCP solve, spec §2.9; [`contact_force`]). It reads the step's contact record,
//!   not the states, so it is evaluated by [`Loss::force_value`] and differentiated by
//!   [`Loss::force_cotangent`]: $\partial\ell/\partial F=w(F-\hat F)$, which the reverse sweep
//!   hands to the contact adjoint as the right-hand side $g_\lambda=J_o\,\partial\ell/\partial F$
//!   of its $\zeta$ rows ([`crate::contact::adjoint`]), plus the dependence of the frozen
//!   directions $n_j,t_{jk}$ on $x_t$ and the obstacle offset.

use crate::contact::ContactRecord;
use crate::mesh::kdtree::KdTree;
use nalgebra::Vector3;
use std::sync::Arc;

/// One weighted term.
#[derive(Clone, Debug)]
pub enum Term {
    Tracking {
        weight: f64,
        nodes: Vec<usize>,
        frames: Vec<(usize, Vec<[f64; 3]>)>,
    },
    CenterOfMass {
        weight: f64,
        nodes: Vec<usize>,
        weights: Vec<f64>,
        target: [f64; 3],
    },
    CenterOfMassDirection {
        weight: f64,
        nodes: Vec<usize>,
        weights: Vec<f64>,
        direction: [f64; 3],
    },
    NodeTarget {
        weight: f64,
        nodes: Vec<usize>,
        target: [f64; 3],
    },
    RandomLinear {
        weight: f64,
        cx: Vec<f64>,
        cv: Vec<f64>,
    },
    Chamfer {
        weight: f64,
        /// Simulated surface nodes $S$.
        nodes: Vec<usize>,
        /// Captured point sets with the frame each is compared with.
        captures: Vec<Capture>,
        /// Mean (normalised by $|S|$ and $|C|$) or sum of the squared distances.
        mean: bool,
    },
    /// Measured total contact force of obstacle `obstacle` (N) on the frames listed (sorted,
    /// unique): $w\,\tfrac12\|F_{t,o}-\hat F_t\|^2$, or $w\,\tfrac12(\hat d\cdot(F_{t,o}-\hat F_t))^2$
    /// with a `direction` (module doc).
    ContactForce {
        weight: f64,
        obstacle: usize,
        /// Unit axis of a one-axis load cell: only $\hat d\cdot(F-\hat F)$ is compared.
        direction: Option<[f64; 3]>,
        frames: Vec<(usize, [f64; 3])>,
    },
}

/// One captured point set of a chamfer term.
#[derive(Clone, Debug)]
pub struct Capture {
    /// Simulated frame (`1..=T`) the capture is compared with.
    pub frame: usize,
    /// The captured points, indexed for nearest-neighbour queries.
    pub tree: Arc<KdTree>,
}

/// Chamfer distance $D(S,C)$ of the nodes `nodes` of `x` and a capture, and (with `grad`)
/// `grad += scale`·$\partial D/\partial x$ (assignment held fixed, see the module doc).
pub fn chamfer(
    nodes: &[usize],
    x: &[f64],
    capture: &KdTree,
    mean: bool,
    grad: Option<(&mut [f64], f64)>,
) -> f64 {
    let y: Vec<[f64; 3]> = nodes
        .iter()
        .map(|&i| [x[3 * i], x[3 * i + 1], x[3 * i + 2]])
        .collect();
    let cap = capture.points();
    let (ws, wc) = if mean {
        (1.0 / y.len() as f64, 1.0 / cap.len() as f64)
    } else {
        (1.0, 1.0)
    };
    let own = KdTree::new(y.clone());
    let to_capture: Vec<(usize, f64)> = y
        .iter()
        .map(|p| {
            capture
                .nearest(p)
                .expect("read_points refuses a capture without points")
        })
        .collect();
    let to_sim: Vec<(usize, f64)> = cap
        .iter()
        .map(|c| {
            own.nearest(c)
                .expect("chamfer_term refuses a body without boundary nodes")
        })
        .collect();
    let value = ws * to_capture.iter().map(|n| n.1).sum::<f64>()
        + wc * to_sim.iter().map(|n| n.1).sum::<f64>();
    if let Some((g, scale)) = grad {
        for (k, &(j, _)) in to_capture.iter().enumerate() {
            let i = nodes[k];
            for d in 0..3 {
                g[3 * i + d] += scale * 2.0 * ws * (y[k][d] - cap[j][d]);
            }
        }
        for (j, &(k, _)) in to_sim.iter().enumerate() {
            let i = nodes[k];
            for d in 0..3 {
                g[3 * i + d] += scale * 2.0 * wc * (y[k][d] - cap[j][d]);
            }
        }
    }
    value
}

/// The total contact force $F_o=\sum_{j\in o}J_j^T\lambda_j$ (N) obstacle `obstacle` exerts on
/// the bodies over a step ([`ContactRecord::obstacle_force`]; the force on the obstacle, what
/// a load cell on it measures, is $-F_o$).
pub fn contact_force(rec: &ContactRecord, obstacle: usize) -> Vector3<f64> {
    rec.obstacle_force(obstacle)
}

/// The measured part $Pr$ of a force residual $r$: $r$ itself, or its component along the
/// unit axis `direction` of a one-axis load cell, $\hat d\hat d^Tr$.
fn measured_residual(r: Vector3<f64>, direction: &Option<[f64; 3]>) -> Vector3<f64> {
    match direction {
        Some(d) => {
            let d = Vector3::from(*d);
            d * d.dot(&r)
        }
        None => r,
    }
}

/// A loss: a weighted sum of terms.
#[derive(Clone, Debug, Default)]
pub struct Loss {
    pub terms: Vec<Term>,
}

/// $\partial\mathcal L/\partial x_t$ for every frame and $\partial\mathcal L/\partial v_T$.
pub struct LossGradient {
    pub dx: Vec<Vec<f64>>,
    pub dv_final: Vec<f64>,
}

pub use crate::model::seeded_uniform;

fn centroid(nodes: &[usize], w: &[f64], x: &[f64]) -> [f64; 3] {
    let tot: f64 = w.iter().sum();
    let mut c = [0.0; 3];
    for (k, &i) in nodes.iter().enumerate() {
        for d in 0..3 {
            c[d] += w[k] * x[3 * i + d] / tot;
        }
    }
    c
}

impl Loss {
    /// Contribution of frame `t` (`1..=t_end`) given $x_t$ and $x_{t-1}$.
    pub fn frame_value(&self, t: usize, t_end: usize, x: &[f64], x_prev: &[f64], h: f64) -> f64 {
        let mut l = 0.0;
        for term in &self.terms {
            l += match term {
                Term::Tracking {
                    weight,
                    nodes,
                    frames,
                } => match frames.binary_search_by_key(&t, |f| f.0) {
                    Ok(k) => {
                        let refx = &frames[k].1;
                        let mut s = 0.0;
                        for (j, &i) in nodes.iter().enumerate() {
                            for d in 0..3 {
                                s += 0.5 * (x[3 * i + d] - refx[j][d]).powi(2);
                            }
                        }
                        weight * s
                    }
                    Err(_) => 0.0,
                },
                Term::Chamfer {
                    weight,
                    nodes,
                    captures,
                    mean,
                } => captures
                    .iter()
                    .filter(|c| c.frame == t)
                    .map(|c| weight * chamfer(nodes, x, &c.tree, *mean, None))
                    .sum(),
                // read from the step's contact record: Loss::force_value
                Term::ContactForce { .. } => 0.0,
                _ if t != t_end => 0.0,
                Term::CenterOfMass {
                    weight,
                    nodes,
                    weights,
                    target,
                } => {
                    let c = centroid(nodes, weights, x);
                    weight * 0.5 * (0..3).map(|d| (c[d] - target[d]).powi(2)).sum::<f64>()
                }
                Term::CenterOfMassDirection {
                    weight,
                    nodes,
                    weights,
                    direction,
                } => {
                    let c = centroid(nodes, weights, x);
                    weight * (0..3).map(|d| c[d] * direction[d]).sum::<f64>()
                }
                Term::NodeTarget {
                    weight,
                    nodes,
                    target,
                } => {
                    let w = vec![1.0; nodes.len()];
                    let c = centroid(nodes, &w, x);
                    weight * 0.5 * (0..3).map(|d| (c[d] - target[d]).powi(2)).sum::<f64>()
                }
                Term::RandomLinear { weight, cx, cv } => {
                    let mut s = 0.0;
                    for j in 0..x.len() {
                        s += cx[j] * x[j] + cv[j] * (x[j] - x_prev[j]) / h;
                    }
                    weight * s / (x.len() as f64).sqrt()
                }
            };
        }
        l
    }

    /// $(\partial\ell_t/\partial x_t,\ \partial\ell_t/\partial v_t)$ of frame `t`; the velocity
    /// part is non-zero only at the final frame (random linear functional).
    pub fn frame_gradient(
        &self,
        t: usize,
        t_end: usize,
        x: &[f64],
        _x_prev: &[f64],
        _h: f64,
    ) -> (Vec<f64>, Vec<f64>) {
        let n3 = x.len();
        let mut dx = vec![0.0; n3];
        let mut dv = vec![0.0; n3];
        for term in &self.terms {
            match term {
                Term::Tracking {
                    weight,
                    nodes,
                    frames,
                } => {
                    if let Ok(k) = frames.binary_search_by_key(&t, |f| f.0) {
                        let refx = &frames[k].1;
                        for (j, &i) in nodes.iter().enumerate() {
                            for d in 0..3 {
                                dx[3 * i + d] += weight * (x[3 * i + d] - refx[j][d]);
                            }
                        }
                    }
                }
                Term::Chamfer {
                    weight,
                    nodes,
                    captures,
                    mean,
                } => {
                    for c in captures.iter().filter(|c| c.frame == t) {
                        chamfer(nodes, x, &c.tree, *mean, Some((&mut dx, *weight)));
                    }
                }
                // no state dependence: Loss::force_cotangent
                Term::ContactForce { .. } => {}
                _ if t != t_end => {}
                Term::CenterOfMass {
                    weight,
                    nodes,
                    weights,
                    target,
                } => {
                    let c = centroid(nodes, weights, x);
                    let tot: f64 = weights.iter().sum();
                    for (k, &i) in nodes.iter().enumerate() {
                        for d in 0..3 {
                            dx[3 * i + d] += weight * (c[d] - target[d]) * weights[k] / tot;
                        }
                    }
                }
                Term::CenterOfMassDirection {
                    weight,
                    nodes,
                    weights,
                    direction,
                } => {
                    let tot: f64 = weights.iter().sum();
                    for (k, &i) in nodes.iter().enumerate() {
                        for d in 0..3 {
                            dx[3 * i + d] += weight * direction[d] * weights[k] / tot;
                        }
                    }
                }
                Term::NodeTarget {
                    weight,
                    nodes,
                    target,
                } => {
                    let w = vec![1.0; nodes.len()];
                    let c = centroid(nodes, &w, x);
                    for &i in nodes {
                        for d in 0..3 {
                            dx[3 * i + d] += weight * (c[d] - target[d]) / nodes.len() as f64;
                        }
                    }
                }
                Term::RandomLinear { weight, cx, cv } => {
                    let s = weight / (n3 as f64).sqrt();
                    for j in 0..n3 {
                        dx[j] += s * cx[j];
                        dv[j] += s * cv[j];
                    }
                }
            }
        }
        (dx, dv)
    }

    /// Whether the loss has a contact-force term (it needs the steps' contact records).
    pub fn has_force_terms(&self) -> bool {
        self.terms
            .iter()
            .any(|t| matches!(t, Term::ContactForce { .. }))
    }

    /// The contact-force terms of frame `t` (`1..=T`) given the contact record of the step
    /// into frame `t` (`None`: the step had no contact candidates, $F=0$).
    pub fn force_value(&self, t: usize, rec: Option<&ContactRecord>) -> f64 {
        let mut l = 0.0;
        for term in &self.terms {
            if let Term::ContactForce {
                weight,
                obstacle,
                direction,
                frames,
            } = term
            {
                if let Ok(k) = frames.binary_search_by_key(&t, |f| f.0) {
                    let f = rec.map_or(Vector3::zeros(), |r| contact_force(r, *obstacle));
                    let d = measured_residual(f - Vector3::from(frames[k].1), direction);
                    l += weight * 0.5 * d.norm_squared();
                }
            }
        }
        l
    }

    /// $\partial\ell_t/\partial F_{t,o}=w(F_{t,o}-\hat F_t)$ of the contact-force terms of frame
    /// `t` given the step's contact record, one `(obstacle, cotangent)` per term measured at
    /// `t` (empty: none).
    pub fn force_cotangent(&self, t: usize, rec: &ContactRecord) -> Vec<(usize, Vector3<f64>)> {
        let mut out = Vec::new();
        for term in &self.terms {
            if let Term::ContactForce {
                weight,
                obstacle,
                direction,
                frames,
            } = term
            {
                if let Ok(k) = frames.binary_search_by_key(&t, |f| f.0) {
                    let r = contact_force(rec, *obstacle) - Vector3::from(frames[k].1);
                    // ½‖P r‖² with P = I or d̂d̂ᵀ (a projector): gradient P r
                    out.push((*obstacle, measured_residual(r, direction) * *weight));
                }
            }
        }
        out
    }

    /// Evaluate on states `xs[0..=T]` (time step `h`).
    pub fn eval(&self, xs: &[Vec<f64>], h: f64) -> f64 {
        let t_end = xs.len() - 1;
        (1..=t_end)
            .map(|t| self.frame_value(t, t_end, &xs[t], &xs[t - 1], h))
            .sum()
    }

    /// Gradient with respect to every state. `v_T=(x_T-x_{T-1})/h` is kept as its own
    /// variable (`dv_final`); the backward's first step turns it into the adjoint RHS (Eq. 41).
    pub fn gradient(&self, xs: &[Vec<f64>], h: f64) -> LossGradient {
        let t_end = xs.len() - 1;
        let n3 = xs[0].len();
        let mut dx = vec![vec![0.0; n3]; xs.len()];
        let mut dv_final = vec![0.0; n3];
        for t in 1..=t_end {
            let (gx, gv) = self.frame_gradient(t, t_end, &xs[t], &xs[t - 1], h);
            dx[t] = gx;
            if t == t_end {
                dv_final = gv;
            }
        }
        LossGradient { dx, dv_final }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every term's state gradient against central differences.
    #[test]
    fn loss_gradients_match_finite_differences() {
        let n = 5;
        let h = 0.01;
        let xs: Vec<Vec<f64>> = (0..4)
            .map(|t| seeded_uniform(10 + t as u64, 3 * n))
            .collect();
        let loss = Loss {
            terms: vec![
                Term::Tracking {
                    weight: 0.7,
                    nodes: vec![1, 3],
                    frames: vec![
                        (1, vec![[0.1, 0.2, 0.3], [0.0, -0.1, 0.5]]),
                        (3, vec![[0.4, 0.2, 0.1], [0.2, 0.2, 0.2]]),
                    ],
                },
                Term::CenterOfMass {
                    weight: 1.3,
                    nodes: vec![0, 2, 4],
                    weights: vec![1.0, 2.0, 0.5],
                    target: [0.1, -0.2, 0.3],
                },
                Term::CenterOfMassDirection {
                    weight: -0.9,
                    nodes: vec![1, 2, 4],
                    weights: vec![0.5, 1.0, 2.0],
                    direction: [0.6, 0.0, 0.8],
                },
                Term::NodeTarget {
                    weight: 0.4,
                    nodes: vec![2, 3],
                    target: [0.5, 0.5, 0.5],
                },
                Term::RandomLinear {
                    weight: 2.0,
                    cx: seeded_uniform(1, 3 * n),
                    cv: seeded_uniform(2, 3 * n),
                },
            ],
        };
        let g = loss.gradient(&xs, h);
        let eps = 1e-6;
        for t in 0..4 {
            for j in 0..3 * n {
                let mut p = xs.clone();
                p[t][j] += eps;
                let mut m = xs.clone();
                m[t][j] -= eps;
                let fd = (loss.eval(&p, h) - loss.eval(&m, h)) / (2.0 * eps);
                // analytic total derivative: x_T enters v_T = (x_T - x_{T-1})/h too
                let mut an = g.dx[t][j];
                if t == 3 {
                    an += g.dv_final[j] / h;
                }
                if t == 2 {
                    an -= g.dv_final[j] / h;
                }
                assert!(
                    (fd - an).abs() <= 1e-6 * (1.0 + an.abs()),
                    "t {t} j {j}: fd {fd} analytic {an}"
                );
            }
        }
    }

    /// The chamfer term (mean and sum) against central differences, at generic positions
    /// (unique nearest neighbours), with captures on two frames, one frame without, and a
    /// node that several captured points share.
    #[test]
    fn chamfer_gradient_matches_finite_differences() {
        let n = 12;
        let h = 0.01;
        let xs: Vec<Vec<f64>> = (0..4)
            .map(|t| seeded_uniform(20 + t as u64, 3 * n))
            .collect();
        let cloud = |seed: u64, k: usize| -> Arc<KdTree> {
            let v = seeded_uniform(seed, 3 * k);
            Arc::new(KdTree::new(
                (0..k)
                    .map(|j| [v[3 * j], v[3 * j + 1], v[3 * j + 2]])
                    .collect(),
            ))
        };
        for mean in [true, false] {
            let loss = Loss {
                terms: vec![Term::Chamfer {
                    weight: 0.8,
                    nodes: vec![0, 2, 3, 5, 7, 8, 11],
                    captures: vec![
                        Capture {
                            frame: 1,
                            tree: cloud(5, 30),
                        },
                        Capture {
                            frame: 3,
                            tree: cloud(6, 4),
                        },
                        Capture {
                            frame: 3,
                            tree: cloud(7, 9),
                        },
                    ],
                    mean,
                }],
            };
            let g = loss.gradient(&xs, h);
            assert!(g.dx[2].iter().all(|&v| v == 0.0), "frame 2 has no capture");
            assert!(
                g.dx[1][3..6].iter().all(|&v| v == 0.0),
                "node 1 is not a surface node"
            );
            let eps = 1e-7;
            let mut checked = 0;
            for t in [1, 3] {
                for j in 0..3 * n {
                    let mut p = xs.clone();
                    p[t][j] += eps;
                    let mut m = xs.clone();
                    m[t][j] -= eps;
                    let fd = (loss.eval(&p, h) - loss.eval(&m, h)) / (2.0 * eps);
                    let an = g.dx[t][j];
                    assert!(
                        (fd - an).abs() <= 1e-6 * (1.0 + an.abs()),
                        "mean {mean} t {t} j {j}: fd {fd} analytic {an}"
                    );
                    checked += (an != 0.0) as usize;
                }
            }
            assert!(checked >= 30, "{checked}");
        }
        // a perfect capture of the surface nodes has distance 0
        let nodes = vec![1, 4, 6];
        let x = &xs[1];
        let exact = KdTree::new(
            nodes
                .iter()
                .map(|&i| [x[3 * i], x[3 * i + 1], x[3 * i + 2]])
                .collect(),
        );
        assert_eq!(chamfer(&nodes, x, &exact, true, None), 0.0);
    }
}
