//! The PD local step on a device (spec §6.2 steps 6–7): per-sample projections of corotated +
//! volume bodies and the gather of $b_p=\sum_sG_s^T\mathrm{vec}\,Q_s$. Plan once per model
//! (persistent buffers, the node → sample transpose), execute per PD iteration.
//!
//! Covered here: corotated (+ volume) and Neo-Hookean bodies, and muscle fibres (spec §3.5,
//! `kernels/muscle.cu`; docs/gpu.md lists what is on the device).

use super::device::{Arg, Device};
use super::kernels::Kernel;
use super::GpuError;
use crate::material::MaterialModel;
use crate::model::{Derived, Model};
use crate::solver::offload::MuscleStep;

/// Plain arrays of the local step (structure of arrays, 64-bit indices).
#[derive(Clone, Debug, Default)]
pub struct LocalArrays {
    /// Sample -> entry offsets (`num_samples + 1`).
    pub sample_ptr: Vec<i64>,
    /// Node of each entry.
    pub nodes: Vec<i64>,
    /// Rest gradient of each entry (3 per entry).
    pub grads: Vec<f64>,
    /// Rest positions (3 per node).
    pub rest: Vec<f64>,
    /// Node -> incidence offsets (`num_nodes + 1`), incidences sorted by sample.
    pub inc_ptr: Vec<i64>,
    pub inc_sample: Vec<i64>,
    pub inc_entry: Vec<i64>,
}

/// Why a model cannot run its local step on the device (`None`: every material law and
/// muscle fibres are covered).
pub fn unsupported(_model: &Model) -> Option<String> {
    None
}

// --- muscles (issue 15) ---

/// Host arrays of the muscle kernel: every actuated sample once, its fibre entries in group
/// order (the order in which the CPU's `solver::muscle::add_projections` adds them).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MuscleArrays {
    /// Actuated samples (ascending).
    pub sample: Vec<i64>,
    /// Sample -> entry offsets (`sample.len() + 1`).
    pub ptr: Vec<i64>,
    /// Group of each entry.
    pub group: Vec<i64>,
    /// Unit rest fibre of each entry (3 per entry).
    pub fiber: Vec<f64>,
    /// $w_m=k_mV_s$ of each entry.
    pub weight: Vec<f64>,
    /// Entries of each group in model order (`Model::muscles[g].samples`): the group-major
    /// fibre order of [`crate::solver::offload::MuscleStep`] and of the CPU's sums.
    pub by_group: Vec<Vec<usize>>,
}

impl MuscleArrays {
    /// The muscle groups of `model`, transposed to actuated samples.
    pub fn from_model(model: &Model) -> Self {
        let mut per: std::collections::BTreeMap<usize, Vec<(usize, [f64; 3], f64)>> =
            Default::default();
        for (gi, g) in model.muscles.iter().enumerate() {
            for (&s, m) in g.samples.iter().zip(&g.fibers) {
                per.entry(s).or_default().push((
                    gi,
                    [m[0], m[1], m[2]],
                    g.stiffness * model.samples.vol[s],
                ));
            }
        }
        let mut a = MuscleArrays {
            ptr: vec![0],
            ..Default::default()
        };
        for (s, entries) in per {
            a.sample.push(s as i64);
            for (gi, m, w) in entries {
                a.group.push(gi as i64);
                a.fiber.extend(m);
                a.weight.push(w);
            }
            a.ptr.push(a.group.len() as i64);
        }
        let mut entry_of = std::collections::HashMap::new();
        for u in 0..a.sample.len() {
            for e in a.ptr[u] as usize..a.ptr[u + 1] as usize {
                entry_of.insert((a.group[e] as usize, a.sample[u] as usize), e);
            }
        }
        a.by_group = (model.muscles.iter().enumerate())
            .map(|(gi, g)| g.samples.iter().map(|&s| entry_of[&(gi, s)]).collect())
            .collect();
        a
    }
}

/// The activation of every muscle group of `model` at time `t`.
pub fn activations(model: &Model, t: f64) -> Vec<f64> {
    model.muscles.iter().map(|g| g.activation_at(t)).collect()
}

/// Muscle buffers on the device.
pub(crate) struct DeviceMuscles<D: Device> {
    pub(crate) num: usize,
    pub(crate) sample: D::Index,
    pub(crate) ptr: D::Index,
    group: D::Index,
    pub(crate) fiber: D::Real,
    pub(crate) weight: D::Real,
    act: D::Real,
}

impl<D: Device> DeviceMuscles<D> {
    /// `None` for a model without muscles.
    fn new(dev: &D, model: &Model, t: f64) -> Result<Option<Self>, GpuError> {
        if model.muscles.is_empty() {
            return Ok(None);
        }
        let a = MuscleArrays::from_model(model);
        Ok(Some(DeviceMuscles {
            num: a.sample.len(),
            sample: dev.upload_index(&a.sample)?,
            ptr: dev.upload_index(&a.ptr)?,
            group: dev.upload_index(&a.group)?,
            fiber: dev.upload(&a.fiber)?,
            weight: dev.upload(&a.weight)?,
            act: dev.upload(&activations(model, t))?,
        }))
    }
}

impl LocalArrays {
    /// Flatten the model's samples and build the node -> (sample, entry) transpose.
    pub fn from_model(model: &Model) -> Self {
        let ns = model.num_samples();
        let nn = model.num_nodes();
        let mut a = LocalArrays {
            sample_ptr: vec![0],
            ..Default::default()
        };
        for s in 0..ns {
            let e = model.samples.elem[s];
            for (&i, g) in model.element(e).iter().zip(model.sample_grads(s)) {
                a.nodes.push(i as i64);
                a.grads.extend_from_slice(g);
            }
            a.sample_ptr.push(a.nodes.len() as i64);
        }
        a.rest = model.rest.iter().flat_map(|r| r.iter().copied()).collect();
        let mut count = vec![0i64; nn + 1];
        for &i in &a.nodes {
            count[i as usize + 1] += 1;
        }
        for i in 0..nn {
            count[i + 1] += count[i];
        }
        a.inc_ptr = count.clone();
        let total = a.nodes.len();
        a.inc_sample = vec![0; total];
        a.inc_entry = vec![0; total];
        for s in 0..ns {
            for k in a.sample_ptr[s]..a.sample_ptr[s + 1] {
                let i = a.nodes[k as usize] as usize;
                let slot = count[i] as usize;
                a.inc_sample[slot] = s as i64;
                a.inc_entry[slot] = k;
                count[i] += 1;
            }
        }
        a
    }
}

/// Per-sample material data of the local kernel: kind (0 corotated + volume, 1 NH), the two
/// PD weights (corotated (w_cor, w_vol), NH (w_nh, 0)), and the NH body-mean (mu, lambda, k).
struct SampleWeights {
    kind: Vec<i64>,
    wa: Vec<f64>,
    wb: Vec<f64>,
    nh: Vec<f64>,
    /// The projected Jacobian's cap per sample, $w_s(1+\beta_e/h)$ (its weight in $A$,
    /// `StepLinearization::projected`).
    cap: Vec<f64>,
}

impl SampleWeights {
    fn new(model: &Model, d: &Derived) -> Self {
        let ns = model.num_samples();
        let mut w = SampleWeights {
            kind: Vec::with_capacity(ns),
            wa: Vec::with_capacity(ns),
            wb: Vec::with_capacity(ns),
            nh: Vec::with_capacity(3 * ns),
            cap: Vec::with_capacity(ns),
        };
        for s in 0..ns {
            let e = model.samples.elem[s];
            let b = model.elem_body[e];
            w.cap.push(d.w_total(s) * (1.0 + d.beta[e] / model.h));
            // The PD weights of the law (`Material::pd_weights`); the device kernels
            // (`kernels/*.cu`) have their own arm per law, selected by `kind`.
            w.wa.push(d.w[s][0]);
            w.wb.push(d.w[s][1]);
            match model.bodies[b].model {
                MaterialModel::Corotated => {
                    w.kind.push(0);
                    w.nh.extend([0.0; 3]);
                }
                MaterialModel::Neohookean => {
                    let p = &d.nh[b];
                    w.kind.push(1);
                    w.nh.extend([p.mu, p.lambda, p.k]);
                }
            }
        }
        w
    }
}

/// The node → (sample, entry) transpose on the device: pointers and the two incidence lists.
struct Incidence<D: Device> {
    ptr: D::Index,
    sample: D::Index,
    entry: D::Index,
}

/// `out` $=\sum_sG_s^T\mathrm{vec}\,M_s$ per node through the transpose (a gather: no atomics).
fn gather<D: Device>(
    dev: &D,
    nn: usize,
    inc: &Incidence<D>,
    grads: &D::Real,
    m: &D::Real,
    out: &mut D::Real,
) -> Result<(), GpuError> {
    dev.launch(
        Kernel::GatherRhs,
        nn,
        &mut [
            Arg::Index(&inc.ptr),
            Arg::Index(&inc.sample),
            Arg::Index(&inc.entry),
            Arg::In(grads),
            Arg::In(m),
            Arg::Out(out),
        ],
    )
}

/// Device buffers of the local step.
pub struct DeviceLocalStep<D: Device> {
    ns: usize,
    nn: usize,
    pub(crate) sample_ptr: D::Index,
    pub(crate) nodes: D::Index,
    pub(crate) grads: D::Real,
    rest: D::Real,
    inc: Incidence<D>,
    kind: D::Index,
    wa: D::Real,
    wb: D::Real,
    nh: D::Real,
    cap: D::Real,
    no_cap: D::Real,
    warm: D::Real,
    x: D::Real,
    q: D::Real,
    bp: D::Real,
    muscles: Option<DeviceMuscles<D>>,
}

impl<D: Device> DeviceLocalStep<D> {
    /// Upload the arrays, the material of each sample and the PD weights of `derived`.
    pub fn new(
        dev: &D,
        model: &Model,
        a: &LocalArrays,
        derived: &Derived,
    ) -> Result<Self, GpuError> {
        let ns = a.sample_ptr.len() - 1;
        let nn = a.inc_ptr.len() - 1;
        let w = SampleWeights::new(model, derived);
        Ok(DeviceLocalStep {
            ns,
            nn,
            sample_ptr: dev.upload_index(&a.sample_ptr)?,
            nodes: dev.upload_index(&a.nodes)?,
            grads: dev.upload(&a.grads)?,
            rest: dev.upload(&a.rest)?,
            inc: Incidence {
                ptr: dev.upload_index(&a.inc_ptr)?,
                sample: dev.upload_index(&a.inc_sample)?,
                entry: dev.upload_index(&a.inc_entry)?,
            },
            kind: dev.upload_index(&w.kind)?,
            wa: dev.upload(&w.wa)?,
            wb: dev.upload(&w.wb)?,
            nh: dev.upload(&w.nh)?,
            cap: dev.upload(&w.cap)?,
            no_cap: dev.zeros(ns)?,
            warm: dev.zeros(3 * ns)?,
            x: dev.zeros(3 * nn)?,
            q: dev.zeros(9 * ns)?,
            bp: dev.zeros(3 * nn)?,
            muscles: DeviceMuscles::new(dev, model, derived.muscle_time)?,
        })
    }

    /// The spectral coefficients $\[U,V,W,M,N\]$ of $\Delta A$ at positions `x` (device,
    /// node-major) into `coef` (`dphd_linearize`): `StepLinearization::new`'s with the Hessian
    /// filter `alpha`, or with `projected` its `projected` Jacobian's (each sample's map capped
    /// at its weight in $A$). Muscle fibres are not included
    /// ([`DeviceAdjointProduct::set_muscles`]).
    ///
    /// `flag` (one per sample) gets 1 where the filter changed the sample's NH stretch
    /// Jacobian (`material::Linearization::filtered`), else 0.
    pub fn linearize(
        &self,
        dev: &D,
        x: &D::Real,
        (alpha, projected): (f64, bool),
        (coef, flag): (&mut [D::Real; 5], &mut D::Real),
    ) -> Result<(), GpuError> {
        let [cu, cv, cw, cm, cn] = coef;
        let mut args = self.sample_args(x);
        args.extend([
            Arg::Real(alpha),
            Arg::In(if projected { &self.cap } else { &self.no_cap }),
            Arg::Out(cu),
            Arg::Out(cv),
            Arg::Out(cw),
            Arg::Out(cm),
            Arg::Out(cn),
            Arg::Out(flag),
        ]);
        dev.launch(Kernel::Linearize, self.ns, &mut args)
    }

    /// The arguments the per-sample kernels of the material laws start with
    /// (`dphd_linearize`, `dphd_pd_energy`, `dphd_param_maps`): the samples' entries, rest
    /// gradients and positions `x`, then each sample's law, PD weights and NH body means.
    /// (`dphd_local_step` starts with them too, but writes buffers of this struct, so
    /// [`DeviceLocalStep::compute`] lists them itself.)
    fn sample_args<'a>(&'a self, x: &'a D::Real) -> Vec<Arg<'a, D>> {
        vec![
            Arg::Index(&self.sample_ptr),
            Arg::Index(&self.nodes),
            Arg::In(&self.grads),
            Arg::In(&self.rest),
            Arg::In(x),
            Arg::Index(&self.kind),
            Arg::In(&self.wa),
            Arg::In(&self.wb),
            Arg::In(&self.nh),
        ]
    }

    /// Every sample's PD energy at positions `x` (device, node-major) into `e` (one per
    /// sample; `dphd_pd_energy`): the material part of the trust region's objective
    /// (`solver::trust_region::pd_energy`).
    pub fn pd_energy(&self, dev: &D, x: &D::Real, e: &mut D::Real) -> Result<(), GpuError> {
        let mut args = self.sample_args(x);
        args.push(Arg::Out(e));
        dev.launch(Kernel::PdEnergy, self.ns, &mut args)
    }

    /// The number of samples.
    pub fn num_samples(&self) -> usize {
        self.ns
    }

    /// The law's parameter-gradient maps $(G^E_s,G^\nu_s)$ of every sample at positions `x`
    /// (device, node-major) into `ge`, `gnu` (9 per sample, row-major; `dphd_param_maps`,
    /// spec §7.5): `Material::param_gradient_linear` with the NH stretch Jacobian filtered
    /// by `alpha`, from the per-sample constants `pc` (6 per sample,
    /// `solver::gradient::ParamConstants::maps`).
    pub fn param_maps(
        &self,
        dev: &D,
        (x, alpha): (&D::Real, f64),
        pc: &D::Real,
        (ge, gnu): (&mut D::Real, &mut D::Real),
    ) -> Result<(), GpuError> {
        let mut args = self.sample_args(x);
        args.extend([Arg::In(pc), Arg::Real(alpha), Arg::Out(ge), Arg::Out(gnu)]);
        dev.launch(Kernel::ParamMaps, self.ns, &mut args)
    }

    /// Muscle activations per group (e.g. [`activations`] at the step's time); a no-op for a
    /// model without muscles.
    pub fn set_activations(&mut self, dev: &D, act: &[f64]) -> Result<(), GpuError> {
        match self.muscles.as_mut() {
            Some(m) => dev.write(&mut m.act, act),
            None => Ok(()),
        }
    }

    /// New PD weights (after a parameter change), same model; clears the NH warm starts.
    pub fn set_weights(
        &mut self,
        dev: &D,
        model: &Model,
        derived: &Derived,
    ) -> Result<(), GpuError> {
        let w = SampleWeights::new(model, derived);
        dev.write(&mut self.wa, &w.wa)?;
        dev.write(&mut self.wb, &w.wb)?;
        dev.write(&mut self.nh, &w.nh)?;
        dev.write(&mut self.cap, &w.cap)?;
        if let Some(m) = self.muscles.as_mut() {
            dev.write(&mut m.weight, &MuscleArrays::from_model(model).weight)?;
            dev.write(&mut m.act, &activations(model, derived.muscle_time))?;
        }
        dev.write(&mut self.warm, &vec![0.0; 3 * self.ns])
    }

    /// One local step at positions `x` (node-major), muscle fibres included (at the
    /// activations last set): returns $b_p$ (node-major); the projections $Q_s$ stay on the
    /// device ([`DeviceLocalStep::projections`]).
    pub fn run(&mut self, dev: &D, x: &[f64]) -> Result<Vec<f64>, GpuError> {
        dev.write(&mut self.x, x)?;
        self.compute(dev)?;
        dev.download(&self.bp)
    }

    /// The local step at the device positions [`DeviceLocalStep::x_mut`] into the device
    /// $b_p$ ([`DeviceLocalStep::bp_mut`]): [`DeviceLocalStep::run`] without the transfers.
    pub(crate) fn compute(&mut self, dev: &D) -> Result<(), GpuError> {
        dev.launch(
            Kernel::LocalStep,
            self.ns,
            &mut [
                Arg::Index(&self.sample_ptr),
                Arg::Index(&self.nodes),
                Arg::In(&self.grads),
                Arg::In(&self.rest),
                Arg::In(&self.x),
                Arg::Index(&self.kind),
                Arg::In(&self.wa),
                Arg::In(&self.wb),
                Arg::In(&self.nh),
                Arg::Out(&mut self.warm),
                Arg::Out(&mut self.q),
            ],
        )?;
        if let Some(m) = self.muscles.as_ref() {
            dev.launch(
                Kernel::MuscleLocal,
                m.num,
                &mut [
                    Arg::Index(&m.sample),
                    Arg::Index(&m.ptr),
                    Arg::Index(&m.group),
                    Arg::In(&m.fiber),
                    Arg::In(&m.weight),
                    Arg::In(&m.act),
                    Arg::Index(&self.sample_ptr),
                    Arg::Index(&self.nodes),
                    Arg::In(&self.grads),
                    Arg::In(&self.rest),
                    Arg::In(&self.x),
                    Arg::Out(&mut self.q),
                ],
            )?;
        }
        gather(dev, self.nn, &self.inc, &self.grads, &self.q, &mut self.bp)
    }

    /// The positions the next [`DeviceLocalStep::compute`] reads (node-major, `3n`).
    pub(crate) fn x(&self) -> &D::Real {
        &self.x
    }

    /// $b_p$ of the last [`DeviceLocalStep::compute`] (node-major, `3n`).
    pub(crate) fn bp(&self) -> &D::Real {
        &self.bp
    }

    /// The positions, to overwrite.
    pub(crate) fn x_mut(&mut self) -> &mut D::Real {
        &mut self.x
    }

    /// $b_p$, to overwrite or swap.
    pub(crate) fn bp_mut(&mut self) -> &mut D::Real {
        &mut self.bp
    }

    /// $Q_s$ of the last [`DeviceLocalStep::run`] (9 per sample, row-major).
    pub fn projections(&self, dev: &D) -> Result<Vec<f64>, GpuError> {
        dev.download(&self.q)
    }

    /// `out` $=\sum_sG_s^T\mathrm{vec}\,M_s$ for per-sample matrices `m` (9 per sample):
    /// the right-hand side of the local step, or $\Delta A\,z$ from the spectral products.
    fn gather(&self, dev: &D, m: &D::Real, out: &mut D::Real) -> Result<(), GpuError> {
        gather(dev, self.nn, &self.inc, &self.grads, m, out)
    }
}

/// The backward's $\Delta A\,z$ on a device (spec §7.2, App. A.1): per-sample spectral
/// coefficients uploaded once per backward step (plan), one product per adjoint iteration
/// (execute). The coefficients come from `solver::backward::StepLinearization`.
pub struct DeviceAdjointProduct<D: Device> {
    ns: usize,
    coef: [D::Real; 5],
    /// Per sample: 1 where the last device linearization's filter changed it.
    flag: D::Real,
    /// First-pass partials of the count of `flag`.
    flag_partial: D::Real,
    z: D::Real,
    dp: D::Real,
    out: D::Real,
    muscles: Option<DeviceMuscleLin<D>>,
}

impl<D: Device> DeviceAdjointProduct<D> {
    /// Buffers for a model with the given arrays.
    pub fn new(dev: &D, a: &LocalArrays) -> Result<Self, GpuError> {
        let ns = a.sample_ptr.len() - 1;
        let nn = a.inc_ptr.len() - 1;
        Ok(DeviceAdjointProduct {
            ns,
            coef: [
                dev.zeros(9 * ns)?,
                dev.zeros(9 * ns)?,
                dev.zeros(9 * ns)?,
                dev.zeros(9 * ns)?,
                dev.zeros(9 * ns)?,
            ],
            flag: dev.zeros(ns)?,
            flag_partial: dev.zeros(super::reduce::partials(ns))?,
            z: dev.zeros(3 * nn)?,
            dp: dev.zeros(9 * ns)?,
            out: dev.zeros(3 * nn)?,
            muscles: None,
        })
    }

    /// The step's coefficients computed on the device at positions `x`
    /// ([`DeviceLocalStep::linearize`]): nothing but `x` crosses. Returns the number of
    /// samples whose NH stretch Jacobian the filter changed (0 without a filter, `alpha = 0`,
    /// where nothing is counted).
    pub fn set_step_at(
        &mut self,
        dev: &D,
        step: &DeviceLocalStep<D>,
        x: &[f64],
        filter: (f64, bool),
    ) -> Result<usize, GpuError> {
        dev.write(&mut self.z, x)?;
        step.linearize(dev, &self.z, filter, (&mut self.coef, &mut self.flag))?;
        if filter.0 == 0.0 {
            return Ok(0);
        }
        let count = super::reduce::sum(dev, (&self.flag, self.ns), &mut self.flag_partial)?;
        Ok(count.round() as usize)
    }

    /// Upload the step's coefficients: `coef[s] = [U, V, W, M, N]` (nalgebra matrices).
    pub fn set_step(
        &mut self,
        dev: &D,
        coef: impl Fn(usize) -> [nalgebra::Matrix3<f64>; 5],
    ) -> Result<(), GpuError> {
        let mut host: Vec<Vec<f64>> = (0..5).map(|_| Vec::with_capacity(9 * self.ns)).collect();
        for s in 0..self.ns {
            for (h, m) in host.iter_mut().zip(coef(s)) {
                h.extend((0..3).flat_map(|r| (0..3).map(move |c| m[(r, c)])));
            }
        }
        for (buf, h) in self.coef.iter_mut().zip(&host) {
            dev.write(buf, h)?;
        }
        Ok(())
    }

    /// $\Delta A\,z$ (all DoFs, Dirichlet rows not zeroed), node-major.
    pub fn apply(
        &mut self,
        dev: &D,
        step: &DeviceLocalStep<D>,
        z: &[f64],
    ) -> Result<Vec<f64>, GpuError> {
        dev.write(&mut self.z, z)?;
        let (coef, muscles) = (&self.coef, self.muscles.as_ref());
        product(
            dev,
            step,
            (coef, muscles),
            &self.z,
            (&mut self.dp, &mut self.out),
        )?;
        dev.download(&self.out)
    }

    /// `out` $=\Delta A\,z$ on device vectors (node-major, Dirichlet rows not zeroed): the
    /// Krylov methods' operator on the device (`gpu::krylov`), nothing crosses.
    pub(crate) fn apply_device(
        &mut self,
        dev: &D,
        step: &DeviceLocalStep<D>,
        z: &D::Real,
        out: &mut D::Real,
    ) -> Result<(), GpuError> {
        let (coef, muscles) = (&self.coef, self.muscles.as_ref());
        product(dev, step, (coef, muscles), z, (&mut self.dp, out))
    }
}

/// $\Delta A\,z$ into `out` with the per-sample products in `dp`: the spectral term, the
/// muscle term added to $dp_s$, the gather.
fn product<D: Device>(
    dev: &D,
    step: &DeviceLocalStep<D>,
    (coef, muscles): (&[D::Real; 5], Option<&DeviceMuscleLin<D>>),
    z: &D::Real,
    (dp, out): (&mut D::Real, &mut D::Real),
) -> Result<(), GpuError> {
    let [cu, cv, cw, cm, cn] = coef;
    dev.launch(
        Kernel::SpectralApply,
        step.ns,
        &mut [
            Arg::Index(&step.sample_ptr),
            Arg::Index(&step.nodes),
            Arg::In(&step.grads),
            Arg::In(cu),
            Arg::In(cv),
            Arg::In(cw),
            Arg::In(cm),
            Arg::In(cn),
            Arg::In(z),
            Arg::Out(dp),
        ],
    )?;
    if let Some(m) = muscles {
        let f = &m.fibres;
        dev.launch(
            Kernel::MuscleJacobianApply,
            f.num,
            &mut [
                Arg::Index(&f.sample),
                Arg::Index(&f.ptr),
                Arg::Index(&f.group),
                Arg::In(&f.fiber),
                Arg::In(&f.weight),
                Arg::In(&f.act),
                Arg::In(&m.len),
                Arg::In(&m.dir),
                Arg::Index(&step.sample_ptr),
                Arg::Index(&step.nodes),
                Arg::In(&step.grads),
                Arg::In(z),
                Arg::Out(dp),
            ],
        )?;
    }
    step.gather(dev, dp, out)
}

// --- muscles in the backward's ΔA·z (issue 15) ---

/// The muscle linearization of a backward step on the device: the fibres
/// ([`MuscleArrays`]) and, per fibre entry, $\ell$ and $n$ at $x_{t+1}$.
pub(crate) struct DeviceMuscleLin<D: Device> {
    pub(crate) fibres: DeviceMuscles<D>,
    /// Entry of each fibre in the group-major order of
    /// [`crate::solver::offload::MuscleStep`].
    order: Vec<usize>,
    len: D::Real,
    pub(crate) dir: D::Real,
}

impl<D: Device> DeviceAdjointProduct<D> {
    /// Plan the muscle term of $\Delta A\,z$ for `model`: its fibres on the device and room
    /// for one step's $\ell$, $n$ (a no-op for a model without muscles).
    pub fn plan_muscles(&mut self, dev: &D, model: &Model) -> Result<(), GpuError> {
        if !model.muscles.is_empty() {
            self.muscles = Some(DeviceMuscleLin::new(dev, model)?);
        }
        Ok(())
    }

    /// Upload the step's muscle linearization (group-major $(a_g,\ell,n)$,
    /// [`crate::solver::muscle::MuscleLin::fibre_states`]) so that
    /// [`DeviceAdjointProduct::apply`] includes the muscle term of $\Delta A\,z$ (the CPU's
    /// `MuscleLin::apply`). Needs [`DeviceAdjointProduct::plan_muscles`] first; with no
    /// muscles planned, an empty `step` is a no-op.
    pub fn set_muscles(&mut self, dev: &D, step: &MuscleStep) -> Result<(), GpuError> {
        let nf = self.muscles.as_ref().map_or(0, |m| m.order.len());
        if step.len.len() != nf || step.dir.len() != 3 * nf {
            return Err(GpuError::Length {
                expected: nf,
                got: step.len.len(),
            });
        }
        let Some(m) = self.muscles.as_mut() else {
            return Ok(());
        };
        let (mut len, mut dir) = (vec![0.0; nf], vec![0.0; 3 * nf]);
        for (f, &e) in m.order.iter().enumerate() {
            len[e] = step.len[f];
            dir[3 * e..3 * e + 3].copy_from_slice(&step.dir[3 * f..3 * f + 3]);
        }
        dev.write(&mut m.len, &len)?;
        dev.write(&mut m.dir, &dir)?;
        dev.write(&mut m.fibres.act, step.activations)
    }

    /// The muscle linearization of the last [`DeviceAdjointProduct::set_muscles`], if any.
    pub(crate) fn muscles(&self) -> Option<&DeviceMuscleLin<D>> {
        self.muscles.as_ref()
    }
}

impl<D: Device> DeviceMuscleLin<D> {
    /// Fibre buffers of `model` (which has muscles) and room for one step's $\ell$, $n$.
    fn new(dev: &D, model: &Model) -> Result<Self, GpuError> {
        let a = MuscleArrays::from_model(model);
        let ne = a.group.len();
        let fibres = DeviceMuscles::new(dev, model, 0.0)?.ok_or(GpuError::Arguments {
            kernel: "dphd_muscle_jacobian_apply",
            why: "model has no muscles",
        })?;
        Ok(DeviceMuscleLin {
            fibres,
            order: a.by_group.concat(),
            len: dev.zeros(ne)?,
            dir: dev.zeros(3 * ne)?,
        })
    }
}
