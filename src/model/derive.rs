//! Quantities derived from the material parameters (spec §6.1 SETUP): PD weights (Eq. 12),
//! Rayleigh coefficients (Eq. 30), lumped masses and the Neo-Hookean prox parameters.

use super::discrete::{MaterialParams, Model};
use super::settings::StiffnessScaling;
use crate::material::neohookean::NhParams;
use crate::material::weights::fit_coefficients;
use crate::material::{lame, MaterialModel};

/// Quantities derived from [`MaterialParams`] (recomputed when parameters change).
#[derive(Clone, Debug)]
pub struct Derived {
    /// Lumped nodal mass $m_i=\sum_{e\ni i}\rho V_e/n_v$.
    pub mass: Vec<f64>,
    /// Per-node mass-damping coefficient α of its body.
    pub node_alpha: Vec<f64>,
    /// Per-sample corotated weight ($2\mu_eV_s$; 0 for NH bodies).
    pub w_cor: Vec<f64>,
    /// Per-sample volume weight ($\lambda_eV_s$; 0 for NH bodies).
    pub w_vol: Vec<f64>,
    /// Per-sample NH weight ($k_eV_s$, Eq. 12; 0 for corotated bodies).
    pub w_nh: Vec<f64>,
    /// Per-element stiffness-damping coefficient β_e (Eq. 30).
    pub beta: Vec<f64>,
    /// Per-body NH prox parameters $(\bar\mu,\bar\lambda,\bar k)$ (Lemma 1).
    pub nh: Vec<NhParams>,
    /// max E / min E > 1.01 (spec §6.1).
    pub heterogeneous: bool,
    /// Time (s) at which muscle activations are evaluated by the local step and the
    /// backward linearization: $t_n=nh$ of the step producing frame n (set per step by the
    /// forward and by the reverse sweep; spec §3.5, activations per time knot).
    pub muscle_time: f64,
}

impl Derived {
    /// Total PD weight of sample `s`.
    #[inline]
    pub fn w_total(&self, s: usize) -> f64 {
        self.w_cor[s] + self.w_vol[s] + self.w_nh[s]
    }
}

impl Model {
    /// Derived quantities for the given parameters (spec §6.1 SETUP).
    pub fn derive(&self, p: &MaterialParams) -> Derived {
        let n = self.num_nodes();
        let ns = self.num_samples();
        let mut mass = vec![0.0; n];
        for e in 0..self.num_elements() {
            let b = self.elem_body[e];
            let el = self.element(e);
            let share = p.density[b] * self.elem_volume[e] / el.len() as f64;
            for &i in el {
                mass[i] += share;
            }
        }
        let node_alpha = self.node_body.iter().map(|&b| p.alpha[b]).collect();
        let (mut w_cor, mut w_vol, mut w_nh) = (vec![0.0; ns], vec![0.0; ns], vec![0.0; ns]);
        let mut nh = Vec::with_capacity(self.bodies.len());
        for (b, body) in self.bodies.iter().enumerate() {
            let (cm, cl) = fit_coefficients(body.fit_range);
            let nu = p.nu[b];
            let ne = body.elements.len() as f64;
            let (mut mbar, mut lbar) = (0.0, 0.0);
            for e in body.elements.clone() {
                let (mu, la) = lame(p.youngs[e], nu);
                mbar += mu / ne;
                lbar += la / ne;
            }
            nh.push(NhParams {
                mu: mbar,
                lambda: lbar,
                k: cm * mbar + cl * lbar,
            });
        }
        for s in 0..ns {
            let e = self.samples.elem[s];
            let b = self.elem_body[e];
            let (mu, la) = lame(p.youngs[e], p.nu[b]);
            let v = self.samples.vol[s];
            match self.bodies[b].model {
                MaterialModel::Corotated => {
                    w_cor[s] = 2.0 * mu * v;
                    w_vol[s] = la * v;
                }
                MaterialModel::Neohookean => {
                    let (cm, cl) = fit_coefficients(self.bodies[b].fit_range);
                    w_nh[s] = (cm * mu + cl * la) * v;
                }
            }
        }
        let beta = (0..self.num_elements())
            .map(|e| {
                let b = self.elem_body[e];
                match self.bodies[b].stiffness_scaling {
                    StiffnessScaling::Amplified => p.beta0[b] * p.youngs[e] / self.bodies[b].e_ref,
                    StiffnessScaling::Uniform => p.beta0[b],
                }
            })
            .collect();
        let emin = p.youngs.iter().cloned().fold(f64::INFINITY, f64::min);
        let emax = p.youngs.iter().cloned().fold(0.0, f64::max);
        Derived {
            mass,
            node_alpha,
            w_cor,
            w_vol,
            w_nh,
            beta,
            nh,
            heterogeneous: emax / emin > 1.01,
            muscle_time: 0.0,
        }
    }
}
