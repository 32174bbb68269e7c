//! Contact between the bodies of one scene (`[contact] bodies = true`): a boundary node $i$
//! of one body against a boundary triangle $(t_0,t_1,t_2)$ of another body, treated like an
//! obstacle contact (same Fischer–Burmeister normal residual and Alart–Curnier friction, same
//! Newton solve on the persistent factor).
//!
//! Frozen frame per step (from the positions at the step start, $p=x_{t,i}$, $q_k=x_{t,t_k}$):
//! the closest point $c=\sum_kw_kq_k$ of the triangle's plane to $p$ (barycentric weights,
//! clamped to the triangle and renormalised), the triangle's outward unit normal $n$
//! (boundary triangles are oriented outward), tangents $t_{1,2}$ as for obstacles. Rows:
//! $$\delta_n(x)=n^T\Big(x_i-\sum_kw_kx_{t_k}\Big),\qquad
//! \delta_{f,k}(x)=t_k^T\Big(x_i-\sum_kw_kx_{t_k}\Big)-t_k^T(p-c),$$
//! i.e. the signed distance to the triangle's plane (linearised with the frame frozen) and
//! the relative tangential displacement over the step. The row of $J$ distributes over the
//! node (coefficient 1) and the triangle's nodes ($-w_k$), so $W=JA^{-1}J^T$ takes the
//! Delassus columns of all four nodes from the persistent factor ([`super::Delassus`]).
//!
//! A node is a candidate of a triangle when its projection falls inside the triangle (all
//! unclamped barycentric coordinates $\ge-0.05$: face region), its distance to the closest
//! point is within the reach margin $+2h(\|v_i\|+\max_k\|v_{t_k}\|)+h^2\|g\|$, and its signed
//! gap is above $-$margin (not a node deep inside). Every boundary node is tested against
//! the other bodies' triangles (both directions); per node and other body the nearest
//! triangle is kept, and up to [`MAX_PER_NODE`] in all when they form a concave crease.
//! Edge–edge contacts between feature edges ([`super::edges`]) use the same rows with the
//! stencil $(a_0,a_1,b_0,b_1)$, and `[contact] self_contact` adds both kinds within one body
//! (non-adjacent primitives facing each other). A hash grid is the broad phase
//! (`docs/contact.md` §2b).
//!
//! Backward: the frame depends on $x_t$ of the four nodes; its derivatives (of $d_r$, $a_r$
//! and $w_k$) are taken by central differences of [`frame`] ([`frame_gradient`]).

use super::ncp::Coulomb;
use super::{ContactSet, Stencil, StepStart, Tri, BODY};
use crate::model::Model;
use nalgebra::{Vector2, Vector3};

/// Tolerance on the unclamped barycentric coordinates of the face region.
pub const FACE_TOL: f64 = 0.05;

/// Frozen frame of a node–triangle contact.
#[derive(Clone, Copy, Debug)]
pub struct Frame {
    /// Barycentric weights of the contact point (clamped, sum 1).
    pub w: [f64; 3],
    /// Unclamped barycentric coordinates of the projection (face-region test).
    pub bary: [f64; 3],
    pub normal: Vector3<f64>,
    pub tangent: [Vector3<f64>; 2],
    /// Right-hand sides $d$ of the normal and the two tangent rows.
    pub d: [f64; 3],
    /// Signed gap $n^T(p-c)$ and distance $\|p-c\|$ at the step start.
    pub gap: f64,
    pub dist: f64,
}

fn v3(x: &[f64], i: usize) -> Vector3<f64> {
    Vector3::new(x[3 * i], x[3 * i + 1], x[3 * i + 2])
}

/// Frame of node position `p` against triangle `q` (see the module doc). `None` for a
/// degenerate triangle.
pub fn frame(p: &Vector3<f64>, q: &[Vector3<f64>; 3]) -> Option<Frame> {
    frame_axis(p, q, None)
}

/// [`frame`] with the tangents built from coordinate axis `axis` (default: the axis least
/// parallel to $n$, as for obstacles). The derivatives hold the axis fixed: the choice is
/// piecewise constant, and the friction law is invariant under the tangent basis.
pub fn frame_axis(p: &Vector3<f64>, q: &[Vector3<f64>; 3], axis: Option<usize>) -> Option<Frame> {
    let e1 = q[1] - q[0];
    let e2 = q[2] - q[0];
    let nn = e1.cross(&e2);
    let area2 = nn.norm();
    if area2 <= 0.0 || !area2.is_finite() {
        return None;
    }
    let n = nn / area2;
    // barycentric coordinates of the projection of p onto the plane
    let r = p - q[0];
    let b1 = n.dot(&r.cross(&e2)) / area2;
    let b2 = n.dot(&e1.cross(&r)) / area2;
    let bary = [1.0 - b1 - b2, b1, b2];
    let mut w = bary.map(|b| b.max(0.0));
    let s: f64 = w.iter().sum();
    w.iter_mut().for_each(|x| *x /= s);
    let c = q[0] * w[0] + q[1] * w[1] + q[2] * w[2];
    let k = axis.unwrap_or_else(|| n.iamin());
    let mut e = Vector3::zeros();
    e[k] = 1.0;
    let t1 = (e - n * n.dot(&e)).normalize();
    let tangent = [t1, n.cross(&t1)];
    let pc = p - c;
    Some(Frame {
        w,
        bary,
        normal: n,
        tangent,
        d: [0.0, tangent[0].dot(&pc), tangent[1].dot(&pc)],
        gap: n.dot(&pc),
        dist: pc.norm(),
    })
}

/// Axis-aligned bounding box of a body's nodes in `x`.
fn bbox(x: &[f64], nodes: std::ops::Range<usize>) -> (Vector3<f64>, Vector3<f64>) {
    let mut lo = Vector3::repeat(f64::INFINITY);
    let mut hi = Vector3::repeat(f64::NEG_INFINITY);
    for i in nodes {
        let p = v3(x, i);
        lo = lo.inf(&p);
        hi = hi.sup(&p);
    }
    (lo, hi)
}

/// Most node–triangle contacts of one node against one body (kept when their normals differ
/// by more than [`DISTINCT_NORMAL`]: a node in a crease or corner).
pub const MAX_PER_NODE: usize = 3;
/// Two contacts of one node are distinct when their normals satisfy $n_1\cdot n_2<$ this.
pub const DISTINCT_NORMAL: f64 = 0.9;
/// Edge–edge candidates need $|\sin\theta|\ge$ this between the edges (near-parallel edges
/// are left to node–triangle contacts: their closest points are ill-conditioned).
pub const EDGE_MIN_SIN: f64 = 0.1;
/// Edge–edge candidates need interior closest points, $s,t\in[$tol$,1-$tol$]$ (the ends are
/// node contacts).
pub const EDGE_TOL: f64 = 1e-3;
/// An edge pair whose normal is within this ($|n_f\cdot n|>$) of a face normal adjacent to
/// each edge is a face-on-face configuration, covered by node–triangle rows (an edge–edge
/// row there would be linearly dependent on them) and skipped.
pub const FACE_ON_FACE: f64 = 0.98;

/// Edge–edge contact is between feature edges: edges whose two faces' normals satisfy
/// $n_1\cdot n_2<$ this (a dihedral angle beyond 30°; surfaces are closed, every edge has two faces). Inside smooth surface patches node–triangle contacts cover the surface.
pub const SHARP: f64 = 0.866;

/// Uniform hash grid over axis-aligned boxes (the broad phase).
struct Grid {
    cell: f64,
    map: std::collections::HashMap<[i64; 3], Vec<u32>>,
}

impl Grid {
    fn new(cell: f64) -> Grid {
        Grid {
            cell,
            map: Default::default(),
        }
    }
    fn key(&self, p: &Vector3<f64>) -> [i64; 3] {
        [0, 1, 2].map(|d| (p[d] / self.cell).floor() as i64)
    }
    fn insert(&mut self, id: u32, lo: &Vector3<f64>, hi: &Vector3<f64>) {
        let (a, b) = (self.key(lo), self.key(hi));
        for i in a[0]..=b[0] {
            for j in a[1]..=b[1] {
                for k in a[2]..=b[2] {
                    self.map.entry([i, j, k]).or_default().push(id);
                }
            }
        }
    }
    fn at(&self, p: &Vector3<f64>) -> &[u32] {
        self.map
            .get(&self.key(p))
            .map(|v| v.as_slice())
            .unwrap_or(&[])
    }
    /// Ids in the cells overlapping the box, sorted, without duplicates.
    fn query(&self, lo: &Vector3<f64>, hi: &Vector3<f64>, out: &mut Vec<u32>) {
        out.clear();
        let (a, b) = (self.key(lo), self.key(hi));
        for i in a[0]..=b[0] {
            for j in a[1]..=b[1] {
                for k in a[2]..=b[2] {
                    if let Some(v) = self.map.get(&[i, j, k]) {
                        out.extend_from_slice(v);
                    }
                }
            }
        }
        out.sort_unstable();
        out.dedup();
    }
}

/// The broad phase's lists as `Scan::node_triangle` builds them: each of `tris` (ids in
/// order) inserted into the grid of cell `cell` over its nodes' box at `x` padded by `pad`,
/// then the ids in the cell of each of `nodes`. The reference of the device's broad phase
/// (`gpu::contact_grid`).
pub fn grid_cell_lists(
    x: &[f64],
    tris: &[[usize; 3]],
    (pad, cell): (f64, f64),
    nodes: &[usize],
) -> Vec<Vec<u32>> {
    let grid = triangle_grid(x, tris.iter(), &Vector3::repeat(pad), cell);
    nodes.iter().map(|&i| grid.at(&v3(x, i)).to_vec()).collect()
}

/// The grid of cell `cell` holding each of `tris` (ids in order) in every cell its nodes'
/// box at `x`, padded by `pad`, overlaps.
fn triangle_grid<'t>(
    x: &[f64],
    tris: impl Iterator<Item = &'t [usize; 3]>,
    pad: &Vector3<f64>,
    cell: f64,
) -> Grid {
    let mut grid = Grid::new(cell);
    for (k, t) in tris.enumerate() {
        let (lo, hi) = t.iter().fold(
            (
                Vector3::repeat(f64::INFINITY),
                Vector3::repeat(f64::NEG_INFINITY),
            ),
            |(lo, hi), &n| (lo.inf(&v3(x, n)), hi.sup(&v3(x, n))),
        );
        grid.insert(k as u32, &(lo - pad), &(hi + pad));
    }
    grid
}

/// A boundary edge: end nodes, body, and the outward normals of its (one or two) faces.
struct Edge {
    nodes: [usize; 2],
    body: usize,
    faces: [Vector3<f64>; 2],
}

/// Boundary triangles of all bodies with their body and unit outward normal at `x`.
struct Surface {
    tris: Vec<([usize; 3], usize, Vector3<f64>)>,
    edges: Vec<Edge>,
    /// Surface neighbours of every boundary node (sorted), for self-contact exclusion.
    ring: std::collections::HashMap<usize, Vec<usize>>,
    /// Area-weighted outward normal of every boundary node (unnormalised).
    vnormal: std::collections::HashMap<usize, Vector3<f64>>,
}

impl Surface {
    fn new(model: &Model, x: &[f64]) -> Surface {
        let mut tris = vec![];
        let mut emap: std::collections::HashMap<(usize, usize), Edge> = Default::default();
        let mut ring: std::collections::HashMap<usize, Vec<usize>> = Default::default();
        let mut vnormal: std::collections::HashMap<usize, Vector3<f64>> = Default::default();
        for (b, body) in model.bodies.iter().enumerate() {
            for t in &body.surface {
                let q = t.map(|k| v3(x, k));
                let nn = (q[1] - q[0]).cross(&(q[2] - q[0]));
                let n = nn.try_normalize(0.0).unwrap_or_else(Vector3::zeros);
                tris.push((*t, b, n));
                for k in 0..3 {
                    let (u, v) = (t[k], t[(k + 1) % 3]);
                    *vnormal.entry(u).or_insert_with(Vector3::zeros) += nn;
                    ring.entry(u).or_default().push(v);
                    ring.entry(v).or_default().push(u);
                    let key = (u.min(v), u.max(v));
                    emap.entry(key)
                        .and_modify(|e| e.faces[1] = n)
                        .or_insert(Edge {
                            nodes: [key.0, key.1],
                            body: b,
                            faces: [n, n],
                        });
                }
            }
        }
        for r in ring.values_mut() {
            r.sort_unstable();
            r.dedup();
        }
        let mut edges: Vec<Edge> = emap.into_values().collect();
        edges.sort_unstable_by_key(|e| e.nodes);
        Surface {
            tris,
            edges,
            ring,
            vnormal,
        }
    }
    /// Whether nodes `i` and `k` are equal or surface neighbours.
    fn near(&self, i: usize, k: usize) -> bool {
        i == k
            || self
                .ring
                .get(&i)
                .is_some_and(|r| r.binary_search(&k).is_ok())
    }
}

/// Directions and right-hand sides of a body–body contact's rows: normal $n$, tangents
/// $t_{1,2}$ and $d$ of the normal and the two tangent rows.
#[derive(Clone, Copy, Debug)]
struct Rows {
    normal: Vector3<f64>,
    tangent: [Vector3<f64>; 2],
    d: [f64; 3],
}

/// Push one body–body contact (node `i`, stencil `tri`, its rows, FB scale `kappa`, friction
/// `mu`) onto `set`.
fn push(set: &mut ContactSet, i: usize, tri: Tri, r: Rows, kappa: f64, mu: Coulomb, x_t: &[f64]) {
    let Rows { normal, tangent, d } = r;
    let rows = if mu.max() > 0.0 { 3 } else { 1 };
    set.node.push(i);
    set.obstacle.push(BODY);
    set.normal.push(normal);
    set.tangent.push(tangent);
    set.gap_offset.push(d[0]);
    set.anchor.push(Vector2::new(d[1], d[2]));
    set.kappa.push(kappa);
    set.mu.push(mu);
    set.obstacle_motion.push(Vector3::zeros());
    set.origin.push(v3(x_t, i));
    set.hessian.push(nalgebra::Matrix3::zeros());
    set.dtangent
        .push(super::obstacle::tangent_jacobians(&normal));
    set.tri.push(Some(tri));
    set.tri_origin.push(tri.nodes.map(|k| v3(x_t, k)));
    let r0 = *set
        .offset
        .last()
        .expect("ContactSet::offset starts with the 0 pushed by its constructor");
    set.offset.push(r0 + rows);
    let dirs = [normal, tangent[0], tangent[1]];
    for a in 0..rows {
        set.row_node.push(i);
        set.row_dir.push(dirs[a]);
        set.row_d.push(d[a]);
        set.row_tri.push(Some(tri));
    }
}

/// Add the body–body candidates of the step from $t$ (positions `x_t`, velocities `v_t`)
/// to `set` (spec §6.2 step 3 for body pairs; module doc and `docs/contact.md`):
/// node–triangle in both directions (every boundary node against the other bodies'
/// triangles, up to [`MAX_PER_NODE`] distinct triangles per node and body), edge–edge
/// between boundary edges ([`super::edges`]), and with `[contact] self_contact` the same
/// between non-adjacent primitives of one body. A hash grid over the surface primitives
/// is the broad phase. `nodes`: the free boundary nodes (no prescribed DoF), sorted; a
/// stencil needs at least one of them (a prescribed node may lead against a free surface).
pub fn add_candidates(
    set: &mut ContactSet,
    model: &Model,
    nodes: &[usize],
    kappa: &[f64],
    margin: f64,
    start: &StepStart,
) {
    let Some(scan) = Scan::new(model, nodes, kappa, margin, start) else {
        return;
    };
    scan.node_triangle(set);
    scan.edge_edge(set);
}

/// What the candidate search of one step shares: the model, the free nodes and their FB
/// scales, the state at the step start, the reach terms, the surface and the grid cell.
struct Scan<'a> {
    model: &'a Model,
    nodes: &'a [usize],
    kappa: &'a [f64],
    margin: f64,
    x_t: &'a [f64],
    v_t: &'a [f64],
    h: f64,
    /// $\|g\|$.
    g: f64,
    /// Body–body friction coefficients.
    mu: Coulomb,
    self_contact: bool,
    /// Largest nodal speed $\max_i\|v_{t,i}\|$ of every body.
    vmax: Vec<f64>,
    surf: Surface,
    /// Broad-phase cell: the mean surface edge length, at least the largest reach.
    cell: f64,
    /// Box padding: the largest reach margin $+4h\max\|v\|+h^2\|g\|$.
    pad: Vector3<f64>,
}

impl<'a> Scan<'a> {
    /// `None` when the bodies have no surface triangles.
    fn new(
        model: &'a Model,
        nodes: &'a [usize],
        kappa: &'a [f64],
        margin: f64,
        start: &StepStart<'a>,
    ) -> Option<Scan<'a>> {
        let (x_t, v_t) = (start.x, start.v);
        let h = model.h;
        let g = Vector3::from(model.gravity).norm();
        let vmax: Vec<f64> = model
            .bodies
            .iter()
            .map(|b| {
                b.nodes
                    .clone()
                    .map(|i| v3(v_t, i).norm())
                    .fold(0.0, f64::max)
            })
            .collect();
        let vall = vmax.iter().copied().fold(0.0, f64::max);
        let reach_max = margin + 4.0 * h * vall + h * h * g;
        let surf = Surface::new(model, x_t);
        if surf.tris.is_empty() {
            return None;
        }
        // cell: the mean surface edge length, at least the largest reach
        let mean_edge = surf
            .edges
            .iter()
            .map(|e| (v3(x_t, e.nodes[0]) - v3(x_t, e.nodes[1])).norm())
            .sum::<f64>()
            / surf.edges.len().max(1) as f64;
        Some(Scan {
            model,
            nodes,
            kappa,
            margin,
            x_t,
            v_t,
            h,
            g,
            mu: Coulomb {
                kinetic: model.contact.body_friction,
                stat: model
                    .contact
                    .body_static_friction
                    .unwrap_or(model.contact.body_friction),
                slip: model.contact.stick_slip_speed * h,
            },
            self_contact: model.contact.self_contact,
            vmax,
            surf,
            cell: mean_edge.max(reach_max).max(1e-9),
            pad: Vector3::repeat(reach_max),
        })
    }

    /// Whether node `k` is free (no prescribed DoF).
    fn free(&self, k: usize) -> bool {
        self.nodes.binary_search(&k).is_ok()
    }

    /// FB scale of a stencil: of its first free node (`None`: no free node).
    fn kap(&self, st: &[usize]) -> Option<f64> {
        st.iter().find(|&&k| self.free(k)).map(|&k| self.kappa[k])
    }

    /// Reach of a pair moving at speeds `va`, `vb`: margin $+2h(v_a+v_b)+h^2\|g\|$.
    fn reach(&self, va: f64, vb: f64) -> f64 {
        self.margin + 2.0 * self.h * (va + vb) + self.h * self.h * self.g
    }

    /// Node–triangle candidates: every boundary node against the triangles in its grid
    /// cell ([`Scan::face_candidates`]), then the nearest ones kept ([`Scan::push_distinct`]).
    fn node_triangle(&self, set: &mut ContactSet) {
        let tris = self.surf.tris.iter().map(|(t, _, _)| t);
        let grid = triangle_grid(self.x_t, tris, &self.pad, self.cell);
        let mut found: Vec<(usize, Tri, Frame)> = vec![];
        for &i in &self.model.boundary_nodes {
            self.face_candidates(&grid, i, &mut found);
            self.push_distinct(set, i, &mut found);
        }
    }

    /// The triangles node `i` may touch, as (other body, stencil, frame) into `found`: in the
    /// face region (unclamped barycentric coordinates $\ge-$[`FACE_TOL`]), within reach, not
    /// deeper than the margin; with self-contact also the node's own body's non-adjacent
    /// triangles facing it.
    fn face_candidates(&self, grid: &Grid, i: usize, found: &mut Vec<(usize, Tri, Frame)>) {
        let (x_t, surf) = (self.x_t, &self.surf);
        let bi = self.model.node_body[i];
        let p = v3(x_t, i);
        let vi = v3(self.v_t, i).norm();
        found.clear();
        for &k in grid.at(&p) {
            let (t, bo, nt) = &surf.tris[k as usize];
            let bo = *bo;
            if bo == bi {
                // self-contact: opt-in, not against the node's own or neighbouring triangles,
                // and only where the surfaces face each other
                if !self.self_contact || t.iter().any(|&n| surf.near(i, n)) {
                    continue;
                }
                if surf.vnormal.get(&i).is_none_or(|vn| vn.dot(nt) >= 0.0) {
                    continue;
                }
            }
            if !self.free(i) && !t.iter().any(|&n| self.free(n)) {
                continue;
            }
            let reach = self.reach(vi, self.vmax[bo]);
            let q = t.map(|n| v3(x_t, n));
            let Some(f) = frame(&p, &q) else { continue };
            if f.bary.iter().any(|&b| b < -FACE_TOL) || f.dist > reach || f.gap < -self.margin {
                continue;
            }
            found.push((
                bo,
                Tri {
                    nodes: *t,
                    w: f.w,
                    lead: 1.0,
                    kind: Stencil::Face,
                },
                f,
            ));
        }
    }

    /// Per other body: push the nearest triangle of `found`, then further ones only in a
    /// concave crease with every kept one (normals differing, $n\cdot n'<$
    /// [`DISTINCT_NORMAL`]; at most [`MAX_PER_NODE`]).
    fn push_distinct(&self, set: &mut ContactSet, i: usize, found: &mut [(usize, Tri, Frame)]) {
        let x_t = self.x_t;
        found.sort_by(|a, b| a.0.cmp(&b.0).then(a.2.dist.total_cmp(&b.2.dist)));
        let mut kept: Vec<(Vector3<f64>, Vector3<f64>)> = vec![];
        let mut body = usize::MAX;
        for (bo, tri, f) in found.iter() {
            if *bo != body {
                body = *bo;
                kept.clear();
            }
            // a further triangle only in a concave crease with every kept one (both
            // planes bound the free space there; at a convex edge the nearest face alone
            // does, and a second row would over-constrain the node)
            let cen: Vector3<f64> =
                tri.nodes.iter().map(|&k| v3(x_t, k)).sum::<Vector3<f64>>() / 3.0;
            if kept.len() >= MAX_PER_NODE
                || kept.iter().any(|(n, c)| {
                    n.dot(&f.normal) >= DISTINCT_NORMAL
                        || n.dot(&(cen - c)) <= 0.0
                        || f.normal.dot(&(c - cen)) <= 0.0
                })
            {
                continue;
            }
            kept.push((f.normal, cen));
            let st = [i, tri.nodes[0], tri.nodes[1], tri.nodes[2]];
            let Some(kj) = self.kap(&st) else { continue };
            let rows = Rows {
                normal: f.normal,
                tangent: f.tangent,
                d: f.d,
            };
            push(set, i, *tri, rows, kj, self.mu, x_t);
        }
    }

    /// Edge–edge candidates between feature edges ($n_1\cdot n_2<$ [`SHARP`]) whose boxes
    /// share a grid cell ([`Scan::edge_pair`]).
    fn edge_edge(&self, set: &mut ContactSet) {
        let surf = &self.surf;
        let smooth = |e: &Edge| e.faces[0].dot(&e.faces[1]) >= SHARP;
        let mut egrid = Grid::new(self.cell);
        for (k, e) in surf.edges.iter().enumerate() {
            if smooth(e) {
                continue;
            }
            let (lo, hi) = self.edge_box(e);
            egrid.insert(k as u32, &lo, &hi);
        }
        let mut cand = vec![];
        for (ka, ea) in surf.edges.iter().enumerate() {
            if smooth(ea) {
                continue;
            }
            let (lo, hi) = self.edge_box(ea);
            egrid.query(&lo, &hi, &mut cand);
            for &kb in cand.iter().filter(|&&kb| kb as usize > ka) {
                let eb = &surf.edges[kb as usize];
                if let Some((tri, rows, kj)) = self.edge_pair(ea, eb) {
                    push(set, ea.nodes[0], tri, rows, kj, self.mu, self.x_t);
                }
            }
        }
    }

    /// Padded bounding box of an edge at $x_t$.
    fn edge_box(&self, e: &Edge) -> (Vector3<f64>, Vector3<f64>) {
        let (a, b) = (v3(self.x_t, e.nodes[0]), v3(self.x_t, e.nodes[1]));
        (a.inf(&b) - self.pad, a.sup(&b) + self.pad)
    }

    /// The edge–edge contact of edges `ea`, `eb` (stencil, rows, FB scale), if any: other
    /// bodies (or non-adjacent with self-contact), interior closest points
    /// ($s,t\in[$[`EDGE_TOL`]$,1-$[`EDGE_TOL`]$]$, $|\sin\theta|\ge$ [`EDGE_MIN_SIN`]), surfaces
    /// facing each other, not face-on-face ([`FACE_ON_FACE`]), gap within reach.
    fn edge_pair(&self, ea: &Edge, eb: &Edge) -> Option<(Tri, Rows, f64)> {
        let surf = &self.surf;
        let [a0, a1] = ea.nodes;
        let [b0, b1] = eb.nodes;
        if ea.body == eb.body
            && (!self.self_contact
                || [b0, b1]
                    .iter()
                    .any(|&b| surf.near(a0, b) || surf.near(a1, b)))
        {
            return None;
        }
        let st = [a0, a1, b0, b1];
        let kj = self.kap(&st)?;
        let pts = st.map(|k| v3(self.x_t, k));
        let (s, t) = super::edges::line_params(&pts[0], &pts[1], &pts[2], &pts[3], EDGE_MIN_SIN)?;
        if !(EDGE_TOL..=1.0 - EDGE_TOL).contains(&s) || !(EDGE_TOL..=1.0 - EDGE_TOL).contains(&t) {
            return None;
        }
        let out_b = eb.faces[0] + eb.faces[1];
        let out_a = ea.faces[0] + ea.faces[1];
        let f = super::edges::frame(&pts, &out_b, None, None)?;
        // the surfaces must face each other at the contact
        if f.normal.dot(&out_a) >= 0.0 || f.normal.dot(&out_b) <= 0.0 {
            return None;
        }
        let parallel =
            |fs: &[Vector3<f64>; 2]| fs.iter().any(|n| n.dot(&f.normal).abs() > FACE_ON_FACE);
        if parallel(&ea.faces) && parallel(&eb.faces) {
            return None;
        }
        let reach = self.reach(self.vmax[ea.body], self.vmax[eb.body]);
        if f.gap > reach || f.gap < -self.margin {
            return None;
        }
        let tri = Tri {
            nodes: [a1, b0, b1],
            w: [-f.s, 1.0 - f.t, f.t],
            lead: 1.0 - f.s,
            kind: Stencil::Edge { sign: f.sign },
        };
        let rows = Rows {
            normal: f.normal,
            tangent: f.tangent,
            d: f.d,
        };
        Some((tri, rows, kj))
    }
}

/// Derivatives with respect to $x_t$ of the four nodes (node, then triangle nodes; 12
/// entries) of $-\sum_r\mu_r\delta_r(x_{t+1})+\sum_r\lambda_r J_r z$, the frame's
/// contribution to $d\mathcal L/dx_t$ (gap part $-\mu^T\partial\delta/\partial x_t$, force
/// direction part $z^T\partial(J^T\lambda)/\partial x_t$), by central differences of
/// [`frame`] with the end positions `x_end` (node, triangle) held.
pub fn frame_gradient(
    p: &Vector3<f64>,
    q: &[Vector3<f64>; 3],
    x_end: &[Vector3<f64>; 4],
    z: &[Vector3<f64>; 4],
    lambda: &[f64],
    mu: &[f64],
) -> [f64; 12] {
    let nr = lambda.len();
    let axis = frame(p, q).map(|f| f.normal.iamin());
    let value = |pts: &[Vector3<f64>; 4]| -> f64 {
        let Some(f) = frame_axis(&pts[0], &[pts[1], pts[2], pts[3]], axis) else {
            return 0.0;
        };
        let dirs = [f.normal, f.tangent[0], f.tangent[1]];
        let rel = x_end[0] - x_end[1] * f.w[0] - x_end[2] * f.w[1] - x_end[3] * f.w[2];
        let zr = z[0] - z[1] * f.w[0] - z[2] * f.w[1] - z[3] * f.w[2];
        (0..nr)
            .map(|r| -mu[r] * (dirs[r].dot(&rel) - f.d[r]) + lambda[r] * dirs[r].dot(&zr))
            .sum()
    };
    let base = [*p, q[0], q[1], q[2]];
    let scale = (q[1] - q[0]).norm().max((q[2] - q[0]).norm()).max(1e-12);
    central(&base, 1e-6 * scale, value)
}

/// [`frame_gradient`] of a node–triangle stencil or its edge–edge analogue (the stencil's
/// points in the order node, `tri.nodes`).
pub fn stencil_gradient(
    tri: &Tri,
    p: &Vector3<f64>,
    q: &[Vector3<f64>; 3],
    x_end: &[Vector3<f64>; 4],
    z: &[Vector3<f64>; 4],
    lambda: &[f64],
    mu: &[f64],
) -> [f64; 12] {
    match tri.kind {
        Stencil::Face => frame_gradient(p, q, x_end, z, lambda, mu),
        Stencil::Edge { sign } => edge_frame_gradient(sign, p, q, x_end, z, lambda, mu),
    }
}

/// Edge–edge analogue of [`frame_gradient`]: central differences of [`super::edges::frame`]
/// with the orientation `sign` and the tangent axis held (piecewise constant choices).
fn edge_frame_gradient(
    sign: f64,
    p: &Vector3<f64>,
    q: &[Vector3<f64>; 3],
    x_end: &[Vector3<f64>; 4],
    z: &[Vector3<f64>; 4],
    lambda: &[f64],
    mu: &[f64],
) -> [f64; 12] {
    let nr = lambda.len();
    let base = [*p, q[0], q[1], q[2]];
    let zero = Vector3::zeros();
    let axis = super::edges::frame(&base, &zero, Some(sign), None).map(|f| f.normal.iamin());
    let value = |pts: &[Vector3<f64>; 4]| -> f64 {
        let Some(f) = super::edges::frame(pts, &zero, Some(sign), axis) else {
            return 0.0;
        };
        let c = f.coefficients();
        let dirs = [f.normal, f.tangent[0], f.tangent[1]];
        let rel: Vector3<f64> = (0..4).map(|k| x_end[k] * c[k]).sum();
        let zr: Vector3<f64> = (0..4).map(|k| z[k] * c[k]).sum();
        (0..nr)
            .map(|r| -mu[r] * (dirs[r].dot(&rel) - f.d[r]) + lambda[r] * dirs[r].dot(&zr))
            .sum()
    };
    let scale = (base[1] - base[0])
        .norm()
        .max((base[3] - base[2]).norm())
        .max(1e-12);
    central(&base, 1e-6 * scale, value)
}

/// Central differences of `value` in the 12 coordinates of `base`.
fn central(
    base: &[Vector3<f64>; 4],
    eps: f64,
    value: impl Fn(&[Vector3<f64>; 4]) -> f64,
) -> [f64; 12] {
    let mut out = [0.0; 12];
    for (k, o) in out.iter_mut().enumerate() {
        let mut a = *base;
        let mut b = *base;
        a[k / 3][k % 3] += eps;
        b[k / 3][k % 3] -= eps;
        *o = (value(&a) - value(&b)) / (2.0 * eps);
    }
    out
}

/// Largest penetration of a boundary node of one body into another body (m): nodes inside
/// the other body's closed boundary surface (generalised winding number $>\tfrac12$), depth
/// = distance to its nearest boundary triangle. 0 with fewer than two bodies.
pub fn max_penetration(model: &Model, x: &[f64]) -> f64 {
    let nb = model.bodies.len();
    if nb < 2 {
        return 0.0;
    }
    let boxes: Vec<_> = model
        .bodies
        .iter()
        .map(|b| bbox(x, b.nodes.clone()))
        .collect();
    let mut worst: f64 = 0.0;
    for &i in &model.boundary_nodes {
        let bi = model.node_body[i];
        let p = v3(x, i);
        for bo in 0..nb {
            if bo == bi {
                continue;
            }
            let (lo, hi) = &boxes[bo];
            if (0..3).any(|d| p[d] < lo[d] || p[d] > hi[d]) {
                continue;
            }
            let mut omega = 0.0;
            let mut dmin = f64::INFINITY;
            for t in &model.bodies[bo].surface {
                let a = v3(x, t[0]) - p;
                let b = v3(x, t[1]) - p;
                let c = v3(x, t[2]) - p;
                omega += solid_angle(&a, &b, &c);
                dmin = dmin.min(point_triangle_distance(&p, &[a + p, b + p, c + p]));
            }
            if omega / (4.0 * std::f64::consts::PI) > 0.5 {
                worst = worst.max(dmin);
            }
        }
    }
    worst
}

/// Signed solid angle of triangle $(a,b,c)$ seen from the origin (Van Oosterom–Strackee).
pub(crate) fn solid_angle(a: &Vector3<f64>, b: &Vector3<f64>, c: &Vector3<f64>) -> f64 {
    let (la, lb, lc) = (a.norm(), b.norm(), c.norm());
    let num = a.dot(&b.cross(c));
    let den = la * lb * lc + a.dot(b) * lc + a.dot(c) * lb + b.dot(c) * la;
    2.0 * num.atan2(den)
}

/// Euclidean distance of `p` to the (closed) triangle `q`.
pub fn point_triangle_distance(p: &Vector3<f64>, q: &[Vector3<f64>; 3]) -> f64 {
    let Some(f) = frame(p, q) else {
        return (p - q[0]).norm();
    };
    if f.bary.iter().all(|&b| b >= 0.0) {
        return f.gap.abs();
    }
    // outside the face region: nearest point on the three edges
    (0..3)
        .map(|k| {
            let (a, b) = (q[k], q[(k + 1) % 3]);
            let e = b - a;
            let s = ((p - a).dot(&e) / e.norm_squared()).clamp(0.0, 1.0);
            (p - (a + e * s)).norm()
        })
        .fold(f64::INFINITY, f64::min)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_of_point_above_triangle() {
        let q = [
            Vector3::new(0.0, 0.0, 0.0),
            Vector3::new(1.0, 0.0, 0.0),
            Vector3::new(0.0, 1.0, 0.0),
        ];
        let p = Vector3::new(0.25, 0.25, 0.1);
        let f = frame(&p, &q).unwrap();
        assert!((f.normal - Vector3::z()).norm() < 1e-15);
        assert!((f.gap - 0.1).abs() < 1e-15);
        assert!((f.w[0] - 0.5).abs() < 1e-15 && (f.w[1] - 0.25).abs() < 1e-15);
        // contact point reproduces the projection
        let c = q[0] * f.w[0] + q[1] * f.w[1] + q[2] * f.w[2];
        assert!((c - Vector3::new(0.25, 0.25, 0.0)).norm() < 1e-15);
        // distance outside the face region: to the nearest edge
        let d = point_triangle_distance(&Vector3::new(-1.0, 0.5, 0.0), &q);
        assert!((d - 1.0).abs() < 1e-15);
    }

    #[test]
    fn winding_number_of_a_tetrahedron() {
        // outward-oriented unit tetrahedron
        let v = [
            Vector3::new(0.0, 0.0, 0.0),
            Vector3::new(1.0, 0.0, 0.0),
            Vector3::new(0.0, 1.0, 0.0),
            Vector3::new(0.0, 0.0, 1.0),
        ];
        let faces = [[0, 2, 1], [0, 1, 3], [0, 3, 2], [1, 2, 3]];
        let wn = |p: Vector3<f64>| -> f64 {
            faces
                .iter()
                .map(|f| solid_angle(&(v[f[0]] - p), &(v[f[1]] - p), &(v[f[2]] - p)))
                .sum::<f64>()
                / (4.0 * std::f64::consts::PI)
        };
        assert!((wn(Vector3::new(0.1, 0.1, 0.1)) - 1.0).abs() < 1e-12);
        assert!(wn(Vector3::new(1.0, 1.0, 1.0)).abs() < 1e-12);
    }

    #[test]
    fn frame_gradient_matches_finite_differences_of_the_value() {
        // A node above the inside of a tilted triangle, all four points moving (x_end) and
        // adjoints z on all four; normal and both tangent rows.
        let p = Vector3::new(0.3, 0.2, 0.05);
        let q = [
            Vector3::new(0.0, 0.0, 0.0),
            Vector3::new(1.0, 0.1, 0.02),
            Vector3::new(0.1, 1.0, -0.03),
        ];
        let xe = [
            p + Vector3::new(0.01, 0.0, -0.02),
            q[0] + Vector3::new(0.0, 0.01, 0.0),
            q[1],
            q[2] + Vector3::new(0.0, 0.0, 0.01),
        ];
        let z = [
            Vector3::new(0.3, -0.2, 0.5),
            Vector3::new(0.1, 0.0, 0.2),
            Vector3::new(-0.4, 0.1, 0.0),
            Vector3::new(0.0, 0.3, 0.1),
        ];
        let lam = [2.0, 0.3, -0.1];
        let mu = [0.7, -0.2, 0.4];
        let g = frame_gradient(&p, &q, &xe, &z, &lam, &mu);
        // The value written out here from the doc's formula,
        // V = Σ_r −μ_r (t_rᵀ(x̄_0 − Σ_k w_k x̄_k) − d_r) + λ_r t_rᵀ(z_0 − Σ_k w_k z_k),
        // with the frame (n, t_1, t_2, w, d) of the perturbed start positions.
        let value = |pts: &[Vector3<f64>; 4]| -> f64 {
            let f = frame(&pts[0], &[pts[1], pts[2], pts[3]]).expect("non-degenerate");
            let dirs = [f.normal, f.tangent[0], f.tangent[1]];
            let mut v = 0.0;
            for r in 0..3 {
                let mut rel = xe[0];
                let mut zr = z[0];
                for k in 0..3 {
                    rel -= xe[k + 1] * f.w[k];
                    zr -= z[k + 1] * f.w[k];
                }
                v += -mu[r] * (dirs[r].dot(&rel) - f.d[r]) + lam[r] * dirs[r].dot(&zr);
            }
            v
        };
        // Fourth-order central differences of V at a step 100× the gradient's own (truncation
        // ~h⁴ ≈ 1e-16, round-off ~1e-16/h ≈ 1e-12): an independent reference.
        let base = [p, q[0], q[1], q[2]];
        let h = 1e-4;
        let at = |k: usize, s: f64| {
            let mut pts = base;
            pts[k / 3][k % 3] += s * h;
            value(&pts)
        };
        let mut largest: f64 = 0.0;
        for (k, gk) in g.iter().enumerate() {
            let fd = (8.0 * (at(k, 1.0) - at(k, -1.0)) - (at(k, 2.0) - at(k, -2.0))) / (12.0 * h);
            largest = largest.max(fd.abs());
            assert!(
                (gk - fd).abs() <= 1e-7 * (1.0 + fd.abs()),
                "coordinate {k}: frame_gradient {gk:e}, finite difference {fd:e}"
            );
        }
        // a non-zero reference: the frame moves with every point
        assert!(largest > 1e-2, "largest difference {largest:e}");
    }
}
