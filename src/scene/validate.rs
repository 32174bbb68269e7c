//! Range and consistency checks of a parsed scene ([`Scene::validate`]). Every error names
//! the full key path of the offending value.

use super::schema::*;
use crate::model::settings::*;

use super::checks::{finite3, nonneg, positive, Check};

/// `` `a`, `b` and `c` `` for error messages.
fn key_list(keys: &[&str]) -> String {
    let q: Vec<String> = keys.iter().map(|k| format!("`{k}`")).collect();
    match q.len() {
        0 => String::new(),
        1 => q[0].clone(),
        n => format!("{} and {}", q[..n - 1].join(", "), q[n - 1]),
    }
}

impl Scene {
    /// Range checks. Errors are `(key path, message)`.
    pub fn validate(&self) -> Check {
        if self.schema_version != 1 {
            return Err((
                "schema_version".into(),
                format!("unsupported version {}, expected 1", self.schema_version),
            ));
        }
        positive("simulation.dt", self.simulation.dt)?;
        if self.simulation.frames == 0 {
            return Err((
                "simulation.frames".into(),
                "expected at least 1 frame".into(),
            ));
        }
        finite3("simulation.gravity", &self.simulation.gravity)?;
        if self.is_mpm() || self.mpm.is_some() {
            return self.validate_mpm();
        }
        if self.bodies.is_empty() {
            return Err((
                "body".into(),
                "the scene needs at least one [[body]]".into(),
            ));
        }
        for (b, body) in self.bodies.iter().enumerate() {
            body.validate(&format!("body[{b}]"))?;
        }
        let s = &self.solver;
        if s.max_iterations == 0 {
            return Err(("solver.max_iterations".into(), "expected at least 1".into()));
        }
        nonneg("solver.rel_tol", s.rel_tol)?;
        nonneg("solver.abs_tol", s.abs_tol)?;
        if s.rel_tol == 0.0 && s.abs_tol == 0.0 {
            return Err((
                "solver.rel_tol".into(),
                "rel_tol and abs_tol cannot both be 0".into(),
            ));
        }
        positive("solver.anderson_gamma_max", s.anderson_gamma_max)?;
        if s.method == SolverMethod::Diffpd
            && self.contact.bodies
            && (self.bodies.len() > 1 || self.contact.self_contact)
        {
            // DiffPD's own contact (active-set glue, diffpd-notes §1.9) is against obstacles
            // only: refuse rather than silently drop body–body contact.
            return Err((
                "solver.method".into(),
                "method \"diffpd\" does not support body-body contact (contact.bodies = true): \
                 its active-set (glue) contact is against [[obstacle]]s only; use \"diffphd\" \
                 or \"newton\""
                    .into(),
            ));
        }
        if s.method == SolverMethod::Diffpd && self.contact.compliance > 0.0 {
            // the glue contact fixes active nodes on the obstacle: no compliance to give it
            return Err((
                "contact.compliance".into(),
                "method \"diffpd\" does not support a contact compliance: its active-set (glue) \
                 contact holds active nodes on the obstacle; use \"diffphd\" or \"newton\""
                    .into(),
            ));
        }
        if s.newton_max_iterations == 0 {
            return Err((
                "solver.newton_max_iterations".into(),
                "expected at least 1".into(),
            ));
        }
        positive("solver.newton_tol", s.newton_tol)?;
        if s.lbfgs_history == 0 {
            return Err(("solver.lbfgs_history".into(), "expected at least 1".into()));
        }
        let b = &self.backward;
        nonneg("backward.rel_tol", b.rel_tol)?;
        nonneg("backward.abs_tol", b.abs_tol)?;
        if b.rel_tol == 0.0 && b.abs_tol == 0.0 {
            return Err((
                "backward.rel_tol".into(),
                "rel_tol and abs_tol cannot both be 0".into(),
            ));
        }
        if b.max_iterations == 0 {
            return Err((
                "backward.max_iterations".into(),
                "expected at least 1".into(),
            ));
        }
        if b.gmres_restart == 0 {
            return Err((
                "backward.gmres_restart".into(),
                "expected at least 1".into(),
            ));
        }
        if b.device_gmres_restart == 0 {
            return Err((
                "backward.device_gmres_restart".into(),
                "expected at least 1".into(),
            ));
        }
        if b.checkpoint_every == 0 {
            return Err((
                "backward.checkpoint_every".into(),
                "expected at least 1 (1 keeps every frame)".into(),
            ));
        }
        if b.anderson_window > 64 {
            return Err(("backward.anderson_window".into(), "expected 0..=64".into()));
        }
        let ncp_contact = self.contact.model != crate::scene::ContactModel::Penalty
            && (!self.obstacles.is_empty()
                || (self.contact.bodies && (self.bodies.len() > 1 || self.contact.self_contact)));
        if ncp_contact && b.method == crate::model::AdjointMethod::Pcg {
            return Err((
                "backward.method".into(),
                "\"pcg\" needs a symmetric positive definite adjoint, but the NCP contact \
                 adjoint is a (non-symmetric with friction) KKT system; use \"woodbury\", \
                 \"gmres\" or \"fixed_point\""
                    .into(),
            ));
        }
        if self.output.every == 0 {
            return Err(("output.every".into(), "expected at least 1".into()));
        }
        self.optimize.validate()?;
        for (i, o) in self.obstacles.iter().enumerate() {
            o.validate(&format!("obstacle[{i}]"))?;
            if o.static_friction.is_some_and(|s| s != o.friction)
                && self.contact.model == crate::scene::ContactModel::Penalty
            {
                return Err((
                    format!("obstacle[{i}].static_friction"),
                    "static friction above `friction` needs contact.model = \"ncp\" (the \
                     penalty model has one coefficient)"
                        .into(),
                ));
            }
        }
        if self.contact.model == crate::scene::ContactModel::Penalty {
            if let Some(i) = self
                .parameters
                .iter()
                .position(|p| p.kind == crate::scene::ParamKind::StaticFriction)
            {
                return Err((
                    format!("parameter[{i}].kind"),
                    "`static_friction` needs contact.model = \"ncp\" (the penalty model has one \
                     coefficient, `friction`)"
                        .into(),
                ));
            }
        }
        self.contact.validate("contact")?;
        Ok(())
    }
}

impl Scene {
    /// Checks of an MPM/rigid scene (`[mpm]`, `[[mpm_body]]`, `[[rigid_body]]`): the
    /// per-table ranges, and the refusals of what these scenes do not run (PD bodies beside
    /// them: the coupling is not built; losses and parameters: not differentiable).
    fn validate_mpm(&self) -> Check {
        if !self.bodies.is_empty() {
            let key = if self.mpm_bodies.is_empty() {
                "rigid_body"
            } else {
                "mpm_body"
            };
            return Err((
                key.into(),
                "a scene mixing PD [[body]]s with [[mpm_body]]s or [[rigid_body]]s is refused: \
                 the PD-MPM/rigid coupling is not built (simulate them in separate scenes)"
                    .into(),
            ));
        }
        if !self.is_mpm() {
            return Err((
                "mpm".into(),
                "[mpm] needs at least one [[mpm_body]] or [[rigid_body]]".into(),
            ));
        }
        if !self.mpm_bodies.is_empty() && self.mpm.is_none() {
            return Err((
                "mpm".into(),
                "[[mpm_body]]s need the grid table [mpm] (domain_min, domain_max, spacing)".into(),
            ));
        }
        if self.loss.is_some() || !self.parameters.is_empty() {
            let key = if self.loss.is_some() {
                "loss"
            } else {
                "parameter"
            };
            return Err((
                key.into(),
                "MPM and rigid scenes are not differentiable yet: no [loss] or [[parameter]]"
                    .into(),
            ));
        }
        if let Some(m) = &self.mpm {
            m.validate("mpm")?;
        }
        for (i, b) in self.mpm_bodies.iter().enumerate() {
            b.validate(&format!("mpm_body[{i}]"))?;
        }
        for (i, b) in self.rigid_bodies.iter().enumerate() {
            b.validate(&format!("rigid_body[{i}]"))?;
        }
        if self.output.every == 0 {
            return Err(("output.every".into(), "expected at least 1".into()));
        }
        for (i, o) in self.obstacles.iter().enumerate() {
            o.validate(&format!("obstacle[{i}]"))?;
            if o.static_friction.is_some() {
                return Err((
                    format!("obstacle[{i}].static_friction"),
                    "MPM and rigid scenes use one friction coefficient per obstacle (`friction`)"
                        .into(),
                ));
            }
        }
        Ok(())
    }
}

impl Body {
    /// Range and consistency checks of one `[[body]]` (key prefix `k`), in file order.
    fn validate(&self, k: &str) -> Check {
        self.validate_attachments(k)?;
        self.validate_mesh(k)?;
        finite3(
            &format!("{k}.transform.translation"),
            &self.transform.translation,
        )?;
        finite3(
            &format!("{k}.transform.rotation_deg"),
            &self.transform.rotation_deg,
        )?;
        positive(&format!("{k}.transform.scale"), self.transform.scale)?;
        self.validate_material(k)?;
        self.validate_dirichlet(k)?;
        self.validate_initial(k)?;
        self.validate_muscles(k)?;
        self.validate_forces(k)
    }

    /// `[[body.attachment]]`: finite compliance >= 0, a finite target only with compliance > 0.
    fn validate_attachments(&self, k: &str) -> Check {
        for (i, a) in self.attachments.iter().enumerate() {
            let ka = format!("{k}.attachment[{i}]");
            if !(a.compliance.is_finite() && a.compliance >= 0.0) {
                return Err((
                    format!("{ka}.compliance"),
                    format!("expected a finite value >= 0, got {}", a.compliance),
                ));
            }
            if let Some(t) = a.target {
                if !t.iter().all(|v| v.is_finite()) {
                    return Err((
                        format!("{ka}.target"),
                        "expected three finite numbers".into(),
                    ));
                }
                if a.compliance == 0.0 {
                    return Err((
                        format!("{ka}.compliance"),
                        "a hard attachment (compliance = 0) holds the nodes at their own positions: drop `target` or give compliance > 0".into(),
                    ));
                }
            }
        }
        Ok(())
    }

    /// `[body.mesh]`: `file` or one generator with exactly its keys (box: `cells`, `dx`,
    /// `element`; sphere: `radius`, `dx`, `element`; cylinder: `radius`, `height`, `dx`,
    /// `element`; rounded_box: `size`, `radius`, `dx`, `element`; crab: `resolution`,
    /// `element`), finite `origin`.
    fn validate_mesh(&self, k: &str) -> Check {
        let m = &self.mesh;
        let given: [(&str, bool); 6] = [
            ("cells", m.cells.is_some()),
            ("dx", m.dx.is_some()),
            ("radius", m.radius.is_some()),
            ("height", m.height.is_some()),
            ("size", m.size.is_some()),
            ("resolution", m.resolution.is_some()),
        ];
        let g = match (&m.file, &m.generator) {
            (Some(_), Some(_)) => {
                return Err((
                    format!("{k}.mesh"),
                    "give either `file` or `generator`, not both".into(),
                ))
            }
            (None, None) => {
                return Err((format!("{k}.mesh"), "missing `file` or `generator`".into()))
            }
            (Some(_), None) => {
                if given.iter().any(|g| g.1) || m.element.is_some() || m.origin != [0.0; 3] {
                    return Err((
                        format!("{k}.mesh"),
                        "`cells`, `dx`, `radius`, `height`, `size`, `resolution`, `element` and `origin` belong to `generator`, not to `file` (move a file mesh with [body.transform])".into(),
                    ));
                }
                return Ok(());
            }
            (None, Some(g)) => *g,
        };
        let (name, keys): (&str, &[&str]) = match g {
            Generator::Box => ("box", &["cells", "dx"]),
            Generator::Sphere => ("sphere", &["radius", "dx"]),
            Generator::Cylinder => ("cylinder", &["radius", "height", "dx"]),
            Generator::RoundedBox => ("rounded_box", &["size", "radius", "dx"]),
            Generator::Crab => ("crab", &["resolution"]),
        };
        for (key, present) in given {
            if present && !keys.contains(&key) {
                return Err((
                    format!("{k}.mesh.{key}"),
                    format!("the {name} generator takes {}, not `{key}`", key_list(keys)),
                ));
            }
        }
        for (key, present) in given {
            if keys.contains(&key) && !present {
                return Err((
                    format!("{k}.mesh.{key}"),
                    format!("the {name} generator needs `{key}`"),
                ));
            }
        }
        if m.element.is_none() {
            return Err((
                format!("{k}.mesh.element"),
                format!("the {name} generator needs `element = \"hex8\"` or `\"tet4\"`"),
            ));
        }
        if let Some(dx) = m.dx {
            positive(&format!("{k}.mesh.dx"), dx)?;
        }
        if let Some(r) = m.radius {
            if g == Generator::RoundedBox {
                nonneg(&format!("{k}.mesh.radius"), r)?;
            } else {
                positive(&format!("{k}.mesh.radius"), r)?;
            }
        }
        if let Some(h) = m.height {
            positive(&format!("{k}.mesh.height"), h)?;
        }
        if let Some(size) = m.size {
            for (i, s) in size.iter().enumerate() {
                positive(&format!("{k}.mesh.size[{i}]"), *s)?;
            }
            let half = 0.5 * size.iter().copied().fold(f64::INFINITY, f64::min);
            if m.radius.is_some_and(|r| r > half) {
                return Err((
                    format!("{k}.mesh.radius"),
                    format!("the rounding radius must be at most half the shortest edge ({half})"),
                ));
            }
        }
        match g {
            Generator::Box => {
                let cells = m.cells.unwrap_or([0; 3]);
                if cells.contains(&0) {
                    return Err((
                        format!("{k}.mesh.cells"),
                        "every cell count must be >= 1".into(),
                    ));
                }
                crate::mesh::generate::box_cell_count(cells)
                    .map_err(|e| (format!("{k}.mesh.cells"), e.to_string()))?;
            }
            Generator::Sphere => {
                let (r, dx) = (m.radius.unwrap_or(0.0), m.dx.unwrap_or(1.0));
                if r / dx > 200.0 {
                    return Err((
                        format!("{k}.mesh.radius"),
                        format!("radius / dx = {:.0} is too large (at most 200)", r / dx),
                    ));
                }
            }
            Generator::Cylinder | Generator::RoundedBox => {
                let dx = m.dx.unwrap_or(1.0);
                let extent = match g {
                    Generator::Cylinder => {
                        let r = m.radius.unwrap_or(0.0);
                        [2.0 * r, 2.0 * r, m.height.unwrap_or(0.0)]
                    }
                    _ => m.size.unwrap_or([0.0; 3]),
                };
                let cells: f64 = extent.iter().map(|e| (e / dx).ceil().max(1.0)).product();
                let max = crate::mesh::solids::MAX_SOLID_CELLS;
                if cells > max as f64 {
                    return Err((
                        format!("{k}.mesh.dx"),
                        format!(
                            "the {name} needs {cells:.3e} grid cells at this dx (at most {max})"
                        ),
                    ));
                }
            }
            Generator::Crab => {
                use crate::mesh::crab::{CRAB_MAX_RESOLUTION as HI, CRAB_MIN_RESOLUTION as LO};
                let r = m.resolution.unwrap_or(0);
                if !(LO..=HI).contains(&r) {
                    return Err((
                        format!("{k}.mesh.resolution"),
                        format!("expected {LO} <= resolution <= {HI} (cells across the carapace), got {r}"),
                    ));
                }
            }
        }
        finite3(&format!("{k}.mesh.origin"), &m.origin)?;
        Ok(())
    }

    /// `[body.material]` (E > 0, -1 < ν < 0.5, ρ > 0, fit range), `[[body.region]]` and `[body.damping]`.
    fn validate_material(&self, k: &str) -> Check {
        let mat = &self.material;
        positive(&format!("{k}.material.youngs_modulus"), mat.youngs_modulus)?;
        let nu = mat.poisson_ratio;
        if !(nu.is_finite() && nu > -1.0 && nu < 0.5) {
            return Err((
                format!("{k}.material.poisson_ratio"),
                format!("expected -1 < ν < 0.5, got {nu}"),
            ));
        }
        positive(&format!("{k}.material.density"), mat.density)?;
        if !(mat.fit_range.is_finite() && mat.fit_range >= 0.0 && mat.fit_range < 1.0) {
            return Err((
                format!("{k}.material.fit_range"),
                format!("expected 0 <= r < 1, got {}", mat.fit_range),
            ));
        }
        for (i, r) in self.regions.iter().enumerate() {
            let rk = format!("{k}.region[{i}]");
            match (r.youngs_modulus, r.scale) {
                (Some(e), None) => positive(&format!("{rk}.youngs_modulus"), e)?,
                (None, Some(s)) => positive(&format!("{rk}.scale"), s)?,
                _ => return Err((rk, "give exactly one of `youngs_modulus` or `scale`".into())),
            }
            r.select.validate(&format!("{rk}.select"))?;
        }
        nonneg(&format!("{k}.damping.alpha"), self.damping.alpha)?;
        nonneg(&format!("{k}.damping.beta"), self.damping.beta)?;
        if let Some(e) = self.damping.e_ref {
            positive(&format!("{k}.damping.e_ref"), e)?;
        }
        Ok(())
    }

    /// `[[body.dirichlet]]`: axes from "xyz", selection, finite non-degenerate motion.
    fn validate_dirichlet(&self, k: &str) -> Check {
        for (i, d) in self.dirichlet.iter().enumerate() {
            let dk = format!("{k}.dirichlet[{i}]");
            if d.axes.is_empty() || !d.axes.chars().all(|c| matches!(c, 'x' | 'y' | 'z')) {
                return Err((
                    format!("{dk}.axes"),
                    format!("expected letters from \"xyz\", got {:?}", d.axes),
                ));
            }
            d.select.validate(&format!("{dk}.select"))?;
            match &d.motion {
                Motion::Fixed => {}
                Motion::Rotate { axis, rate, .. } => {
                    finite3(&format!("{dk}.motion.axis"), axis)?;
                    if axis.iter().map(|v| v * v).sum::<f64>() == 0.0 {
                        return Err((format!("{dk}.motion.axis"), "axis must be non-zero".into()));
                    }
                    if !rate.is_finite() {
                        return Err((format!("{dk}.motion.rate"), "expected a finite rate".into()));
                    }
                }
                Motion::Translate { velocity } => {
                    finite3(&format!("{dk}.motion.velocity"), velocity)?
                }
            }
        }
        Ok(())
    }

    /// `[body.initial]`: finite velocities and placement, scale > 0, non-zero twist axis.
    fn validate_initial(&self, k: &str) -> Check {
        finite3(&format!("{k}.initial.velocity"), &self.initial.velocity)?;
        finite3(
            &format!("{k}.initial.angular_velocity"),
            &self.initial.angular_velocity,
        )?;
        positive(&format!("{k}.initial.scale"), self.initial.scale)?;
        finite3(
            &format!("{k}.initial.translation"),
            &self.initial.translation,
        )?;
        finite3(
            &format!("{k}.initial.rotation_deg"),
            &self.initial.rotation_deg,
        )?;
        if let Some(t) = &self.initial.twist {
            finite3(&format!("{k}.initial.twist.axis"), &t.axis)?;
            if t.axis.iter().map(|v| v * v).sum::<f64>() == 0.0 {
                return Err((
                    format!("{k}.initial.twist.axis"),
                    "axis must be non-zero".into(),
                ));
            }
        }
        Ok(())
    }

    /// `[[body.muscle]]`: stiffness >= 0, finite activation knots and knot spacing, non-zero fiber axis, selection.
    fn validate_muscles(&self, k: &str) -> Check {
        for (i, m) in self.muscles.iter().enumerate() {
            let mk = format!("{k}.muscle[{i}]");
            nonneg(&format!("{mk}.stiffness"), m.stiffness)?;
            let acts = m.activation.values();
            if acts.is_empty() {
                return Err((
                    format!("{mk}.activation"),
                    "expected a number or a non-empty array of knot values".into(),
                ));
            }
            if let Some(k) = acts.iter().position(|a| !a.is_finite()) {
                return Err((
                    format!("{mk}.activation"),
                    format!("expected finite numbers (entry {k})"),
                ));
            }
            if let Some(tau) = m.knot_interval {
                if !(tau.is_finite() && tau > 0.0) {
                    return Err((
                        format!("{mk}.knot_interval"),
                        format!("expected a knot spacing > 0 s, got {tau}"),
                    ));
                }
                if acts.len() == 1 {
                    return Err((
                        format!("{mk}.knot_interval"),
                        "needs an `activation` array of at least two knots".into(),
                    ));
                }
            }
            let (axis, key) = match &m.fiber {
                FiberSpec::Direction(d) => (d, format!("{mk}.fiber")),
                FiberSpec::Field(FiberField::Radial { axis, .. })
                | FiberSpec::Field(FiberField::Circumferential { axis, .. }) => {
                    (axis, format!("{mk}.fiber.axis"))
                }
            };
            finite3(&key, axis)?;
            if axis.iter().map(|v| v * v).sum::<f64>() == 0.0 {
                return Err((key, "must be non-zero".into()));
            }
            m.select.validate(&format!("{mk}.select"))?;
        }
        Ok(())
    }

    /// `[[body.force]]`: one of `force` or `twist`, selection, a well-formed profile.
    fn validate_forces(&self, k: &str) -> Check {
        for (i, f) in self.forces.iter().enumerate() {
            let fk = format!("{k}.force[{i}]");
            match (&f.force, &f.twist) {
                (Some(v), None) => finite3(&format!("{fk}.force"), v)?,
                (None, Some(t)) => {
                    finite3(&format!("{fk}.twist.axis"), &t.axis)?;
                    if t.axis.iter().map(|v| v * v).sum::<f64>() == 0.0 || !t.magnitude.is_finite()
                    {
                        return Err((
                            format!("{fk}.twist"),
                            "needs a non-zero axis and a finite magnitude".into(),
                        ));
                    }
                }
                _ => return Err((fk, "give exactly one of `force` or `twist`".into())),
            }
            f.select.validate(&format!("{fk}.select"))?;
            match &f.profile {
                Profile::Ramp { duration } => {
                    positive(&format!("{fk}.profile.duration"), *duration)?
                }
                Profile::Window { start, end }
                    if !(start.is_finite() && end.is_finite() && start < end) =>
                {
                    return Err((
                        format!("{fk}.profile"),
                        format!("window needs finite start < end, got {start} .. {end}"),
                    ));
                }
                Profile::Table { times, values }
                    if times.is_empty()
                        || times.len() != values.len()
                        || times.windows(2).any(|w| w[1] <= w[0]) =>
                {
                    return Err((
                        format!("{fk}.profile"),
                        "table needs equally long `times` (strictly increasing) and `values`"
                            .into(),
                    ));
                }
                _ => {}
            }
        }
        Ok(())
    }
}

impl OptimizeSettings {
    /// Range checks of `[optimize]`.
    pub fn validate(&self) -> Result<(), (String, String)> {
        if self.max_iterations == 0 {
            return Err((
                "optimize.max_iterations".into(),
                "expected at least 1".into(),
            ));
        }
        if self.max_evaluations < 2 {
            return Err((
                "optimize.max_evaluations".into(),
                "expected at least 2".into(),
            ));
        }
        nonneg("optimize.grad_tol", self.grad_tol)?;
        nonneg("optimize.abs_grad_tol", self.abs_grad_tol)?;
        nonneg("optimize.rel_loss_tol", self.rel_loss_tol)?;
        if let Some(t) = self.target_loss {
            if !t.is_finite() {
                return Err((
                    "optimize.target_loss".into(),
                    "expected a finite number".into(),
                ));
            }
        }
        if self.lbfgs_memory == 0 {
            return Err(("optimize.lbfgs_memory".into(), "expected at least 1".into()));
        }
        positive("optimize.initial_step", self.initial_step)
    }
}
