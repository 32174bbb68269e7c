//! The command line's grammar: the clap definitions of `diffphd` and its subcommands, and
//! the command-line reference (`docs/cli.md`) generated from them so that the documented
//! flags and defaults are the ones the code has: `diffphd schema --cli` prints it and
//! `tests/cli/docs/cli_reference.rs` keeps the committed copy equal to it.

use crate::run::RunArgs;
use crate::{doctor, grad, gradcheck, mesh, optimize, plot, sweep};
use clap::{CommandFactory, Parser, Subcommand};
use std::fmt::Write;

#[derive(Parser, Debug)]
#[command(
    name = "diffphd",
    version,
    about = "Differentiable Projective Dynamics for heterogeneous soft bodies"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

// The variants' doc comments are the `--help` text (TOML names like `[[parameter]]`), not
// rustdoc links.
#[allow(rustdoc::broken_intra_doc_links)]
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Forward rollout: writes frames (VTU volumes by default, or PLY surfaces) and log.json.
    Simulate(RunArgs),
    /// One forward + backward pass: loss and gradient of the declared [[parameter]]s.
    Grad(grad::GradArgs),
    /// Adjoint gradients of the scene's [loss] against central finite differences.
    Gradcheck(gradcheck::GradcheckArgs),
    /// Mesh tools: info, check, convert, voxelize.
    Mesh {
        #[command(subcommand)]
        cmd: mesh::MeshCommand,
    },
    /// L-BFGS on the scene's [[parameter]]s: optimize.json, optimized.toml, final frames.
    Optimize(optimize::OptimizeArgs),
    /// SVG or PNG of a run's log: an optimize.json (loss, gradient norm, parameters with bounds
    /// and truth) or a simulation's log.json (energies and centre of mass against time).
    Plot(plot::PlotArgs),
    /// What this machine can run: CPU threads, CUDA driver and device, NVRTC, the GPU emulator.
    Doctor(doctor::DoctorArgs),
    /// Print the JSON Schema of the scene format (the copy in docs/scene.schema.json).
    Schema {
        /// Print the command-line reference instead (the copy in docs/cli.md).
        #[arg(long)]
        cli: bool,
    },
    /// Parameter sweeps: plan, run locally, emit for GNU parallel / Slurm, task, collect.
    Sweep {
        #[command(subcommand)]
        cmd: sweep::SweepCommand,
    },
}

/// Every option of every command with a default value: (command path, `--long`, default).
pub fn defaults() -> Vec<(String, String, String)> {
    fn walk(cmd: &clap::Command, path: &str, out: &mut Vec<(String, String, String)>) {
        for a in cmd.get_arguments() {
            if let (Some(l), [d, ..]) = (a.get_long(), a.get_default_values()) {
                out.push((path.into(), l.into(), d.to_string_lossy().into_owned()));
            }
        }
        for sub in cmd.get_subcommands() {
            walk(sub, &format!("{path} {}", sub.get_name()), out);
        }
    }
    let mut root = Cli::command();
    root.build();
    let mut out = Vec::new();
    walk(&root, "diffphd", &mut out);
    out
}

/// Markdown reference of every command: usage, help and each option's default.
pub fn markdown() -> String {
    let mut root = Cli::command();
    root.build();
    let mut out = String::from(
        "# Command-line reference\n\n\
         Generated from the code by `diffphd schema --cli > docs/cli.md`; a test keeps this\n\
         file equal to the generated text, so every flag and default listed here is the one the\n\
         program has. Exit codes: README.md.\n",
    );
    for cmd in root.get_subcommands() {
        write_command(&mut out, cmd, "diffphd");
    }
    out
}

fn write_command(out: &mut String, cmd: &clap::Command, parent: &str) {
    if cmd.is_hide_set() || cmd.get_name() == "help" {
        return;
    }
    let path = format!("{parent} {}", cmd.get_name());
    let _ = write!(out, "\n## `{path}`\n\n");
    if let Some(about) = cmd.get_long_about().or(cmd.get_about()) {
        let _ = writeln!(out, "{about}\n");
    }
    let args: Vec<&clap::Arg> = cmd
        .get_arguments()
        .filter(|a| !a.is_hide_set() && a.get_id() != "help" && a.get_id() != "version")
        .collect();
    if !args.is_empty() {
        out.push_str("| argument | default | meaning |\n|---|---|---|\n");
        for a in args {
            let _ = writeln!(out, "| {} | {} | {} |", name(a), default(a), help(a));
        }
    }
    for sub in cmd.get_subcommands() {
        write_command(out, sub, &path);
    }
}

/// `--long VALUE` / `-s, --long` / `POSITIONAL`.
fn name(a: &clap::Arg) -> String {
    let value = a
        .get_value_names()
        .map(|v| v.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| a.get_id().as_str().to_uppercase());
    let takes = a.get_num_args().is_none_or(|n| n.takes_values());
    match (a.get_short(), a.get_long()) {
        (_, None) => format!("`{value}`"),
        (Some(s), Some(l)) if takes => format!("`-{s}, --{l} {value}`"),
        (Some(s), Some(l)) => format!("`-{s}, --{l}`"),
        (None, Some(l)) if takes => format!("`--{l} {value}`"),
        (None, Some(l)) => format!("`--{l}`"),
    }
}

fn default(a: &clap::Arg) -> String {
    if matches!(a.get_action(), clap::ArgAction::SetTrue) {
        return "off".into();
    }
    let d: Vec<String> = a
        .get_default_values()
        .iter()
        .map(|v| v.to_string_lossy().into_owned())
        .collect();
    if d.is_empty() {
        if a.is_required_set() {
            "required".into()
        } else {
            "".into()
        }
    } else {
        format!("`{}`", d.join(" "))
    }
}

/// The help text on one line, with its possible values where clap knows them.
fn help(a: &clap::Arg) -> String {
    let mut h = a
        .get_long_help()
        .or(a.get_help())
        .map(|s| s.to_string())
        .unwrap_or_default()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|");
    let values: Vec<String> = a
        .get_possible_values()
        .iter()
        .filter(|v| !v.is_hide_set())
        .map(|v| format!("`{}`", v.get_name()))
        .collect();
    if !values.is_empty() && a.get_action().takes_values() {
        let _ = write!(h, " (one of {})", values.join(", "));
    }
    h
}
