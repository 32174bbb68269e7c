//! NVRTC through its C API, loaded at run time (no CUDA needed to build, none needed to run
//! the CPU path). Compiles `kernels/*.cu` to PTX for a given architecture; used by the CUDA
//! device, by `diffphd doctor` and by the CI compile check (every kernel must compile for
//! `sm_90`). Library names tried, in order: `libnvrtc.so.13`, `libnvrtc.so.12`, `libnvrtc.so`
//! (found through `LD_LIBRARY_PATH`, see `docs/gpu.md`).

pub use super::error::NvrtcError;
use super::kernels::{HEADERS, SOURCES};
use std::ffi::{c_char, c_int, c_void, CStr, CString};

type Program = *mut c_void;
type Status = c_int;

/// A loaded NVRTC library.
pub struct Nvrtc {
    lib: libloading::Library,
    /// The library file name that was loaded.
    pub soname: &'static str,
}

/// One kernel source compiled to PTX, or its compiler log.
pub struct Compiled {
    /// The source path (`kernels/x.cu`).
    pub name: &'static str,
    /// PTX text on success; the NVRTC log ([`NvrtcError::Log`]) on failure.
    pub result: Result<String, NvrtcError>,
}

const NAMES: &[&str] = &["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"];

impl Nvrtc {
    /// Load NVRTC, or say why it is not available.
    pub fn load() -> Result<Self, NvrtcError> {
        let mut last = String::new();
        for &name in NAMES {
            // SAFETY: loading a shared library runs its initialisers; NVRTC's are benign.
            match unsafe { libloading::Library::new(name) } {
                Ok(lib) => return Ok(Nvrtc { lib, soname: name }),
                Err(e) => last = e.to_string(),
            }
        }
        Err(NvrtcError::NotFound {
            tried: NAMES.join(", "),
            last,
        })
    }

    fn sym<T>(&self, name: &[u8]) -> Result<libloading::Symbol<'_, T>, NvrtcError> {
        // SAFETY: the symbol types below are NVRTC's documented C signatures.
        unsafe { self.lib.get::<T>(name) }.map_err(|e| NvrtcError::Symbol(e.to_string()))
    }

    /// NVRTC's version `(major, minor)`.
    pub fn version(&self) -> Result<(i32, i32), NvrtcError> {
        let f =
            self.sym::<unsafe extern "C" fn(*mut c_int, *mut c_int) -> Status>(b"nvrtcVersion\0")?;
        let (mut a, mut b) = (0, 0);
        // SAFETY: two valid out pointers.
        check(unsafe { f(&mut a, &mut b) }, "nvrtcVersion")?;
        Ok((a, b))
    }

    /// Compile one source with the kernel headers, for `arch` (e.g. `sm_90`).
    pub fn compile(&self, name: &str, src: &str, arch: &str) -> Result<String, NvrtcError> {
        type Create = unsafe extern "C" fn(
            *mut Program,
            *const c_char,
            *const c_char,
            c_int,
            *const *const c_char,
            *const *const c_char,
        ) -> Status;
        type Compile = unsafe extern "C" fn(Program, c_int, *const *const c_char) -> Status;
        type Size = unsafe extern "C" fn(Program, *mut usize) -> Status;
        type Get = unsafe extern "C" fn(Program, *mut c_char) -> Status;
        type Destroy = unsafe extern "C" fn(*mut Program) -> Status;
        let create = self.sym::<Create>(b"nvrtcCreateProgram\0")?;
        let compile = self.sym::<Compile>(b"nvrtcCompileProgram\0")?;
        let log_size = self.sym::<Size>(b"nvrtcGetProgramLogSize\0")?;
        let get_log = self.sym::<Get>(b"nvrtcGetProgramLog\0")?;
        let ptx_size = self.sym::<Size>(b"nvrtcGetPTXSize\0")?;
        let get_ptx = self.sym::<Get>(b"nvrtcGetPTX\0")?;
        let destroy = self.sym::<Destroy>(b"nvrtcDestroyProgram\0")?;

        let c = |s: &str| {
            CString::new(s).map_err(|_| NvrtcError::Nul {
                name: name.to_string(),
            })
        };
        let csrc = c(src)?;
        let cname = c(name)?;
        let hdr_src: Vec<CString> = HEADERS
            .iter()
            .map(|(_, s)| c(s))
            .collect::<Result<_, _>>()?;
        let hdr_name: Vec<CString> = HEADERS
            .iter()
            .map(|(n, _)| c(n))
            .collect::<Result<_, _>>()?;
        let hs: Vec<*const c_char> = hdr_src.iter().map(|s| s.as_ptr()).collect();
        let hn: Vec<*const c_char> = hdr_name.iter().map(|s| s.as_ptr()).collect();
        let opts: Vec<CString> = [format!("--gpu-architecture={arch}"), "--std=c++17".into()]
            .iter()
            .map(|s| c(s))
            .collect::<Result<_, _>>()?;
        let op: Vec<*const c_char> = opts.iter().map(|s| s.as_ptr()).collect();

        let mut prog: Program = std::ptr::null_mut();
        // SAFETY: all strings outlive the program; counts match the pointer arrays.
        unsafe {
            check(
                create(
                    &mut prog,
                    csrc.as_ptr(),
                    cname.as_ptr(),
                    hs.len() as c_int,
                    hs.as_ptr(),
                    hn.as_ptr(),
                ),
                "nvrtcCreateProgram",
            )?;
            let status = compile(prog, op.len() as c_int, op.as_ptr());
            let out = if status == 0 {
                read(prog, &ptx_size, &get_ptx)
            } else {
                Err(match read(prog, &log_size, &get_log) {
                    Ok(log) => NvrtcError::Log(log),
                    Err(e) => e,
                })
            };
            destroy(&mut prog);
            out
        }
    }

    /// Compile every kernel source for `arch`.
    pub fn compile_all(&self, arch: &str) -> Vec<Compiled> {
        SOURCES
            .iter()
            .map(|&(name, src)| Compiled {
                name,
                result: self.compile(name, src, arch),
            })
            .collect()
    }
}

/// Read a sized NVRTC string (PTX or log).
///
/// # Safety
/// `prog` must be a live program.
unsafe fn read(
    prog: Program,
    size: &unsafe extern "C" fn(Program, *mut usize) -> Status,
    get: &unsafe extern "C" fn(Program, *mut c_char) -> Status,
) -> Result<String, NvrtcError> {
    let mut n = 0usize;
    check(size(prog, &mut n), "size query")?;
    let mut buf = vec![0u8; n.max(1)];
    check(get(prog, buf.as_mut_ptr() as *mut c_char), "read")?;
    let s =
        CStr::from_bytes_until_nul(&buf).map_err(|e| NvrtcError::Unterminated(e.to_string()))?;
    Ok(s.to_string_lossy().into_owned())
}

fn check(status: Status, what: &'static str) -> Result<(), NvrtcError> {
    if status == 0 {
        Ok(())
    } else {
        Err(NvrtcError::Status { what, status })
    }
}
