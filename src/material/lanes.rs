//! Lane types of the interleaved kernels: [`LANES`] samples side by side, one scalar or one
//! $3\times3$ matrix per lane.

/// Samples processed side by side.
pub const LANES: usize = 8;
/// One scalar per lane.
pub type Lanes = [f64; LANES];
/// A $3\times3$ matrix per lane, column-major: entry `3 * c + r` is row `r`, column `c`.
pub type Mat3Lanes = [Lanes; 9];
