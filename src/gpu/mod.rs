//! GPU backend seam. The CPU path ([`crate::linalg::GlobalSystem`]) is complete and is the
//! reference; a CUDA implementation of [`crate::linalg::LinearSolver`] plugs in here
//! behind the `cuda` cargo feature (cudarc, runtime loading, kernels in `kernels/`
//! compiled at run time by NVRTC).

/// Which backend a run uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    Cpu,
    Cuda,
}

/// Why the CUDA backend is not available, or `Ok(())` when it is.
pub fn cuda_status() -> Result<(), String> {
    #[cfg(not(feature = "cuda"))]
    {
        Err(
            "this binary was built without the `cuda` feature (rebuild with `--features cuda`)"
                .into(),
        )
    }
    #[cfg(feature = "cuda")]
    {
        cuda::probe()
    }
}

#[cfg(feature = "cuda")]
mod cuda {
    /// Probe the driver and NVRTC without panicking (cudarc panics when libcuda is missing,
    /// so check the libraries first; see `dependencies-notes.md` §1.2).
    pub fn probe() -> Result<(), String> {
        // SAFETY: these only try to dlopen the libraries.
        let libs = unsafe {
            cudarc::driver::sys::is_culib_present() && cudarc::nvrtc::sys::is_culib_present()
        };
        if !libs {
            return Err("no CUDA driver library (libcuda) or NVRTC found on this machine".into());
        }
        match std::panic::catch_unwind(|| cudarc::driver::CudaContext::new(0)) {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(format!("CUDA driver present but no usable device: {e:?}")),
            Err(_) => Err("CUDA initialisation panicked (driver library unusable)".into()),
        }
    }
}
