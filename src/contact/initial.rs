//! Bodies that start inside an obstacle (issue 18): detected before the first step and
//! refused, naming body, node and obstacle. A body placed below a ground plane made every
//! boundary node a contact of one dense NCP solve that did not finish in minutes.

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

impl std::fmt::Display for Penetration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "body {} ({:?}) starts inside obstacle {} ({:?}): node {} (global {}) is {:.3e} m below its surface; move the body or the obstacle (a start in contact is allowed up to contact.margin)",
            self.body, self.body_name, self.obstacle, self.obstacle_name, self.node, self.global_node, self.depth
        )
    }
}
