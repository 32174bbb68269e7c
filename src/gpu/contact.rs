//! The dense contact operator of a PD step on a [`Device`] (spec §2.9 "Delassus", §6.2
//! steps 3 and 10–18; docs/gpu.md "Contact on the device"), for the resident PD loop.
//!
//! Per step ([`DeviceContact::begin`]): the contact rows go up once as fixed-size records
//! ([`RowRecords`]); for each reduced system the unit spikes of the distinct contact nodes are
//! built on the device (`dphd_contact_spikes`: no $3n$-long right-hand side crosses), solved
//! by the device factor's multi-RHS pass (`GpuSystem::solve_many_device`) and scattered into
//! node-major columns $X=A^{-1}J^T$ that stay on the device; $W=JX$ is formed there
//! (`dphd_contact_delassus`) and comes down once ($m^2$ numbers). Per PD iteration
//! ([`DeviceContact::delta`], [`DeviceContact::project`]): $\delta_0=J\hat x-d$ down ($m$
//! numbers), the multipliers $\lambda$ up ($m$ numbers), $\hat x\mathrel{+}=X\lambda$ on the
//! device: two copies and three launches whatever the number of contacts. The small dense
//! NCP solve stays on the host (`contact::solve_from_delta`): it is a sequential semismooth
//! Newton iteration with an LU of the coupled rows and a line search, whose every step would
//! otherwise be a round trip of its own.
//!
//! Each kernel runs the host code's arithmetic in its order
//! (`contact::DenseDelassus::{new, add_x}`, `contact::ContactSet::delta`), so with the same
//! columns the device's $W$, $\delta_0$ and $\hat x$ are the host's to the bit (unit test).

use super::device::{Arg, Device};
use super::kernels::Kernel;
use super::system::{GpuSystem, MULTI_RHS_BYTES};
use super::GpuError;
use crate::contact::ContactSet;
use nalgebra::DMatrix;

/// Doubles of one row record (`kernels/contact.cu` `CONTACT_ROW`): direction (3), $d_r$, and
/// four terms (node, column of $X$, coefficient).
pub const ROW: usize = 16;

/// Bytes of the columns $X$ ([`DeviceContact::columns_bytes`]) above which a step's contact
/// stays on the host loop (the dense form's columns are (distinct contact nodes) × $3n$).
pub const MAX_COLUMN_BYTES: usize = 1 << 31;

/// The host side of a step's contact rows for the device: the row records, the distinct
/// nodes of the rows' terms (the columns of $X$, ascending) and, per column, its
/// (row, coefficient) entries in row order (the gather of `dphd_contact_forces`).
pub struct RowRecords {
    pub rows: Vec<f64>,
    pub col_nodes: Vec<usize>,
    pub ptr: Vec<f64>,
    pub ent: Vec<f64>,
}

impl RowRecords {
    /// The records of `set`'s rows (terms with a zero coefficient are skipped, as the host's
    /// dense operator skips them).
    pub fn new(set: &ContactSet) -> RowRecords {
        let m = set.nrows();
        let mut col_nodes: Vec<usize> = (0..m)
            .flat_map(|r| set.row_terms(r))
            .filter(|(_, c)| *c != 0.0)
            .map(|(i, _)| i)
            .collect();
        col_nodes.sort_unstable();
        col_nodes.dedup();
        let col_of = |i: usize| col_nodes.binary_search(&i).unwrap_or(0);
        let mut rows = vec![0.0; m * ROW];
        let mut per_col: Vec<Vec<(usize, f64)>> = vec![Vec::new(); col_nodes.len()];
        for r in 0..m {
            let rec = &mut rows[r * ROW..(r + 1) * ROW];
            let a = &set.row_dir[r];
            rec[..3].copy_from_slice(&[a[0], a[1], a[2]]);
            rec[3] = set.row_d[r];
            for (t, (i, c)) in set.row_terms(r).into_iter().enumerate() {
                if c == 0.0 {
                    continue;
                }
                let col = col_of(i);
                rec[4 + 3 * t] = i as f64;
                rec[5 + 3 * t] = col as f64;
                rec[6 + 3 * t] = c;
                per_col[col].push((r, c));
            }
        }
        let mut ptr = Vec::with_capacity(col_nodes.len() + 1);
        let mut ent = Vec::new();
        ptr.push(0.0);
        for list in &per_col {
            for &(r, c) in list {
                ent.extend([r as f64, c]);
            }
            ptr.push((ent.len() / 2) as f64);
        }
        RowRecords {
            rows,
            col_nodes,
            ptr,
            ent,
        }
    }
}

/// One reduced system's maps for the spikes and their scatter into $X$: the free nodes'
/// node-major bases $3i$ and the axes that use it (on the device), and each node's position
/// in the free order (host; `-1` where prescribed).
struct Reduced<D: Device> {
    sys: usize,
    nf: usize,
    q: usize,
    base: D::Real,
    axes: D::Real,
    pos: Vec<f64>,
}

/// The step's contact on the device: row records, the columns $X$ (node-major, column $c$ at
/// $c\cdot3n$), the column lists, and the per-iteration buffers.
pub struct DeviceContact<D: Device> {
    n3: usize,
    reduced: Vec<Reduced<D>>,
    /// Rows $m$ and columns (distinct nodes) of the current step.
    m: usize,
    cols: usize,
    rows: Option<D::Real>,
    x: Option<D::Real>,
    ptr: Option<D::Real>,
    ent: Option<D::Real>,
    f: Option<D::Real>,
    delta: Option<D::Real>,
    lambda: Option<D::Real>,
}

impl<D: Device> DeviceContact<D> {
    /// The maps of `sys`'s reduced systems (uploaded once); the factor's wide blocks on the
    /// flat copy of $S$ where memory allows (`GpuSystem::enable_wide_solves`).
    pub fn new(dev: &D, sys: &GpuSystem<D>) -> Result<Self, GpuError> {
        sys.enable_wide_solves()?;
        let n = sys.a.n;
        let reduced = (0..sys.num_reduced())
            .filter_map(|k| {
                let (free, axes) = sys.reduced_free(k);
                (!free.is_empty() && !axes.is_empty()).then_some((k, free, axes))
            })
            .map(|(k, free, axes)| {
                let mut pos = vec![-1.0; n];
                free.iter()
                    .enumerate()
                    .for_each(|(j, &i)| pos[i] = j as f64);
                let base: Vec<f64> = free.iter().map(|&i| (3 * i) as f64).collect();
                let ax: Vec<f64> = axes.iter().map(|&d| d as f64).collect();
                Ok(Reduced {
                    sys: k,
                    nf: free.len(),
                    q: axes.len(),
                    base: dev.upload(&base)?,
                    axes: dev.upload(&ax)?,
                    pos,
                })
            })
            .collect::<Result<Vec<_>, GpuError>>()?;
        Ok(DeviceContact {
            n3: 3 * n,
            reduced,
            m: 0,
            cols: 0,
            rows: None,
            x: None,
            ptr: None,
            ent: None,
            f: None,
            delta: None,
            lambda: None,
        })
    }

    /// Bytes of the columns $X$ of `set` on a system of `n3` unknowns.
    pub fn columns_bytes(set: &ContactSet, n3: usize) -> usize {
        let mut nodes: Vec<usize> = (0..set.nrows())
            .flat_map(|r| set.row_terms(r))
            .filter(|(_, c)| *c != 0.0)
            .map(|(i, _)| i)
            .collect();
        nodes.sort_unstable();
        nodes.dedup();
        nodes.len().saturating_mul(n3).saturating_mul(8)
    }

    /// A step's contact: upload its rows, solve and keep $X=A^{-1}J^T$, and return the dense
    /// $W=JX$ ($m\times m$, one copy).
    pub fn begin(
        &mut self,
        dev: &D,
        sys: &GpuSystem<D>,
        set: &ContactSet,
    ) -> Result<DMatrix<f64>, GpuError> {
        let rec = RowRecords::new(set);
        let (m, cols, n3) = (set.nrows(), rec.col_nodes.len(), self.n3);
        self.m = m;
        self.cols = cols;
        let mut x = dev.zeros((cols * n3).max(1))?;
        for red in &self.reduced {
            // node columns per pass: two blocks of nf × q × columns within MULTI_RHS_BYTES
            let per = (MULTI_RHS_BYTES / (8 * red.nf * red.q)).clamp(1, cols.max(1));
            for c0 in (0..cols).step_by(per) {
                let c1 = (c0 + per).min(cols);
                let k = red.q * (c1 - c0);
                let pos: Vec<f64> = (0..k)
                    .map(|c| red.pos[rec.col_nodes[c0 + c / red.q]])
                    .collect();
                let pos = dev.upload(&pos)?;
                let len = red.nf * k;
                let mut a = dev.zeros(len)?;
                dev.launch(
                    Kernel::ContactSpikes,
                    len,
                    &mut [Arg::Int(k as i64), Arg::In(&pos), Arg::Out(&mut a)],
                )?;
                let (a, _) = sys.solve_many_device((red.sys, k), a, dev.zeros(len)?)?;
                dev.launch(
                    Kernel::ContactUnblock,
                    len,
                    &mut [
                        Arg::Int(k as i64),
                        Arg::Int(red.q as i64),
                        Arg::Int(n3 as i64),
                        Arg::Int(c0 as i64),
                        Arg::In(&red.base),
                        Arg::In(&red.axes),
                        Arg::In(&a),
                        Arg::Out(&mut x),
                    ],
                )?;
            }
        }
        let rows = dev.upload(&padded(&rec.rows))?;
        let mut w = dev.zeros((m * m).max(1))?;
        dev.launch(
            Kernel::ContactDelassus,
            m * m,
            &mut [
                Arg::Int(m as i64),
                Arg::Int(n3 as i64),
                Arg::In(&rows),
                Arg::In(&x),
                Arg::Out(&mut w),
            ],
        )?;
        let wv = dev.download_prefix(&w, m * m)?;
        self.ptr = Some(dev.upload(&rec.ptr)?);
        self.ent = Some(dev.upload(&padded(&rec.ent))?);
        self.f = Some(dev.zeros((3 * cols).max(1))?);
        self.delta = Some(dev.zeros(m.max(1))?);
        self.lambda = Some(dev.zeros(m.max(1))?);
        self.rows = Some(rows);
        self.x = Some(x);
        Ok(DMatrix::from_row_slice(m, m, &wv))
    }

    /// $\delta_0=J\hat x-d$ of the step's rows at the device vector `xhat` (one copy).
    pub fn delta(&mut self, dev: &D, xhat: &D::Real) -> Result<Vec<f64>, GpuError> {
        let (Some(rows), Some(delta)) = (self.rows.as_ref(), self.delta.as_mut()) else {
            return Err(GpuError::Length {
                expected: self.m,
                got: 0,
            });
        };
        dev.launch(
            Kernel::ContactDelta,
            self.m,
            &mut [Arg::In(rows), Arg::In(xhat), Arg::Out(delta)],
        )?;
        dev.download_prefix(delta, self.m)
    }

    /// $\hat x\mathrel{+}=X\lambda$ on the device vector `xhat` (`lambda` up: one copy).
    pub fn project(&mut self, dev: &D, lambda: &[f64], xhat: &mut D::Real) -> Result<(), GpuError> {
        if lambda.len() != self.m {
            return Err(GpuError::Length {
                expected: self.m,
                got: lambda.len(),
            });
        }
        let (Some(rows), Some(x), Some(ptr), Some(ent), Some(f), Some(lam)) = (
            self.rows.as_ref(),
            self.x.as_ref(),
            self.ptr.as_ref(),
            self.ent.as_ref(),
            self.f.as_mut(),
            self.lambda.as_mut(),
        ) else {
            return Err(GpuError::Length {
                expected: self.m,
                got: 0,
            });
        };
        dev.write(lam, &padded(lambda))?;
        dev.launch(
            Kernel::ContactForces,
            3 * self.cols,
            &mut [
                Arg::In(ptr),
                Arg::In(ent),
                Arg::In(rows),
                Arg::In(lam),
                Arg::Out(f),
            ],
        )?;
        dev.launch(
            Kernel::ContactAddX,
            self.n3,
            &mut [
                Arg::Int(self.cols as i64),
                Arg::In(f),
                Arg::In(x),
                Arg::Out(xhat),
            ],
        )
    }

    /// The columns $X$ (node-major, column $c$ at $c\cdot3n$; tests).
    pub fn columns(&self, dev: &D) -> Result<Vec<f64>, GpuError> {
        match self.x.as_ref() {
            Some(x) => dev.download_prefix(x, self.cols * self.n3),
            None => Ok(Vec::new()),
        }
    }
}

/// `v`, or one zero where it is empty (device buffers are never empty).
fn padded(v: &[f64]) -> Vec<f64> {
    if v.is_empty() {
        vec![0.0]
    } else {
        v.to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contact::{DenseDelassus, Stencil, Tri};
    use crate::gpu::Emulator;
    use crate::linalg::{AxisDirichlet, CscMatrix};
    use nalgebra::Vector3;

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

    /// Rows of obstacle contacts (three rows a node) and of node–triangle and edge–edge
    /// body contacts, one of whose stencil nodes is prescribed (node 5) and two share a node.
    fn contact_set() -> ContactSet {
        let dir = |k: usize| {
            let v = Vector3::new(
                (k as f64 * 0.37).sin(),
                (k as f64 * 0.71).cos(),
                0.3 + k as f64 * 0.1,
            );
            v / v.norm()
        };
        let face = |nodes: [usize; 3], w: [f64; 3]| Tri {
            nodes,
            w,
            lead: 1.0,
            kind: Stencil::Face,
        };
        let edge = Tri {
            nodes: [12, 30, 31],
            w: [-0.25, 0.6, 0.4],
            lead: 0.75,
            kind: Stencil::Edge { sign: 1.0 },
        };
        let mut s = ContactSet::default();
        let rows: Vec<(usize, Option<Tri>)> = vec![
            (3, None),
            (3, None),
            (3, None),
            (20, None),
            (11, Some(face([5, 6, 13], [0.2, 0.3, 0.5]))),
            (11, Some(face([5, 6, 13], [0.2, 0.3, 0.5]))),
            (40, Some(face([20, 21, 27], [0.6, 0.1, 0.3]))),
            (11, Some(edge)),
        ];
        for (k, (node, tri)) in rows.into_iter().enumerate() {
            s.row_node.push(node);
            s.row_dir.push(dir(k));
            s.row_d.push(0.01 * k as f64 - 0.02);
            s.row_tri.push(tri);
        }
        s
    }

    /// The device's $W$, $\delta_0=Jx-d$ and $x+X\lambda$ equal the host's dense operator
    /// (`DenseDelassus` on the same device factor, whose columns are the same multi-RHS
    /// solves) to the bit, with one reduced system and with two (z clamped apart), on both
    /// solve paths; the device's columns equal the host's.
    #[test]
    fn device_operator_equals_the_host_dense_operator_bitwise() {
        let dev = Emulator;
        let clamp = |nodes: Vec<usize>| AxisDirichlet { nodes };
        let set = contact_set();
        let m = set.nrows();
        for (budget, path) in [(usize::MAX, "inverse factor"), (0, "triangular")] {
            for z_extra in [false, true] {
                let z = if z_extra { vec![0, 5, 17] } else { vec![0, 5] };
                let dir = [clamp(vec![0, 5]), clamp(vec![0, 5]), clamp(z)];
                let sys = GpuSystem::new(dev, grid(7), dir, budget).unwrap();
                let n3 = 3 * sys.a.n;
                let host = DenseDelassus::new(&set, &sys).unwrap();
                let mut dc = DeviceContact::new(&dev, &sys).unwrap();
                let w = dc.begin(&dev, &sys, &set).unwrap();
                let what = format!("{path}, z clamped apart: {z_extra}");
                assert_eq!(w, host.w, "W, {what}");
                assert!(w.iter().any(|v| *v != 0.0) && w[(0, 7)] != 0.0, "W is zero");
                let x: Vec<f64> = (0..n3)
                    .map(|i| ((i * 29 % 17) as f64) * 0.01 - 0.08)
                    .collect();
                let mut xd = dev.upload(&x).unwrap();
                assert_eq!(dc.delta(&dev, &xd).unwrap(), set.delta(&x), "delta, {what}");
                let lambda: Vec<f64> = (0..m).map(|r| 0.5 - 0.13 * r as f64).collect();
                dc.project(&dev, &lambda, &mut xd).unwrap();
                let mut want = x.clone();
                host.add_x(&set, &lambda, &mut want);
                assert_ne!(want, x);
                assert_eq!(dev.download(&xd).unwrap(), want, "x + X lambda, {what}");
            }
        }
    }

    /// The device's columns equal the host's multi-RHS columns (solved before the flat copy
    /// of $S$ existed: the wide solve on the flat copy is bitwise the sliced one), and a
    /// column of a prescribed node is zero.
    #[test]
    fn device_columns_are_the_host_columns() {
        let dev = Emulator;
        let clamp = |nodes: Vec<usize>| AxisDirichlet { nodes };
        let dir = [clamp(vec![0, 5]), clamp(vec![0, 5]), clamp(vec![0, 5, 17])];
        let sys = GpuSystem::new(dev, grid(7), dir, usize::MAX).unwrap();
        let n3 = 3 * sys.a.n;
        let set = contact_set();
        let rec = RowRecords::new(&set);
        let spikes: Vec<Vec<f64>> = rec
            .col_nodes
            .iter()
            .map(|&i| {
                let mut q = vec![0.0; n3];
                q[3 * i..3 * i + 3].copy_from_slice(&[1.0; 3]);
                q
            })
            .collect();
        // before the flat copy of S: the sliced wide solve
        let want = sys.try_solve_homogeneous_many(&spikes).unwrap();
        let mut dc = DeviceContact::new(&dev, &sys).unwrap();
        assert!(sys.enable_wide_solves().unwrap(), "the flat copy fits");
        dc.begin(&dev, &sys, &set).unwrap();
        let got = dc.columns(&dev).unwrap();
        assert_eq!(got, want.concat());
        // after: the flat copy's, the same bits
        let again = sys.try_solve_homogeneous_many(&spikes).unwrap();
        assert_eq!(again, want);
        let c5 = rec.col_nodes.binary_search(&5).unwrap();
        assert!(got[c5 * n3..(c5 + 1) * n3].iter().all(|v| *v == 0.0));
    }
}
