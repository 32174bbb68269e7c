//! Adjoint of one Newton step (direct solve with the step's Hessian; with contact, the KKT
//! system by one solve and the contact Schur complement). See the module docs of
//! `crate::solver::newton`.

use super::*;
use crate::linalg::krylov;

/// Adjoint of one Newton step: $\nabla^2g(x_{t+1})z=g$ on the free DoFs by one direct solve
/// (exact Hessian, or with the backward filter's element projection for the ablation); with
/// the step's contact block (`lin.contact`), the KKT system of the module docs by one solve
/// and the contact Schur complement.
pub fn solve_adjoint(
    sim: &StepContext,
    lin: &StepLinearization,
    x_next: &[f64],
    g: &[f64],
    cfg: &BackwardConfig,
    frame: usize,
) -> Result<(Vec<f64>, AdjointStats), SolverError> {
    let t0 = Instant::now();
    let ncfg = sim.config.newton;
    if ncfg.energy != NewtonEnergy::Pd {
        return Err(SolverError::Unsupported(
            "gradients with solver.newton_energy = \"true\": the parameter-gradient routing \
             (solver::gradient) differentiates the PD energy; use newton_energy = \"pd\""
                .into(),
        ));
    }
    // the rollout's pattern, ordering and symbolic factor (built at the first direct solve)
    let mut cache = sim.adjoint_system.lock().unwrap_or_else(|p| p.into_inner());
    let sys: &mut NewtonSystem =
        cache.get_or_insert_with(|| Box::new(NewtonSystem::new(sim.model, &sim.prescribed)));
    // only the Hessian is needed: y and x_t enter the gradient, not the Hessian
    let ev = evaluate(sim, ncfg.energy, x_next, x_next, x_next, (true, true));
    let mut hess = ev.hess;
    let mut ns = NewtonStats::default();
    let filter = match cfg.filter {
        HessianFilterMode::None => NewtonFilter::None,
        HessianFilterMode::Clamp => NewtonFilter::Clamp,
        HessianFilterMode::Abs | HessianFilterMode::TrustRegion => NewtonFilter::Abs,
    };
    let mut delta = f64::INFINITY;
    let policy = FilterPolicy {
        filter,
        tr_clamp: false,
        ppn_delta: &mut delta,
    };
    factor_filtered(sim, sys, policy, (&mut hess, g), &mut ns)?;
    let mut gf = g.to_vec();
    sim.zero_prescribed(&mut gf);
    let mut z = sys.solve(&gf)?;
    let k = assemble(sim, sys, &hess);
    let prescribed = &sim.prescribed;
    let apply = |v: &[f64], out: &mut [f64]| {
        k.matvec(v, out);
        for &p in prescribed {
            out[p] = 0.0;
        }
    };
    let mut gmres_iterations = 0;
    if ns.regularizations > 0 {
        // The factor is of H + τI (indefinite H): GMRES on the unshifted matrix from the
        // shifted solution, preconditioned by the PD factor A⁻¹ (SPD; the shifted factor is
        // nearly singular and measured to stall GMRES), so z solves the exact system.
        let mut op = |v: &[f64], out: &mut [f64]| {
            apply(v, out);
            Ok(())
        };
        let mut pre = |v: &[f64], out: &mut [f64]| {
            use crate::linalg::LinearSolver;
            sim.system.solve_homogeneous(v, out)
        };
        let mut space = krylov::HostSpace::<LinalgError>::new(gf.len(), &mut op, &mut pre);
        let st = krylov::gmres_in(
            &mut krylov::Cancellable::new(&mut space, &sim.cancel),
            &gf,
            &mut z,
            &krylov::GmresSettings {
                restart: cfg.gmres_restart,
                rel_tol: cfg.rel_tol,
                abs_tol: cfg.abs_tol,
                max_iter: cfg.max_iterations,
            },
        )
        .map_err(|e| SolverError::linalg(frame, e))?;
        gmres_iterations = st.iterations;
    }
    let mut kz = vec![0.0; z.len()];
    // the residual's scale: g and the force a contact-force loss's g_λ puts on the z rows
    let mut force_scale = 0.0;
    if let Some(c) = lin.contact.as_ref() {
        if ns.regularizations > 0 {
            // indefinite K with contact: the same KKT system by the PD-side contact adjoint
            let (z, mut st) =
                crate::solver::adjoint::backward::solve_adjoint(sim, lin, g, cfg, frame)
                    .map_err(|error| SolverError::adjoint_offload(frame, error))?;
            st.method = format!("newton_indefinite:{}", st.method);
            return Ok((z, st));
        }
        let fac = NewtonFactor {
            sys,
            k: Some(&k),
            n: sim.model.num_nodes(),
        };
        let ca = ContactAdjoint::new(&c.rec, &fac)?.with_force_of(c);
        force_scale = ca.rhs_scale(z.len())?;
        let (_, mu) = ca.project(&mut z)?;
        sim.zero_prescribed(&mut z);
        // KKT residual g − Kz − Jᵀμ
        ca.add_jt(&mu, &mut kz);
    }
    let mut kz2 = vec![0.0; z.len()];
    apply(&z, &mut kz2);
    kz.iter_mut().zip(&kz2).for_each(|(a, b)| *a += b);
    sim.zero_prescribed(&mut kz);
    let r = norm(&kz.iter().zip(&gf).map(|(a, b)| a - b).collect::<Vec<_>>());
    let gn = norm(&gf) + force_scale;
    let stats = AdjointStats {
        frame,
        iterations: 1,
        converged: r <= cfg.rel_tol * gn + cfg.abs_tol || r <= 1e-10 * gn,
        relative_residual: if gn > 0.0 { r / gn } else { 0.0 },
        max_abs_z: z.iter().map(|v| v.abs()).fold(0.0, f64::max),
        alpha: 0.0,
        filtered_samples: ns.modified_elements,
        seconds: t0.elapsed().as_secs_f64(),
        method: if ns.regularizations == 0 {
            "newton_direct".into()
        } else {
            "newton_direct_shifted+gmres".into()
        },
        gmres_iterations,
        ..Default::default()
    };
    Ok((z, stats))
}
