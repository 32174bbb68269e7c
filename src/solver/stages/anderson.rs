//! Bounded-window type-II Anderson acceleration with Tikhonov regularization and a
//! reliability guard (spec Eqs. 18–21, §6.4).
//!
//! Plan then execute: [`Anderson`] holds the algorithm's small host state (which history
//! slots are live, the cached Gram matrix of the residual differences, the guard), and an
//! [`AndersonStore`] holds the vectors: [`HostStore`] on the CPU, the accelerator's resident
//! PD loop on a device (`solver::offload::ResidentPd`), so both run the same algorithm and
//! only the $m$ new dot products and the $m$ coefficients cross between them per iteration.

/// The vectors of Anderson's history: the differences $\Delta x_j$, $\Delta g_j$ of consecutive
/// pairs in ring slots, the last pair $(x_{k-1},g_{k-1})$ and the current pair $(x_k,g_k)$.
pub trait AndersonStore {
    /// A failure of the store ([`std::convert::Infallible`] for [`HostStore`]; the
    /// accelerator's `OffloadError` for its resident loop).
    type Error;
    /// Make the current pair the last one; with `slot`, first write
    /// $\Delta x=x_k-x_{k-1}$, $\Delta g=g_k-g_{k-1}$ into that slot.
    fn push(&mut self, slot: Option<usize>) -> Result<(), Self::Error>;
    /// $(\Delta g_{slot}\cdot\Delta g_j,\ \Delta g_j\cdot g_k)$ for each slot $j$ of `live`.
    #[allow(clippy::type_complexity)]
    fn dots(&mut self, slot: usize, live: &[usize]) -> Result<(Vec<f64>, Vec<f64>), Self::Error>;
    /// The next iterate $x_{k+1}=x_k+g_k-\sum_j\gamma_j(\Delta x_j+\Delta g_j)$ over
    /// `terms` $=(slot_j,\gamma_j)$ in order (empty: the plain step $x_k+g_k$).
    fn mix(&mut self, terms: &[(usize, f64)]) -> Result<(), Self::Error>;
}

/// Type-II (Walker–Ni) Anderson mixing on a fixed-point map $\Phi$ with residual
/// $g_k=\Phi(x_k)-x_k$:
/// $\gamma_k=(\Delta G^T\Delta G+\epsilon I)^{-1}\Delta G^Tg_k$,
/// $x_{k+1}=x_k+g_k-(\Delta X+\Delta G)\gamma_k$, window $m$.
///
/// Regularization: $\epsilon=\max(10^{-6}\|\Delta G\|_F^2/m,\ \epsilon_{\min})$. The spec (R)
/// uses $\epsilon_{\min}=10^{-12}$ in absolute units, which in metre-scale scenes switches
/// the acceleration off once $\|\Delta g\|\lesssim10^{-6}$ m, i.e. exactly in the tight-tolerance
/// runs used for gradient checks. We keep the relative term (which bounds the condition
/// number of the normal equations by about $10^6$) and use $\epsilon_{\min}=10^{-300}$.
/// Guard: if $\|\gamma\|_2\ge\gamma_{\max}$ the history restarts from the current pair and
/// the plain step $x_{k+1}=\Phi(x_k)$ is taken.
///
/// The Gram matrix $\Delta G^T\Delta G$ is cached per slot pair: each iteration computes the
/// $m$ products of the new column (the same values, bit for bit, as recomputing them all).
#[derive(Debug)]
pub struct Anderson {
    window: usize,
    gamma_max: f64,
    /// Live ring slots, oldest first (at most `window`).
    live: std::collections::VecDeque<usize>,
    /// Whether the store holds a last pair (false after [`Anderson::reset`]).
    has_last: bool,
    /// $\Delta g_i\cdot\Delta g_j$ by slots, `window × window`.
    gram: Vec<f64>,
    /// Number of guard firings since construction.
    pub guard_firings: usize,
    /// $\|\gamma\|_2$ of the last mixing step (0 if none).
    pub last_gamma_norm: f64,
}

impl Anderson {
    pub fn new(window: usize, gamma_max: f64) -> Self {
        Anderson {
            window,
            gamma_max,
            live: std::collections::VecDeque::with_capacity(window),
            has_last: false,
            gram: vec![0.0; window * window],
            guard_firings: 0,
            last_gamma_norm: 0.0,
        }
    }

    pub fn window(&self) -> usize {
        self.window
    }

    /// Forget the history (start of a new time step).
    pub fn reset(&mut self) {
        self.live.clear();
        self.has_last = false;
    }

    /// Push the store's current pair $(x_k,g_k)$ and write the next iterate into the store;
    /// the store's first failure ends it and is returned.
    pub fn advance<S: AndersonStore + ?Sized>(&mut self, store: &mut S) -> Result<(), S::Error> {
        self.last_gamma_norm = 0.0;
        if self.window == 0 {
            return store.mix(&[]);
        }
        let slot = self.has_last.then(|| self.next_slot());
        store.push(slot)?;
        self.has_last = true;
        let Some(s) = slot else {
            return store.mix(&[]);
        };
        let live: Vec<usize> = self.live.iter().copied().collect();
        let (row, rhs) = store.dots(s, &live)?;
        for (&j, &v) in live.iter().zip(&row) {
            self.gram[s * self.window + j] = v;
            self.gram[j * self.window + s] = v;
        }
        match self.coefficients(&live, &rhs) {
            Some(gamma) => {
                let terms: Vec<(usize, f64)> = live.iter().copied().zip(gamma).collect();
                store.mix(&terms)
            }
            None => {
                // guard: restart the history from the current pair, plain step
                self.guard_firings += 1;
                self.live.clear();
                store.mix(&[])
            }
        }
    }

    /// The slot the next difference goes to: a free one, or the oldest live one (evicted).
    fn next_slot(&mut self) -> usize {
        let s = if self.live.len() == self.window {
            self.live.pop_front().unwrap_or(0)
        } else {
            (0..self.window)
                .find(|s| !self.live.contains(s))
                .unwrap_or(0)
        };
        self.live.push_back(s);
        s
    }

    /// $\gamma=(\Delta G^T\Delta G+\epsilon I)^{-1}\Delta G^Tg$ over the live slots, or `None`
    /// when the guard fires (no Cholesky factor, $\|\gamma\|$ not finite or $\ge\gamma_{\max}$).
    fn coefficients(&mut self, live: &[usize], rhs: &[f64]) -> Option<Vec<f64>> {
        let m = live.len();
        let w = self.window;
        let mut gram =
            nalgebra::DMatrix::<f64>::from_fn(m, m, |i, j| self.gram[live[i] * w + live[j]]);
        let fro2: f64 = (0..m).map(|i| gram[(i, i)]).sum();
        let eps = (1e-6 * fro2 / m as f64).max(1e-300);
        for i in 0..m {
            gram[(i, i)] += eps;
        }
        let gamma = gram
            .cholesky()?
            .solve(&nalgebra::DVector::from_column_slice(rhs));
        let gn = gamma.norm();
        self.last_gamma_norm = gn;
        (gn.is_finite() && gn < self.gamma_max).then(|| gamma.iter().copied().collect())
    }
}

/// $a\cdot b$ in index order (the host's reduction order).
fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>()
}

/// [`AndersonStore`] in host memory: `window` slots of $\Delta x$, $\Delta g$, the last and the
/// current pair, and the mixed iterate.
#[derive(Debug, Default)]
pub struct HostStore {
    dx: Vec<Vec<f64>>,
    dg: Vec<Vec<f64>>,
    last: (Vec<f64>, Vec<f64>),
    cur: (Vec<f64>, Vec<f64>),
    out: Vec<f64>,
}

impl HostStore {
    /// Set the current pair $(x_k,g_k)$.
    fn set(&mut self, x: &[f64], g: &[f64]) {
        for (v, src) in [(&mut self.cur.0, x), (&mut self.cur.1, g)] {
            v.clear();
            v.extend_from_slice(src);
        }
    }
}

impl AndersonStore for HostStore {
    type Error = std::convert::Infallible;

    fn push(&mut self, slot: Option<usize>) -> Result<(), Self::Error> {
        if let Some(s) = slot {
            if self.dx.len() <= s {
                self.dx.resize(s + 1, Vec::new());
                self.dg.resize(s + 1, Vec::new());
            }
            let diff = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(p, q)| p - q).collect();
            self.dx[s] = diff(&self.cur.0, &self.last.0);
            self.dg[s] = diff(&self.cur.1, &self.last.1);
        }
        self.last.0.clone_from(&self.cur.0);
        self.last.1.clone_from(&self.cur.1);
        Ok(())
    }

    fn dots(&mut self, slot: usize, live: &[usize]) -> Result<(Vec<f64>, Vec<f64>), Self::Error> {
        let row = live.iter().map(|&j| dot(&self.dg[slot], &self.dg[j]));
        let rhs = live.iter().map(|&j| dot(&self.dg[j], &self.cur.1));
        Ok((row.collect(), rhs.collect()))
    }

    fn mix(&mut self, terms: &[(usize, f64)]) -> Result<(), Self::Error> {
        let (x, g) = (&self.cur.0, &self.cur.1);
        self.out.clear();
        self.out.extend(x.iter().zip(g).map(|(a, b)| a + b));
        for &(j, c) in terms {
            for ((o, dx), dg) in self.out.iter_mut().zip(&self.dx[j]).zip(&self.dg[j]) {
                *o -= c * (dx + dg);
            }
        }
        Ok(())
    }
}

/// [`Anderson`] on a [`HostStore`]: the CPU's PD iteration and the fixed-point adjoint.
#[derive(Debug)]
pub struct TypeII {
    core: Anderson,
    store: HostStore,
}

impl TypeII {
    pub fn new(window: usize, gamma_max: f64) -> Self {
        TypeII {
            core: Anderson::new(window, gamma_max),
            store: HostStore::default(),
        }
    }

    pub fn window(&self) -> usize {
        self.core.window()
    }

    /// Forget the history (start of a new time step).
    pub fn reset(&mut self) {
        self.core.reset();
    }

    /// Number of guard firings since construction.
    pub fn guard_firings(&self) -> usize {
        self.core.guard_firings
    }

    /// $\|\gamma\|_2$ of the last mixing step (0 if none).
    pub fn last_gamma_norm(&self) -> f64 {
        self.core.last_gamma_norm
    }

    /// The algorithm's host state, to drive a store of another backend with (the
    /// accelerator's resident PD loop).
    pub fn core_mut(&mut self) -> &mut Anderson {
        &mut self.core
    }

    /// Next iterate from $x_k$ and $g_k$.
    pub fn step(&mut self, x: &[f64], g: &[f64]) -> Vec<f64> {
        self.store.set(x, g);
        // the host store cannot fail (its error type is uninhabited)
        crate::linalg::krylov::infallible(self.core.advance(&mut self.store));
        self.store.out.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Linear contraction x ↦ Bx + c with spectral radius 0.95: Anderson must beat the
    /// plain iteration by a wide margin and reach the same fixed point.
    #[test]
    fn anderson_accelerates_a_linear_contraction() {
        let n = 40;
        let diag: Vec<f64> = (0..n).map(|i| 0.95 * (i as f64 + 1.0) / n as f64).collect();
        let c: Vec<f64> = (0..n).map(|i| (i as f64).cos()).collect();
        let fixed: Vec<f64> = (0..n).map(|i| c[i] / (1.0 - diag[i])).collect();
        let run = |window: usize| -> usize {
            let mut aa = TypeII::new(window, 10.0);
            let mut x = vec![0.0; n];
            for k in 0..10_000 {
                let phi: Vec<f64> = (0..n).map(|i| diag[i] * x[i] + c[i]).collect();
                let g: Vec<f64> = (0..n).map(|i| phi[i] - x[i]).collect();
                let err = x
                    .iter()
                    .zip(&fixed)
                    .map(|(a, b)| (a - b).abs())
                    .fold(0.0, f64::max);
                if err < 1e-10 {
                    return k;
                }
                x = aa.step(&x, &g);
            }
            usize::MAX
        };
        let plain = run(0);
        let aa1 = run(1);
        let aa5 = run(5);
        assert!(plain > 300, "plain {plain}");
        assert!(aa1 < plain, "m=1 {aa1} vs plain {plain}");
        assert!(aa5 < plain / 4, "m=5 {aa5} vs plain {plain}");
    }

    /// The slot-ring store with its cached Gram matrix gives the iterates of the textbook
    /// formulation (all differences and products recomputed from the last `window + 1`
    /// pairs) bit for bit, through window eviction and guard restarts.
    #[test]
    fn cached_gram_equals_recomputing_every_product() {
        fn reference(
            hist: &mut Vec<(Vec<f64>, Vec<f64>)>,
            w: usize,
            gmax: f64,
            x: &[f64],
            g: &[f64],
        ) -> Vec<f64> {
            let plain: Vec<f64> = x.iter().zip(g).map(|(a, b)| a + b).collect();
            hist.push((x.to_vec(), g.to_vec()));
            if hist.len() > w + 1 {
                hist.remove(0);
            }
            let h = hist.len();
            if h < 2 {
                return plain;
            }
            let m = h - 1;
            let diff = |a: &[f64], b: &[f64]| -> Vec<f64> {
                a.iter().zip(b).map(|(p, q)| p - q).collect()
            };
            let dg: Vec<Vec<f64>> = (0..m).map(|j| diff(&hist[j + 1].1, &hist[j].1)).collect();
            let dx: Vec<Vec<f64>> = (0..m).map(|j| diff(&hist[j + 1].0, &hist[j].0)).collect();
            let mut gram = nalgebra::DMatrix::<f64>::zeros(m, m);
            let mut rhs = nalgebra::DVector::<f64>::zeros(m);
            let mut fro2 = 0.0;
            for i in 0..m {
                for j in 0..=i {
                    gram[(i, j)] = dot(&dg[i], &dg[j]);
                    gram[(j, i)] = gram[(i, j)];
                }
                fro2 += gram[(i, i)];
                rhs[i] = dot(&dg[i], g);
            }
            let eps = (1e-6 * fro2 / m as f64).max(1e-300);
            for i in 0..m {
                gram[(i, i)] += eps;
            }
            let gamma = gram.cholesky().map(|c| c.solve(&rhs));
            match gamma {
                Some(gm) if gm.norm().is_finite() && gm.norm() < gmax => {
                    let mut out = plain;
                    for j in 0..m {
                        for i in 0..out.len() {
                            out[i] -= gm[j] * (dx[j][i] + dg[j][i]);
                        }
                    }
                    out
                }
                _ => {
                    hist.clear();
                    hist.push((x.to_vec(), g.to_vec()));
                    plain
                }
            }
        }
        let n = 17;
        // a nonlinear contraction whose Anderson steps sometimes trip a tight guard
        let phi = |x: &[f64]| -> Vec<f64> {
            (0..n)
                .map(|i| 0.9 * (x[i] + 0.3 * x[(i + 1) % n]).sin() + (i as f64).cos())
                .collect()
        };
        for (w, gmax) in [(1, 10.0), (3, 10.0), (5, 2.0), (5, 1e9)] {
            let mut aa = TypeII::new(w, gmax);
            let mut hist = Vec::new();
            let (mut x, mut xr) = (vec![0.1; n], vec![0.1; n]);
            for k in 0..40 {
                let g: Vec<f64> = phi(&x).iter().zip(&x).map(|(p, q)| p - q).collect();
                let gr: Vec<f64> = phi(&xr).iter().zip(&xr).map(|(p, q)| p - q).collect();
                x = aa.step(&x, &g);
                xr = reference(&mut hist, w, gmax, &xr, &gr);
                assert_eq!(x, xr, "window {w}, gamma_max {gmax}, iteration {k}");
                if k == 20 {
                    aa.reset();
                    hist.clear();
                }
            }
        }
    }

    #[test]
    fn guard_fires_on_collinear_residuals() {
        let mut aa = TypeII::new(2, 1e-3);
        let x0 = vec![0.0, 0.0];
        let _ = aa.step(&x0, &[1.0, 1.0]);
        let out = aa.step(&[1.0, 1.0], &[2.0, 2.0]);
        // gamma would be large (residual grows): guard → plain step
        assert_eq!(out, vec![3.0, 3.0]);
        assert_eq!(aa.guard_firings(), 1);
    }
}
