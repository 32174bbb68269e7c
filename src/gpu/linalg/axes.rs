//! The global solve's axes on device vectors: per reduced system of the [`GpuSystem`] one
//! gather of its axes' free entries, the factor's block solve and one scatter
//! (`solve_free`), what the resident PD iteration and the Krylov space share.

use super::system::{idx, DeviceSolve, GpuSystem};
use crate::gpu::runtime::device::{Arg, Device};
use crate::gpu::runtime::error::GpuError;
use crate::gpu::runtime::kernels::Kernel;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::runtime::emulator::Emulator;
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
            let mut buf = super::super::krylov::KrylovBuffers::new(&dev, &sys).unwrap();
            let got = buf.solve_homogeneous(&dev, &sys, &q).unwrap();
            let mut want = vec![f64::NAN; n3];
            sys.try_solve(&q, None, &mut want).unwrap();
            assert_eq!(got, want, "z clamped apart: {z_extra}");
        }
    }
}
