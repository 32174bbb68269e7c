//! The Krylov methods' vectors on a [`Device`] (issue 15, docs/gpu.md "Krylov vectors"): a
//! [`KrylovSpace`] whose slots are device buffers, so `linalg::krylov`'s GMRES and PCG (the
//! adjoint, the forward's Newton–Krylov phase and Newton polish) run with their vectors
//! resident. Per solve the right-hand side and the start go up and the solution comes down;
//! per iteration only the chunk partials of the dot products cross (two-pass, summed in order
//! on the host, as the resident PD iteration's reductions).
//!
//! The operator is `solver::backward::apply_k` on device vectors:
//! $Kv=\hat Av-\Delta A\,v$ with the prescribed rows zeroed ($\hat A$ by the node-major SpMV,
//! $\Delta A\,v$ by `crate::gpu::local::DeviceAdjointProduct::apply_device` with the step's
//! planned coefficients); the preconditioner is $A^{-1}$ with zero Dirichlet values (per
//! reduced system one gather of its axes' free entries, the factor's block solve, one
//! scatter: `axes::solve_free`). GMRES orthogonalizes by classical Gram–Schmidt twice
//! ([`KrylovSpace::orthogonalize`]: one block reduction per pass).

use super::axes::{solve_free, Axis};
use super::reduce::{copy, Reducer};
use crate::gpu::linalg::system::{DeviceSolve, GpuSystem};
use crate::gpu::runtime::device::{Arg, Device};
use crate::gpu::runtime::error::GpuError;
use crate::gpu::runtime::kernels::Kernel;
use crate::linalg::krylov::{slot_pair, KrylovSpace};
use crate::solver::offload::OffloadError;
use std::sync::MutexGuard;

/// The device state of the Krylov methods of one simulator: the axis maps, the reducer and
/// the slots ($\hat A$ and the prescribed DoFs are the [`GpuSystem`]'s) (grown on demand, kept across solves).
pub struct KrylovBuffers<D: Device> {
    n3: usize,
    axes: Vec<Axis<D>>,
    red: Reducer<D>,
    zero: D::Real,
    /// $\Delta A\,v$ of the operator.
    da: D::Real,
    /// The result of [`KrylovBuffers::solve_homogeneous`].
    tmp: D::Real,
    slots: Vec<D::Real>,
    /// Writes to each slot so far (what [`Block`] checks its copies against).
    writes: Vec<u64>,
    /// The contiguous copy of the Gram–Schmidt basis (built at the first orthogonalization).
    block: Option<Block<D>>,
}

/// The basis of classical Gram–Schmidt in one buffer, as `dphd_dots_partial` and
/// `dphd_subtract_block` read it: vector `c` at `c * n3`. `held[c]` is the slot and its write
/// count copied there, so an Arnoldi step copies only its new vector.
struct Block<D: Device> {
    cap: usize,
    v: D::Real,
    held: Vec<Option<(usize, u64)>>,
    /// The coefficients $h$ of the update (padded to `cap`).
    h: D::Real,
    red: Reducer<D>,
}

impl<D: Device> Block<D> {
    fn new(dev: &D, n3: usize, cap: usize) -> Result<Self, GpuError> {
        Ok(Block {
            cap,
            v: dev.zeros(cap * n3)?,
            held: vec![None; cap],
            h: dev.zeros(cap)?,
            red: Reducer::new(dev, n3, cap)?,
        })
    }
}

impl<D: Device> KrylovBuffers<D> {
    /// Buffers for `sys`'s matrix and Dirichlet sets (no slots yet).
    pub fn new(dev: &D, sys: &GpuSystem<D>) -> Result<Self, GpuError> {
        let n3 = 3 * sys.a.n;
        Ok(KrylovBuffers {
            n3,
            axes: Axis::all(dev, sys)?,
            red: Reducer::new(dev, n3, 1)?,
            zero: dev.zeros(n3)?,
            da: dev.zeros(n3)?,
            tmp: dev.zeros(n3)?,
            slots: Vec::new(),
            writes: Vec::new(),
            block: None,
        })
    }

    /// $A^{-1}q$ with zero Dirichlet values (the contract of
    /// `LinearSolver::solve_homogeneous`): one upload, the block solve of each reduced system
    /// (`axes::solve_free`), one download, where the axis-by-axis host path
    /// ([`GpuSystem::try_solve`]) copies each axis both ways; the same values bitwise.
    pub(crate) fn solve_homogeneous(
        &mut self,
        dev: &D,
        sys: &GpuSystem<D>,
        q: &[f64],
    ) -> Result<Vec<f64>, GpuError> {
        dev.write(&mut self.da, q)?;
        let io = (&self.da, &mut self.tmp);
        solve_free(dev, sys, &mut self.axes, io, DeviceSolve::Krylov)?;
        sys.prescribed().impose(dev, &self.zero, &mut self.tmp)?;
        dev.download(&self.tmp)
    }

    /// Note a write to `slot` (its copy in the [`Block`], if any, is stale).
    fn touch(&mut self, slot: usize) {
        if let Some(w) = self.writes.get_mut(slot) {
            *w += 1;
        }
    }

    /// Make the block hold the slots `basis` in order, copying those not already there.
    fn fill_block(&mut self, dev: &D, basis: &[usize]) -> Result<(), GpuError> {
        let n3 = self.n3;
        if self.block.as_ref().is_none_or(|b| b.cap < basis.len()) {
            // doubling, but no further than GMRES's basis can grow (its slots are the
            // basis, the directions and four more): restart 300 takes 302 vectors, not 512
            let most = self.slots.len() / 2;
            let cap = basis
                .len()
                .max(self.block.as_ref().map_or(0, |b| (2 * b.cap).min(most)));
            self.block = Some(Block::new(dev, n3, cap)?);
        }
        let block = self
            .block
            .as_mut()
            .expect("the block was built just above when absent or too small");
        for (c, &slot) in basis.iter().enumerate() {
            let now = (slot, self.writes[slot]);
            if block.held[c] == Some(now) {
                continue;
            }
            // v[c * n3 + i] = slot[i] - 0 (exact)
            dev.launch(
                Kernel::DiffInto,
                n3,
                &mut [
                    Arg::Int((c * n3) as i64),
                    Arg::In(&self.slots[slot]),
                    Arg::In(&self.zero),
                    Arg::Out(&mut block.v),
                ],
            )?;
            block.held[c] = Some(now);
        }
        Ok(())
    }

    /// Device memory of the slots now allocated (bytes).
    pub fn slot_bytes(&self) -> usize {
        8 * self.n3 * self.slots.len()
    }
}

/// $\Delta A\,v$ on device vectors for one planned step (the offload's product, which checks
/// the step's token and keeps its failures).
pub type Product<'a, D> =
    Box<dyn FnMut(&<D as Device>::Real, &mut <D as Device>::Real) -> Result<(), OffloadError> + 'a>;

/// A [`KrylovSpace`] on a device for one solve: holds the Krylov buffers (locked) for its
/// lifetime. Every failure is returned to the Krylov method, which ends with it.
pub struct DeviceKrylov<'a, D: Device> {
    dev: &'a D,
    sys: &'a GpuSystem<D>,
    buf: MutexGuard<'a, KrylovBuffers<D>>,
    product: Product<'a, D>,
}

impl<'a, D: Device> DeviceKrylov<'a, D> {
    /// A space on `buf` with the operator's $\Delta A$ from `product`.
    pub fn new(
        (dev, sys): (&'a D, &'a GpuSystem<D>),
        buf: MutexGuard<'a, KrylovBuffers<D>>,
        product: Product<'a, D>,
    ) -> Self {
        DeviceKrylov {
            dev,
            sys,
            buf,
            product,
        }
    }

    /// The error of a slot not reserved.
    fn check(&self, s: usize) -> Result<(), GpuError> {
        let have = self.buf.slots.len();
        if s < have {
            Ok(())
        } else {
            Err(GpuError::Length {
                expected: have,
                got: s + 1,
            })
        }
    }

    /// `out` $=\hat Ax-\Delta A\,x$ with the prescribed rows zeroed.
    fn op_raw(&mut self, x: usize, out: usize) -> Result<(), OffloadError> {
        self.check(x.max(out))?;
        let dev = self.dev;
        let buf = &mut *self.buf;
        buf.touch(out);
        let (xv, ov) = slot_pair(&mut buf.slots, x, out);
        self.sys.matrix().apply(dev, buf.n3, xv, ov)?;
        (self.product)(xv, &mut buf.da)?;
        let r = dev
            .launch(
                Kernel::Axpby,
                buf.n3,
                &mut [
                    Arg::Real(-1.0),
                    Arg::In(&buf.da),
                    Arg::Real(1.0),
                    Arg::Out(ov),
                ],
            )
            .and_then(|_| self.sys.prescribed().impose(dev, &buf.zero, ov));
        Ok(r?)
    }

    /// `out` $=A^{-1}x$ with zero Dirichlet values.
    fn precond_raw(&mut self, x: usize, out: usize) -> Result<(), GpuError> {
        self.check(x.max(out))?;
        let (dev, sys) = (self.dev, self.sys);
        let buf = &mut *self.buf;
        buf.touch(out);
        let (xv, ov) = slot_pair(&mut buf.slots, x, out);
        solve_free(dev, sys, &mut buf.axes, (xv, &mut *ov), DeviceSolve::Krylov)?;
        sys.prescribed().impose(dev, &buf.zero, ov)
    }

    /// $y\leftarrow\alpha x+\beta y$.
    fn axpby_raw(&mut self, alpha: f64, x: usize, beta: f64, y: usize) -> Result<(), GpuError> {
        self.check(x.max(y))?;
        let (dev, buf) = (self.dev, &mut *self.buf);
        buf.touch(y);
        let (xv, yv) = slot_pair(&mut buf.slots, x, y);
        let args = &mut [Arg::Real(alpha), Arg::In(xv), Arg::Real(beta), Arg::Out(yv)];
        dev.launch(Kernel::Axpby, buf.n3, args)
    }

    /// `out` $=x/s$.
    fn divide_raw(&mut self, x: usize, s: f64, out: usize) -> Result<(), GpuError> {
        self.check(x.max(out))?;
        let (dev, buf) = (self.dev, &mut *self.buf);
        buf.touch(out);
        let (xv, ov) = slot_pair(&mut buf.slots, x, out);
        let args = &mut [Arg::Real(s), Arg::In(xv), Arg::Out(ov)];
        dev.launch(Kernel::Divide, buf.n3, args)
    }

    /// `dst` $=$ `src`.
    fn copy_raw(&mut self, src: usize, dst: usize) -> Result<(), GpuError> {
        self.check(src.max(dst))?;
        let (dev, buf) = (self.dev, &mut *self.buf);
        buf.touch(dst);
        let (sv, dv) = slot_pair(&mut buf.slots, src, dst);
        copy(dev, buf.n3, sv, dv)
    }

    /// $a\cdot b$ (two-pass).
    fn dot_raw(&mut self, a: usize, b: usize) -> Result<f64, GpuError> {
        self.check(a.max(b))?;
        let (dev, buf) = (self.dev, &mut *self.buf);
        let d = buf.red.dots(dev, (&buf.slots[a], 0), &buf.slots[b], 1)?;
        Ok(d[0])
    }

    /// Several dot products in one copy.
    fn dots_raw(&mut self, pairs: &[(usize, usize)]) -> Result<Vec<f64>, GpuError> {
        let top = pairs.iter().map(|&(a, b)| a.max(b)).max().unwrap_or(0);
        self.check(top)?;
        let (dev, buf) = (self.dev, &mut *self.buf);
        let requests: Vec<_> = pairs
            .iter()
            .map(|&(a, b)| ((&buf.slots[a], 0), &buf.slots[b], 1))
            .collect();
        Ok(buf.red.dots_many(dev, &requests)?.concat())
    }

    /// `out` $\leftarrow$ slot `slot`.
    fn download_raw(&mut self, slot: usize, out: &mut [f64]) -> Result<(), GpuError> {
        self.check(slot)?;
        let v = self.dev.download(&self.buf.slots[slot])?;
        if v.len() != out.len() {
            return Err(GpuError::Length {
                expected: v.len(),
                got: out.len(),
            });
        }
        out.copy_from_slice(&v);
        Ok(())
    }

    /// Slot `slot` $\leftarrow$ `v`.
    fn upload_raw(&mut self, slot: usize, v: &[f64]) -> Result<(), GpuError> {
        self.check(slot)?;
        let (dev, buf) = (self.dev, &mut *self.buf);
        buf.touch(slot);
        dev.write(&mut buf.slots[slot], v)
    }

    /// Classical Gram–Schmidt twice: per pass $h=V^Tw$ (one block reduction, one round
    /// trip) and $w\leftarrow w-Vh$ (one launch).
    fn orthogonalize_raw(&mut self, w: usize, basis: &[usize]) -> Result<Vec<f64>, GpuError> {
        self.check(basis.iter().copied().chain([w]).max().unwrap_or(0))?;
        if basis.contains(&w) {
            return Err(GpuError::Arguments {
                kernel: "orthogonalize",
                why: "the vector is one of its basis slots",
            });
        }
        let (dev, q) = (self.dev, basis.len());
        let mut h = vec![0.0; q];
        if q == 0 {
            return Ok(h);
        }
        let buf = &mut *self.buf;
        buf.touch(w);
        let n3 = buf.n3;
        buf.fill_block(dev, basis)?;
        let block = buf
            .block
            .as_mut()
            .expect("fill_block succeeded just above, so the block is allocated");
        for _ in 0..2 {
            let d = block.red.dots(dev, (&buf.slots[w], 0), &block.v, q)?;
            let mut padded = d.clone();
            padded.resize(block.cap, 0.0);
            dev.write(&mut block.h, &padded)?;
            dev.launch(
                Kernel::SubtractBlock,
                n3,
                &mut [
                    Arg::Int(q as i64),
                    Arg::In(&block.h),
                    Arg::In(&block.v),
                    Arg::Out(&mut buf.slots[w]),
                ],
            )?;
            h.iter_mut().zip(&d).for_each(|(hi, di)| *hi += di);
        }
        Ok(h)
    }
}

impl<D: Device> KrylovSpace for DeviceKrylov<'_, D> {
    type Error = OffloadError;

    fn reserve(&mut self, count: usize) -> Result<(), OffloadError> {
        while self.buf.slots.len() < count {
            let v = self.dev.zeros(self.buf.n3)?;
            self.buf.slots.push(v);
            self.buf.writes.push(0);
        }
        Ok(())
    }
    fn upload(&mut self, slot: usize, v: &[f64]) -> Result<(), OffloadError> {
        Ok(self.upload_raw(slot, v)?)
    }
    fn download(&mut self, slot: usize, out: &mut [f64]) -> Result<(), OffloadError> {
        Ok(self.download_raw(slot, out)?)
    }
    fn dot(&mut self, a: usize, b: usize) -> Result<f64, OffloadError> {
        Ok(self.dot_raw(a, b)?)
    }
    fn dots(&mut self, pairs: &[(usize, usize)]) -> Result<Vec<f64>, OffloadError> {
        Ok(self.dots_raw(pairs)?)
    }
    fn axpby(&mut self, alpha: f64, x: usize, beta: f64, y: usize) -> Result<(), OffloadError> {
        Ok(self.axpby_raw(alpha, x, beta, y)?)
    }
    fn divide(&mut self, x: usize, s: f64, out: usize) -> Result<(), OffloadError> {
        Ok(self.divide_raw(x, s, out)?)
    }
    fn copy(&mut self, src: usize, dst: usize) -> Result<(), OffloadError> {
        Ok(self.copy_raw(src, dst)?)
    }
    fn op(&mut self, x: usize, out: usize) -> Result<(), OffloadError> {
        self.op_raw(x, out)
    }
    fn precond(&mut self, x: usize, out: usize) -> Result<(), OffloadError> {
        Ok(self.precond_raw(x, out)?)
    }
    fn orthogonalize(&mut self, w: usize, basis: &[usize]) -> Result<Vec<f64>, OffloadError> {
        Ok(self.orthogonalize_raw(w, basis)?)
    }
}
