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
//! - random linear: $(c_x^Tx_T+c_v^Tv_T)/\sqrt{3n}$ with seeded $c_x,c_v\in[-1,1]$ (DiffPD's timing loss).

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
}
