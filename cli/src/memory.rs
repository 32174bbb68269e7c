//! Memory guards (issue 18): estimate what a run will hold before allocating it and refuse
//! (exit 2) with the estimate when it exceeds the memory available or `--max-memory`.
//!
//! Estimated, every part before it is allocated:
//! - the model's arrays and the solver state sized by it (`Model::memory_bytes`: derived
//!   per-node and per-sample quantities, step and Anderson vectors);
//! - the sparse Cholesky factor of the PD matrix, from the symbolic analysis (nnz of L and
//!   the factorization's work space, `SystemPlan::factor_bytes`), computed before the
//!   numeric factorization allocates;
//! - for `grad`, `gradcheck` and `optimize`, the rollout tape — `48·n` bytes per kept state
//!   (positions and velocities of `n` nodes), `⌊frames/K⌋ + 1` kept states plus one
//!   recomputed segment of `K` states with `backward.checkpoint_every = K > 1`.
//!
//! Not estimated: the Hessian factor of `solver.method = "newton"`, the dense contact
//! Delassus columns and the GPU's copies. The mesh readers and generators guard the mesh
//! sizes themselves (the model is built from the mesh before this estimate).

use crate::failure::Failure;
use diffphd::linalg::SystemPlan;
use diffphd::model::{AndersonWindow, Model, SolverSettings};
use diffphd::optimize::problem::Problem;

/// Parse a byte count: `123`, `1e9`, `512K`, `64M`, `8G`, `1T` (binary multiples; `KiB`,
/// `MB`, … are read the same).
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let digits_end = t
        .find(|c: char| c.is_ascii_alphabetic() && c != 'e' && c != 'E')
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(digits_end);
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("{s:?}: expected a byte count like 8G, 512M or 1e9"))?;
    let mult = match unit
        .trim()
        .to_ascii_uppercase()
        .trim_end_matches("IB")
        .trim_end_matches('B')
    {
        "" => 1u64,
        "K" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        "T" => 1 << 40,
        _ => return Err(format!("{s:?}: unknown unit (use K, M, G or T)")),
    };
    let bytes = v * mult as f64;
    if !(bytes.is_finite() && bytes >= 1.0 && bytes < u64::MAX as f64) {
        return Err(format!("{s:?}: expected a positive byte count"));
    }
    Ok(bytes as u64)
}

/// `MemAvailable` of /proc/meminfo, if readable.
pub fn available_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Bytes of the rollout tape (see the module doc).
pub fn tape_bytes(nodes: usize, frames: usize, checkpoint_every: usize) -> u64 {
    let k = checkpoint_every.max(1) as u64;
    let per_state = 48 * nodes as u64;
    let kept = (frames as u64 / k).saturating_add(1);
    let segment = if k > 1 { k } else { 0 };
    per_state.saturating_mul(kept.saturating_add(segment))
}

fn human(b: u64) -> String {
    let b = b as f64;
    if b >= (1u64 << 30) as f64 {
        format!("{:.2} GiB", b / (1u64 << 30) as f64)
    } else if b >= (1u64 << 20) as f64 {
        format!("{:.1} MiB", b / (1u64 << 20) as f64)
    } else {
        format!("{:.1} KiB", b / (1u64 << 10) as f64)
    }
}

/// An estimate in named parts (bytes).
#[derive(Clone, Debug, Default)]
pub struct Estimate {
    pub parts: Vec<(&'static str, u64)>,
}

impl Estimate {
    /// Add a part.
    pub fn part(mut self, name: &'static str, bytes: u64) -> Self {
        self.parts.push((name, bytes));
        self
    }
    pub fn total(&self) -> u64 {
        self.parts.iter().fold(0u64, |a, p| a.saturating_add(p.1))
    }
    /// "total (estimate: a 1.0 MiB + b 2.0 MiB)".
    fn describe(&self) -> String {
        let parts: Vec<String> = self
            .parts
            .iter()
            .map(|(n, b)| format!("{n} {}", human(*b)))
            .collect();
        format!("{} (estimate: {})", human(self.total()), parts.join(" + "))
    }
}

/// The model and solver state of a run on `model` with `settings` and the factor planned
/// in `plan`.
pub fn simulation(model: &Model, settings: &SolverSettings, plan: &SystemPlan) -> Estimate {
    // "auto" resolves to at most 5
    let window = match settings.anderson_window {
        AndersonWindow::Auto => 5,
        AndersonWindow::Fixed(n) => n,
    };
    Estimate::default()
        .part("model and solver state", model.memory_bytes(window))
        .part("Cholesky factor", plan.factor_bytes())
}

/// `grad`, `gradcheck`, `optimize`: plan the linear algebra of `problem` (ordering and
/// symbolic analysis, kept for its evaluations) and refuse the run when model, solver
/// state, factor and rollout tape together exceed the limit — before the first numeric
/// factorization or rollout allocates.
///
/// Returns the bytes left under the limit (`None` when no limit is known): the budget of
/// `backward.adjoint = "auto"`'s direct adjoint ([`Problem::memory_budget`]).
pub fn check_problem(problem: &Problem, max_memory: Option<u64>) -> Result<Option<u64>, Failure> {
    let plan = problem.prepare_plan().map_err(|e| {
        Failure::input(anyhow::Error::new(e).context(format!(
            "{}: setting up the solver",
            problem.ls.path.display()
        )))
    })?;
    let est = simulation(&problem.base, &problem.ls.scene.solver, &plan).part(
        "rollout tape",
        tape_bytes(
            problem.base.num_nodes(),
            problem.base.frames,
            problem.checkpoint_every,
        ),
    );
    check(
        &format!("{}: the run", problem.ls.path.display()),
        &est,
        max_memory,
        "use fewer frames, a larger backward.checkpoint_every, a coarser mesh, or a larger --max-memory",
    )?;
    Ok(limit(max_memory).map(|(l, _)| l.saturating_sub(est.total())))
}

/// The memory limit of a run and its name: the smaller of `--max-memory` and the memory
/// available (`None` when neither is known).
fn limit(max_memory: Option<u64>) -> Option<(u64, &'static str)> {
    match (max_memory, available_bytes()) {
        (Some(m), Some(a)) if a < m => Some((a, "the memory available")),
        (Some(m), _) => Some((m, "--max-memory")),
        (None, Some(a)) => Some((a, "the memory available")),
        (None, None) => None,
    }
}

/// Refuse `what` (needing about `est`) above `--max-memory` or the memory available now;
/// `hint` says what to change.
pub fn check(
    what: &str,
    est: &Estimate,
    max_memory: Option<u64>,
    hint: &str,
) -> Result<(), Failure> {
    let estimate = est.total();
    let Some((limit, name)) = limit(max_memory) else {
        return Ok(());
    };
    if estimate > limit {
        return Err(Failure::input(anyhow::anyhow!(
            "{what} needs about {}, more than {name} ({}); {hint}",
            est.describe(),
            human(limit)
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_counts_parse() {
        assert_eq!(parse_bytes("123").unwrap(), 123);
        assert_eq!(parse_bytes("1e9").unwrap(), 1_000_000_000);
        assert_eq!(parse_bytes("512M").unwrap(), 512 << 20);
        assert_eq!(parse_bytes("8GiB").unwrap(), 8 << 30);
        assert_eq!(parse_bytes("2k").unwrap(), 2048);
        for bad in ["", "x", "-1", "0", "nan", "1Q", "inf"] {
            assert!(parse_bytes(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn tape_estimate_counts_kept_states() {
        assert_eq!(tape_bytes(10, 9, 1), 48 * 10 * 10);
        assert_eq!(tape_bytes(10, 9, 3), 48 * 10 * (4 + 3));
        assert_eq!(tape_bytes(usize::MAX, usize::MAX, 1), u64::MAX);
    }

    #[test]
    fn over_the_limit_is_bad_input_naming_the_estimate() {
        let est = Estimate::default()
            .part("tape", 1 << 30)
            .part("factor", 1 << 30);
        let e = check("grad", &est, Some(1 << 30), "hint").err().unwrap();
        assert_eq!(e.code, 2);
        let m = e.error.to_string();
        assert!(
            m.contains("2.00 GiB (estimate: tape 1.00 GiB + factor 1.00 GiB)")
                && (m.contains("--max-memory") || m.contains("available"))
                && m.ends_with("hint"),
            "{m}"
        );
        let small = Estimate::default().part("x", 1 << 20);
        assert!(check("x", &small, Some(1 << 30), "").is_ok());
    }
}
