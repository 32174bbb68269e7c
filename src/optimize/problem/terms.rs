//! The loss terms of a problem that read data: the reference trajectory (the scene simulated
//! with `[loss.reference]` overrides), the chamfer term's captured point sets, the force term's
//! samples and tracking targets from frame files. Each error names the scene key and the file.

use super::error::{setup, ProblemError};
use crate::scene::LoadedScene;
use crate::solver::loss::{Loss, Term};
use crate::solver::rollout;
use crate::solver::{Model, Simulator};
use std::sync::Arc;

/// Reference states: the same scene simulated with extra overrides.
pub(super) fn simulate_reference(
    ls: &LoadedScene,
    base: &Model,
    sets: &[String],
) -> Result<Vec<Vec<f64>>, ProblemError> {
    let rls = crate::scene::load_str(&ls.effective_toml, &ls.path, sets)
        .map_err(|e| ProblemError::Reference(e.to_string()))?;
    let model = Model::from_scene(&rls).map_err(|e| ProblemError::Reference(e.to_string()))?;
    if model.num_nodes() != base.num_nodes() || model.frames != base.frames || model.h != base.h {
        return Err(ProblemError::Reference(
            "[loss.reference] overrides must keep the mesh, dt and frames".into(),
        ));
    }
    let mut sim = Simulator::new(&model, &rls.scene.solver)
        .map_err(|e| ProblemError::Reference(e.to_string()))?;
    let ro = rollout::forward(&mut sim, model.frames, 1, &Loss::default())
        .map_err(|e| ProblemError::Reference(e.to_string()))?;
    // checkpoint_every = 1 keeps every state
    Ok(ro
        .all_states()
        .expect("a forward rollout with checkpoint_every = 1 keeps every frame"))
}

/// Chamfer term (`type = "chamfer"`): the boundary nodes of `body` (or of every body) and
/// the captured point sets of the frame map, each read once and indexed by a 3-d tree.
/// Errors name the key (`captures[k].frame`, `captures[k].file`, `capture_dir`) and the
/// file.
pub(super) fn chamfer_term(
    ls: &LoadedScene,
    base: &Model,
    (weight, body, captures, capture_dir, reduction): (
        f64,
        Option<usize>,
        &[crate::scene::CaptureSpec],
        Option<&str>,
        crate::scene::ChamferReduction,
    ),
    key: &str,
) -> Result<Term, ProblemError> {
    use crate::mesh::kdtree::KdTree;
    use crate::solver::loss::Capture;
    if !(weight.is_finite()) {
        return Err(setup(&format!("{key}.weight"), "expected a finite number"));
    }
    let nodes = chamfer_nodes(base, body, key)?;
    let frames = base.frames;
    let read = |path: &std::path::Path, k: &str| -> Result<Arc<KdTree>, ProblemError> {
        let pts = crate::mesh::points::read_points(path).map_err(|e| setup(k, e.to_string()))?;
        Ok(Arc::new(KdTree::new(pts)))
    };
    let mut out = Vec::new();
    for (k, c) in captures.iter().enumerate() {
        let ck = format!("{key}.captures[{k}]");
        if c.frame == 0 || c.frame > frames {
            return Err(setup(
                &format!("{ck}.frame"),
                format!(
                    "frame {} is outside the simulated frames 1..={frames}",
                    c.frame
                ),
            ));
        }
        out.push(Capture {
            frame: c.frame,
            tree: read(&ls.resolve(&c.file), &format!("{ck}.file"))?,
        });
    }
    if let Some(dir) = capture_dir {
        let dk = format!("{key}.capture_dir");
        let path = ls.resolve(dir);
        let found = capture_files(&path, &dk, frames)?;
        if found.is_empty() {
            return Err(setup(
                &dk,
                format!(
                    "{}: no frame_NNNNN.ply or frame_NNNNN.obj files",
                    path.display()
                ),
            ));
        }
        for (frame, p) in found {
            out.push(Capture {
                frame,
                tree: read(&p, &dk)?,
            });
        }
    }
    if out.is_empty() {
        return Err(setup(
            &format!("{key}.captures"),
            "a chamfer term needs `captures` (a frame map) or `capture_dir`",
        ));
    }
    out.sort_by_key(|c| c.frame);
    Ok(Term::Chamfer {
        weight,
        nodes,
        captures: out,
        mean: reduction == crate::scene::ChamferReduction::Mean,
    })
}

/// Contact-force term (`type = "contact_force"`): the measurements of `file` (`frame, fx, fy,
/// fz` per line). Errors name the key (`weight`, `obstacle`, `file` with the file and line) —
/// and refuse the set-ups whose contact forces are not the NCP multipliers the adjoint
/// differentiates: penalty contact and DiffPD's glue contact.
pub(super) fn force_term(
    ls: &LoadedScene,
    base: &Model,
    (weight, obstacle, direction, file): (f64, usize, Option<[f64; 3]>, &str),
    key: &str,
) -> Result<Term, ProblemError> {
    if !weight.is_finite() {
        return Err(setup(&format!("{key}.weight"), "expected a finite number"));
    }
    let direction = match direction {
        None => None,
        Some(d) => {
            let len = d.iter().map(|v| v * v).sum::<f64>().sqrt();
            if !(len.is_finite() && len > 0.0) {
                return Err(setup(
                    &format!("{key}.direction"),
                    "expected a finite non-zero vector",
                ));
            }
            Some(d.map(|v| v / len))
        }
    };
    if obstacle >= base.obstacles.len() {
        return Err(setup(
            &format!("{key}.obstacle"),
            format!(
                "obstacle {obstacle} does not exist (scene has {})",
                base.obstacles.len()
            ),
        ));
    }
    if crate::contact::penalty_enabled(base) {
        return Err(setup(
            &format!("{key}.type"),
            "a contact_force term needs NCP contact (contact.model = \"ncp\"), not penalty",
        ));
    }
    if ls.scene.solver.method == crate::model::SolverMethod::Diffpd {
        return Err(setup(
            &format!("{key}.type"),
            "a contact_force term needs solver.method \"diffphd\", \"newton\" or \"auto\" \
             (DiffPD's glue contact has no NCP multipliers)",
        ));
    }
    let fk = format!("{key}.file");
    let path = ls.resolve(file);
    let bytes = crate::io::input::read_input(&path)
        .map_err(|e| setup(&fk, format!("{}: {e}", path.display())))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| setup(&fk, format!("{}: not UTF-8 text", path.display())))?;
    let frames = parse_forces(&text, base.frames)
        .map_err(|(line, m)| setup(&fk, format!("{}:{line}: {m}", path.display())))?;
    Ok(Term::ContactForce {
        weight,
        obstacle,
        direction,
        frames,
    })
}

/// One measured total contact force: (frame, [fx, fy, fz] in N).
pub type ForceSample = (usize, [f64; 3]);

/// The measurements of a contact-force file: `frame, fx, fy, fz` per line (commas and/or
/// white space), `#` comments, an optional header line starting with `frame`; frames in
/// `1..=frames`, each once, sorted on return. Errors: (1-based line, message). (Public for
/// the scene fuzz body, `fuzz/bodies`.)
pub fn parse_forces(text: &str, frames: usize) -> Result<Vec<ForceSample>, (usize, String)> {
    let mut out: Vec<ForceSample> = Vec::new();
    for (k, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() || (out.is_empty() && line.starts_with("frame")) {
            continue;
        }
        let f: Vec<&str> = line
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|t| !t.is_empty())
            .collect();
        if f.len() != 4 {
            return Err((
                k + 1,
                format!("expected 4 values (frame, fx, fy, fz), found {}", f.len()),
            ));
        }
        let frame: usize = f[0].parse().map_err(|_| {
            (
                k + 1,
                format!("frame `{}` is not a non-negative integer", f[0]),
            )
        })?;
        if frame == 0 || frame > frames {
            return Err((
                k + 1,
                format!("frame {frame} is outside the simulated frames 1..={frames}"),
            ));
        }
        let mut v = [0.0; 3];
        for d in 0..3 {
            v[d] = f[d + 1]
                .parse::<f64>()
                .ok()
                .filter(|x| x.is_finite())
                .ok_or_else(|| {
                    (
                        k + 1,
                        format!("force `{}` is not a finite number", f[d + 1]),
                    )
                })?;
        }
        if out.iter().any(|(t, _)| *t == frame) {
            return Err((k + 1, format!("frame {frame} is measured twice")));
        }
        out.push((frame, v));
    }
    if out.is_empty() {
        return Err((1, "no measurement (lines `frame, fx, fy, fz`)".into()));
    }
    out.sort_by_key(|m| m.0);
    Ok(out)
}

/// The boundary nodes of a chamfer term: of body `body`, or of every body (sorted, unique).
fn chamfer_nodes(base: &Model, body: Option<usize>, key: &str) -> Result<Vec<usize>, ProblemError> {
    let bodies: Vec<usize> = match body {
        Some(b) if b >= base.bodies.len() => {
            return Err(setup(
                &format!("{key}.body"),
                format!("body {b} does not exist (scene has {})", base.bodies.len()),
            ))
        }
        Some(b) => vec![b],
        None => (0..base.bodies.len()).collect(),
    };
    let mut nodes: Vec<usize> = bodies
        .iter()
        .flat_map(|&b| base.bodies[b].surface.iter().flatten().copied())
        .collect();
    nodes.sort_unstable();
    nodes.dedup();
    if nodes.is_empty() {
        return Err(setup(
            &format!("{key}.body"),
            "the body has no boundary surface",
        ));
    }
    Ok(nodes)
}

/// The `frame_NNNNN.ply` / `frame_NNNNN.obj` files of a chamfer term's `capture_dir` (`dk`)
/// with their frame numbers, sorted; every frame within `1..=frames`.
fn capture_files(
    path: &std::path::Path,
    dk: &str,
    frames: usize,
) -> Result<Vec<(usize, std::path::PathBuf)>, ProblemError> {
    let entries = std::fs::read_dir(path).map_err(|e| {
        setup(
            dk,
            format!("{}: cannot read the folder: {e}", path.display()),
        )
    })?;
    let mut found = Vec::new();
    for e in entries {
        let e = e.map_err(|e| setup(dk, format!("{}: {e}", path.display())))?;
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(stem) = name
            .strip_suffix(".ply")
            .or_else(|| name.strip_suffix(".obj"))
            .and_then(|s| s.strip_prefix("frame_"))
        else {
            continue;
        };
        let Ok(frame) = stem.parse::<usize>() else {
            continue;
        };
        if frame == 0 || frame > frames {
            return Err(setup(
                dk,
                format!(
                    "{}: frame {frame} is outside the simulated frames 1..={frames}",
                    e.path().display()
                ),
            ));
        }
        found.push((frame, e.path()));
    }
    found.sort();
    Ok(found)
}

/// Tracking term from the frames `simulate` wrote into `dir`: per frame `t` in `1..=frames`,
/// `frame_t.vtu` if it exists (the default format, full double precision), else
/// `frame_t.ply` (32-bit floats); frames with neither file are not tracked.
///
/// Either format tracks the same nodes in the same order: the boundary nodes in the PLY
/// frames' vertex order ([`crate::io::frames::surface_node_order`]). A `.vtu` frame holds
/// every node (point array `node`), and only its boundary nodes are taken, so that a
/// reference written as `.vtu` gives the loss a PLY reference of the same run gives, up to
/// the PLY's float32 rounding of the positions (relative 2⁻²⁴ per coordinate), and the
/// scene's `weight` keeps its meaning (docs/NOTES.md "Frame format").
pub(super) fn tracking_from_frames(
    base: &Model,
    dir: &std::path::Path,
    weight: f64,
    key: &str,
) -> Result<Term, ProblemError> {
    let fail = |m: String| setup(&format!("{key}.reference_dir"), m);
    let boundary = crate::io::frames::surface_node_order(
        base.num_nodes(),
        base.bodies.iter().flat_map(|b| b.surface.iter()),
    );
    let mut nodes: Option<Vec<usize>> = None;
    let mut frames = Vec::new();
    for t in 1..=base.frames {
        let vtu = dir.join(crate::io::frames::vtu_frame_name(t));
        let ply = dir.join(crate::io::frames::frame_name(t));
        let (path, pts) = if vtu.exists() {
            let pts = vtu_node_positions(&vtu, &boundary, base.num_nodes(), &fail)?;
            (vtu, pts)
        } else if ply.exists() {
            let pts = crate::io::ply::read_node_positions(&ply).map_err(|m| fail(m.to_string()))?;
            (ply, pts)
        } else {
            continue;
        };
        let these: Vec<usize> = pts.iter().map(|p| p.0).collect();
        if let Some(&bad) = these.iter().find(|&&i| i >= base.num_nodes()) {
            return Err(fail(format!(
                "{}: node {bad} does not exist in this scene",
                path.display()
            )));
        }
        match &nodes {
            None => nodes = Some(these),
            Some(n) if *n != these => {
                return Err(fail(format!(
                    "{}: a different node set than the first frame",
                    path.display()
                )))
            }
            _ => {}
        }
        frames.push((t, pts.into_iter().map(|p| p.1).collect()));
    }
    let nodes = nodes.ok_or_else(|| {
        fail(format!(
            "{}: no frame_NNNNN.vtu or frame_NNNNN.ply files for frames 1..={}",
            dir.display(),
            base.frames
        ))
    })?;
    Ok(Term::Tracking {
        weight,
        nodes,
        frames,
    })
}

/// `(node, position)` of each node of `boundary`, in that order, from a `.vtu` frame written
/// by `simulate` (point array `node`: the global node index of each point); `fail` turns a
/// message naming the file and, where one, the node into the error.
fn vtu_node_positions(
    path: &std::path::Path,
    boundary: &[usize],
    num_nodes: usize,
    fail: &dyn Fn(String) -> ProblemError,
) -> Result<Vec<(usize, [f64; 3])>, ProblemError> {
    let name = path.display();
    let bytes = crate::io::input::read_input(path).map_err(|e| fail(format!("{name}: {e}")))?;
    let grid = crate::io::vtu_read::parse_vtu_grid(&bytes)
        .map_err(|e| fail(format!("{name}: line {}: {e}", e.line)))?;
    let node = grid
        .point_data
        .iter()
        .find(|a| a.name == "node" && a.components == 1)
        .ok_or_else(|| {
            fail(format!(
                "{name}: no point array `node` (the global node index)"
            ))
        })?;
    let crate::io::vtu_read::VtuValues::Int(index) = &node.values else {
        return Err(fail(format!(
            "{name}: point array `node` is not an integer array"
        )));
    };
    if index.len() != grid.points.len() {
        return Err(fail(format!(
            "{name}: point array `node` has {} values for {} points",
            index.len(),
            grid.points.len()
        )));
    }
    let mut at = vec![usize::MAX; num_nodes];
    for (k, &i) in index.iter().enumerate() {
        match usize::try_from(i).ok().filter(|&i| i < num_nodes) {
            Some(i) => at[i] = k,
            None => {
                return Err(fail(format!(
                    "{name}: node {i} does not exist in this scene"
                )))
            }
        }
    }
    boundary
        .iter()
        .map(|&i| match at[i] {
            usize::MAX => Err(fail(format!(
                "{name}: boundary node {i} is not in the frame"
            ))),
            k => Ok((i, grid.points[k])),
        })
        .collect()
}
