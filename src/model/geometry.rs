//! Rest geometry of the elements: quadrature samples, their volumes and shape-function
//! gradients (spec §4).

use crate::mesh::ElementKind;
use nalgebra::{Matrix3, Vector3};

/// A degenerate element, found while computing its rest geometry.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ElementError {
    #[error("non-positive tetrahedron volume {volume:.3e}")]
    TetVolume { volume: f64 },
    #[error("singular tetrahedron")]
    SingularTet,
    /// The hexahedron's Jacobian at Gauss point `point` (0..8, lexicographic).
    #[error("non-positive hexahedron Jacobian {det:.3e} at Gauss point {point}")]
    HexJacobian { det: f64, point: usize },
    #[error("singular hexahedron Jacobian")]
    SingularHex,
}

/// Volume and rest shape-function gradients of one quadrature sample.
pub type SampleGeometry = (f64, Vec<[f64; 3]>);

/// Rest gradients and volumes of the samples of one element.
/// Tet: $[\nabla N_1,\nabla N_2,\nabla N_3]^T=D_m^{-1}$, $\nabla N_0=-\sum_a\nabla N_a$,
/// $V=\det D_m/6$. Hex (lexicographic nodes, reference cube $\[0,1\]^3$): Gauss points at
/// $\tfrac12\pm\tfrac1{2\sqrt3}$, $\nabla_XN_a=J^{-T}\nabla_\xi N_a$, $V_s=\det J/8$.
pub fn element_samples(
    kind: ElementKind,
    x: &[[f64; 3]],
) -> Result<Vec<SampleGeometry>, ElementError> {
    match kind {
        ElementKind::Tet4 => {
            let c = |a: usize| Vector3::from(x[a]) - Vector3::from(x[0]);
            let dm = Matrix3::from_columns(&[c(1), c(2), c(3)]);
            let det = dm.determinant();
            if det.is_nan() || det <= 0.0 {
                return Err(ElementError::TetVolume { volume: det / 6.0 });
            }
            let b = dm.try_inverse().ok_or(ElementError::SingularTet)?;
            let mut g = vec![[0.0; 3]; 4];
            for a in 1..4 {
                g[a] = [b[(a - 1, 0)], b[(a - 1, 1)], b[(a - 1, 2)]];
                for d in 0..3 {
                    g[0][d] -= g[a][d];
                }
            }
            Ok(vec![(det / 6.0, g)])
        }
        ElementKind::Hex8 => {
            let q = [0.5 - 0.5 / 3f64.sqrt(), 0.5 + 0.5 / 3f64.sqrt()];
            let mut out = Vec::with_capacity(8);
            for qp in 0..8 {
                let xi = [q[qp & 1], q[(qp >> 1) & 1], q[(qp >> 2) & 1]];
                // dN_a/dxi
                let mut dn = [[0.0; 3]; 8];
                for (a, dna) in dn.iter_mut().enumerate() {
                    let f = |d: usize| {
                        if (a >> d) & 1 == 1 {
                            xi[d]
                        } else {
                            1.0 - xi[d]
                        }
                    };
                    let s = |d: usize| if (a >> d) & 1 == 1 { 1.0 } else { -1.0 };
                    *dna = [s(0) * f(1) * f(2), f(0) * s(1) * f(2), f(0) * f(1) * s(2)];
                }
                let mut j = Matrix3::<f64>::zeros();
                for a in 0..8 {
                    for i in 0..3 {
                        for d in 0..3 {
                            j[(i, d)] += x[a][i] * dn[a][d];
                        }
                    }
                }
                let det = j.determinant();
                if det.is_nan() || det <= 0.0 {
                    return Err(ElementError::HexJacobian { det, point: qp });
                }
                let jit = j
                    .try_inverse()
                    .ok_or(ElementError::SingularHex)?
                    .transpose();
                let g: Vec<[f64; 3]> = dn
                    .iter()
                    .map(|d| {
                        let v = jit * Vector3::from(*d);
                        [v[0], v[1], v[2]]
                    })
                    .collect();
                out.push((det / 8.0, g));
            }
            Ok(out)
        }
    }
}
