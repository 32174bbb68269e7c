//! The backward's per-step parameter-gradient reductions on a device (spec §7.5): the
//! $z$-dependent half of `solver::gradient::accumulate_step`. Material terms: the law's linear
//! maps at $x_{t+1}$ (`dphd_param_maps`), $\hat Z_s=G_sz$, $G_sv$ and their contractions,
//! summed per element (a segment gather over each element's samples) and per body. Nodal
//! terms (density, mass damping, gravity) per node, force-group scales per loaded node, muscle
//! activations per fibre, each summed per group. Every per-group sum is two passes (chunk sums
//! on the device, the chunks of a group summed in order on the host). No atomics:
//! deterministic.

use super::device::{Arg, Device};
use super::kernels::Kernel;
use super::local::{DeviceAdjointProduct, DeviceLocalStep, MuscleArrays};
use super::GpuError;
use crate::model::{Derived, Model};
use crate::solver::gradient::ParamConstants;
use crate::solver::offload::{ParamStep, ParamSums};

/// Items per chunk of the first pass of a per-group sum (samples of a body, nodes of a body
/// or of the model, loaded nodes of a force group, fibres of a muscle group).
pub const BODY_CHUNK: usize = 256;

/// A deterministic per-group sum on the device, two passes: the items of each group (in the
/// order given, the order of the CPU's sum) cut into chunks of at most [`BODY_CHUNK`], one
/// `dphd_segment_sum` item per chunk, then each group's chunk partials added in order on the
/// host. No atomics.
struct ChunkedSum<D: Device> {
    groups: usize,
    ptr: D::Index,
    idx: D::Index,
    /// Group of each chunk (host; the chunks of a group are consecutive).
    chunk_group: Vec<usize>,
    partial: D::Real,
}

impl<D: Device> ChunkedSum<D> {
    /// Chunks of the item lists `lists[g]` of every group `g`.
    fn new(dev: &D, lists: &[Vec<usize>]) -> Result<Self, GpuError> {
        let mut chunks = Vec::new();
        let mut chunk_group = Vec::new();
        for (g, list) in lists.iter().enumerate() {
            for chunk in list.chunks(BODY_CHUNK) {
                chunks.push(chunk.to_vec());
                chunk_group.push(g);
            }
        }
        let (ptr, idx) = segments(&chunks);
        Ok(ChunkedSum {
            groups: lists.len(),
            ptr: dev.upload_index(&ptr)?,
            idx: dev.upload_index(&idx)?,
            partial: dev.zeros(chunk_group.len())?,
            chunk_group,
        })
    }

    /// $\sum_{i\in g}$`src[stride i + comp]` per group.
    fn sums(
        &mut self,
        dev: &D,
        src: &D::Real,
        stride: usize,
        comp: usize,
    ) -> Result<Vec<f64>, GpuError> {
        let mut sums = vec![0.0; self.groups];
        if self.chunk_group.is_empty() {
            return Ok(sums);
        }
        dev.launch(
            Kernel::SegmentSum,
            self.chunk_group.len(),
            &mut [
                Arg::Int(stride as i64),
                Arg::Int(comp as i64),
                Arg::Index(&self.ptr),
                Arg::Index(&self.idx),
                Arg::In(src),
                Arg::Out(&mut self.partial),
            ],
        )?;
        let partial = dev.download(&self.partial)?;
        for (&g, p) in self.chunk_group.iter().zip(&partial) {
            sums[g] += p;
        }
        Ok(sums)
    }
}

/// Items `0..n` grouped by `of(item)` in item order.
fn lists(groups: usize, n: usize, of: impl Fn(usize) -> usize) -> Vec<Vec<usize>> {
    let mut l = vec![Vec::new(); groups];
    (0..n).for_each(|i| l[of(i)].push(i));
    l
}

/// `(ptr, idx)` of a segment list: group `g`'s items are `idx[ptr[g]..ptr[g+1]]`.
fn segments(lists: &[Vec<usize>]) -> (Vec<i64>, Vec<i64>) {
    let mut ptr = vec![0i64];
    let mut idx = Vec::new();
    for list in lists {
        idx.extend(list.iter().map(|&i| i as i64));
        ptr.push(idx.len() as i64);
    }
    (ptr, idx)
}

/// Segment lists of the reductions and the device buffers of one step.
pub struct DeviceParamGradient<D: Device> {
    ns: usize,
    ne: usize,
    elem_ptr: D::Index,
    elem_idx: D::Index,
    bodies: ChunkedSum<D>,
    z: D::Real,
    vel: D::Real,
    /// The step's end $x_{t+1}$ (the material maps' and the nodal terms' positions).
    x_next: D::Real,
    /// Per-sample constants of the maps and of $\ell_s$ ([`ParamConstants`]), uploaded once.
    pc: D::Real,
    a: D::Real,
    ge: D::Real,
    gnu: D::Real,
    out: D::Real,
    elem_sum: D::Real,
    nodal: NodalTerms<D>,
    forces: ForceTerms<D>,
    muscles: MuscleTerms<D>,
}

impl<D: Device> DeviceParamGradient<D> {
    /// Segment lists for `model`'s elements, bodies, nodes, force groups and muscle groups;
    /// the per-node data of `derived` (masses, $\alpha_i$) and the per-sample constants of
    /// the material maps ([`ParamConstants`]); buffers for one step.
    pub fn new(dev: &D, model: &Model, derived: &Derived) -> Result<Self, GpuError> {
        let constants = ParamConstants::new(model, derived);
        let ns = model.num_samples();
        let ne = model.num_elements();
        let nb = model.bodies.len();
        let nn = model.num_nodes();
        let (elem_ptr, elem_idx) = segments(&lists(ne, ns, |s| model.samples.elem[s]));
        let body_of = |s: usize| model.elem_body[model.samples.elem[s]];
        Ok(DeviceParamGradient {
            ns,
            ne,
            elem_ptr: dev.upload_index(&elem_ptr)?,
            elem_idx: dev.upload_index(&elem_idx)?,
            bodies: ChunkedSum::new(dev, &lists(nb, ns, body_of))?,
            z: dev.zeros(3 * nn)?,
            vel: dev.zeros(3 * nn)?,
            x_next: dev.zeros(3 * nn)?,
            pc: dev.upload(&constants.maps)?,
            a: dev.upload(&constants.a)?,
            ge: dev.zeros(9 * ns)?,
            gnu: dev.zeros(9 * ns)?,
            out: dev.zeros(3 * ns)?,
            elem_sum: dev.zeros(ne)?,
            nodal: NodalTerms::new(dev, model, derived)?,
            forces: ForceTerms::new(dev, model)?,
            muscles: MuscleTerms::new(dev, model)?,
        })
    }

    /// Every per-step sum of [`ParamSums`]: the material terms (per element and body), the
    /// nodal terms, the force groups' scales and, with `product`'s muscle linearization of
    /// the same step, the muscle activations.
    pub fn run(
        &mut self,
        dev: &D,
        local: &DeviceLocalStep<D>,
        product: &DeviceAdjointProduct<D>,
        step: &ParamStep,
    ) -> Result<ParamSums, GpuError> {
        dev.write(&mut self.z, step.z)?;
        dev.write(&mut self.x_next, step.x_next)?;
        let mut sums = self.material(dev, local, step)?;
        self.nodal
            .run(dev, (&self.z, &self.x_next), step, &mut sums)?;
        sums.force_scale = self.forces.run(dev, &self.z, step.force_profile)?;
        sums.muscle = self.muscles.run(dev, local, product, &self.z)?;
        Ok(sums)
    }

    /// The per-element E and per-body ν, β0 sums of the step's sample gradients: the maps
    /// at $x_{t+1}$ (`dphd_param_maps`), their contraction (`dphd_param_gradient_samples`),
    /// then segment sums.
    fn material(
        &mut self,
        dev: &D,
        local: &DeviceLocalStep<D>,
        step: &ParamStep,
    ) -> Result<ParamSums, GpuError> {
        dev.write(&mut self.vel, step.vel)?;
        local.param_maps(
            dev,
            (&self.x_next, step.alpha),
            &self.pc,
            (&mut self.ge, &mut self.gnu),
        )?;
        dev.launch(
            Kernel::ParamGradientSamples,
            self.ns,
            &mut [
                Arg::Index(&local.sample_ptr),
                Arg::Index(&local.nodes),
                Arg::In(&local.grads),
                Arg::In(&self.z),
                Arg::In(&self.vel),
                Arg::In(&self.ge),
                Arg::In(&self.gnu),
                Arg::In(&self.a),
                Arg::Out(&mut self.out),
            ],
        )?;
        dev.launch(
            Kernel::SegmentSum,
            self.ne,
            &mut [
                Arg::Int(3),
                Arg::Int(0),
                Arg::Index(&self.elem_ptr),
                Arg::Index(&self.elem_idx),
                Arg::In(&self.out),
                Arg::Out(&mut self.elem_sum),
            ],
        )?;
        let youngs = dev.download(&self.elem_sum)?;
        Ok(ParamSums {
            youngs: youngs[..self.ne].to_vec(),
            nu: self.bodies.sums(dev, &self.out, 3, 1)?,
            beta0: self.bodies.sums(dev, &self.out, 3, 2)?,
            ..Default::default()
        })
    }
}

/// The nodal terms (density, mass damping, gravity; `dphd_nodal_gradient`): per-node masses,
/// $\alpha_i$ and $\rho_{b(i)}$ uploaded once, the step's states per step, sums per body and
/// over all nodes.
struct NodalTerms<D: Device> {
    nn: usize,
    h: f64,
    gravity: [f64; 3],
    mass: D::Real,
    alpha: D::Real,
    rho: D::Real,
    x_t: D::Real,
    v_t: D::Real,
    out: D::Real,
    bodies: ChunkedSum<D>,
    all: ChunkedSum<D>,
}

impl<D: Device> NodalTerms<D> {
    fn new(dev: &D, model: &Model, derived: &Derived) -> Result<Self, GpuError> {
        let nn = model.num_nodes();
        let rho: Vec<f64> = (model.node_body.iter())
            .map(|&b| model.params.density[b])
            .collect();
        let body_of = |i: usize| model.node_body[i];
        Ok(NodalTerms {
            nn,
            h: model.h,
            gravity: model.gravity,
            mass: dev.upload(&derived.mass)?,
            alpha: dev.upload(&derived.node_alpha)?,
            rho: dev.upload(&rho)?,
            x_t: dev.zeros(3 * nn)?,
            v_t: dev.zeros(3 * nn)?,
            out: dev.zeros(5 * nn)?,
            bodies: ChunkedSum::new(dev, &lists(model.bodies.len(), nn, body_of))?,
            all: ChunkedSum::new(dev, &[(0..nn).collect()])?,
        })
    }

    /// The step's per-body $d\rho$, $d\alpha$ and $dg$ into `sums` (`x_next` on the device
    /// already).
    fn run(
        &mut self,
        dev: &D,
        (z, x_next): (&D::Real, &D::Real),
        step: &ParamStep,
        sums: &mut ParamSums,
    ) -> Result<(), GpuError> {
        dev.write(&mut self.x_t, step.x_t)?;
        dev.write(&mut self.v_t, step.v_t)?;
        let [g0, g1, g2] = self.gravity;
        dev.launch(
            Kernel::NodalGradient,
            self.nn,
            &mut [
                Arg::Real(self.h),
                Arg::Real(g0),
                Arg::Real(g1),
                Arg::Real(g2),
                Arg::In(&self.mass),
                Arg::In(&self.alpha),
                Arg::In(&self.rho),
                Arg::In(z),
                Arg::In(&self.x_t),
                Arg::In(x_next),
                Arg::In(&self.v_t),
                Arg::Out(&mut self.out),
            ],
        )?;
        sums.density = self.bodies.sums(dev, &self.out, 5, 0)?;
        sums.alpha = self.bodies.sums(dev, &self.out, 5, 1)?;
        for (k, g) in sums.gravity.iter_mut().enumerate() {
            *g = self.all.sums(dev, &self.out, 5, 2 + k)?[0];
        }
        Ok(())
    }
}

/// The force-group terms (`dphd_force_gradient`): the loaded nodes of every group and their
/// nominal forces uploaded once, the groups' profile values per step, sums per group.
struct ForceTerms<D: Device> {
    items: usize,
    node: D::Index,
    group: D::Index,
    force: D::Real,
    scale: D::Real,
    out: D::Real,
    sums: ChunkedSum<D>,
}

impl<D: Device> ForceTerms<D> {
    fn new(dev: &D, model: &Model) -> Result<Self, GpuError> {
        let (mut node, mut group, mut force, mut lists) = (vec![], vec![], vec![], vec![]);
        for (g, fg) in model.forces.iter().enumerate() {
            lists.push((node.len()..node.len() + fg.nodes.len()).collect());
            node.extend(fg.nodes.iter().map(|&i| i as i64));
            group.extend(std::iter::repeat_n(g as i64, fg.nodes.len()));
            force.extend(fg.forces.iter().flatten());
        }
        Ok(ForceTerms {
            items: node.len(),
            node: dev.upload_index(&node)?,
            group: dev.upload_index(&group)?,
            force: dev.upload(&force)?,
            scale: dev.zeros(model.forces.len())?,
            out: dev.zeros(node.len())?,
            sums: ChunkedSum::new(dev, &lists)?,
        })
    }

    /// $ds_g$ per group with the groups' profile values `profile`.
    fn run(&mut self, dev: &D, z: &D::Real, profile: &[f64]) -> Result<Vec<f64>, GpuError> {
        if self.sums.groups == 0 {
            return Ok(vec![]);
        }
        dev.write(&mut self.scale, profile)?;
        dev.launch(
            Kernel::ForceGradient,
            self.items,
            &mut [
                Arg::Index(&self.node),
                Arg::Index(&self.group),
                Arg::In(&self.force),
                Arg::In(&self.scale),
                Arg::In(z),
                Arg::Out(&mut self.out),
            ],
        )?;
        self.sums.sums(dev, &self.out, 1, 0)
    }
}

/// The muscle activation terms (`dphd_muscle_activation_gradient`) on the fibres and the
/// $n$ of the adjoint product's muscle linearization; sums per group in model order.
struct MuscleTerms<D: Device> {
    out: D::Real,
    sums: ChunkedSum<D>,
}

impl<D: Device> MuscleTerms<D> {
    fn new(dev: &D, model: &Model) -> Result<Self, GpuError> {
        let a = MuscleArrays::from_model(model);
        Ok(MuscleTerms {
            out: dev.zeros(a.group.len())?,
            sums: ChunkedSum::new(dev, &a.by_group)?,
        })
    }

    /// $da_g$ per group; an error if the model has muscles but `product` has no muscle
    /// linearization.
    fn run(
        &mut self,
        dev: &D,
        local: &DeviceLocalStep<D>,
        product: &DeviceAdjointProduct<D>,
        z: &D::Real,
    ) -> Result<Vec<f64>, GpuError> {
        if self.sums.groups == 0 {
            return Ok(vec![]);
        }
        let m = product.muscles().ok_or(GpuError::Arguments {
            kernel: "dphd_muscle_activation_gradient",
            why: "no muscle linearization planned for this step",
        })?;
        let f = &m.fibres;
        dev.launch(
            Kernel::MuscleActivationGradient,
            f.num,
            &mut [
                Arg::Index(&f.sample),
                Arg::Index(&f.ptr),
                Arg::In(&f.fiber),
                Arg::In(&f.weight),
                Arg::In(&m.dir),
                Arg::Index(&local.sample_ptr),
                Arg::Index(&local.nodes),
                Arg::In(&local.grads),
                Arg::In(z),
                Arg::Out(&mut self.out),
            ],
        )?;
        self.sums.sums(dev, &self.out, 1, 0)
    }
}
