//! Bodies that start inside an obstacle or, with `[contact] bodies = true`, inside another
//! body (issue 18): detected before the first step and refused, naming body, node and
//! obstacle (or the other body and its nearest boundary triangle). A body placed below a
//! ground plane made every boundary node a contact of one dense NCP solve that did not
//! finish in minutes; a node deep inside another body is no contact candidate at all
//! (candidates need a gap above −margin) and the bodies would stay interlocked silently.

use super::obstacle::Obstacle;
use crate::model::Model;
use nalgebra::Vector3;

/// The deepest initial penetration of a free boundary node into an obstacle.
#[derive(Clone, Debug, PartialEq)]
pub struct Penetration {
    /// Body index and its name.
    pub body: usize,
    pub body_name: String,
    /// Node index local to the body, and global.
    pub node: usize,
    pub global_node: usize,
    /// Obstacle index and its name.
    pub obstacle: usize,
    pub obstacle_name: String,
    /// Depth below the obstacle surface (m), > 0.
    pub depth: f64,
}

/// The deepest penetration deeper than `allowed` (m) of `nodes` (global indices) in the
/// state `x` at time 0, if any. Shallower penetrations are left to the contact solve, which
/// resolves them in the first step.
pub fn deepest_penetration(
    model: &Model,
    obstacles: &[Obstacle],
    nodes: &[usize],
    x: &[f64],
    allowed: f64,
) -> Option<Penetration> {
    let mut worst: Option<(f64, usize, usize)> = None;
    for &i in nodes {
        let p = Vector3::new(x[3 * i], x[3 * i + 1], x[3 * i + 2]);
        for (k, o) in obstacles.iter().enumerate() {
            let depth = -o.query(&p, 0.0).dist;
            if depth > allowed && worst.is_none_or(|w| depth > w.0) {
                worst = Some((depth, i, k));
            }
        }
    }
    let (depth, i, k) = worst?;
    let b = model.node_body[i];
    let body = &model.bodies[b];
    Some(Penetration {
        body: b,
        body_name: body.name.clone(),
        node: i - body.nodes.start,
        global_node: i,
        obstacle: k,
        obstacle_name: obstacles[k].name.clone(),
        depth,
    })
}

/// The deepest initial penetration of a boundary node of one body into another body.
#[derive(Clone, Debug, PartialEq)]
pub struct BodyOverlap {
    /// The penetrating body, its name, the node (local to the body, and global).
    pub body: usize,
    pub body_name: String,
    pub node: usize,
    pub global_node: usize,
    /// The body it lies inside, its name, and the nearest of that body's boundary
    /// triangles: index into its `surface` and global node indices.
    pub other: usize,
    pub other_name: String,
    pub triangle: usize,
    pub triangle_nodes: [usize; 3],
    /// Distance to that triangle (m), > 0.
    pub depth: f64,
}

/// The deepest overlap deeper than `allowed` (m) of the boundary nodes `nodes` (global
/// indices) inside another body's closed boundary surface in the state `x`, if any. Inside
/// means a generalised winding number above ½ (as [`super::bodies::max_penetration`]); the
/// depth is the distance to the nearest boundary triangle of the other body. Shallower
/// overlaps are left to the body–body contact solve.
pub fn deepest_body_overlap(
    model: &Model,
    nodes: &[usize],
    x: &[f64],
    allowed: f64,
) -> Option<BodyOverlap> {
    let nb = model.bodies.len();
    if nb < 2 {
        return None;
    }
    let v3 = |i: usize| Vector3::new(x[3 * i], x[3 * i + 1], x[3 * i + 2]);
    let boxes: Vec<(Vector3<f64>, Vector3<f64>)> = model
        .bodies
        .iter()
        .map(|b| {
            b.nodes.clone().map(v3).fold(
                (
                    Vector3::repeat(f64::INFINITY),
                    Vector3::repeat(f64::NEG_INFINITY),
                ),
                |(lo, hi), p| (lo.inf(&p), hi.sup(&p)),
            )
        })
        .collect();
    // (depth, node, other body, triangle)
    let mut worst: Option<(f64, usize, usize, usize)> = None;
    for &i in nodes {
        let bi = model.node_body[i];
        let p = v3(i);
        for (bo, (lo, hi)) in boxes.iter().enumerate() {
            if bo == bi || (0..3).any(|d| p[d] <= lo[d] || p[d] >= hi[d]) {
                continue;
            }
            let mut omega = 0.0;
            let mut nearest = (f64::INFINITY, 0);
            for (k, t) in model.bodies[bo].surface.iter().enumerate() {
                let q = t.map(v3);
                omega += super::bodies::solid_angle(&(q[0] - p), &(q[1] - p), &(q[2] - p));
                let d = super::bodies::point_triangle_distance(&p, &q);
                if d < nearest.0 {
                    nearest = (d, k);
                }
            }
            let depth = nearest.0;
            if omega / (4.0 * std::f64::consts::PI) > 0.5
                && depth > allowed
                && worst.is_none_or(|w| depth > w.0)
            {
                worst = Some((depth, i, bo, nearest.1));
            }
        }
    }
    let (depth, i, bo, k) = worst?;
    let b = model.node_body[i];
    Some(BodyOverlap {
        body: b,
        body_name: model.bodies[b].name.clone(),
        node: i - model.bodies[b].nodes.start,
        global_node: i,
        other: bo,
        other_name: model.bodies[bo].name.clone(),
        triangle: k,
        triangle_nodes: model.bodies[bo].surface[k],
        depth,
    })
}

impl std::fmt::Display for BodyOverlap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let t = self.triangle_nodes;
        write!(
            f,
            "body {} ({:?}) starts inside body {} ({:?}): node {} (global {}) is {:.3e} m from the nearest boundary triangle {} of body {} (global nodes {}, {}, {}); move the bodies apart (an initial overlap is allowed up to contact.margin)",
            self.body, self.body_name, self.other, self.other_name, self.node, self.global_node, self.depth, self.triangle, self.other, t[0], t[1], t[2]
        )
    }
}

impl std::fmt::Display for Penetration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "body {} ({:?}) starts inside obstacle {} ({:?}): node {} (global {}) is {:.3e} m below its surface; move the body or the obstacle (a start in contact is allowed up to contact.margin)",
            self.body, self.body_name, self.obstacle, self.obstacle_name, self.node, self.global_node, self.depth
        )
    }
}
