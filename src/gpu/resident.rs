//! The resident PD iteration on a [`Device`] (spec §6.2 steps 4–9, issue 15): the iterate,
//! $b_p$, the PD step, the force residual and Anderson's history live in device buffers for
//! the whole step; per iteration the host receives the chunk partials of a few norms and of
//! Anderson's $m$ new dot products, and sends the $m$ mixing coefficients. The algorithm
//! (Anderson's slots and guard, the gates, the residual test) stays in the solver, which
//! drives this through `solver::offload::ResidentPd`.
//!
//! One map $\hat x=x_t+A^{-1}(c_u-s_t+b_p(x))$ with the Dirichlet coupling folded into the
//! step's constant: $c_2=c_u-s_t-\hat A\bar u_D$ ($\bar u_D$ the relative Dirichlet values,
//! zero off the prescribed entries), so each axis solve is a gather of the free entries of
//! $c_2+b_p$, the factor's solve and a scatter, all on the device.

use super::device::{Arg, Device};
use super::kernels::Kernel;
use super::linalg::axes::{solve_free, Axis};
use super::linalg::reduce::{copy, lincomb, Reducer};
use super::local::DeviceLocalStep;
use super::system::{DeviceSolve, GpuSystem};
use super::GpuError;
use crate::solver::offload::{MapNorms, ResidentStep};

/// Anderson's history on the device: `window` slots of $\Delta x$, $\Delta g$ (slot $j$ at
/// offset $j\cdot3n$), the last pair, the mixed iterate and the coefficient buffer.
struct History<D: Device> {
    window: usize,
    dx: D::Real,
    dg: D::Real,
    last_x: D::Real,
    last_g: D::Real,
    out: D::Real,
    terms: D::Real,
}

/// Device state of the resident PD loop of one simulator.
pub struct Resident<D: Device> {
    n3: usize,
    axes: Vec<Axis<D>>,
    red: Reducer<D>,
    x_t: D::Real,
    /// $c_2=c_u-s_t-\hat A\bar u_D$.
    c2: D::Real,
    /// $\hat Ax_t+c_u-s_t$ (the floor's reference minus $b_p$).
    f0: D::Real,
    xd: D::Real,
    zero: D::Real,
    xhat: D::Real,
    g: D::Real,
    b: D::Real,
    bp_prev: D::Real,
    tmp: D::Real,
    tmp2: D::Real,
    hist: History<D>,
}

impl<D: Device> Resident<D> {
    /// Buffers for `sys`'s matrix and Dirichlet sets and an Anderson window of `window`.
    pub fn new(dev: &D, sys: &GpuSystem<D>, window: usize) -> Result<Self, GpuError> {
        let n3 = 3 * sys.a.n;
        let w = window.max(1);
        Ok(Resident {
            n3,
            axes: Axis::all(dev, sys)?,
            red: Reducer::new(dev, n3, 2 * w)?,
            x_t: dev.zeros(n3)?,
            c2: dev.zeros(n3)?,
            f0: dev.zeros(n3)?,
            xd: dev.zeros(n3)?,
            zero: dev.zeros(n3)?,
            xhat: dev.zeros(n3)?,
            g: dev.zeros(n3)?,
            b: dev.zeros(n3)?,
            bp_prev: dev.zeros(n3)?,
            tmp: dev.zeros(n3)?,
            tmp2: dev.zeros(n3)?,
            hist: History {
                window,
                dx: dev.zeros(w * n3)?,
                dg: dev.zeros(w * n3)?,
                last_x: dev.zeros(n3)?,
                last_g: dev.zeros(n3)?,
                out: dev.zeros(n3)?,
                terms: dev.zeros(2 * w)?,
            },
        })
    }

    /// The Anderson window the history was sized for.
    pub fn window(&self) -> usize {
        self.hist.window
    }

    /// Upload a step: $x_t$, $\bar x_D$, the first iterate (into the local step's positions)
    /// and the constants $c_2=c_u-s_t-\hat A\bar u_D$, $f_0=\hat Ax_t+c_u-s_t$.
    pub fn begin(
        &mut self,
        (dev, sys): (&D, &GpuSystem<D>),
        local: &mut DeviceLocalStep<D>,
        step: &ResidentStep,
    ) -> Result<(), GpuError> {
        let (n3, a, pres) = (self.n3, sys.matrix(), sys.prescribed());
        dev.write(&mut self.x_t, step.x_t)?;
        dev.write(&mut self.xd, step.xd)?;
        dev.write(local.x_mut(), step.x0)?;
        // c_u - s_t (into tmp)
        dev.write(&mut self.b, step.c)?;
        dev.write(&mut self.g, step.st)?;
        lincomb(dev, n3, (1.0, &self.b), (-1.0, &self.g), &mut self.tmp)?;
        // f0 = A x_t + (c_u - s_t)
        a.apply(dev, n3, &self.x_t, &mut self.g)?;
        lincomb(dev, n3, (1.0, &self.g), (1.0, &self.tmp), &mut self.f0)?;
        // c2 = (c_u - s_t) - A ū_D, ū_D the relative Dirichlet values on the prescribed DoFs
        dev.write(&mut self.b, step.xd_u)?;
        copy(dev, n3, &self.zero, &mut self.xhat)?;
        pres.impose(dev, &self.b, &mut self.xhat)?;
        a.apply(dev, n3, &self.xhat, &mut self.g)?;
        lincomb(dev, n3, (1.0, &self.tmp), (-1.0, &self.g), &mut self.c2)
    }

    /// The PD map at the local step's positions $x_k$ (see [`crate::solver::offload::ResidentPd::pd_map`]).
    pub fn pd_map(
        &mut self,
        dev: &D,
        local: &mut DeviceLocalStep<D>,
        sys: &GpuSystem<D>,
        flags: (bool, bool),
    ) -> Result<MapNorms, GpuError> {
        self.map_xhat(dev, local, sys)?;
        self.map_norms(dev, local, sys, flags)
    }

    /// The PD map's first half: $b_p(x_k)$ and $\hat x=x_t+\hat u$ with $\bar x_D$ imposed
    /// (a contact step projects $\hat x$ in between, `gpu::contact`).
    pub fn map_xhat(
        &mut self,
        dev: &D,
        local: &mut DeviceLocalStep<D>,
        sys: &GpuSystem<D>,
    ) -> Result<(), GpuError> {
        let n3 = self.n3;
        local.compute(dev)?;
        lincomb(dev, n3, (1.0, &self.c2), (1.0, local.bp()), &mut self.b)?;
        self.solve(dev, sys)?;
        // x̂ = (x_t + û) with x̄_D imposed
        lincomb(dev, n3, (1.0, &self.tmp), (1.0, &self.x_t), &mut self.xhat)?;
        sys.prescribed().impose(dev, &self.xd, &mut self.xhat)
    }

    /// $\hat x$ of the map on the device (a contact step's projection adds $X\lambda$).
    pub(crate) fn xhat_mut(&mut self) -> &mut D::Real {
        &mut self.xhat
    }

    /// The PD map's second half: $g_k=\hat x-x_k$ and the norms of [`Resident::pd_map`].
    pub fn map_norms(
        &mut self,
        dev: &D,
        local: &mut DeviceLocalStep<D>,
        sys: &GpuSystem<D>,
        (residual, floor): (bool, bool),
    ) -> Result<MapNorms, GpuError> {
        let n3 = self.n3;
        lincomb(dev, n3, (1.0, &self.xhat), (-1.0, local.x()), &mut self.g)?;
        // every norm of the map in one copy: A g on the free DoFs (prescribed rows zeroed)
        // into tmp, f0 + b_p on them into tmp2
        if residual {
            sys.matrix().apply(dev, n3, &self.g, &mut self.tmp)?;
            sys.prescribed().impose(dev, &self.zero, &mut self.tmp)?;
        }
        if floor {
            lincomb(dev, n3, (1.0, &self.f0), (1.0, local.bp()), &mut self.tmp2)?;
            sys.prescribed().impose(dev, &self.zero, &mut self.tmp2)?;
        }
        let (bp, x) = (local.bp(), local.x());
        let mut pairs = vec![
            (bp, &self.zero),
            (&self.g, &self.zero),
            (x, &self.zero),
            (x, &self.x_t),
            (bp, &self.bp_prev),
            (&self.bp_prev, &self.zero),
        ];
        if residual {
            pairs.push((&self.tmp, &self.zero));
        }
        if floor {
            pairs.push((&self.tmp2, &self.zero));
        }
        let d = self.red.dists(dev, &pairs)?;
        let norms = MapNorms {
            bp: d[0],
            g: d[1],
            x: d[2],
            disp: d[3],
            dbp: d[4],
            bp_prev: d[5],
            residual: residual.then(|| d[6]),
            floor_reference: floor.then(|| d[6 + usize::from(residual)]),
        };
        Ok(norms)
    }

    /// $\hat u=A^{-1}b$ on the free DoFs of each axis, into `tmp` (prescribed entries left
    /// as they were: the caller imposes $\bar x_D$).
    fn solve(&mut self, dev: &D, sys: &GpuSystem<D>) -> Result<(), GpuError> {
        let io = (&self.b, &mut self.tmp);
        solve_free(dev, sys, &mut self.axes, io, DeviceSolve::Resident)
    }

    /// Anderson's push: with `slot`, $\Delta x=x_k-x_{k-1}$ and $\Delta g=g_k-g_{k-1}$ into it;
    /// then $(x_k,g_k)$ becomes the last pair.
    pub fn push(
        &mut self,
        dev: &D,
        local: &DeviceLocalStep<D>,
        slot: Option<usize>,
    ) -> Result<(), GpuError> {
        let (n3, h) = (self.n3, &mut self.hist);
        if let Some(s) = slot {
            for (cur, last, ring) in [
                (local.x(), &h.last_x, &mut h.dx),
                (&self.g, &h.last_g, &mut h.dg),
            ] {
                dev.launch(
                    Kernel::DiffInto,
                    n3,
                    &mut [
                        Arg::Int((s * n3) as i64),
                        Arg::In(cur),
                        Arg::In(last),
                        Arg::Out(ring),
                    ],
                )?;
            }
        }
        copy(dev, n3, local.x(), &mut h.last_x)?;
        copy(dev, n3, &self.g, &mut h.last_g)
    }

    /// $(\Delta g_{slot}\cdot\Delta g_j,\ \Delta g_j\cdot g_k)$ for the slots $j$ of `live`.
    pub fn dots(
        &mut self,
        dev: &D,
        slot: usize,
        live: &[usize],
    ) -> Result<(Vec<f64>, Vec<f64>), GpuError> {
        let (n3, q) = (self.n3, self.hist.window.max(1));
        let dg = &self.hist.dg;
        let mut both = self
            .red
            .dots_many(dev, &[((dg, slot * n3), dg, q), ((&self.g, 0), dg, q)])?;
        let (rhs, row) = (both.pop().expect("two"), both.pop().expect("two"));
        Ok((
            live.iter().map(|&j| row[j]).collect(),
            live.iter().map(|&j| rhs[j]).collect(),
        ))
    }

    /// The mixed iterate $x_k+g_k-\sum_j\gamma_j(\Delta x_j+\Delta g_j)$ into the history's output.
    pub fn mix(
        &mut self,
        dev: &D,
        local: &DeviceLocalStep<D>,
        terms: &[(usize, f64)],
    ) -> Result<(), GpuError> {
        let h = &mut self.hist;
        let mut t = vec![0.0; 2 * h.window.max(1)];
        for (j, &(slot, gamma)) in terms.iter().enumerate() {
            t[2 * j] = slot as f64;
            t[2 * j + 1] = gamma;
        }
        dev.write(&mut h.terms, &t)?;
        dev.launch(
            Kernel::AndersonMix,
            self.n3,
            &mut [
                Arg::Int(terms.len() as i64),
                Arg::In(&h.terms),
                Arg::In(&h.dx),
                Arg::In(&h.dg),
                Arg::In(local.x()),
                Arg::In(&self.g),
                Arg::Out(&mut h.out),
            ],
        )
    }

    /// $x_{k+1}$ = the mixed iterate with $\bar x_D$ imposed (into the local step's positions);
    /// $b_p(x_k)$ becomes the previous $b_p$.
    pub fn accept(
        &mut self,
        (dev, sys): (&D, &GpuSystem<D>),
        local: &mut DeviceLocalStep<D>,
    ) -> Result<(), GpuError> {
        sys.prescribed().impose(dev, &self.xd, &mut self.hist.out)?;
        std::mem::swap(local.x_mut(), &mut self.hist.out);
        std::mem::swap(local.bp_mut(), &mut self.bp_prev);
        Ok(())
    }

    /// $\hat x$ of the last map.
    pub fn xhat(&self, dev: &D) -> Result<Vec<f64>, GpuError> {
        dev.download(&self.xhat)
    }
}
