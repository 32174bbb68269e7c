//! Caller-supplied cotangents through the public API: load a scene with `--set`-style
//! overrides, run a rollout with a custom sink, inject dL/dx_t on every frame and read the
//! named per-parameter gradients. The loss is the caller's own, L = ½ Σ_t ‖x_t − x_0‖² over
//! frames 1..=T (the motion away from the start), so dL/dx_t = x_t − x_0 (and dL/dv_t = 0).
//!
//! `cargo run --release --example cotangents [SCENE] [key.path=value ...]`
use diffphd::session::{self, FrameState, SessionError, Tape};
use diffphd::solver::cotangent::DenseCotangents;

/// The loss and (name, dL/dθ) of every `[[parameter]]` of `scene` with overrides `sets`.
pub fn run(scene: &str, sets: &[String]) -> Result<(f64, Vec<(String, f64)>), SessionError> {
    let ls = diffphd::scene::load(std::path::Path::new(scene), sets)?;
    let model = session::build_model(&ls)?;
    // a rollout with a custom sink: the loss, frame by frame
    let x0 = model.x0.clone();
    let mut loss = 0.0;
    let sink = |f: &FrameState| {
        let d2: f64 = f.x.iter().zip(&x0).map(|(a, b)| (a - b) * (a - b)).sum();
        loss += 0.5 * d2;
        true
    };
    session::simulate(&ls, &model, diffphd::gpu::Backend::Cpu, sink)?;
    // the adjoint of the same loss: its cotangents dL/dx_t on every frame
    let problem = session::parameters(ls)?;
    let theta = problem.theta0();
    let tape = Tape::record(&problem, problem.model_at(&theta), 0, None, model.frames)?;
    let n3 = model.x0.len();
    let dx: Vec<f64> = tape
        .states()
        .flat_map(|(_, x, _)| x.iter().zip(&x0).map(|(a, b)| a - b).collect::<Vec<_>>())
        .collect();
    let source = DenseCotangents {
        start: 0,
        n3,
        x: Some(dx),
        v: None,
    };
    let g = tape.gradient(&problem, &theta, &source)?;
    Ok((loss, g.names.into_iter().zip(g.gradient).collect()))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let scene = args
        .first()
        .map_or("tests/fixtures/torch_cantilever.toml", |s| s);
    let sets = args.get(1..).unwrap_or_default().to_vec();
    match run(scene, &sets) {
        Ok((loss, grads)) => {
            println!("loss = {loss:.10e}");
            grads
                .iter()
                .for_each(|(n, g)| println!("  dL/d{n} = {g:.10e}"));
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(e.exit_code());
        }
    }
}
