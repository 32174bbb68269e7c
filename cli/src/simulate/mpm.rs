//! `diffphd simulate` of an MPM/rigid scene (`[[mpm_body]]`, `[[rigid_body]]`; docs/mpm.md):
//! builds the system with `diffphd::mpm::build` (memory checked against `--max-memory` or
//! the memory available before allocation), runs it on the one time loop
//! (`diffphd::solver::timeloop::run_system`) with a sink that writes the particle and rigid
//! frames and `log.json` (energies, momentum, poses and contact wrenches per frame).
//! Exit codes: 2 bad input (scene keys, memory, an unsupported contact pair), 3 a particle
//! moving more than h in a substep or a contact solve missing its tolerance, 1 other failures,
//! 130 interrupted.

use super::log::{MpmFrameRecord, MpmRunHeader, MpmRunLog, RigidBodyRecord, Status};
use crate::failure::Failure;
use crate::memory;
use crate::run::{claim_output, effective_sets, interrupt_flag, set_threads, RunArgs};
use anyhow::anyhow;
use diffphd::gpu::Backend;
use diffphd::io::write_atomic;
use diffphd::mpm::frames::MpmFrameWriter;
use diffphd::mpm::{self, MpmState, MpmStepStats, MpmSystem};
use diffphd::scene::mpm::CouplingKind;
use diffphd::scene::LoadedScene;
use diffphd::solver::timeloop::{run_system, Flow, RolloutError, SystemFrame};
use std::path::{Path, PathBuf};
use std::time::Instant;

fn write_log(dir: &Path, log: &MpmRunLog) -> Result<(), Failure> {
    let text = serde_json::to_string_pretty(log).map_err(Failure::run)?;
    write_atomic(&dir.join("log.json"), text.as_bytes()).map_err(|e| {
        Failure::input(anyhow!(
            "cannot write {}: {e}",
            dir.join("log.json").display()
        ))
    })
}

fn header(
    args: &RunArgs,
    ls: &LoadedScene,
    sys: &MpmSystem,
    state: &MpmState,
    threads: usize,
) -> MpmRunHeader {
    let est = mpm::estimate(ls).ok().flatten();
    let (particles, masses) = match &state.sim {
        Some(sim) => {
            let p = sim.particles();
            let mut m = vec![0.0; sys.mpm_body_names.len()];
            for (&k, &mass) in p.material().iter().zip(p.mass()) {
                if let Some(slot) = m.get_mut(k as usize) {
                    *slot += mass;
                }
            }
            (p.len(), m)
        }
        None => (0, vec![]),
    };
    MpmRunHeader {
        diffphd_version: diffphd::io::VERSION.into(),
        git_commit: diffphd::io::git_commit().map(String::from),
        command: "simulate".into(),
        scene: ls.path.display().to_string(),
        scene_hash: ls.hash.clone(),
        overrides: effective_sets(args),
        threads,
        system: "mpm".into(),
        dt: sys.dt,
        substeps: sys.substeps,
        frames_requested: sys.frames,
        particles,
        grid_nodes: state
            .sim
            .as_ref()
            .map_or(0, |s| s.grid().spec().node_count()),
        spacing: state.sim.as_ref().map(|s| s.grid().spec().h),
        memory_bytes: est.map(|e| e.bytes),
        mpm_bodies: sys.mpm_body_names.clone(),
        rigid_bodies: sys.body_names.clone(),
        mpm_body_masses: masses,
        rigid_body_masses: state.world.bodies.iter().map(|b| b.mass()).collect(),
    }
}

/// A 3-vector as an array.
fn arr(v: impl std::ops::Index<usize, Output = f64>) -> [f64; 3] {
    [v[0], v[1], v[2]]
}

fn body_records(state: &MpmState, stats: Option<&MpmStepStats>) -> Vec<RigidBodyRecord> {
    state
        .world
        .bodies
        .iter()
        .enumerate()
        .map(|(b, body)| {
            let q = body.pose.rotation;
            let w = |list: Option<&Vec<mpm::Wrench>>| {
                list.and_then(|l| l.get(b)).copied().unwrap_or_default()
            };
            let mw = w(stats.map(|s| &s.mpm_wrenches));
            let rw = w(stats.map(|s| &s.rigid_wrenches));
            RigidBodyRecord {
                position: arr(body.com()),
                orientation: [q.w, q.i, q.j, q.k],
                velocity: arr(body.velocity),
                angular_velocity: arr(body.angular_velocity),
                mpm_force: arr(mw.force),
                mpm_torque: arr(mw.torque),
                contact_force: arr(rw.force),
                contact_torque: arr(rw.torque),
            }
        })
        .collect()
}

fn record(
    frame: usize,
    time: f64,
    state: &MpmState,
    stats: Option<&MpmStepStats>,
    files: Vec<String>,
) -> MpmFrameRecord {
    MpmFrameRecord {
        frame,
        time,
        energies: mpm::energies(state),
        contacts: stats.map_or(0, |s| s.contacts),
        qn_iterations_max: stats.map_or(0, |s| s.qn_iterations_max),
        qn_iterations_total: stats.map_or(0, |s| s.qn_iterations_total),
        rigid_contacts: stats.map_or(0, |s| s.rigid_contacts),
        bodies: body_records(state, stats),
        files,
        device_traffic: None,
    }
}

/// The memory budget of the MPM state: `--max-memory`, or the memory available if less.
fn budget(max_memory: Option<u64>) -> Option<(u64, String)> {
    match (max_memory, memory::available_bytes()) {
        (Some(m), Some(a)) if a < m => Some((a, "the memory available".into())),
        (Some(m), _) => Some((m, "--max-memory".into())),
        (None, Some(a)) => Some((a, "the memory available".into())),
        (None, None) => None,
    }
}

/// `--backend emulator|cuda`: the weak coupling's MPM substeps and contact solves on the
/// device (`diffphd::gpu::mpm_contact`), refusing (exit 2) what it does not run: the strong
/// coupling, scenes without MPM bodies, rigid shapes without a device signed distance.
fn attach_mpm_offload(
    ls: &LoadedScene,
    system: &mut MpmSystem,
    state: &MpmState,
    backend: Backend,
    quiet: bool,
) -> Result<(), Failure> {
    if backend == Backend::Cpu {
        return Ok(());
    }
    let path = ls.path.display();
    let refuse = |why: String| Failure::input(anyhow!("{path}: --backend {backend:?}: {why}"));
    if system.coupling == CouplingKind::Strong {
        return Err(refuse(
            "mpm.coupling = \"strong\" runs on the CPU only (its Newton solve is serial)".into(),
        ));
    }
    if state.sim.is_none() {
        return Err(refuse(
            "the device runs the MPM substeps and this scene has no [[mpm_body]]".into(),
        ));
    }
    diffphd::gpu::mpm_contact::geometry_table(&state.world).map_err(|e| refuse(e.to_string()))?;
    let off = diffphd::gpu::mpm_contact::mpm_offload(backend).map_err(|e| refuse(e.to_string()))?;
    if let (Some(off), false) = (&off, quiet) {
        let what = off.lock().map(|o| o.describe()).unwrap_or_default();
        eprintln!("GPU path: {what}");
    }
    system.offload = off;
    Ok(())
}

/// Run an MPM/rigid scene (see the module doc).
pub fn run(args: &RunArgs, ls: LoadedScene) -> Result<(), Failure> {
    let backend = super::simulate_backend(args.backend)?;
    let threads = set_threads(ls.scene.solver.threads);
    let (mut system, state) = mpm::build(&ls, budget(args.max_memory)).map_err(Failure::input)?;
    attach_mpm_offload(&ls, &mut system, &state, backend, args.quiet)?;
    let out: PathBuf = claim_output("simulate", args, &ls)?;
    let t_run = Instant::now();
    let mut log = MpmRunLog {
        header: header(args, &ls, &system, &state, threads),
        status: Status::Running,
        error: None,
        frames: vec![],
        seconds_total: 0.0,
    };
    let output = &ls.scene.output;
    let mut writer = MpmFrameWriter::new(output);
    let write_err = |frame: usize, e: std::io::Error| {
        Failure::input(anyhow!(
            "cannot write frame {frame} into {}: {e}",
            out.display()
        ))
    };
    let files0 = if output.frames {
        writer
            .write(&out, 0, 0.0, &state)
            .map_err(|e| write_err(0, e))?
    } else {
        vec![]
    };
    log.frames.push(record(0, 0.0, &state, None, files0));
    write_log(&out, &log)?;
    let interrupt = interrupt_flag();
    if let Some(flag) = &interrupt {
        // the substeps poll the interrupt too: a long frame ends at its next substep
        system.cancel = diffphd::cancel::Cancel::with_flag(flag.clone());
    }
    let frames = system.frames;
    let quiet = args.quiet;
    // the device's counters, read after every frame (the step has released the lock)
    let offload = system.offload.clone();
    let read_traffic = || {
        offload
            .as_ref()
            .and_then(|o| o.lock().ok().and_then(|o| o.traffic()))
    };
    let mut traffic0 = read_traffic();
    let ended = run_system(
        &mut system,
        0,
        frames,
        state,
        |f: SystemFrame<'_, MpmSystem>| {
            let files = if output.frames && f.frame.is_multiple_of(output.every) {
                writer
                    .write(&out, f.frame, f.time, f.state)
                    .map_err(|e| write_err(f.frame, e))?
            } else {
                vec![]
            };
            let mut rec = record(f.frame, f.time, f.state, Some(f.stats), files);
            if let (Some(t0), Some(t)) = (&traffic0, read_traffic()) {
                rec.device_traffic = Some(t.since(t0));
                traffic0 = Some(t);
            }
            log.frames.push(rec);
            log.seconds_total = t_run.elapsed().as_secs_f64();
            if !quiet {
                eprintln!(
                    "frame {}/{frames}: {} contacts, {} QN iterations (max per substep)",
                    f.frame, f.stats.contacts, f.stats.qn_iterations_max
                );
            }
            let stop = f.frame < frames
                && interrupt
                    .as_ref()
                    .is_some_and(|i| i.load(std::sync::atomic::Ordering::SeqCst));
            if stop {
                log.status = Status::Interrupted;
                log.error = Some(format!("interrupted after frame {}", f.frame));
            }
            write_log(&out, &log)?;
            Ok(if stop { Flow::Stop } else { Flow::Continue })
        },
    );
    let scene = ls.path.display().to_string();
    match ended {
        Err(RolloutError::Step { frame, error }) if error.exit_code() == 130 => {
            // interrupted inside frame `frame`: it is not written; the earlier frames are
            log.status = Status::Interrupted;
            log.error = Some(format!("interrupted in frame {frame} ({error})"));
            log.seconds_total = t_run.elapsed().as_secs_f64();
            write_log(&out, &log)?;
            Err(Failure {
                code: 130,
                error: anyhow!(
                    "interrupted in frame {frame}/{frames}; frames and log.json so far in {}",
                    out.display()
                ),
            })
        }
        Err(RolloutError::Step { frame, error }) => {
            let msg = format!("frame {frame}, {error}");
            log.status = Status::Failed;
            log.error = Some(msg.clone());
            log.seconds_total = t_run.elapsed().as_secs_f64();
            write_log(&out, &log)?;
            Err(Failure {
                code: error.exit_code(),
                error: anyhow!("{scene}: {msg}"),
            })
        }
        Err(RolloutError::Sink(f)) => Err(f),
        Ok(end) if end.stopped => Err(Failure {
            code: 130,
            error: anyhow!(
                "interrupted after frame {}/{frames}; frames and log.json so far in {}",
                end.frame,
                out.display()
            ),
        }),
        Ok(_) => {
            log.status = Status::Completed;
            log.seconds_total = t_run.elapsed().as_secs_f64();
            write_log(&out, &log)?;
            if !quiet {
                eprintln!("done: {frames} frames -> {}", out.display());
            }
            Ok(())
        }
    }
}
