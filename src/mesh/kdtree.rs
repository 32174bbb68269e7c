//! A static 3-d tree for nearest-neighbour queries on point sets (the chamfer loss of
//! `solver::loss` matches simulated surface nodes and captured points with it). Numbers in,
//! numbers out: built once from a point list, queried any number of times.
//!
//! Build: median splits along the widest axis of each node's bounding box, down to leaves
//! of at most [`LEAF`] points ($O(n\log n)$). Query: depth-first descent into the nearer
//! child, visiting the farther one only when the splitting plane is closer than the best
//! distance so far (exact nearest neighbour; ties resolve to the smaller point index).

/// Largest number of points in a leaf.
pub const LEAF: usize = 8;

#[derive(Clone, Debug)]
enum Node {
    Leaf {
        lo: usize,
        hi: usize,
    },
    Split {
        dim: usize,
        value: f64,
        left: usize,
        right: usize,
    },
}

/// Nearest-neighbour index over a fixed set of points.
#[derive(Clone, Debug)]
pub struct KdTree {
    points: Vec<[f64; 3]>,
    /// Point indices, permuted so that every node covers a contiguous range.
    order: Vec<usize>,
    nodes: Vec<Node>,
}

impl KdTree {
    /// Builds the tree over `points` (which should be finite; an empty set is allowed and
    /// answers every query with `None`).
    pub fn new(points: Vec<[f64; 3]>) -> Self {
        let mut t = KdTree {
            order: (0..points.len()).collect(),
            points,
            nodes: Vec::new(),
        };
        if !t.points.is_empty() {
            t.build(0, t.points.len());
        }
        t
    }

    /// The indexed points, in their original order.
    pub fn points(&self) -> &[[f64; 3]] {
        &self.points
    }

    pub fn len(&self) -> usize {
        self.points.len()
    }

    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    /// Builds the subtree of `order[lo..hi]`; returns its node index.
    fn build(&mut self, lo: usize, hi: usize) -> usize {
        let id = self.nodes.len();
        self.nodes.push(Node::Leaf { lo, hi });
        if hi - lo <= LEAF {
            return id;
        }
        let mut min = [f64::INFINITY; 3];
        let mut max = [f64::NEG_INFINITY; 3];
        for &i in &self.order[lo..hi] {
            for d in 0..3 {
                min[d] = min[d].min(self.points[i][d]);
                max[d] = max[d].max(self.points[i][d]);
            }
        }
        let dim = (0..3)
            .max_by(|&a, &b| (max[a] - min[a]).total_cmp(&(max[b] - min[b])))
            .expect("max_by over the three axes 0..3 has a maximum");
        if max[dim] - min[dim] <= 0.0 {
            // all points coincide: one leaf, however large
            return id;
        }
        let mid = (lo + hi) / 2;
        let pts = &self.points;
        self.order[lo..hi]
            .select_nth_unstable_by(mid - lo, |&a, &b| pts[a][dim].total_cmp(&pts[b][dim]));
        let value = self.points[self.order[mid]][dim];
        let left = self.build(lo, mid);
        let right = self.build(mid, hi);
        self.nodes[id] = Node::Split {
            dim,
            value,
            left,
            right,
        };
        id
    }

    /// The point nearest to `q` and its squared distance (`None` for an empty tree).
    pub fn nearest(&self, q: &[f64; 3]) -> Option<(usize, f64)> {
        if self.points.is_empty() {
            return None;
        }
        let mut best = (usize::MAX, f64::INFINITY);
        let mut stack = vec![(0usize, 0.0f64)];
        while let Some((n, plane2)) = stack.pop() {
            if plane2 > best.1 {
                continue;
            }
            match self.nodes[n] {
                Node::Leaf { lo, hi } => {
                    for &i in &self.order[lo..hi] {
                        let p = &self.points[i];
                        let d2 = (0..3).map(|d| (p[d] - q[d]).powi(2)).sum::<f64>();
                        if d2 < best.1 || (d2 == best.1 && i < best.0) {
                            best = (i, d2);
                        }
                    }
                }
                Node::Split {
                    dim,
                    value,
                    left,
                    right,
                } => {
                    let off = q[dim] - value;
                    let (near, far) = if off < 0.0 {
                        (left, right)
                    } else {
                        (right, left)
                    };
                    // far first on the stack, so the near child is searched first
                    stack.push((far, off * off));
                    stack.push((near, 0.0));
                }
            }
        }
        Some(best)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lcg(seed: &mut u64) -> f64 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (*seed >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Exact nearest neighbours (index and distance) against brute force, on random
    /// points with duplicates and on queries inside and outside the cloud.
    #[test]
    fn nearest_matches_brute_force() {
        let mut s = 7u64;
        let mut pts: Vec<[f64; 3]> = (0..500)
            .map(|_| [lcg(&mut s), lcg(&mut s), 0.1 * lcg(&mut s)])
            .collect();
        pts.push(pts[3]);
        pts.push(pts[3]);
        let tree = KdTree::new(pts.clone());
        for k in 0..300 {
            let q = [
                2.0 * lcg(&mut s) - 0.5,
                2.0 * lcg(&mut s) - 0.5,
                lcg(&mut s) - 0.5,
            ];
            let q = if k % 10 == 0 { pts[3] } else { q };
            let (i, d2) = tree.nearest(&q).unwrap();
            let (bi, bd) = pts
                .iter()
                .enumerate()
                .map(|(j, p)| (j, (0..3).map(|d| (p[d] - q[d]).powi(2)).sum::<f64>()))
                .fold(
                    (usize::MAX, f64::INFINITY),
                    |a, b| {
                        if b.1 < a.1 {
                            b
                        } else {
                            a
                        }
                    },
                );
            assert_eq!(d2, bd, "query {k}");
            assert_eq!(i, bi, "query {k}");
        }
        assert!(KdTree::new(vec![]).nearest(&[0.0; 3]).is_none());
        // coincident points: a single leaf
        let same = KdTree::new(vec![[1.0, 2.0, 3.0]; 40]);
        assert_eq!(same.nearest(&[0.0; 3]).unwrap().0, 0);
    }
}
