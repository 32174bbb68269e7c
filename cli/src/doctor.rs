//! `diffphd doctor`: what this machine can run. Exit 0 when the CPU path can run (always, for
//! a binary that started); the GPU lines say what is missing and why.

use crate::failure::Failure;

#[derive(clap::Args, Debug)]
pub struct DoctorArgs {
    /// Also compile every kernel with NVRTC for this architecture (e.g. sm_90).
    #[arg(long, value_name = "ARCH")]
    pub compile: Option<String>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

fn line<E: std::fmt::Display>(what: &str, r: &Result<String, E>) {
    match r {
        Ok(s) if s.is_empty() => println!("{what:<10} yes"),
        Ok(s) => println!("{what:<10} {s}"),
        Err(e) => println!("{what:<10} no: {e}"),
    }
}

pub fn run(args: &DoctorArgs) -> Result<(), Failure> {
    let threads = std::thread::available_parallelism().map_or(1, |v| v.get());
    let rep = diffphd::gpu::doctor();
    if args.json {
        let v = serde_json::json!({
            "version": env!("CARGO_PKG_VERSION"),
            "cpu_threads": threads,
            "cuda_feature": rep.cuda_feature,
            "device": rep.device.as_ref().map_err(|e| e.to_string()),
            "nvrtc": rep.nvrtc.as_ref().map_err(|e| e.to_string()),
            "emulator": rep.emulator,
            "kernels": rep.kernels,
        });
        println!("{}", serde_json::to_string_pretty(&v).expect("json"));
    } else {
        println!("diffphd {}", env!("CARGO_PKG_VERSION"));
        println!(
            "{:<10} yes, {threads} threads (--threads 0 uses all; the CPU path is the reference)",
            "cpu"
        );
        println!(
            "{:<10} {}",
            "cuda",
            if rep.cuda_feature {
                "feature compiled in"
            } else {
                "feature not compiled in (cargo build --release --features cuda)"
            }
        );
        line("device", &rep.device);
        line("nvrtc", &rep.nvrtc);
        println!(
            "{:<10} built in (kernels: {})",
            "emulator",
            rep.kernels.join(", ")
        );
    }
    if let Some(arch) = &args.compile {
        let nv =
            diffphd::gpu::nvrtc::Nvrtc::load().map_err(|e| Failure::input(anyhow::anyhow!(e)))?;
        let mut bad = 0;
        for c in nv.compile_all(arch) {
            match c.result {
                Ok(ptx) => println!(
                    "compile    {} ok ({} bytes of PTX for {arch})",
                    c.name,
                    ptx.len()
                ),
                Err(log) => {
                    bad += 1;
                    println!("compile    {} FAILED:\n{log}", c.name);
                }
            }
        }
        if bad > 0 {
            return Err(Failure::run(anyhow::anyhow!(
                "{bad} kernel source(s) failed to compile for {arch}"
            )));
        }
    }
    Ok(())
}
