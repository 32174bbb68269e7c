//! The kernel table: every `.cu` source in `kernels/` (embedded in the binary), and every
//! kernel entry point with its argument kinds. One table drives the NVRTC compile, the CUDA
//! launches and the emulator's typed host calls (see `docs/gpu.md`, "adding a kernel").

/// Kernel sources, by their repository path (NVRTC reports errors against these names).
pub const SOURCES: &[(&str, &str)] = &[
    (
        "kernels/vector.cu",
        include_str!("../../../kernels/vector.cu"),
    ),
    (
        "kernels/sparse.cu",
        include_str!("../../../kernels/sparse.cu"),
    ),
    (
        "kernels/local.cu",
        include_str!("../../../kernels/local.cu"),
    ),
    (
        "kernels/gradient.cu",
        include_str!("../../../kernels/gradient.cu"),
    ),
    (
        "kernels/muscle.cu",
        include_str!("../../../kernels/muscle.cu"),
    ),
    (
        "kernels/resident.cu",
        include_str!("../../../kernels/resident.cu"),
    ),
    ("kernels/sort.cu", include_str!("../../../kernels/sort.cu")),
    ("kernels/mpm.cu", include_str!("../../../kernels/mpm.cu")),
    (
        "kernels/mpm_contact.cu",
        include_str!("../../../kernels/mpm_contact.cu"),
    ),
    (
        "kernels/contact.cu",
        include_str!("../../../kernels/contact.cu"),
    ),
];

/// Headers the sources include, by include name.
pub const HEADERS: &[(&str, &str)] = &[
    ("device.h", include_str!("../../../kernels/device.h")),
    ("material.h", include_str!("../../../kernels/material.h")),
    ("mpm.h", include_str!("../../../kernels/mpm.h")),
];

/// Argument kinds of a kernel parameter after the implicit count `n`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `long long` scalar.
    Int,
    /// `double` scalar.
    Real,
    /// `const double*`.
    In,
    /// `double*` (written).
    Out,
    /// `const long long*`.
    Index,
    /// `const int*`: 32-bit indices (the inverse factor's columns, 4 bytes an entry less).
    Index32,
    /// `int*` (written: the inverse factor's index patterns, built on the device).
    Index32Out,
}

use super::error::GpuError;

/// A raw argument of a host kernel call.
pub(crate) enum HostArg {
    Int(i64),
    Real(f64),
    In(*const f64),
    Out(*mut f64),
    Index(*const i64),
    Index32(*const i32),
    Index32Out(*mut i32),
}

/// Conversion of a [`HostArg`] to the typed parameter of a host kernel.
pub(crate) trait Take: Sized {
    fn take(a: Option<&HostArg>, k: Kernel) -> Result<Self, GpuError>;
}

fn kind_error(k: Kernel) -> GpuError {
    GpuError::Arguments {
        kernel: k.symbol(),
        why: "argument kind differs from the kernel table",
    }
}

macro_rules! take {
    ($ty:ty, $variant:ident) => {
        impl Take for $ty {
            fn take(a: Option<&HostArg>, k: Kernel) -> Result<Self, GpuError> {
                match a {
                    Some(HostArg::$variant(v)) => Ok(*v),
                    _ => Err(kind_error(k)),
                }
            }
        }
    };
}
take!(i64, Int);
take!(f64, Real);
take!(*const f64, In);
take!(*mut f64, Out);
take!(*const i64, Index);
take!(*const i32, Index32);
take!(*mut i32, Index32Out);

macro_rules! kernel_table {
    ($( $(#[$doc:meta])* $name:ident = $sym:ident in $file:literal ( $($arg:ident : $kind:ident),* ); )*) => {
        /// A kernel entry point of `kernels/`.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Kernel { $( $(#[$doc])* $name, )* }

        impl Kernel {
            /// Every kernel.
            pub const ALL: &'static [Kernel] = &[$(Kernel::$name,)*];
            /// The `extern "C"` symbol.
            pub fn symbol(self) -> &'static str {
                match self { $(Kernel::$name => stringify!($sym),)* }
            }
            /// The source file that defines it.
            pub fn file(self) -> &'static str {
                match self { $(Kernel::$name => $file,)* }
            }
            /// Argument kinds after the count `n`.
            pub fn args(self) -> &'static [Kind] {
                match self { $(Kernel::$name => &[$(Kind::$kind,)*],)* }
            }
        }

        /// Typed host calls of the emulator: the same sources compiled by `build.rs`.
        pub(crate) mod host {
            use super::Kernel;
            use super::{HostArg, Take};
            use crate::gpu::runtime::error::GpuError;
            #[allow(non_camel_case_types, dead_code)]
            mod kinds {
                pub type Int = i64;
                pub type Real = f64;
                pub type In = *const f64;
                pub type Out = *mut f64;
                pub type Index = *const i64;
                pub type Index32 = *const i32;
                pub type Index32Out = *mut i32;
            }
            extern "C" {
                $( fn $sym(item: i64, n: i64, $($arg: kinds::$kind),*); )*
            }
            /// Run `n` items of `k` in item order.
            pub(crate) fn run(k: Kernel, n: usize, args: &[HostArg]) -> Result<(), GpuError> {
                match k {
                    $(Kernel::$name => {
                        let mut it = args.iter();
                        $( let $arg: kinds::$kind = Take::take(it.next(), k)?; )*
                        if it.next().is_some() {
                            return Err(GpuError::Arguments { kernel: k.symbol(), why: "too many arguments" });
                        }
                        for i in 0..n {
                            // SAFETY: argument kinds and counts were checked against the table,
                            // buffer lengths by the launcher's contract (docs/gpu.md).
                            unsafe { $sym(i as i64, n as i64, $($arg),*) };
                        }
                        Ok(())
                    })*
                }
            }
        }
    };
}

kernel_table! {
    /// `y += a x` (vector.cu).
    Axpy = dphd_axpy in "kernels/vector.cu" (a: Real, x: In, y: Out);
    /// `y = a x + b y` (vector.cu).
    Axpby = dphd_axpby in "kernels/vector.cu" (a: Real, x: In, b: Real, y: Out);
    /// `out = x / s` (vector.cu): GMRES's basis normalisation on the device.
    Divide = dphd_div in "kernels/vector.cu" (s: Real, x: In, out: Out);
    /// `dst[i] = src[map[i]]` (vector.cu).
    GatherPerm = dphd_gather_perm in "kernels/vector.cu" (map: Index, src: In, dst: Out);
    /// First pass of the deterministic dot product (vector.cu).
    DotPartial = dphd_dot_partial in "kernels/vector.cu" (len: Int, x: In, y: In, partial: Out);
    /// Segmented SpMV, first pass: one partial sum per row segment (sparse.cu, Eq. 33).
    SpmvSegments = dphd_spmv_segments in "kernels/sparse.cu" (seg: Index, col: Index32, val: In, x: In, partial: Out);
    /// Segmented SpMV, second pass: each row's segment partials summed in order (sparse.cu).
    SumSegments = dphd_sum_segments in "kernels/sparse.cu" (rseg: Index, partial: In, y: Out);
    /// One level of `L x = b`, diagonal last (sparse.cu).
    TrisolveLowerLevel = dphd_trisolve_lower_level in "kernels/sparse.cu" (offset: Int, rows: Index, ptr: Index, col: Index, val: In, x: Out);
    /// One level of `L^T x = b`, diagonal first (sparse.cu).
    TrisolveUpperLevel = dphd_trisolve_upper_level in "kernels/sparse.cu" (offset: Int, rows: Index, ptr: Index, col: Index, val: In, x: Out);
    /// One elimination-tree depth of the sparse inverse factor `S = L^{-1}`, one item per
    /// (column, path position) (sparse.cu, spec Eq. 32).
    InverseFactorLevel = dphd_inverse_factor_level in "kernels/sparse.cu" (len: Int, offset: Int, cols: Index, depth: Index, lptr: Index, lrow: Index, lval: In, cseg: Index, sval: Out);
    /// One elimination-tree depth of the index pattern of `S` (its paths), same schedule
    /// (sparse.cu).
    InversePatternLevel = dphd_inverse_pattern_level in "kernels/sparse.cu" (len: Int, offset: Int, cols: Index, parent: Index, cseg: Index, srow: Index32Out);
    /// The row form of `S` (columns and values) from its column form, one item per entry,
    /// through a postorder of the elimination tree (sparse.cu).
    InverseRows = dphd_inverse_rows in "kernels/sparse.cu" (rows: Int, rptr: Index, rseg: Index, post: Index, first: Index, depth: Index, cseg: Index, sval: In, rcol: Index32Out, rval: Out);
    /// Local step per sample: corotated + volume or Neo-Hookean prox (local.cu, spec §3).
    LocalStep = dphd_local_step in "kernels/local.cu" (sptr: Index, nodes: Index, grads: In, rest: In, x: In, kind: Index, wa: In, wb: In, nh: In, warm: Out, q: Out);
    /// Right-hand-side gather `b_p = sum G^T vec Q` (local.cu).
    GatherRhs = dphd_gather_rhs in "kernels/local.cu" (iptr: Index, inc_sample: Index, inc_entry: Index, grads: In, q: In, bp: Out);
    /// The backward's local-Jacobian product per sample, `dp = U c V^T` (local.cu, Eq. 42).
    SpectralApply = dphd_spectral_apply in "kernels/local.cu" (sptr: Index, nodes: Index, grads: In, cu: In, cv: In, cw: In, cm: In, cn: In, z: In, dp: Out);
    /// Per-sample material parameter gradients of a backward step (gradient.cu, spec §7.5).
    ParamGradientSamples = dphd_param_gradient_samples in "kernels/gradient.cu" (sptr: Index, nodes: Index, grads: In, z: In, vel: In, ge: In, gnu: In, a: In, out: Out);
    /// The law's parameter-gradient maps $(G^E_s, G^\nu_s)$ per sample at positions `x`
    /// (gradient.cu, spec §7.5; `Material::param_gradient_linear`).
    ParamMaps = dphd_param_maps in "kernels/gradient.cu" (sptr: Index, nodes: Index, grads: In, rest: In, x: In, kind: Index, wa: In, wb: In, nh: In, pc: In, alpha: Real, ge: Out, gnu: Out);
    /// Segment sums through an index list (gradient.cu): per-element sums, per-body first pass.
    SegmentSum = dphd_segment_sum in "kernels/gradient.cu" (stride: Int, comp: Int, ptr: Index, idx: Index, src: In, dst: Out);
    // --- multi-RHS solves (contact Delassus columns) and muscles ---
    /// `dst[r k + c] = src[map[r] k + c]`: permutation of a block of k vectors (sparse.cu).
    GatherPermMulti = dphd_gather_perm_multi in "kernels/sparse.cu" (k: Int, map: Index, src: In, dst: Out);
    /// CSR SpMV on a row-interleaved block of k vectors (sparse.cu, Eq. 33).
    SpmvCsrMulti = dphd_spmv_csr_multi in "kernels/sparse.cu" (k: Int, ptr: Index, col: Index, val: In, x: In, y: Out);
    /// Segmented SpMV on a row-interleaved block of k vectors (sparse.cu, Eq. 33).
    SpmvSegmentedMulti = dphd_spmv_segmented_multi in "kernels/sparse.cu" (k: Int, rseg: Index, seg: Index, col: Index32, val: In, x: In, y: Out);
    /// One level of `L X = B` for k columns, diagonal last (sparse.cu).
    TrisolveLowerLevelMulti = dphd_trisolve_lower_level_multi in "kernels/sparse.cu" (k: Int, offset: Int, rows: Index, ptr: Index, col: Index, val: In, x: Out);
    /// One level of `L^T X = B` for k columns, diagonal first (sparse.cu).
    TrisolveUpperLevelMulti = dphd_trisolve_upper_level_multi in "kernels/sparse.cu" (k: Int, offset: Int, rows: Index, ptr: Index, col: Index, val: In, x: Out);
    /// Muscle fibres' projections added to `Q_s` per actuated sample (muscle.cu, spec §3.5).
    MuscleLocal = dphd_muscle_local in "kernels/muscle.cu" (msample: Index, mptr: Index, mgroup: Index, fiber: In, mweight: In, act: In, sptr: Index, nodes: Index, grads: In, rest: In, x: In, q: Out);
    /// The backward's muscle term of `ΔA z` added to the per-sample `dp` (muscle.cu, App. A.4).
    MuscleJacobianApply = dphd_muscle_jacobian_apply in "kernels/muscle.cu" (msample: Index, mptr: Index, mgroup: Index, fiber: In, mweight: In, act: In, mlen: In, mdir: In, sptr: Index, nodes: Index, grads: In, z: In, dp: Out);
    // --- the nodal, force-group and muscle-activation gradient terms (issue 15) ---
    /// Per-node density, mass-damping and gravity terms of a backward step (gradient.cu, §7.5).
    NodalGradient = dphd_nodal_gradient in "kernels/gradient.cu" (h: Real, g0: Real, g1: Real, g2: Real, mass: In, alpha: In, rho: In, z: In, x0: In, x1: In, v0: In, out: Out);
    /// Per-loaded-node force-scale terms of a backward step (gradient.cu, §7.5).
    ForceGradient = dphd_force_gradient in "kernels/gradient.cu" (fnode: Index, fgroup: Index, force: In, scale: In, z: In, out: Out);
    /// Per-fibre muscle activation terms of a backward step (muscle.cu, §7.5, §3.5).
    MuscleActivationGradient = dphd_muscle_activation_gradient in "kernels/muscle.cu" (msample: Index, mptr: Index, fiber: In, mweight: In, mdir: In, sptr: Index, nodes: Index, grads: In, z: In, out: Out);
    // --- the device-resident PD iteration (resident.cu) ---
    /// `dst = src`.
    Copy = dphd_copy in "kernels/resident.cu" (src: In, dst: Out);
    /// `out = a x + b y`.
    Lincomb = dphd_lincomb in "kernels/resident.cu" (a: Real, x: In, b: Real, y: In, out: Out);
    /// `dst[idx[i]] = src[idx[i]]`: impose (or zero) the prescribed entries.
    CopyAt = dphd_copy_at in "kernels/resident.cu" (idx: Index, src: In, dst: Out);
    /// `ring[off + i] = a[i] - b[i]`: an Anderson history difference into its slot.
    DiffInto = dphd_diff_into in "kernels/resident.cu" (off: Int, a: In, b: In, ring: Out);
    /// First pass of `||a - b||^2` (chunk partials, at an offset of the output).
    DiffSqPartial = dphd_diff_sq_partial in "kernels/resident.cu" (len: Int, off: Int, a: In, b: In, partial: Out);
    /// First pass of `q` dot products of one vector with a block of vectors (at an offset of
    /// the output).
    DotsPartial = dphd_dots_partial in "kernels/resident.cu" (len: Int, chunks: Int, a_off: Int, off: Int, a: In, b: In, partial: Out);
    /// Anderson's mixed iterate (spec Eq. 21).
    AndersonMix = dphd_anderson_mix in "kernels/resident.cu" (m: Int, terms: In, dx: In, dg: In, x: In, g: In, out: Out);
    /// The spectral coefficients of $\Delta A$ at positions `x` (the linearization, local.cu).
    Linearize = dphd_linearize in "kernels/local.cu" (sptr: Index, nodes: Index, grads: In, rest: In, x: In, kind: Index, wa: In, wb: In, nh: In, alpha: Real, cap: In, cu: Out, cv: Out, cw: Out, cm: Out, cn: Out, flag: Out);
    /// First pass of the segmented SpMV on a row-interleaved block of `k` columns.
    SpmvSegmentsMulti = dphd_spmv_segments_multi in "kernels/sparse.cu" (k: Int, seg: Index, col: Index32, val: In, x: In, partial: Out);
    /// Second pass of the block form: sums of the segments of each row and column.
    SumSegmentsMulti = dphd_sum_segments_multi in "kernels/sparse.cu" (k: Int, rseg: Index, partial: In, y: Out);
    /// `dst[to[i]] = src[from[i]]`.
    PermuteInto = dphd_permute_into in "kernels/vector.cu" (from: Index, to: Index, src: In, dst: Out);
    /// The PD energy of each sample at positions `x` (local.cu; the material part of the
    /// trust region's objective, `solver::trust_region::pd_energy`).
    PdEnergy = dphd_pd_energy in "kernels/local.cu" (sptr: Index, nodes: Index, grads: In, rest: In, x: In, kind: Index, wa: In, wb: In, nh: In, e: Out);
    /// First pass of the deterministic sum (vector.cu).
    SumPartial = dphd_sum_partial in "kernels/vector.cu" (len: Int, x: In, partial: Out);
    /// Second pass of a block of reductions: each group of `chunks` partials summed in order.
    SumGroups = dphd_sum_groups in "kernels/vector.cu" (chunks: Int, partial: In, out: Out);
    /// `w -= V h` for a block `V` of `q` vectors (classical Gram–Schmidt's update).
    SubtractBlock = dphd_subtract_block in "kernels/resident.cu" (q: Int, h: In, v: In, w: Out);
    // --- the stable key/value sort and bin ranges (sort.cu): MPM re-binning, broad phases ---
    /// `out[i] = i`.
    Iota32 = dphd_iota32 in "kernels/sort.cu" (out: Index32Out);
    /// One pass of the stable global-memory merge sort by key: runs of width `w` merged.
    MergePass = dphd_merge_pass in "kernels/sort.cu" (w: Int, keys_in: Index32, vals_in: Index32, keys_out: Index32Out, vals_out: Index32Out);
    /// `start[c]` = first position of a key `>= c` in sorted `keys` (binary search per bin).
    BinStarts = dphd_bin_starts in "kernels/sort.cu" (len: Int, keys: Index32, start: Index32Out);
    /// `dst[i] = src[i]` from 32-bit indices to doubles (exact).
    Index32ToReal = dphd_index32_to_real in "kernels/sort.cu" (src: Index32, dst: Out);
    /// `dst[i] = src[i]` from doubles to 32-bit indices (exact for integers below 2^31).
    RealToIndex32 = dphd_real_to_index32 in "kernels/sort.cu" (src: In, dst: Index32Out);
    // --- the MLS-MPM substep (mpm.cu, mpm.h; crates/mpm's transfer.rs and grid.rs) ---
    /// Per particle: weights, the stress-and-affine matrix, the bin key, failure codes.
    MpmPrepare = dphd_mpm_prepare in "kernels/mpm.cu" (nmat: Int, dt: Real, dims: Index, geo: In, x: In, c: In, f: In, mass: In, volume: In, material: Index, mat: In, frac: Out, weights: Out, affine: Out, key: Index32Out, code: Out, value: Out);
    /// Per node: the P2G gather over the 27 neighbouring bins in the CPU's order.
    MpmP2g = dphd_mpm_p2g in "kernels/mpm.cu" (dims: Index, geo: In, start: Index32, sorted: Index32, frac: In, weights: In, mass: In, v: In, affine: In, gm: Out, gmv: Out);
    /// Per node: momentum to velocity, gravity, walls.
    MpmGridUpdate = dphd_mpm_grid_update in "kernels/mpm.cu" (dt: Real, dims: Index, geo: In, gm: In, gv: Out);
    /// Per particle: G2P, APIC affine velocity, F update, return mapping, advection.
    MpmG2p = dphd_mpm_g2p in "kernels/mpm.cu" (dt: Real, dims: Index, geo: In, gv: In, frac: In, weights: In, x: In, f: In, plastic: In, material: Index, mat: In, x_out: Out, v_out: Out, c_out: Out, f_out: Out, plastic_out: Out, code: Out, value: Out);
    // --- the MPM-rigid contact solve of a substep (mpm_contact.cu; crates/mpm's contact/) ---
    /// Per node entry: grid damping of v*, and v = v* (the solve's start).
    MpmContactStart = dphd_mpm_contact_start in "kernels/mpm_contact.cu" (damp: Real, gv: Out, vstar: Out);
    /// Per particle: one contact slot per geometry, active inside it (frame, bias, lagged model).
    MpmContactRegister = dphd_mpm_contact_register in "kernels/mpm_contact.cu" (ng: Int, dt: Real, dims: Index, geo: In, rig: In, x: In, v: In, weights: In, gm: In, code: In, frame: Out, bias: Out, model: Out, lever: Out, active: Out);
    /// Per slot: contact velocity, impulse, Hessian and their world forms.
    MpmContactEval = dphd_mpm_contact_eval in "kernels/mpm_contact.cu" (ng: Int, dims: Index, geo: In, x: In, weights: In, gv: In, frame: In, bias: In, model: In, active: In, vc: Out, gamma_c: Out, gamma_w: Out, hess_w: Out);
    /// Per node: gradient, block Hessian, quasi-Newton step and stopping-test terms (a gather).
    MpmContactNode = dphd_mpm_contact_node in "kernels/mpm_contact.cu" (ng: Int, dims: Index, start: Index32, sorted: Index32, weights: In, gm: In, vstar: In, gv: In, active: In, gamma_w: In, hess_w: In, dv: Out, terms: Out);
    /// First pass of the sums of a column-major block (strided partials per column).
    MpmSumColumns = dphd_mpm_sum_columns in "kernels/mpm_contact.cu" (len: Int, cols: Int, x: In, partial: Out);
    /// Per slot: the step direction in the contact frame.
    MpmContactDirection = dphd_mpm_contact_direction in "kernels/mpm_contact.cu" (ng: Int, dims: Index, geo: In, x: In, weights: In, dv: In, frame: In, active: In, dvc: Out);
    /// Strided partials of the exact line search's contact terms at one step length.
    MpmContactLine = dphd_mpm_contact_line in "kernels/mpm_contact.cu" (ns: Int, alpha: Real, model: In, active: In, vc: In, gamma_c: In, dvc: In, partial: Out);
    /// Strided partials of the impulses and moments on each rigid body.
    MpmContactWrench = dphd_mpm_contact_wrench in "kernels/mpm_contact.cu" (ns: Int, ng: Int, nb: Int, rig: In, active: In, gamma_w: In, lever: In, partial: Out);
    // --- the dense contact operator on the device (contact.cu; docs/gpu.md "Contact on the device") ---
    /// Unit spikes of a block of `k` Delassus columns at their free positions.
    ContactSpikes = dphd_contact_spikes in "kernels/contact.cu" (k: Int, pos: In, out: Out);
    /// A solved block of Delassus columns into the node-major columns of `X = A^{-1} J^T`.
    ContactUnblock = dphd_contact_unblock in "kernels/contact.cu" (k: Int, q: Int, n3: Int, c0: Int, base: In, axes: In, src: In, x: Out);
    /// `W = J X`, one item per entry, in the host's order.
    ContactDelassus = dphd_contact_delassus in "kernels/contact.cu" (m: Int, n3: Int, rows: In, x: In, w: Out);
    /// `delta = J x - d` of the contact rows.
    ContactDelta = dphd_contact_delta in "kernels/contact.cu" (rows: In, x: In, delta: Out);
    /// The per-column forces of `X lambda` (a gather over each column's rows).
    ContactForces = dphd_contact_forces in "kernels/contact.cu" (ptr: In, ent: In, rows: In, lambda: In, f: Out);
    /// `x += X lambda` from the per-column forces.
    ContactAddX = dphd_contact_add_x in "kernels/contact.cu" (cols: Int, f: In, xcols: In, x: Out);
    /// The flat (CSR-order) copy of a sliced form of `S`, one item per entry (wide blocks).
    ContactUnslice = dphd_contact_unslice in "kernels/contact.cu" (nseg: Int, seg: Index, col: Index32, val: In, fcol: Index32Out, fval: Out);
    /// `Y = M X` for `k` columns on the flat copy, bitwise `SpmvSegmentedMulti`.
    ContactSpmvWide = dphd_contact_spmv_wide in "kernels/contact.cu" (k: Int, rseg: Index, seg: Index, col: Index32, val: In, x: In, y: Out);
    /// The body–body broad phase: each triangle's padded box as cell ranges.
    GridTriCells = dphd_grid_tri_cells in "kernels/contact.cu" (cell: Real, pad: Real, tris: In, x: In, out: Out);
    /// The body–body broad phase: each triangle's (cell key, triangle) pairs at its offset.
    GridTriPairs = dphd_grid_tri_pairs in "kernels/contact.cu" (o0: Int, o1: Int, o2: Int, nx: Int, ny: Int, ranges: In, offs: In, keys: Index32Out, vals: Index32Out);
    /// The body–body broad phase: each queried node's range of its cell's sorted pairs.
    GridNodeRanges = dphd_grid_node_ranges in "kernels/contact.cu" (cell: Real, o0: Int, o1: Int, o2: Int, nx: Int, ny: Int, nz: Int, len: Int, nodes: In, x: In, keys: Index32, out: Out);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `kernels/*.cu` file is embedded, and every table entry names an embedded file
    /// that defines its symbol.
    #[test]
    fn table_matches_the_kernel_folder() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels");
        let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| {
                let name = e.unwrap().file_name().into_string().unwrap();
                name.ends_with(".cu").then(|| format!("kernels/{name}"))
            })
            .collect();
        on_disk.sort();
        let mut embedded: Vec<String> = SOURCES.iter().map(|(p, _)| p.to_string()).collect();
        embedded.sort();
        assert_eq!(
            on_disk, embedded,
            "kernels/*.cu and gpu::kernels::SOURCES differ"
        );
        for k in Kernel::ALL {
            let src = SOURCES.iter().find(|(p, _)| *p == k.file()).unwrap().1;
            assert!(
                src.contains(&format!("DPHD_KERNEL({})", k.symbol())),
                "{} does not define {}",
                k.file(),
                k.symbol()
            );
        }
    }
}
