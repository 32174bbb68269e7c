//! The CUDA device (feature `cuda`): cudarc with run-time library loading; every kernel
//! source compiled once by NVRTC (through [`crate::gpu::nvrtc`]) for the device's architecture and
//! loaded as a module; buffers are persistent `CudaSlice`s; launches go to one stream in
//! order. Not run in this project's CI (no device there); run on an H100 through
//! `scripts/gpu_device.sh` (2026-11-27, docs/gpu.md).

use super::device::{check_args, Arg, Device};
use super::error::{GpuError, Unavailable};
use super::kernels::{Kernel, SOURCES};
use super::nvrtc::Nvrtc;
use cudarc::driver::{
    CudaContext, CudaFunction, CudaSlice, CudaStream, LaunchConfig, PushKernelArg,
};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

fn err(e: impl std::fmt::Debug) -> GpuError {
    GpuError::Cuda(format!("{e:?}"))
}

/// Probe the driver without panicking (cudarc panics when libcuda is missing, so check the
/// library first); returns the device description.
pub fn probe() -> Result<String, Unavailable> {
    // SAFETY: only tries to dlopen the library.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err(Unavailable::NoDriver);
    }
    let ctx = CudaContext::new(0).map_err(|e| Unavailable::NoDevice(format!("{e:?}")))?;
    let driver = |e: cudarc::driver::DriverError| Unavailable::Driver(format!("{e:?}"));
    let name = ctx.name().map_err(driver)?;
    let (ma, mi) = ctx.compute_capability().map_err(driver)?;
    let mem = ctx.total_mem().map_err(driver)?;
    Ok(format!(
        "{name}, compute capability {ma}.{mi}, {:.1} GiB",
        mem as f64 / (1u64 << 30) as f64
    ))
}

/// `sm_XX` for a compute capability.
fn arch(cc: (i32, i32)) -> &'static str {
    match cc {
        (9, _) => "sm_90",
        (8, 9) => "sm_89",
        (8, 6) => "sm_86",
        (8, _) => "sm_80",
        (10, _) => "sm_100",
        (12, _) => "sm_120",
        _ => "sm_75",
    }
}

/// The PTX of every kernel source for `arch`, compiled by NVRTC once per process and kept:
/// a test binary or an `optimize` run opens the device many times, and NVRTC takes about a
/// second per source.
fn ptx_for(arch: &'static str) -> Result<Vec<(&'static str, String)>, GpuError> {
    type Cache = Mutex<HashMap<&'static str, Vec<(&'static str, String)>>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let mut cache = CACHE
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    if let Some(ptx) = cache.get(arch) {
        return Ok(ptx.clone());
    }
    let nv = Nvrtc::load().map_err(Unavailable::from)?;
    let mut all = Vec::with_capacity(SOURCES.len());
    for &(file, src) in SOURCES {
        let ptx = nv
            .compile(file, src, arch)
            .map_err(|log| GpuError::Compile { file, log })?;
        all.push((file, ptx));
    }
    cache.insert(arch, all.clone());
    Ok(all)
}

/// An NVIDIA GPU (cloning shares the context, stream and modules).
#[derive(Clone)]
pub struct Cuda {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    functions: HashMap<Kernel, CudaFunction>,
}

impl Cuda {
    /// Open device `ordinal`, compile and load every kernel.
    pub fn new(ordinal: usize) -> Result<Self, GpuError> {
        probe()?;
        let ctx = CudaContext::new(ordinal).map_err(err)?;
        let stream = ctx.default_stream();
        let arch = arch(ctx.compute_capability().map_err(err)?);
        let mut functions = HashMap::new();
        for (file, ptx) in ptx_for(arch)? {
            let module = ctx
                .load_module(cudarc::nvrtc::Ptx::from_src(ptx))
                .map_err(err)?;
            for k in Kernel::ALL.iter().filter(|k| k.file() == file) {
                functions.insert(*k, module.load_function(k.symbol()).map_err(err)?);
            }
        }
        Ok(Cuda {
            ctx,
            stream,
            functions,
        })
    }
}

impl Device for Cuda {
    type Real = CudaSlice<f64>;
    type Index = CudaSlice<i64>;
    type Index32 = CudaSlice<i32>;

    fn name(&self) -> String {
        self.ctx.name().unwrap_or_else(|_| "CUDA device".into())
    }
    fn upload(&self, v: &[f64]) -> Result<CudaSlice<f64>, GpuError> {
        if v.is_empty() {
            return self.stream.alloc_zeros::<f64>(1).map_err(err);
        }
        self.stream.clone_htod(v).map_err(err)
    }
    fn upload_index(&self, v: &[i64]) -> Result<CudaSlice<i64>, GpuError> {
        if v.is_empty() {
            return self.stream.alloc_zeros::<i64>(1).map_err(err);
        }
        self.stream.clone_htod(v).map_err(err)
    }
    fn zeros(&self, n: usize) -> Result<CudaSlice<f64>, GpuError> {
        self.stream.alloc_zeros::<f64>(n.max(1)).map_err(err)
    }
    fn zeros_index32(&self, n: usize) -> Result<CudaSlice<i32>, GpuError> {
        self.stream.alloc_zeros::<i32>(n.max(1)).map_err(err)
    }
    fn write(&self, dst: &mut CudaSlice<f64>, v: &[f64]) -> Result<(), GpuError> {
        if dst.len() != v.len().max(1) {
            return Err(GpuError::Length {
                expected: dst.len(),
                got: v.len(),
            });
        }
        self.stream.memcpy_htod(v, dst).map_err(err)
    }
    fn download(&self, b: &CudaSlice<f64>) -> Result<Vec<f64>, GpuError> {
        self.stream.clone_dtoh(b).map_err(err)
    }
    fn download_prefix(&self, b: &CudaSlice<f64>, len: usize) -> Result<Vec<f64>, GpuError> {
        if len > b.len() {
            return Err(GpuError::Length {
                expected: b.len(),
                got: len,
            });
        }
        if len == 0 {
            return Ok(Vec::new());
        }
        self.stream.clone_dtoh(&b.slice(..len)).map_err(err)
    }
    fn free_memory(&self) -> Option<usize> {
        self.ctx.mem_get_info().ok().map(|(free, _)| free)
    }
    fn launch(&self, k: Kernel, n: usize, args: &mut [Arg<'_, Self>]) -> Result<(), GpuError> {
        check_args(k, args)?;
        if n == 0 {
            return Ok(());
        }
        let f = self.functions.get(&k).ok_or(GpuError::Arguments {
            kernel: k.symbol(),
            why: "kernel not loaded",
        })?;
        let item: i64 = 0;
        let count = n as i64;
        let mut b = self.stream.launch_builder(f);
        b.arg(&item);
        b.arg(&count);
        for a in args.iter_mut() {
            match a {
                Arg::Int(v) => b.arg(&*v),
                Arg::Real(v) => b.arg(&*v),
                Arg::In(s) => b.arg(&**s),
                Arg::Out(s) => b.arg(&mut **s),
                Arg::Index(s) => b.arg(&**s),
                Arg::Index32(s) => b.arg(&**s),
                Arg::Index32Out(s) => b.arg(&mut **s),
            };
        }
        // `n as u32` would wrap at 2^32 items (an inverse factor of 4.3G entries): count the
        // blocks in 64 bits; the grid's x dimension holds up to 2^31 - 1 of them
        let blocks = u32::try_from(n.div_ceil(256))
            .ok()
            .filter(|&b| b < 1 << 31)
            .ok_or(GpuError::Arguments {
                kernel: k.symbol(),
                why: "more items than one launch's grid holds (2^31 - 1 blocks of 256)",
            })?;
        let cfg = LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: argument kinds match the kernel table (checked above) and the kernels'
        // C signatures; buffer sizes are the pipeline's contract.
        unsafe { b.launch(cfg) }.map_err(err)?;
        Ok(())
    }
}
