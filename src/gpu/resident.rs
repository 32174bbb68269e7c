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
use super::local::DeviceLocalStep;
use super::system::{idx, DeviceSolve, GpuSystem};
use super::GpuError;
use crate::solver::offload::{MapNorms, ResidentStep};

pub use super::reduce::{partials, ENTRIES_PER_ITEM, MAX_PARTIALS};

/// The axes of one reduced system of the global solve, solved together
/// ([`crate::gpu::system::AxisGroup`]): the composed gather and scatter maps on the device and
/// the block's two buffers.
pub(crate) struct Axis<D: Device> {
    factor: usize,
    q: usize,
    /// Entries of the block (free nodes times `q`).
    len: usize,
    gather: D::Index,
    from: D::Index,
    to: D::Index,
    a: D::Real,
    b: D::Real,
}

impl<D: Device> Axis<D> {
    /// One per distinct reduced system of `sys` (one for all three axes when they share
    /// their free set).
    pub(crate) fn all(dev: &D, sys: &GpuSystem<D>) -> Result<Vec<Self>, GpuError> {
        sys.axis_groups()
            .into_iter()
            .map(|g| {
                Ok(Axis {
                    factor: g.factor,
                    q: g.q,
                    len: g.n * g.q,
                    gather: dev.upload_index(&idx(&g.gather))?,
                    from: dev.upload_index(&idx(&g.from))?,
                    to: dev.upload_index(&idx(&g.to))?,
                    a: dev.zeros(g.n * g.q)?,
                    b: dev.zeros(g.n * g.q)?,
                })
            })
            .collect()
    }
}

/// $A_{FF}^{-1}b$ on the free DoFs of each axis into `out` (node-major; prescribed entries
/// left as they were): per reduced system one gather (free DoFs and permutation composed),
/// the factor's block solve of its axes, one scatter: four launches per system with the
/// explicit inverse factor, where a solve axis by axis took eight per axis.
pub(crate) fn solve_free<D: Device>(
    dev: &D,
    sys: &GpuSystem<D>,
    axes: &mut [Axis<D>],
    (b, out): (&D::Real, &mut D::Real),
    purpose: DeviceSolve,
) -> Result<(), GpuError> {
    for ax in axes.iter_mut() {
        let len = ax.len;
        dev.launch(
            Kernel::GatherPerm,
            len,
            &mut [Arg::Index(&ax.gather), Arg::In(b), Arg::Out(&mut ax.a)],
        )?;
        sys.solve_group_device((ax.factor, ax.q), &mut ax.a, &mut ax.b, purpose)?;
        dev.launch(
            Kernel::PermuteInto,
            len,
            &mut [
                Arg::Index(&ax.from),
                Arg::Index(&ax.to),
                Arg::In(&ax.a),
                Arg::Out(out),
            ],
        )?;
    }
    Ok(())
}

/// The deterministic two-pass reductions: chunk partials on the device, summed in order on
/// the host, or, from [`DEVICE_SUM_FROM`] partials on, on the device (`dphd_sum_groups`,
/// the same order and bits) so that only the sums cross. Several reductions write one
/// buffer at their own offsets and come back in one copy: each copy is a round trip that
/// stalls the launch queue (docs/gpu.md "Profiling").
pub(crate) struct Reducer<D: Device> {
    n3: usize,
    chunks: usize,
    /// Reductions (norms or dot products) one copy holds.
    capacity: usize,
    partial: D::Real,
    /// The device's second pass: one sum per reduction.
    sums: D::Real,
    /// Partials from which the second pass runs on the device ([`DEVICE_SUM_FROM`]).
    device_sum_from: usize,
}

/// Partials (256 KiB) from which a copy of reductions is summed on the device first: a
/// 300-vector Gram–Schmidt pass over the 1M-tet box's 557k-entry vectors writes 4,096
/// partials per dot product, 9.8 MB a copy, against 2.4 kB of sums; below this the copy is
/// small and the extra launch not worth it.
pub(crate) const DEVICE_SUM_FROM: usize = 32 * 1024;

/// Norms one [`Reducer`] returns together at least (the PD map's eight).
pub(crate) const NORMS: usize = 8;

/// One block of dot products for [`Reducer::dots_many`]: $a\cdot B_c$ for the `q` vectors
/// $B_c$ stored one after another in `b`, `a` starting at its offset.
pub(crate) type DotsRequest<'a, D> = (
    (&'a <D as Device>::Real, usize),
    &'a <D as Device>::Real,
    usize,
);

impl<D: Device> Reducer<D> {
    /// Reductions over vectors of `n3` entries, at most `q` (and at least [`NORMS`]) at once.
    pub(crate) fn new(dev: &D, n3: usize, q: usize) -> Result<Self, GpuError> {
        let chunks = partials(n3);
        let capacity = q.max(NORMS);
        Ok(Reducer {
            n3,
            chunks,
            capacity,
            partial: dev.zeros(capacity * chunks)?,
            sums: dev.zeros(capacity)?,
            device_sum_from: DEVICE_SUM_FROM,
        })
    }

    /// The second pass on the device from `partials` partials on (tests force both paths).
    #[cfg(test)]
    pub(crate) fn with_device_sum_from(mut self, partials: usize) -> Self {
        self.device_sum_from = partials;
        self
    }

    fn check(&self, count: usize) -> Result<(), GpuError> {
        if count <= self.capacity {
            Ok(())
        } else {
            Err(GpuError::Length {
                expected: self.capacity,
                got: count,
            })
        }
    }

    /// The sums of the first `count` groups of chunk partials, in order, after one copy (of
    /// those groups only).
    fn sums(&mut self, dev: &D, count: usize) -> Result<Vec<f64>, GpuError> {
        if count > 0 && count * self.chunks >= self.device_sum_from {
            dev.launch(
                Kernel::SumGroups,
                count,
                &mut [
                    Arg::Int(self.chunks as i64),
                    Arg::In(&self.partial),
                    Arg::Out(&mut self.sums),
                ],
            )?;
            return dev.download_prefix(&self.sums, count);
        }
        let p = dev.download_prefix(&self.partial, count * self.chunks)?;
        Ok(p.chunks(self.chunks)
            .take(count)
            .map(|c| c.iter().sum())
            .collect())
    }

    /// $\|a-b\|$ for each pair, in one copy.
    pub(crate) fn dists(
        &mut self,
        dev: &D,
        pairs: &[(&D::Real, &D::Real)],
    ) -> Result<Vec<f64>, GpuError> {
        self.check(pairs.len())?;
        for (i, (a, b)) in pairs.iter().enumerate() {
            dev.launch(
                Kernel::DiffSqPartial,
                self.chunks,
                &mut [
                    Arg::Int(self.n3 as i64),
                    Arg::Int((i * self.chunks) as i64),
                    Arg::In(*a),
                    Arg::In(*b),
                    Arg::Out(&mut self.partial),
                ],
            )?;
        }
        Ok(self
            .sums(dev, pairs.len())?
            .into_iter()
            .map(f64::sqrt)
            .collect())
    }

    /// Each request's dot products ([`DotsRequest`]), in one copy.
    pub(crate) fn dots_many(
        &mut self,
        dev: &D,
        requests: &[DotsRequest<'_, D>],
    ) -> Result<Vec<Vec<f64>>, GpuError> {
        let total: usize = requests.iter().map(|r| r.2).sum();
        self.check(total)?;
        let mut first = 0;
        for &((a, a_off), b, q) in requests {
            dev.launch(
                Kernel::DotsPartial,
                q * self.chunks,
                &mut [
                    Arg::Int(self.n3 as i64),
                    Arg::Int(self.chunks as i64),
                    Arg::Int(a_off as i64),
                    Arg::Int((first * self.chunks) as i64),
                    Arg::In(a),
                    Arg::In(b),
                    Arg::Out(&mut self.partial),
                ],
            )?;
            first += q;
        }
        let mut all = self.sums(dev, total)?.into_iter();
        Ok(requests
            .iter()
            .map(|r| all.by_ref().take(r.2).collect())
            .collect())
    }

    /// $a\cdot B_c$ for the `q` vectors $B_c$ of the block `b`, `a` starting at `a_off`.
    pub(crate) fn dots(
        &mut self,
        dev: &D,
        a: (&D::Real, usize),
        b: &D::Real,
        q: usize,
    ) -> Result<Vec<f64>, GpuError> {
        Ok(self.dots_many(dev, &[(a, b, q)])?.remove(0))
    }
}

/// `out` $=a\,x+b\,y$ on `n` entries.
pub(crate) fn lincomb<D: Device>(
    dev: &D,
    n: usize,
    (a, x): (f64, &D::Real),
    (b, y): (f64, &D::Real),
    out: &mut D::Real,
) -> Result<(), GpuError> {
    dev.launch(
        Kernel::Lincomb,
        n,
        &mut [
            Arg::Real(a),
            Arg::In(x),
            Arg::Real(b),
            Arg::In(y),
            Arg::Out(out),
        ],
    )
}

/// `dst` $=$ `src` on `n` entries.
pub(crate) fn copy<D: Device>(
    dev: &D,
    n: usize,
    src: &D::Real,
    dst: &mut D::Real,
) -> Result<(), GpuError> {
    dev.launch(Kernel::Copy, n, &mut [Arg::In(src), Arg::Out(dst)])
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::Emulator;
    use crate::linalg::{AxisDirichlet, CscMatrix};

    /// A `w`×`w` grid of springs with mass on the diagonal (fill-in under any ordering).
    fn grid(w: usize) -> CscMatrix {
        let n = w * w;
        let mut conn = vec![];
        for i in 0..w {
            for j in 0..w {
                let p = i * w + j;
                if j + 1 < w {
                    conn.extend([p, p + 1]);
                }
                if i + 1 < w {
                    conn.extend([p, p + w]);
                }
            }
        }
        let ptr: Vec<usize> = (0..=conn.len() / 2).map(|e| 2 * e).collect();
        let mut a = CscMatrix::pattern_from_elements(n, &conn, &ptr);
        for e in conn.chunks(2) {
            let (p, q) = (e[0], e[1]);
            a.add(p, p, 1.0);
            a.add(q, q, 1.0);
            a.add(p, q, -1.0);
            a.add(q, p, -1.0);
        }
        a.add_diagonal(&vec![0.1; n]);
        a
    }

    /// The block solve of the axes sharing a free set (one gather, the factor's block solve,
    /// one scatter) equals the axis-by-axis solve bitwise, on both solve paths, with all
    /// three axes in one group and with the z axis in a group of its own.
    #[test]
    fn block_solve_equals_the_axis_by_axis_solve_bitwise() {
        let dev = Emulator;
        let clamp = |nodes: Vec<usize>| AxisDirichlet { nodes };
        for (budget, path) in [(usize::MAX, "inverse factor"), (0, "triangular")] {
            for z_extra in [false, true] {
                let z = if z_extra { vec![0, 5, 17] } else { vec![0, 5] };
                let dir = [clamp(vec![0, 5]), clamp(vec![0, 5]), clamp(z)];
                let sys = GpuSystem::new(dev, grid(7), dir, budget).unwrap();
                let n3 = 3 * sys.a.n;
                let b: Vec<f64> = (0..n3).map(|i| ((i * 37 % 11) as f64) - 5.0).collect();
                let mut axes = Axis::all(&dev, &sys).unwrap();
                assert_eq!(axes.len(), if z_extra { 2 } else { 1 });
                let mut got = vec![0.0; n3];
                solve_free(&dev, &sys, &mut axes, (&b, &mut got), DeviceSolve::Resident).unwrap();
                let mut want = vec![0.0; n3];
                for d in 0..3 {
                    let map = sys.axis_free_dofs(d);
                    let mut v: Vec<f64> = map.iter().map(|&i| b[i]).collect();
                    sys.solve_axis_device(d, &mut v, DeviceSolve::Resident)
                        .unwrap();
                    map.iter().zip(&v).for_each(|(&i, &x)| want[i] = x);
                }
                assert_eq!(got, want, "{path}, z clamped apart: {z_extra}");
            }
        }
    }

    /// The Krylov buffers' $A^{-1}q$ with zero Dirichlet values (one upload, the block solve,
    /// one download: what `DeviceOffload::solve_homogeneous` runs) equals the axis-by-axis host
    /// path (`GpuSystem::try_solve`) bitwise, with one reduced system and with two.
    #[test]
    fn homogeneous_block_solve_equals_the_axis_by_axis_host_path() {
        let dev = Emulator;
        let clamp = |nodes: Vec<usize>| AxisDirichlet { nodes };
        for z_extra in [false, true] {
            let z = if z_extra { vec![0, 5, 17] } else { vec![0, 5] };
            let dir = [clamp(vec![0, 5]), clamp(vec![0, 5]), clamp(z)];
            let sys = GpuSystem::new(dev, grid(7), dir, usize::MAX).unwrap();
            let n3 = 3 * sys.a.n;
            let q: Vec<f64> = (0..n3).map(|i| ((i * 53 % 13) as f64) - 6.0).collect();
            let mut buf = crate::gpu::krylov::KrylovBuffers::new(&dev, &sys).unwrap();
            let got = buf.solve_homogeneous(&dev, &sys, &q).unwrap();
            let mut want = vec![f64::NAN; n3];
            sys.try_solve(&q, None, &mut want).unwrap();
            assert_eq!(got, want, "z clamped apart: {z_extra}");
        }
    }

    /// The device's second pass (`dphd_sum_groups`) returns the host's in-order sums bit for
    /// bit, for norms and for blocks of dot products, one copy of `count` numbers instead of
    /// `count` × partials.
    #[test]
    fn device_second_pass_equals_the_host_sums_bitwise() {
        let dev = crate::gpu::Counted::new(Emulator);
        let n3 = 5_000;
        let q = 40;
        let noise = |k: usize| -> Vec<f64> {
            (0..k)
                .map(|i| ((i * 7919 + 13) % 1009) as f64 / 1009.0 - 0.37)
                .collect()
        };
        let a = dev.upload(&noise(n3)).unwrap();
        let b = dev
            .upload(&noise(q * n3)[..].iter().rev().copied().collect::<Vec<_>>())
            .unwrap();
        let run = |from: usize| {
            let mut red = Reducer::new(&dev, n3, q)
                .unwrap()
                .with_device_sum_from(from);
            let before = dev.traffic().unwrap();
            let dots = red.dots(&dev, (&a, 0), &b, q).unwrap();
            let dists = red.dists(&dev, &[(&a, &b), (&b, &a)]).unwrap();
            let after = dev.traffic().unwrap();
            (dots, dists, after.download_bytes - before.download_bytes)
        };
        let (host_dots, host_dists, host_bytes) = run(usize::MAX);
        let (dev_dots, dev_dists, dev_bytes) = run(0);
        assert_eq!(host_dots, dev_dots);
        assert_eq!(host_dists, dev_dists);
        let parts = crate::gpu::reduce::partials(n3);
        assert_eq!(host_bytes, ((q + 2) * parts * 8) as u64);
        assert_eq!(dev_bytes, ((q + 2) * 8) as u64);
    }
}
