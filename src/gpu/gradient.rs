//! The backward's per-sample material parameter gradients on a device (spec §7.5): the
//! $z$-dependent half of `solver::gradient::accumulate_step` — $\hat Z_s=G_sz$, $G_sv$, their
//! contractions with the law's linear maps ([`crate::solver::offload::ParamStep`]) — and the
//! reductions, per element (a segment gather over each element's samples) and per body (two
//! passes: chunk sums on the device, the chunks of a body summed in order on the host). No
//! atomics: deterministic.

use super::device::{Arg, Device};
use super::kernels::Kernel;
use super::local::DeviceLocalStep;
use super::GpuError;
use crate::model::Model;
use crate::solver::offload::{ParamStep, ParamSums};

/// Samples per chunk of the per-body first pass.
pub const BODY_CHUNK: usize = 256;

/// Segment lists of the reductions and the device buffers of one step.
pub struct DeviceParamGradient<D: Device> {
    ns: usize,
    ne: usize,
    nb: usize,
    elem_ptr: D::Index,
    elem_idx: D::Index,
    chunk_ptr: D::Index,
    chunk_idx: D::Index,
    /// Body of each chunk (host; chunks of a body are consecutive).
    chunk_body: Vec<usize>,
    z: D::Real,
    vel: D::Real,
    ge: D::Real,
    gnu: D::Real,
    a: D::Real,
    out: D::Real,
    elem_sum: D::Real,
    chunk_sum: D::Real,
}

/// `(ptr, idx)` of segments listing the samples of each group in sample order.
fn segments(groups: usize, of: impl Fn(usize) -> usize, ns: usize) -> (Vec<i64>, Vec<i64>) {
    let mut count = vec![0i64; groups + 1];
    (0..ns).for_each(|s| count[of(s) + 1] += 1);
    for g in 0..groups {
        count[g + 1] += count[g];
    }
    let ptr = count.clone();
    let mut idx = vec![0i64; ns];
    for s in 0..ns {
        let g = of(s);
        idx[count[g] as usize] = s as i64;
        count[g] += 1;
    }
    (ptr, idx)
}

impl<D: Device> DeviceParamGradient<D> {
    /// Segment lists for `model`'s elements and bodies, buffers for one step.
    pub fn new(dev: &D, model: &Model) -> Result<Self, GpuError> {
        let ns = model.num_samples();
        let ne = model.num_elements();
        let nb = model.bodies.len();
        let nn = model.num_nodes();
        let (elem_ptr, elem_idx) = segments(ne, |s| model.samples.elem[s], ns);
        let body_of = |s: usize| model.elem_body[model.samples.elem[s]];
        let (body_ptr, body_idx) = segments(nb, body_of, ns);
        let mut chunk_ptr = vec![0i64];
        let mut chunk_body = Vec::new();
        for b in 0..nb {
            let (lo, hi) = (body_ptr[b] as usize, body_ptr[b + 1] as usize);
            let mut at = lo;
            while at < hi {
                at = (at + BODY_CHUNK).min(hi);
                chunk_ptr.push(at as i64);
                chunk_body.push(b);
            }
        }
        Ok(DeviceParamGradient {
            ns,
            ne,
            nb,
            elem_ptr: dev.upload_index(&elem_ptr)?,
            elem_idx: dev.upload_index(&elem_idx)?,
            chunk_ptr: dev.upload_index(&chunk_ptr)?,
            chunk_idx: dev.upload_index(&body_idx)?,
            z: dev.zeros(3 * nn)?,
            vel: dev.zeros(3 * nn)?,
            ge: dev.zeros(9 * ns)?,
            gnu: dev.zeros(9 * ns)?,
            a: dev.zeros(3 * ns)?,
            out: dev.zeros(3 * ns)?,
            elem_sum: dev.zeros(ne)?,
            chunk_sum: dev.zeros(chunk_body.len())?,
            chunk_body,
        })
    }

    /// The per-element and per-body sums of one step's sample gradients.
    pub fn run(
        &mut self,
        dev: &D,
        local: &DeviceLocalStep<D>,
        step: &ParamStep,
    ) -> Result<ParamSums, GpuError> {
        dev.write(&mut self.z, step.z)?;
        dev.write(&mut self.vel, step.vel)?;
        dev.write(&mut self.ge, step.ge)?;
        dev.write(&mut self.gnu, step.gnu)?;
        dev.write(&mut self.a, step.a)?;
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
        let mut per_body = [vec![0.0; self.nb], vec![0.0; self.nb]];
        for (comp, sums) in [1i64, 2].into_iter().zip(per_body.iter_mut()) {
            dev.launch(
                Kernel::SegmentSum,
                self.chunk_body.len(),
                &mut [
                    Arg::Int(3),
                    Arg::Int(comp),
                    Arg::Index(&self.chunk_ptr),
                    Arg::Index(&self.chunk_idx),
                    Arg::In(&self.out),
                    Arg::Out(&mut self.chunk_sum),
                ],
            )?;
            let partial = dev.download(&self.chunk_sum)?;
            for (&b, p) in self.chunk_body.iter().zip(&partial) {
                sums[b] += p;
            }
        }
        let [nu, beta0] = per_body;
        Ok(ParamSums {
            youngs: youngs[..self.ne].to_vec(),
            nu,
            beta0,
        })
    }
}
