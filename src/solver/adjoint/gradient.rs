//! Parameter gradients from the adjoint of each step (spec §7.5, Eq. 38):
//! $d\mathcal L/d\theta=-z^T\,\partial\mathcal R_x/\partial\theta$ with the residual
//! $\mathcal R_x=Ax-b=\tfrac{M}{h^2}(x-x_t-hv_t)+\tfrac1h\mathcal D(x-x_t)-f_{ext}
//! +\sum_s w_sG_s^T(G_sx-\mathrm{vec}\,p_s)$.
//!
//! Per sample ($\hat Z_s=G_sz$ reshaped, $F_s=G_sx_{t+1}$, $V_s=G_s(x_{t+1}-x_t)/h$):
//! - $\partial\mathcal L/\partial w_s=-\hat Z_s:(F_s-p_s)$ (for corotated: separately for the
//!   rotation and the volume term);
//! - $\partial\mathcal L/\partial(\beta_ew_s)=-\hat Z_s:V_s$;
//! - $\partial\mathcal L/\partial p_s=w_s\hat Z_s$ (NH Poisson-ratio sensitivity through the prox).
//!
//! Every per-element quantity uses the element's own $w_e$ (exact on heterogeneous meshes).

use crate::material::law::NhParams;
use crate::material::{frob, lame_dnu, ParamInput};
use crate::solver::adjoint::backward::StepLinearization;
use crate::solver::context::StepContext;
use crate::solver::offload::{Offload, OffloadError, ParamStep};
use rayon::prelude::*;

/// Accumulated gradients of a loss with respect to every parameter class.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Gradients {
    /// $d\mathcal L/dE_e$ per element.
    pub youngs: Vec<f64>,
    /// $d\mathcal L/d\nu$ per body.
    pub nu: Vec<f64>,
    /// $d\mathcal L/d\rho$ per body.
    pub density: Vec<f64>,
    /// $d\mathcal L/d\alpha$ per body.
    pub alpha: Vec<f64>,
    /// $d\mathcal L/d\beta_0$ per body.
    pub beta0: Vec<f64>,
    /// $d\mathcal L/dx_0$ (node-major), including the dependence of prescribed
    /// (Dirichlet) values on the initial positions.
    pub x0: Vec<f64>,
    /// $d\mathcal L/dv_0$.
    pub v0: Vec<f64>,
    /// $d\mathcal L/d s_g$ for a scale $s_g$ multiplying force group $g$ (nominal 1).
    pub force_scale: Vec<f64>,
    /// $d\mathcal L/dg$ (gravity vector).
    pub gravity: [f64; 3],
    /// $d\mathcal L/da_{g,k}$ per muscle group and activation knot (one knot: constant).
    pub muscle_activation: Vec<Vec<f64>>,
    /// $d\mathcal L/d\mu_o$ per obstacle (Coulomb coefficient; $\mu_s$ and $\mu_k$ moved
    /// together).
    pub friction: Vec<f64>,
    /// $d\mathcal L/d\mu_{s,o}$ per obstacle (static coefficient, $\mu_k$ fixed; NCP only).
    pub static_friction: Vec<f64>,
    /// $d\mathcal L/d\tau_o$ per obstacle (rigid translation of its trajectory).
    pub obstacle_offset: Vec<[f64; 3]>,
    /// $d\mathcal L/d\mu_b$ of body–body contact (`contact.body_friction`).
    pub body_friction: f64,
    /// $d\mathcal L/d\mu_s$ of body–body contact (`contact.body_static_friction`).
    pub body_static_friction: f64,
    /// $d\mathcal L/dk_g$ per compliant attachment group (stiffness $k=1/c$).
    pub attachment_stiffness: Vec<f64>,
    /// $d\mathcal L/d\tau_g$ per compliant attachment group (translation of the target).
    pub attachment_offset: Vec<[f64; 3]>,
}

impl Gradients {
    pub fn zeros(sim: &StepContext) -> Self {
        let m = sim.model;
        let nb = m.bodies.len();
        Gradients {
            youngs: vec![0.0; m.num_elements()],
            nu: vec![0.0; nb],
            density: vec![0.0; nb],
            alpha: vec![0.0; nb],
            beta0: vec![0.0; nb],
            x0: vec![0.0; 3 * m.num_nodes()],
            v0: vec![0.0; 3 * m.num_nodes()],
            force_scale: vec![0.0; m.forces.len()],
            gravity: [0.0; 3],
            muscle_activation: m.muscles.iter().map(|g| vec![0.0; g.knots.len()]).collect(),
            friction: vec![0.0; m.obstacles.len()],
            static_friction: vec![0.0; m.obstacles.len()],
            obstacle_offset: vec![[0.0; 3]; m.obstacles.len()],
            body_friction: 0.0,
            body_static_friction: 0.0,
            attachment_stiffness: vec![0.0; m.attachments.len()],
            attachment_offset: vec![[0.0; 3]; m.attachments.len()],
        }
    }
}

/// The states of one step of the reverse sweep: frame (1-based), start $(x_t, v_t)$ and
/// end positions $x_{t+1}$.
#[derive(Clone, Copy)]
pub struct StepStates<'a> {
    pub frame: usize,
    pub x_t: &'a [f64],
    pub v_t: &'a [f64],
    pub x_next: &'a [f64],
}

/// Add the contributions of step `frame` (from $x_t$ to $x_{t+1}$, velocity $v_t$) with
/// adjoint `z` to `grads`. With an accelerator the per-step reductions (material, nodal,
/// force-group and muscle-activation terms) run on it (`device_terms`); the attachment
/// terms stay on the host either way (small node sets whose targets move on the host).
///
/// Errors: a failure of the accelerator's reductions is returned (and `grads` then lacks the
/// step's device terms: the caller must not use it), never dropped; the rollout ends the
/// backward with it (`SolverError::AdjointOffload`, naming the frame).
pub fn accumulate_step(
    sim: &StepContext,
    lin: &StepLinearization,
    step: StepStates,
    z: &[f64],
    grads: &mut Gradients,
) -> Result<(), OffloadError> {
    let model = sim.model;
    let h = model.h;
    let vel: Vec<f64> = (step.x_next.iter().zip(step.x_t))
        .map(|(a, b)| (a - b) / h)
        .collect();
    let t_start = (step.frame - 1) as f64 * h;
    for (g, (dk, dt)) in
        crate::contact::attachment::gradients(&model.attachments, t_start + h, step.x_next, z)
            .into_iter()
            .enumerate()
    {
        grads.attachment_stiffness[g] += dk;
        for c in 0..3 {
            grads.attachment_offset[g][c] += dt[c];
        }
    }
    if let Some(off) = sim.accelerator() {
        return device_terms(sim, off, lin, (step, z, &vel), grads);
    }
    let body_dnu: Vec<_> = (0..model.bodies.len())
        .map(|b| model.body_means_dnu(&model.params, b))
        .collect();
    host_nodal_terms(sim, step, z, &vel, grads);
    lin.muscle
        .activation_gradient(model, z, &mut grads.muscle_activation);
    host_material_terms(sim, lin, (z, &vel, &body_dnu), grads);
    Ok(())
}

/// The nodal terms of one step on the host (spec §7.5), per node $i$ of body $b$ with
/// $r_i=(x_{t+1}-x_t-hv_t)/h^2+\alpha_iv_i-g$: $d\rho_b\mathrel{+}=-(z_i\cdot r_i)m_i/\rho_b$,
/// $d\alpha_b\mathrel{+}=-m_iz_i\cdot v_i$, $dg\mathrel{+}=m_iz_i$; and per force group $g$
/// with profile $\sigma_g$, $ds_g\mathrel{+}=\sigma_g(t)\sum_kf_k\cdot z_{i_k}$.
fn host_nodal_terms(
    sim: &StepContext,
    step: StepStates,
    z: &[f64],
    vel: &[f64],
    grads: &mut Gradients,
) {
    let StepStates {
        frame,
        x_t,
        v_t,
        x_next,
    } = step;
    let model = sim.model;
    let d = &sim.derived;
    let p = &model.params;
    let h = model.h;
    for i in 0..model.num_nodes() {
        let b = model.node_body[i];
        let mut dm = 0.0;
        let mut da = 0.0;
        for k in 0..3 {
            let j = 3 * i + k;
            let r_m = (x_next[j] - x_t[j] - h * v_t[j]) / (h * h) + d.node_alpha[i] * vel[j]
                - model.gravity[k];
            dm -= z[j] * r_m;
            da -= z[j] * d.mass[i] * vel[j];
            grads.gravity[k] += d.mass[i] * z[j];
        }
        grads.density[b] += dm * d.mass[i] / p.density[b];
        grads.alpha[b] += da;
    }
    let t_start = (frame - 1) as f64 * h;
    for (g, fg) in model.forces.iter().enumerate() {
        let s = fg.profile.eval(t_start);
        for (k, &i) in fg.nodes.iter().enumerate() {
            for c in 0..3 {
                grads.force_scale[g] += s * fg.forces[k][c] * z[3 * i + c];
            }
        }
    }
}

/// The per-sample material terms of one step on the host (module doc): per-element
/// $\partial\mathcal L/\partial E_e$, per-body $\partial\mathcal L/\partial\nu$ and
/// $\partial\mathcal L/\partial\beta_0$.
fn host_material_terms(
    sim: &StepContext,
    lin: &StepLinearization,
    (z, vel, body_dnu): (&[f64], &[f64], &[NhParams]),
    grads: &mut Gradients,
) {
    let model = sim.model;
    let d = &sim.derived;
    let p = &model.params;
    // per-sample terms in parallel, summed below in sample order (the same bits on any
    // thread count)
    let per: Vec<(usize, f64, f64, f64)> = (0..model.num_samples())
        .into_par_iter()
        .map(|s| {
            let e = model.samples.elem[s];
            let b = model.elem_body[e];
            let zh = model.gradient_of(s, z);
            let vs = model.gradient_of(s, vel);
            let w = d.w_total(s);
            let ee = p.youngs[e];
            let nu = p.nu[b];
            let dl_dbw = -frob(&zh, &vs); // dL/d(beta_e w_s)
            let body = &model.bodies[b];
            let s_e = body.stiffness_scaling.beta(1.0, ee, body.e_ref);
            // dL/dE_e: weights scale like E (w/E); beta_e*w like E^2 (amplified) or E.
            let c_beta = body.stiffness_scaling.beta_weight_power();
            let mut de = c_beta * d.beta[e] * w / ee * dl_dbw;
            let (de_w, dnu) = body.model.param_gradient(
                lin.sample(s),
                &ParamInput {
                    zh: &zh,
                    youngs: ee,
                    dlame_dnu: lame_dnu(ee, nu),
                    vol: model.samples.vol[s],
                    fit_range: body.fit_range,
                    beta: d.beta[e],
                    dl_dbw,
                    body: &d.nh[b],
                    body_dnu: &body_dnu[b],
                },
            );
            de += de_w;
            (e, de, dnu, s_e * w * dl_dbw)
        })
        .collect();
    for (s, (e, de, dnu, dbeta)) in per.into_iter().enumerate() {
        let b = model.elem_body[model.samples.elem[s]];
        grads.youngs[e] += de;
        grads.nu[b] += dnu;
        grads.beta0[b] += dbeta;
    }
}

/// The per-sample constants of the accelerator's parameter-gradient maps over a rollout
/// (the parameters and PD weights are fixed while an offload lives): what
/// [`crate::material::MaterialModel::param_gradient_linear`] reads besides the sample's
/// linearization, so that the device computes $(G^E_s,G^\nu_s)$ at $x_{t+1}$ itself
/// (`dphd_param_maps`, docs/gpu.md "Gradient terms").
pub struct ParamConstants {
    /// Per sample, 6: $1/E_e$; $\partial w_{a,b}/\partial\nu$ (the law's PD weights at the
    /// Lamé $\nu$-derivatives); $\partial(\bar\mu,\bar\lambda,\bar k)/\partial\nu$ of the body
    /// means (Neo-Hookean; zeros for corotated).
    pub maps: Vec<f64>,
    /// Per sample, 3: the coefficients $(a^E_s,a^\nu_s,a^\beta_s)$ of
    /// $\ell_s=\partial\mathcal L/\partial(\beta_ew_s)$: the $E$ part of $\beta_ew_s$
    /// ($c_\beta\beta_ew_s/E_e$, $c_\beta=2$ amplified, 1 uniform), $\beta_e\sum_k\partial
    /// w_k/\partial\nu$ (the law's $a^\nu$), and $s_ew_s$ for $\beta_0$.
    pub a: Vec<f64>,
}

impl ParamConstants {
    /// The constants of every sample of `model` with PD weights and body means `d`.
    pub fn new(model: &crate::model::Model, d: &crate::model::Derived) -> Self {
        let p = &model.params;
        let ns = model.num_samples();
        let body_dnu: Vec<NhParams> = (0..model.bodies.len())
            .map(|b| model.body_means_dnu(p, b))
            .collect();
        let mut c = ParamConstants {
            maps: Vec::with_capacity(6 * ns),
            a: Vec::with_capacity(3 * ns),
        };
        for s in 0..ns {
            let e = model.samples.elem[s];
            let b = model.elem_body[e];
            let body = &model.bodies[b];
            let (ee, w) = (p.youngs[e], d.w_total(s));
            let scaling = body.stiffness_scaling;
            let (s_e, c_beta) = (
                scaling.beta(1.0, ee, body.e_ref),
                scaling.beta_weight_power(),
            );
            let (dmu, dla) = lame_dnu(ee, p.nu[b]);
            let [dwa, dwb] = body
                .model
                .pd_weights(dmu, dla, model.samples.vol[s], body.fit_range);
            let dn = &body_dnu[b];
            c.maps.extend([1.0 / ee, dwa, dwb, dn.mu, dn.lambda, dn.k]);
            c.a.extend([
                c_beta * d.beta[e] * w / ee,
                d.beta[e] * (dwa + dwb),
                s_e * w,
            ]);
        }
        c
    }
}

/// The per-step reductions of [`accumulate_step`] through the accelerator
/// ([`Offload::param_gradients`]): the force profiles at the step's start here; the
/// material maps at $x_{t+1}$ (from [`ParamConstants`], uploaded with the offload), the
/// contractions with $z$ and the sums per element,
/// body, force group and muscle group there (the nodal and muscle terms of
/// [`host_nodal_terms`] and [`crate::solver::muscle::MuscleLin::activation_gradient`]); the
/// knot chain rule of the activations here. A device failure, or a step without a device
/// plan ([`OffloadError::Unplanned`]), is the error and leaves `grads` unchanged: the terms
/// are never dropped silently.
fn device_terms(
    sim: &StepContext,
    off: &(dyn Offload + Send + Sync + '_),
    lin: &StepLinearization,
    (states, z, vel): (StepStates, &[f64], &[f64]),
    grads: &mut Gradients,
) -> Result<(), OffloadError> {
    let token = lin.device_step.ok_or(OffloadError::Unplanned)?;
    let model = sim.model;
    let t_start = (states.frame - 1) as f64 * model.h;
    let force_profile: Vec<f64> = model
        .forces
        .iter()
        .map(|f| f.profile.eval(t_start))
        .collect();
    let step = ParamStep {
        token,
        z,
        vel,
        alpha: lin.alpha,
        x_t: states.x_t,
        v_t: states.v_t,
        x_next: states.x_next,
        force_profile: &force_profile,
    };
    let sums = off.param_gradients(&step)?;
    let add = |g: &mut [f64], v: &[f64]| g.iter_mut().zip(v).for_each(|(g, v)| *g += v);
    add(&mut grads.youngs, &sums.youngs);
    add(&mut grads.nu, &sums.nu);
    add(&mut grads.beta0, &sums.beta0);
    add(&mut grads.density, &sums.density);
    add(&mut grads.alpha, &sums.alpha);
    add(&mut grads.gravity, &sums.gravity);
    add(&mut grads.force_scale, &sums.force_scale);
    lin.muscle
        .add_knot_gradient(&sums.muscle, &mut grads.muscle_activation);
    Ok(())
}

/// Contact contributions of one step to $\partial\mathcal L/\partial x_t$, $\partial\mathcal L/\partial v_t$.
pub struct ContactStepGradient {
    pub x_t: Vec<f64>,
    pub v_t: Vec<f64>,
}

/// Contact contributions of step `frame` (from $x_t$, $v_t$) to the parameter gradients and
/// to $\partial\mathcal L/\partial(x_t,v_t)$ (spec §7.5). NCP: recomputes $\zeta,\mu$ from the
/// converged adjoint $z$ ($\zeta=G_c^{-1}JA^{-1}(g+\Delta Az)$), then friction coefficients,
/// obstacle offsets and the friction anchors $x_t$. Penalty: the chain rule through the
/// explicit contact force ([`crate::contact::penalty::gradients`]). `None` without contact;
/// a failed solve on the accelerator is the error.
pub fn accumulate_contact(
    sim: &StepContext,
    lin: &StepLinearization,
    step: StepStates,
    (g, z): (&[f64], &[f64]),
    grads: &mut Gradients,
) -> Result<Option<ContactStepGradient>, OffloadError> {
    let StepStates {
        frame, x_t, v_t, ..
    } = step;
    let model = sim.model;
    if crate::contact::penalty_enabled(model) {
        let t = (frame - 1) as f64 * model.h;
        let start = crate::contact::StepStart { t, x: x_t, v: v_t };
        let (gx, gv) = crate::contact::penalty::gradients(
            model,
            &sim.contact_nodes,
            &start,
            z,
            &mut grads.friction,
            &mut grads.obstacle_offset,
        );
        return Ok(Some(ContactStepGradient { x_t: gx, v_t: gv }));
    }
    let Some(c) = lin.contact.as_ref() else {
        return Ok(None);
    };
    let mut gf = g.to_vec();
    sim.zero_prescribed(&mut gf);
    let (mut w, _) = crate::solver::adjoint::backward::global_step(sim, lin, &gf, z)?;
    let (zeta, mu) = c.project(&mut w)?;
    let cg = c.gradients(z, &zeta, &mu, model.obstacles.len(), model.num_nodes());
    for (o, v) in cg.friction.iter().enumerate() {
        grads.friction[o] += v;
    }
    for (o, v) in cg.static_friction.iter().enumerate() {
        grads.static_friction[o] += v;
    }
    grads.body_friction += cg.body_friction;
    grads.body_static_friction += cg.body_static_friction;
    for (o, v) in cg.offset.iter().enumerate() {
        for d in 0..3 {
            grads.obstacle_offset[o][d] += v[d];
        }
    }
    Ok(Some(ContactStepGradient {
        x_t: cg.x_t,
        v_t: vec![0.0; x_t.len()],
    }))
}
