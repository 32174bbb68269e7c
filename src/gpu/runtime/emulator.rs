//! The host emulator: the `kernels/*.cu` sources compiled as C++ by `build.rs`, each launch
//! running its items sequentially in item order (deterministic; slow by design). Buffers are
//! host vectors. Used by CI to run the GPU pipeline without a GPU (`--backend emulator`).

use super::device::{check_args, Arg, Device};
use super::error::GpuError;
use super::kernels::{host, HostArg, Kernel};

/// The emulator device.
#[derive(Debug, Default, Clone, Copy)]
pub struct Emulator;

impl Device for Emulator {
    type Real = Vec<f64>;
    type Index = Vec<i64>;
    type Index32 = Vec<i32>;

    fn name(&self) -> String {
        "host emulator (kernels/*.cu compiled as C++)".into()
    }
    fn upload(&self, v: &[f64]) -> Result<Vec<f64>, GpuError> {
        Ok(v.to_vec())
    }
    fn upload_index(&self, v: &[i64]) -> Result<Vec<i64>, GpuError> {
        Ok(v.to_vec())
    }
    fn zeros(&self, n: usize) -> Result<Vec<f64>, GpuError> {
        Ok(vec![0.0; n])
    }
    fn zeros_index32(&self, n: usize) -> Result<Vec<i32>, GpuError> {
        Ok(vec![0; n])
    }
    fn write(&self, dst: &mut Vec<f64>, v: &[f64]) -> Result<(), GpuError> {
        if dst.len() != v.len() {
            return Err(GpuError::Length {
                expected: dst.len(),
                got: v.len(),
            });
        }
        dst.copy_from_slice(v);
        Ok(())
    }
    fn download(&self, b: &Vec<f64>) -> Result<Vec<f64>, GpuError> {
        Ok(b.clone())
    }
    fn download_prefix(&self, b: &Vec<f64>, len: usize) -> Result<Vec<f64>, GpuError> {
        b.get(..len).map(<[f64]>::to_vec).ok_or(GpuError::Length {
            expected: b.len(),
            got: len,
        })
    }
    fn launch(&self, k: Kernel, n: usize, args: &mut [Arg<'_, Self>]) -> Result<(), GpuError> {
        check_args(k, args)?;
        let raw: Vec<HostArg> = args
            .iter_mut()
            .map(|a| match a {
                Arg::Int(v) => HostArg::Int(*v),
                Arg::Real(v) => HostArg::Real(*v),
                Arg::In(b) => HostArg::In(b.as_ptr()),
                Arg::Out(b) => HostArg::Out(b.as_mut_ptr()),
                Arg::Index(b) => HostArg::Index(b.as_ptr()),
                Arg::Index32(b) => HostArg::Index32(b.as_ptr()),
                Arg::Index32Out(b) => HostArg::Index32Out(b.as_mut_ptr()),
            })
            .collect();
        host::run(k, n, &raw)
    }
}
