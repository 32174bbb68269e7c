//! Adjoint gradients against central finite differences (spec §10.4):
//! $\mathrm{FD}=(\mathcal L(\theta+\eta e_i)-\mathcal L(\theta-\eta e_i))/2\eta$, one parameter at a time.
//! Pass when $|g_{adj}-\mathrm{FD}|\le r_{tol}\max(|g_{adj}|,|\mathrm{FD}|)+a_{tol}$.
//!
//! Step selection (spec §10.4, "sweep ≥ 4 decades and require a plateau"): the central
//! difference is evaluated at $10\eta_0,\eta_0,\eta_0/10,\dots$ (`decades` + 1 steps) and the
//! reported value is the smaller step of the consecutive pair that agrees best (a plateau
//! between truncation error at large steps and solver noise at small ones). The choice never looks at the
//! adjoint value; the whole sweep is in the JSON report.
//!
//! Zero reference: a row whose adjoint and central difference are both below
//! [`ZERO_REL`]$\,|\mathcal L|$ (or both exactly 0) compares nothing — a parameter cut off from
//! the physics has a zero adjoint and a zero difference — so it fails as "zero reference"
//! unless the caller lists it in [`Options::expect_zero`]; a listed row passes only when both
//! are that small.

use super::problem::{Evaluation, Problem};
use crate::solver::SolverError;

/// One row of the report.
#[derive(Clone, Debug, serde::Serialize)]
pub struct CheckRow {
    pub name: String,
    /// Working variable θ (log of the value for log parameters).
    pub theta: f64,
    pub value: f64,
    pub adjoint: f64,
    pub finite_difference: f64,
    pub step: f64,
    /// Every `(step, central difference)` of the sweep.
    pub sweep: Vec<(f64, f64)>,
    pub abs_error: f64,
    pub rel_error: f64,
    pub pass: bool,
    /// Some finite-difference forward did not converge (the row then fails).
    pub fd_nonconverged: bool,
    /// Adjoint and central difference both at most [`ZERO_REL`]·|loss|: nothing was compared.
    pub zero_reference: bool,
    /// The caller stated that this gradient is zero ([`Options::expect_zero`]).
    pub zero_expected: bool,
}

/// Below $10^{-10}|\mathcal L|$ (in loss units per unit of the working variable) a gradient
/// and its central difference count as zero: a step of $10^{-6}$ turns the loss's round-off
/// ($\sim10^{-16}|\mathcal L|$) into differences of $\sim10^{-10}|\mathcal L|$.
pub const ZERO_REL: f64 = 1e-10;

/// Full report.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Report {
    pub loss: f64,
    pub rtol: f64,
    pub atol: f64,
    pub rows: Vec<CheckRow>,
    pub evaluation: Evaluation,
    pub all_pass: bool,
}

/// Options of a check.
#[derive(Clone, Debug)]
pub struct Options {
    /// Only these parameter names (all when empty).
    pub only: Vec<String>,
    /// Step override (in θ) for every parameter.
    pub eps: Option<f64>,
    pub rtol: f64,
    pub atol: f64,
    /// Number of decades swept below the base step (0 = a single step).
    pub decades: usize,
    /// Parameters whose gradient is zero by construction: their rows pass only as a zero
    /// reference, and every other row fails as one.
    pub expect_zero: Vec<String>,
}

/// Run the check.
pub fn check(problem: &Problem, opts: &Options) -> Result<Report, SolverError> {
    let theta = problem.theta0();
    let ev = problem.evaluate(&theta, true)?;
    let mut rows = Vec::new();
    for (i, p) in problem.params.iter().enumerate() {
        if !opts.only.is_empty() && !opts.only.iter().any(|o| o == &p.name) {
            continue;
        }
        let base = opts.eps.unwrap_or_else(|| p.default_fd_step(&problem.base));
        let mut sweep = Vec::new();
        let mut fd_nonconverged = false;
        for k in 0..=opts.decades {
            let step = if opts.decades == 0 {
                base
            } else {
                base * 10.0 / 10f64.powi(k as i32)
            };
            let mut tp = theta.clone();
            tp[i] += step;
            let ep = problem.evaluate(&tp, false)?;
            fd_nonconverged |= !ep.nonconverged_forward_frames.is_empty();
            let lp = ep.loss;
            let mut tm = theta.clone();
            tm[i] -= step;
            let em = problem.evaluate(&tm, false)?;
            fd_nonconverged |= !em.nonconverged_forward_frames.is_empty();
            let lm = em.loss;
            sweep.push((step, (lp - lm) / (2.0 * step)));
        }
        let (step, fd) = if sweep.len() == 1 {
            sweep[0]
        } else {
            let k = (1..sweep.len())
                .min_by(|&a, &b| {
                    let da = (sweep[a].1 - sweep[a - 1].1).abs();
                    let db = (sweep[b].1 - sweep[b - 1].1).abs();
                    da.partial_cmp(&db).unwrap_or(std::cmp::Ordering::Equal)
                })
                .unwrap_or(0);
            sweep[k]
        };
        let adj = ev.gradient[i];
        let abs_error = (adj - fd).abs();
        let scale = adj.abs().max(fd.abs());
        let rel_error = if scale > 0.0 { abs_error / scale } else { 0.0 };
        let zero_reference = adj.is_finite() && fd.is_finite() && scale <= ZERO_REL * ev.loss.abs();
        let zero_expected = opts.expect_zero.iter().any(|z| z == &p.name);
        // A finite difference over non-converged forwards is not evidence either way; a zero
        // reference only when the caller said zero is the answer.
        let agree = if zero_expected {
            zero_reference
        } else {
            abs_error <= opts.rtol * scale + opts.atol && !zero_reference
        };
        let pass = agree && !fd_nonconverged;
        rows.push(CheckRow {
            name: p.name.clone(),
            theta: theta[i],
            value: p.value(&problem.base),
            adjoint: adj,
            finite_difference: fd,
            step,
            sweep,
            abs_error,
            rel_error,
            pass,
            fd_nonconverged,
            zero_reference,
            zero_expected,
        });
    }
    let all_pass = rows.iter().all(|r| r.pass)
        && ev.nonconverged_backward_frames.is_empty()
        && ev.nonconverged_forward_frames.is_empty();
    Ok(Report {
        loss: ev.loss,
        rtol: opts.rtol,
        atol: opts.atol,
        rows,
        evaluation: ev,
        all_pass,
    })
}

/// Plain-text table.
pub fn table(r: &Report) -> String {
    let mut s = format!(
        "loss = {:.10e}\n{:<36} {:>16} {:>16} {:>10} {:>10}  verdict\n",
        r.loss, "parameter", "adjoint", "central FD", "rel.err", "step"
    );
    for row in &r.rows {
        s.push_str(&format!(
            "{:<36} {:>16.8e} {:>16.8e} {:>10.2e} {:>10.1e}  {}\n",
            row.name,
            row.adjoint,
            row.finite_difference,
            row.rel_error,
            row.step,
            match (row.pass, row.zero_reference, row.zero_expected) {
                (true, _, true) => "PASS (zero expected)",
                (true, _, false) => "PASS",
                (false, true, false) => "FAIL (zero reference)",
                (false, _, true) => "FAIL (zero expected)",
                (false, _, false) => "FAIL",
            }
        ));
    }
    let e = &r.evaluation;
    s.push_str(&format!(
        "forward {:.2}s ({} PD iterations), backward {:.2}s ({} adjoint iterations, max |z| {:.3e}, filtered samples {})\n",
        e.forward_seconds, e.pd_iterations, e.backward_seconds, e.adjoint_iterations, e.max_abs_adjoint, e.filtered_samples
    ));
    if !e.nonconverged_forward_frames.is_empty() {
        s.push_str(&format!(
            "WARNING: forward did not converge in frames {:?}\n",
            e.nonconverged_forward_frames
        ));
    }
    if !e.nonconverged_backward_frames.is_empty() {
        s.push_str(&format!(
            "WARNING: adjoint did not converge in frames {:?}\n",
            e.nonconverged_backward_frames
        ));
    }
    let passed = r.rows.iter().filter(|x| x.pass).count();
    s.push_str(&format!(
        "gradcheck: {} passed, {} failed\n",
        passed,
        r.rows.len() - passed
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optimize::problem::Problem;

    /// A two-cell bar clamped at x_min, its density the one parameter, with `loss` (a `--set`
    /// of `loss.term`).
    fn problem(loss: &str) -> Problem {
        let text = crate::scene::overrides::fixture("scenes/unit/gradcheck_bar", &[loss]);
        let ls = crate::scene::load_str(&text, std::path::Path::new("inline.toml"), &[])
            .expect("scene loads");
        Problem::new(ls).expect("problem builds")
    }

    fn opts(expect_zero: &[&str]) -> Options {
        Options {
            only: vec![],
            eps: None,
            rtol: 1e-4,
            atol: 0.0,
            decades: 4,
            expect_zero: expect_zero.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn zero_reference_fails_unless_expected() {
        // a loss the parameter moves: a real comparison, which passes
        let moved = problem(r#"loss.term=[{ type = "random_linear", seed = 1 }]"#);
        let rep = check(&moved, &opts(&[])).unwrap();
        let row = &rep.rows[0];
        assert!(
            !row.zero_reference && row.pass && rep.all_pass,
            "{}",
            table(&rep)
        );
        // the same parameter declared zero: it is not, so the row fails
        let rep = check(&moved, &opts(&[&row.name])).unwrap();
        assert!(!rep.rows[0].pass && !rep.all_pass, "{}", table(&rep));
        // a loss no parameter reaches (a constant): adjoint 0 and FD 0 compare nothing
        let flat = problem(r#"loss.term=[{ type = "random_linear", seed = 1, weight = 0.0 }]"#);
        let rep = check(&flat, &opts(&[])).unwrap();
        let row = &rep.rows[0];
        assert!(
            row.zero_reference && !row.pass && !rep.all_pass,
            "{}",
            table(&rep)
        );
        assert!(table(&rep).contains("FAIL (zero reference)"));
        // ... unless zero is stated to be the answer
        let rep = check(&flat, &opts(&[&row.name])).unwrap();
        assert!(rep.rows[0].pass && rep.all_pass, "{}", table(&rep));
    }
}
