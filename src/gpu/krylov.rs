//! The Krylov methods' vectors on a [`Device`] (issue 15, docs/gpu.md "Next" item 1): a
//! [`KrylovSpace`] whose slots are device buffers, so `linalg::krylov`'s GMRES and PCG (the
//! adjoint, the forward's Newton–Krylov phase and Newton polish) run with their vectors
//! resident. Per solve the right-hand side and the start go up and the solution comes down;
//! per iteration only the chunk partials of the dot products cross (two-pass, summed in order
//! on the host, as the resident PD iteration's reductions).
//!
//! The operator is `solver::backward::apply_k` on device vectors:
//! $Kv=\hat Av-\Delta A\,v$ with the prescribed rows zeroed ($\hat A$ by the node-major SpMV,
//! $\Delta A\,v$ by [`super::local::DeviceAdjointProduct::apply_device`] with the step's
//! planned coefficients); the preconditioner is $A^{-1}$ with zero Dirichlet values (per axis
//! a gather of the free entries, [`GpuSystem::solve_axis_device`], a scatter).

use super::device::{Arg, Device};
use super::kernels::Kernel;
use super::resident::{copy, solve_free, Axis, Reducer};
use super::system::{DeviceSolve, GpuSystem};
use super::GpuError;
use crate::linalg::krylov::{slot_pair, KrylovSpace};
use std::sync::{Mutex, MutexGuard};

/// The device state of the Krylov methods of one simulator: the axis maps, the reducer and
/// the slots ($\hat A$ and the prescribed DoFs are the [`GpuSystem`]'s) (grown on demand, kept across solves).
pub struct KrylovBuffers<D: Device> {
    n3: usize,
    axes: Vec<Axis<D>>,
    red: Reducer<D>,
    zero: D::Real,
    /// $\Delta A\,v$ of the operator.
    da: D::Real,
    slots: Vec<D::Real>,
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
            slots: Vec::new(),
        })
    }

    /// Device memory of the slots now allocated (bytes).
    pub fn slot_bytes(&self) -> usize {
        8 * self.n3 * self.slots.len()
    }
}

/// $\Delta A\,v$ on device vectors for one planned step (the offload's product, which checks
/// the step's token and keeps its failures).
pub type Product<'a, D> =
    Box<dyn FnMut(&<D as Device>::Real, &mut <D as Device>::Real) -> Result<(), String> + 'a>;

/// A [`KrylovSpace`] on a device for one solve: holds the Krylov buffers (locked) for its
/// lifetime. Every failure is kept in `error` (the offload's, reported by
/// `Offload::take_error`) and returned.
pub struct DeviceKrylov<'a, D: Device> {
    dev: &'a D,
    sys: &'a GpuSystem<D>,
    buf: MutexGuard<'a, KrylovBuffers<D>>,
    product: Product<'a, D>,
    error: &'a Mutex<Option<String>>,
}

impl<'a, D: Device> DeviceKrylov<'a, D> {
    /// A space on `buf` with the operator's $\Delta A$ from `product`.
    pub fn new(
        (dev, sys): (&'a D, &'a GpuSystem<D>),
        buf: MutexGuard<'a, KrylovBuffers<D>>,
        product: Product<'a, D>,
        error: &'a Mutex<Option<String>>,
    ) -> Self {
        DeviceKrylov {
            dev,
            sys,
            buf,
            product,
            error,
        }
    }

    /// Keep the first failure and pass it on.
    fn kept<T>(&self, r: Result<T, GpuError>) -> Result<T, String> {
        keep(self.error, r)
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
    fn op_raw(&mut self, x: usize, out: usize) -> Result<(), String> {
        let r = self.check(x.max(out));
        self.kept(r)?;
        let (dev, error) = (self.dev, self.error);
        let buf = &mut *self.buf;
        let (xv, ov) = slot_pair(&mut buf.slots, x, out);
        keep(error, self.sys.matrix().apply(dev, buf.n3, xv, ov))?;
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
        keep(error, r)
    }

    /// `out` $=A^{-1}x$ with zero Dirichlet values.
    fn precond_raw(&mut self, x: usize, out: usize) -> Result<(), GpuError> {
        self.check(x.max(out))?;
        let (dev, sys) = (self.dev, self.sys);
        let buf = &mut *self.buf;
        let (xv, ov) = slot_pair(&mut buf.slots, x, out);
        solve_free(dev, sys, &mut buf.axes, (xv, &mut *ov), DeviceSolve::Krylov)?;
        sys.prescribed().impose(dev, &buf.zero, ov)
    }

    /// $y\leftarrow\alpha x+\beta y$.
    fn axpby_raw(&mut self, alpha: f64, x: usize, beta: f64, y: usize) -> Result<(), GpuError> {
        self.check(x.max(y))?;
        let (dev, buf) = (self.dev, &mut *self.buf);
        let (xv, yv) = slot_pair(&mut buf.slots, x, y);
        let args = &mut [Arg::Real(alpha), Arg::In(xv), Arg::Real(beta), Arg::Out(yv)];
        dev.launch(Kernel::Axpby, buf.n3, args)
    }

    /// `out` $=x/s$.
    fn divide_raw(&mut self, x: usize, s: f64, out: usize) -> Result<(), GpuError> {
        self.check(x.max(out))?;
        let (dev, buf) = (self.dev, &mut *self.buf);
        let (xv, ov) = slot_pair(&mut buf.slots, x, out);
        let args = &mut [Arg::Real(s), Arg::In(xv), Arg::Out(ov)];
        dev.launch(Kernel::Divide, buf.n3, args)
    }

    /// `dst` $=$ `src`.
    fn copy_raw(&mut self, src: usize, dst: usize) -> Result<(), GpuError> {
        self.check(src.max(dst))?;
        let (dev, buf) = (self.dev, &mut *self.buf);
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
        dev.write(&mut buf.slots[slot], v)
    }
}

/// Keep the first failure in `error` and pass it on.
fn keep<T>(error: &Mutex<Option<String>>, r: Result<T, GpuError>) -> Result<T, String> {
    r.map_err(|e| {
        let msg = e.to_string();
        let mut kept = error.lock().unwrap_or_else(|p| p.into_inner());
        kept.get_or_insert_with(|| msg.clone());
        msg
    })
}

impl<D: Device> KrylovSpace for DeviceKrylov<'_, D> {
    type Error = String;

    fn reserve(&mut self, count: usize) -> Result<(), String> {
        while self.buf.slots.len() < count {
            let r = self.dev.zeros(self.buf.n3);
            let v = self.kept(r)?;
            self.buf.slots.push(v);
        }
        Ok(())
    }
    fn upload(&mut self, slot: usize, v: &[f64]) -> Result<(), String> {
        let r = self.upload_raw(slot, v);
        self.kept(r)
    }
    fn download(&mut self, slot: usize, out: &mut [f64]) -> Result<(), String> {
        let r = self.download_raw(slot, out);
        self.kept(r)
    }
    fn dot(&mut self, a: usize, b: usize) -> Result<f64, String> {
        let r = self.dot_raw(a, b);
        self.kept(r)
    }
    fn axpby(&mut self, alpha: f64, x: usize, beta: f64, y: usize) -> Result<(), String> {
        let r = self.axpby_raw(alpha, x, beta, y);
        self.kept(r)
    }
    fn divide(&mut self, x: usize, s: f64, out: usize) -> Result<(), String> {
        let r = self.divide_raw(x, s, out);
        self.kept(r)
    }
    fn copy(&mut self, src: usize, dst: usize) -> Result<(), String> {
        let r = self.copy_raw(src, dst);
        self.kept(r)
    }
    fn op(&mut self, x: usize, out: usize) -> Result<(), String> {
        self.op_raw(x, out)
    }
    fn precond(&mut self, x: usize, out: usize) -> Result<(), String> {
        let r = self.precond_raw(x, out);
        self.kept(r)
    }
}
