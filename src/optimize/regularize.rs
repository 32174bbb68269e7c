//! Smoothness penalties on per-element fields (`[[parameter]] regularize`, scene type
//! [`crate::scene::Regularize`]), added to the loss by [`super::problem::Problem::evaluate`].
//!
//! Over the pairs $(e,f)$ of a field's elements that share a face, with
//! $d_{ef}=\ell_e-\ell_f$ on the field's penalty variable $\ell$: $\ell=\ln E$ for
//! `youngs_modulus_field` (a positive class: contrasts are ratios), $\ell=\nu$ itself for
//! `poisson_ratio_field` (not positive, and bounded: differences of ν are the natural
//! contrast):
//!
//! * `laplacian`: $R=w\sum_{(e,f)}d_{ef}^2$ — the quadratic form $\ell^TL\ell$ of the
//!   element graph's Laplacian $L$ on $\ell=\ln E$ (Tikhonov smoothing; e.g. Vogel,
//!   *Computational Methods for Inverse Problems*, 2002, ch. 1);
//! * `tv`: $R=w\sum_{(e,f)}\bigl(\sqrt{d_{ef}^2+\varepsilon^2}-\varepsilon\bigr)$ — total
//!   variation on the graph, smoothed at $|d|\lesssim\varepsilon$ so that it is
//!   differentiable (Vogel, ch. 8), which keeps sharp material interfaces cheaper than the
//!   Laplacian does.
//!
//! $\partial R/\partial\ell_e=\sum_{f\sim e}\pm\phi'(d_{ef})$ with $\phi'(d)=2wd$ or
//! $wd/\sqrt{d^2+\varepsilon^2}$; for E the working variable θ is $\ell$ itself with
//! `log = true`, else $E$ ($\partial\ell/\partial E=1/E$); for ν, θ is ν ($\ell=\theta$).
//!
//! Two elements share a face when they share at least three nodes (a triangle of two tets; a
//! quad of two hexes, which can share 1, 2 or 4 nodes in a conforming mesh).

use super::params::Param;
use crate::model::Model;
use crate::scene::{ParamSpec, RegularizeKind};
use std::collections::HashMap;

/// One declaration's penalty, on θ indices.
#[derive(Clone, Debug)]
pub struct Regularizer {
    /// The `[[parameter]]` entry.
    pub index: usize,
    pub kind: RegularizeKind,
    pub weight: f64,
    pub epsilon: f64,
    /// Face-adjacent pairs, as indices into θ.
    pub pairs: Vec<(usize, usize)>,
}

/// The pairs (positions in `elements`) of elements that share a face (module doc), each
/// once, `i < j`, sorted.
pub fn face_pairs(model: &Model, elements: &[usize]) -> Vec<(usize, usize)> {
    let nodes = |e: usize| &model.conn[model.conn_ptr[e]..model.conn_ptr[e + 1]];
    let mut by_node: HashMap<usize, Vec<usize>> = HashMap::new();
    for (i, &e) in elements.iter().enumerate() {
        for &n in nodes(e) {
            by_node.entry(n).or_default().push(i);
        }
    }
    let mut shared: HashMap<(usize, usize), usize> = HashMap::new();
    for list in by_node.values() {
        for (a, &i) in list.iter().enumerate() {
            for &j in &list[a + 1..] {
                *shared.entry((i.min(j), i.max(j))).or_default() += 1;
            }
        }
    }
    let mut pairs: Vec<(usize, usize)> = shared
        .into_iter()
        .filter(|&(_, n)| n >= 3)
        .map(|(p, _)| p)
        .collect();
    pairs.sort_unstable();
    pairs
}

/// The penalties declared in `specs` over the expanded `params` (θ order): the pairs of each
/// field declaration's elements. Errors name the `parameter[i].regularize` key.
pub fn build(
    specs: &[ParamSpec],
    params: &[Param],
    model: &Model,
) -> Result<Vec<Regularizer>, (String, String)> {
    let mut out = Vec::new();
    for (i, s) in specs.iter().enumerate() {
        let Some(r) = s.regularize else { continue };
        let key = format!("parameter[{i}].regularize");
        if !(r.weight.is_finite() && r.weight >= 0.0) {
            return Err((
                format!("{key}.weight"),
                format!("expected a finite weight >= 0, got {}", r.weight),
            ));
        }
        if !(r.epsilon.is_finite() && r.epsilon > 0.0) {
            return Err((
                format!("{key}.epsilon"),
                format!("expected a finite epsilon > 0, got {}", r.epsilon),
            ));
        }
        let thetas: Vec<usize> = (0..params.len())
            .filter(|&j| params[j].index == i)
            .collect();
        let elements: Vec<usize> = thetas.iter().map(|&j| params[j].elements[0]).collect();
        let pairs = face_pairs(model, &elements)
            .into_iter()
            .map(|(a, b)| (thetas[a], thetas[b]))
            .collect();
        out.push(Regularizer {
            index: i,
            kind: r.kind,
            weight: r.weight,
            epsilon: r.epsilon,
            pairs,
        });
    }
    Ok(out)
}

impl Regularizer {
    /// $R$ and $\partial R/\partial\ell$ (added into `d_ell`, indexed like θ) at the penalty
    /// variables `ell` (log moduli, or ratios; module doc).
    pub fn eval_log(&self, ell: &[f64], d_ell: &mut [f64]) -> f64 {
        let (w, eps) = (self.weight, self.epsilon);
        let mut r = 0.0;
        for &(e, f) in &self.pairs {
            let d = ell[e] - ell[f];
            let (phi, dphi) = match self.kind {
                RegularizeKind::Laplacian => (w * d * d, 2.0 * w * d),
                RegularizeKind::Tv => {
                    let s = (d * d + eps * eps).sqrt();
                    (w * (s - eps), w * d / s)
                }
            };
            r += phi;
            d_ell[e] += dphi;
            d_ell[f] -= dphi;
        }
        r
    }
}

/// The sum of the penalties at parameter values `values` (user units) and its gradient in θ
/// (one entry per parameter). The penalty variable is $\ln v$ for positive classes (E), $v$
/// otherwise (ν; module doc).
pub fn total(regs: &[Regularizer], params: &[Param], values: &[f64]) -> (f64, Vec<f64>) {
    let on_log = |p: &Param| p.class.positive();
    let ell: Vec<f64> = params
        .iter()
        .zip(values)
        .map(|(p, v)| if on_log(p) { v.ln() } else { *v })
        .collect();
    let mut d_ell = vec![0.0; values.len()];
    let r = regs.iter().map(|g| g.eval_log(&ell, &mut d_ell)).sum();
    let grad = params
        .iter()
        .zip(values)
        .zip(&d_ell)
        .map(|((p, v), d)| match (on_log(p), p.log) {
            (true, true) | (false, false) => *d,
            (true, false) => d / v,
            (false, true) => d * v,
        })
        .collect();
    (r, grad)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reg(kind: RegularizeKind, pairs: Vec<(usize, usize)>) -> Regularizer {
        Regularizer {
            index: 0,
            kind,
            weight: 0.7,
            epsilon: 0.05,
            pairs,
        }
    }

    /// Both penalties' gradients against central differences swept over 4 decades of step
    /// (1e-2 … 1e-6), at a non-zero reference: the best step within 1e-7 relative.
    #[test]
    fn penalty_gradients_match_central_differences() {
        let pairs = vec![(0, 1), (1, 2), (0, 2), (2, 3)];
        let ell = [0.3, -0.2, 0.45, 0.1];
        for kind in [RegularizeKind::Laplacian, RegularizeKind::Tv] {
            let g = reg(kind, pairs.clone());
            let mut d = vec![0.0; 4];
            let r0 = g.eval_log(&ell, &mut d);
            assert!(r0 > 0.0);
            for k in 0..4 {
                assert!(d[k].abs() > 1e-3, "{kind:?}: zero reference at {k}");
                let best = (2..=6)
                    .map(|p| {
                        let h = 10f64.powi(-p);
                        let at = |s: f64| {
                            let mut x = ell;
                            x[k] += s;
                            g.eval_log(&x, &mut [0.0; 4])
                        };
                        ((at(h) - at(-h)) / (2.0 * h) - d[k]).abs() / d[k].abs()
                    })
                    .fold(f64::INFINITY, f64::min);
                assert!(best < 1e-7, "{kind:?} element {k}: rel err {best:e}");
            }
        }
    }

    /// Known values: the Laplacian of a two-element jump, TV ≈ w|d| far from 0, and a
    /// constant field costs nothing.
    #[test]
    fn penalty_values() {
        let lap = reg(RegularizeKind::Laplacian, vec![(0, 1)]);
        let d = (2.0f64).ln();
        let r = lap.eval_log(&[0.0, d], &mut [0.0; 2]);
        assert!((r - 0.7 * d * d).abs() < 1e-15);
        let tv = reg(RegularizeKind::Tv, vec![(0, 1)]);
        let r = tv.eval_log(&[0.0, 5.0], &mut [0.0; 2]);
        assert!((r - 0.7 * 5.0).abs() < 0.7 * 0.05 + 1e-12);
        let mut g = [0.0; 2];
        assert_eq!(lap.eval_log(&[0.4, 0.4], &mut g), 0.0);
        assert_eq!(g, [0.0, 0.0]);
    }
}
