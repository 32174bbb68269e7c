//! Selectors: which nodes (Dirichlet, forces) or elements (regions) a scene entry acts on.
//!
//! TOML form: an inline table with one key, e.g. `select = { box = { min = [0,0,0],
//! max = [0.1,1,1] } }`, `select = { face = "x_min" }`, `select = { tag = 2 }`.
//! Elements are selected by centroid; nodes by position. Geometry is evaluated in the
//! body's transformed rest configuration.

use serde::{Deserialize, Serialize};

/// Axis-aligned box, inclusive, with a tolerance of 1e-9 × the body's largest
/// bounding-box edge.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BoxSel {
    pub min: [f64; 3],
    pub max: [f64; 3],
}

/// Half-space `{x : (x - point)·normal >= 0}`.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HalfSpaceSel {
    pub point: [f64; 3],
    pub normal: [f64; 3],
}

/// Ball `{x : |x - center| <= radius}`.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SphereSel {
    pub center: [f64; 3],
    pub radius: f64,
}

/// Element selector (by centroid, tag or explicit list).
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum ElementSelector {
    All(bool),
    Box(BoxSel),
    HalfSpace(HalfSpaceSel),
    Sphere(SphereSel),
    /// Region tag from the mesh file.
    Tag(i64),
    Tags(Vec<i64>),
    /// Explicit element indices (0-based).
    Elements(Vec<usize>),
    /// File with whitespace-separated 0-based element indices.
    ElementsFile(String),
}

/// Node selector (by position or explicit list).
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum NodeSelector {
    All(bool),
    Box(BoxSel),
    HalfSpace(HalfSpaceSel),
    Sphere(SphereSel),
    /// Nodes on a face of the body's bounding box: `x_min`, `x_max`, `y_min`, … .
    Face(String),
    /// Explicit node indices (0-based, within the body).
    Nodes(Vec<usize>),
    /// File with whitespace-separated 0-based node indices.
    NodesFile(String),
}

type Check = Result<(), (String, String)>;

fn geo_ok(k: &str, v: &[f64]) -> Check {
    if v.iter().all(|x| x.is_finite()) {
        Ok(())
    } else {
        Err((k.into(), "expected finite numbers".into()))
    }
}

fn validate_geo(
    k: &str,
    b: Option<&BoxSel>,
    h: Option<&HalfSpaceSel>,
    s: Option<&SphereSel>,
) -> Check {
    if let Some(b) = b {
        geo_ok(&format!("{k}.box.min"), &b.min)?;
        geo_ok(&format!("{k}.box.max"), &b.max)?;
        if (0..3).any(|d| b.min[d] > b.max[d]) {
            return Err((
                format!("{k}.box"),
                "expected min <= max on every axis".into(),
            ));
        }
    }
    if let Some(h) = h {
        geo_ok(&format!("{k}.half_space.point"), &h.point)?;
        geo_ok(&format!("{k}.half_space.normal"), &h.normal)?;
        if h.normal.iter().map(|v| v * v).sum::<f64>() == 0.0 {
            return Err((
                format!("{k}.half_space.normal"),
                "normal must be non-zero".into(),
            ));
        }
    }
    if let Some(s) = s {
        geo_ok(&format!("{k}.sphere.center"), &s.center)?;
        if !(s.radius.is_finite() && s.radius > 0.0) {
            return Err((format!("{k}.sphere.radius"), "expected a radius > 0".into()));
        }
    }
    Ok(())
}

/// Point-in-shape tests shared by both selector kinds.
fn in_box(b: &BoxSel, p: &[f64; 3], tol: f64) -> bool {
    (0..3).all(|d| p[d] >= b.min[d] - tol && p[d] <= b.max[d] + tol)
}
fn in_half(h: &HalfSpaceSel, p: &[f64; 3], tol: f64) -> bool {
    let n = h.normal;
    let len = (n[0] * n[0] + n[1] * n[1] + n[2] * n[2]).sqrt();
    ((p[0] - h.point[0]) * n[0] + (p[1] - h.point[1]) * n[1] + (p[2] - h.point[2]) * n[2]) / len
        >= -tol
}
fn in_sphere(s: &SphereSel, p: &[f64; 3], tol: f64) -> bool {
    let d2: f64 = (0..3).map(|d| (p[d] - s.center[d]).powi(2)).sum();
    d2.sqrt() <= s.radius + tol
}

/// Error while resolving a selector against a mesh.
pub type SelectError = (String, String);

fn read_index_file(
    path: &std::path::Path,
    key: &str,
    bound: usize,
    what: &str,
) -> Result<Vec<usize>, SelectError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        (
            key.to_string(),
            format!("cannot read {}: {e}", path.display()),
        )
    })?;
    let mut out = Vec::new();
    for (ln, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("");
        for tok in line.split_whitespace() {
            let i: usize = tok.parse().map_err(|_| {
                (
                    key.to_string(),
                    format!(
                        "{}:{}: expected a non-negative {what} index, found {tok:?}",
                        path.display(),
                        ln + 1
                    ),
                )
            })?;
            if i >= bound {
                return Err((
                    key.to_string(),
                    format!(
                        "{}:{}: {what} index {i} out of range (body has {bound})",
                        path.display(),
                        ln + 1
                    ),
                ));
            }
            out.push(i);
        }
    }
    Ok(out)
}

impl ElementSelector {
    pub fn validate(&self, k: &str) -> Check {
        match self {
            ElementSelector::Box(b) => validate_geo(k, Some(b), None, None),
            ElementSelector::HalfSpace(h) => validate_geo(k, None, Some(h), None),
            ElementSelector::Sphere(s) => validate_geo(k, None, None, Some(s)),
            _ => Ok(()),
        }
    }

    /// Boolean mask over elements. `centroids` in the transformed rest configuration,
    /// `tags` from the mesh, `tol` a geometric tolerance, `base` the scene directory.
    pub fn mask(
        &self,
        key: &str,
        centroids: &[[f64; 3]],
        tags: &[i64],
        tol: f64,
        base: &std::path::Path,
    ) -> Result<Vec<bool>, SelectError> {
        let m = centroids.len();
        Ok(match self {
            ElementSelector::All(b) => vec![*b; m],
            ElementSelector::Box(b) => centroids.iter().map(|c| in_box(b, c, tol)).collect(),
            ElementSelector::HalfSpace(h) => centroids.iter().map(|c| in_half(h, c, tol)).collect(),
            ElementSelector::Sphere(s) => centroids.iter().map(|c| in_sphere(s, c, tol)).collect(),
            ElementSelector::Tag(t) => tags.iter().map(|x| x == t).collect(),
            ElementSelector::Tags(ts) => tags.iter().map(|x| ts.contains(x)).collect(),
            ElementSelector::Elements(list) => {
                let mut mask = vec![false; m];
                for &e in list {
                    if e >= m {
                        return Err((
                            key.into(),
                            format!("element index {e} out of range (body has {m} elements)"),
                        ));
                    }
                    mask[e] = true;
                }
                mask
            }
            ElementSelector::ElementsFile(f) => {
                let mut mask = vec![false; m];
                for e in read_index_file(&base.join(f), key, m, "element")? {
                    mask[e] = true;
                }
                mask
            }
        })
    }
}

impl NodeSelector {
    pub fn validate(&self, k: &str) -> Check {
        match self {
            NodeSelector::Box(b) => validate_geo(k, Some(b), None, None),
            NodeSelector::HalfSpace(h) => validate_geo(k, None, Some(h), None),
            NodeSelector::Sphere(s) => validate_geo(k, None, None, Some(s)),
            NodeSelector::Face(f) => {
                if matches!(
                    f.as_str(),
                    "x_min" | "x_max" | "y_min" | "y_max" | "z_min" | "z_max"
                ) {
                    Ok(())
                } else {
                    Err((
                        format!("{k}.face"),
                        format!(
                            "expected one of x_min, x_max, y_min, y_max, z_min, z_max; got {f:?}"
                        ),
                    ))
                }
            }
            _ => Ok(()),
        }
    }

    /// Selected node indices (sorted) among `nodes`.
    pub fn select(
        &self,
        key: &str,
        nodes: &[[f64; 3]],
        tol: f64,
        base: &std::path::Path,
    ) -> Result<Vec<usize>, SelectError> {
        let n = nodes.len();
        let pick =
            |f: &dyn Fn(&[f64; 3]) -> bool| (0..n).filter(|&i| f(&nodes[i])).collect::<Vec<_>>();
        let mut out = match self {
            NodeSelector::All(b) => {
                if *b {
                    (0..n).collect()
                } else {
                    vec![]
                }
            }
            NodeSelector::Box(b) => pick(&|p| in_box(b, p, tol)),
            NodeSelector::HalfSpace(h) => pick(&|p| in_half(h, p, tol)),
            NodeSelector::Sphere(s) => pick(&|p| in_sphere(s, p, tol)),
            NodeSelector::Face(f) => {
                let axis = match &f[..1] {
                    "x" => 0,
                    "y" => 1,
                    _ => 2,
                };
                let vals = nodes.iter().map(|p| p[axis]);
                let target = if f.ends_with("min") {
                    vals.fold(f64::INFINITY, f64::min)
                } else {
                    vals.fold(f64::NEG_INFINITY, f64::max)
                };
                pick(&|p| (p[axis] - target).abs() <= tol)
            }
            NodeSelector::Nodes(list) => {
                for &i in list {
                    if i >= n {
                        return Err((
                            key.into(),
                            format!("node index {i} out of range (body has {n} nodes)"),
                        ));
                    }
                }
                list.clone()
            }
            NodeSelector::NodesFile(f) => read_index_file(&base.join(f), key, n, "node")?,
        };
        out.sort_unstable();
        out.dedup();
        Ok(out)
    }
}
