//! Quantities derived from the material parameters (spec §6.1 SETUP): PD weights (Eq. 12),
//! Rayleigh coefficients (Eq. 30), lumped masses and the Neo-Hookean prox parameters.

use super::discrete::{MaterialParams, Model};
use super::settings::MassConvention;
use crate::material::neohookean::NhParams;
use crate::material::weights::fit_coefficients;
use crate::material::{lame, lame_dnu, PdWeights};

/// Quantities derived from [`MaterialParams`] (recomputed when parameters change).
#[derive(Clone, Debug)]
pub struct Derived {
    /// Nodal mass of the body's [`MassConvention`]: lumped $m_i=\sum_{e\ni i}\rho V_e/n_v$,
    /// or uniform $m_i=\rho\bar V$ ($\bar V$ = the body's mean element volume). Linear in
    /// the body's density either way (the density gradient is $\sum_i m_i/\rho\,\partial_{m_i}$).
    pub mass: Vec<f64>,
    /// Per-node mass-damping coefficient α of its body.
    pub node_alpha: Vec<f64>,
    /// Per-sample PD weights of the body's material law
    /// ([`crate::material::Material::pd_weights`]: corotated $(2\mu_eV_s,\lambda_eV_s)$,
    /// Neo-Hookean $(k_eV_s,0)$, Eq. 12).
    pub w: Vec<PdWeights>,
    /// Per-element stiffness-damping coefficient β_e (Eq. 30).
    pub beta: Vec<f64>,
    /// Per-body means $(\bar\mu,\bar\lambda,\bar k)$ (Lemma 1; the NH prox parameters),
    /// [`Model::body_means`].
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
        self.w[s][0] + self.w[s][1]
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
            if self.bodies[b].mass != MassConvention::Lumped {
                continue;
            }
            let el = self.element(e);
            let share = p.density[b] * self.elem_volume[e] / el.len() as f64;
            for &i in el {
                mass[i] += share;
            }
        }
        for (b, body) in self.bodies.iter().enumerate() {
            if body.mass == MassConvention::Uniform {
                let m = p.density[b] * self.mean_element_volume(b);
                mass[body.nodes.clone()].fill(m);
            }
        }
        let node_alpha = self.node_body.iter().map(|&b| p.alpha[b]).collect();
        let nh = (0..self.bodies.len())
            .map(|b| self.body_means(p, b))
            .collect();
        let w = (0..ns)
            .map(|s| {
                let e = self.samples.elem[s];
                let body = &self.bodies[self.elem_body[e]];
                let (mu, la) = lame(p.youngs[e], p.nu_of(e, self.elem_body[e]));
                let v = self.samples.vol[s];
                body.model.pd_weights(mu, la, v, body.fit_range)
            })
            .collect();
        let beta = (0..self.num_elements())
            .map(|e| {
                let b = self.elem_body[e];
                let body = &self.bodies[b];
                body.stiffness_scaling
                    .beta(p.beta0[b], p.youngs[e], body.e_ref)
            })
            .collect();
        let emin = p.youngs.iter().cloned().fold(f64::INFINITY, f64::min);
        let emax = p.youngs.iter().cloned().fold(0.0, f64::max);
        Derived {
            mass,
            node_alpha,
            w,
            beta,
            nh,
            heterogeneous: emax / emin > 1.01,
            muscle_time: 0.0,
        }
    }

    /// Mean rest volume $\bar V$ of body `b`'s elements (the [`MassConvention::Uniform`]
    /// mass is $\rho\bar V$ per node).
    pub fn mean_element_volume(&self, b: usize) -> f64 {
        let el = self.bodies[b].elements.clone();
        let n = el.len() as f64;
        self.elem_volume[el].iter().sum::<f64>() / n
    }

    /// Body means $(\bar\mu,\bar\lambda,\bar k)$ of body `b`: the element mean of the Lamé
    /// parameters at $(E_e,\nu_e)$ ($\nu_e=\nu_b$ without a per-element ν; spec §1, Lemma 1) and $\bar k=c_\mu\bar\mu+c_\lambda\bar\lambda$
    /// (Eq. 12 over the body's fit range).
    pub fn body_means(&self, p: &MaterialParams, b: usize) -> NhParams {
        self.body_mean_map(p, b, lame)
    }

    /// $\partial(\bar\mu,\bar\lambda,\bar k)/\partial\nu_b$ of [`Self::body_means`], every element's ν
    /// moved together (the same linear
    /// maps applied to $\partial(\mu,\lambda)/\partial\nu$).
    pub fn body_means_dnu(&self, p: &MaterialParams, b: usize) -> NhParams {
        self.body_mean_map(p, b, lame_dnu)
    }

    /// $\partial(\bar\mu,\bar\lambda,\bar k)/\partial E_e$ and $/\partial\nu_e$ of
    /// [`Self::body_means`] for one element $e$ of body $b$ with $n_b$ elements (used with a
    /// per-element ν, [`MaterialParams::nu_elem`]): $\tfrac1{n_b}(\mu,\lambda)(1,\nu_e)$ (the
    /// Lamé parameters are linear in $E$) and $\tfrac1{n_b}\,\partial(\mu,\lambda)/\partial\nu$
    /// at $(E_e,\nu_e)$, each with its fit $\bar k$ (Eq. 12). Summed over the body's elements
    /// the second is [`Self::body_means_dnu`].
    pub fn element_means_derivatives(&self, p: &MaterialParams, e: usize) -> [NhParams; 2] {
        let b = self.elem_body[e];
        let body = &self.bodies[b];
        let (cm, cl) = fit_coefficients(body.fit_range);
        let ne = body.elements.len() as f64;
        let nu = p.nu_of(e, b);
        [lame(1.0, nu), lame_dnu(p.youngs[e], nu)].map(|(mu, la)| {
            let (mu, lambda) = (mu / ne, la / ne);
            NhParams {
                mu,
                lambda,
                k: cm * mu + cl * lambda,
            }
        })
    }

    /// Element mean of `lame_map(E_e, ν_e)` over body `b` (ν_e: the element's, else the
    /// body's) and the fit of Eq. 12.
    fn body_mean_map(
        &self,
        p: &MaterialParams,
        b: usize,
        lame_map: fn(f64, f64) -> (f64, f64),
    ) -> NhParams {
        let body = &self.bodies[b];
        let (cm, cl) = fit_coefficients(body.fit_range);
        let ne = body.elements.len() as f64;
        let (mut mbar, mut lbar) = (0.0, 0.0);
        for e in body.elements.clone() {
            let (mu, la) = lame_map(p.youngs[e], p.nu_of(e, b));
            mbar += mu / ne;
            lbar += la / ne;
        }
        NhParams {
            mu: mbar,
            lambda: lbar,
            k: cm * mbar + cl * lbar,
        }
    }
}
