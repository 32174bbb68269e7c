use diffphd::material::{corotated, neohookean, svd, volume};
use nalgebra::Matrix3;
fn main() {
    let n = 2_000_000;
    let fs: Vec<Matrix3<f64>> = (0..1000)
        .map(|i| {
            let t = i as f64 * 0.001;
            Matrix3::new(
                1.0 + 0.1 * t.sin(),
                0.05 * t,
                0.02,
                -0.03,
                0.9 + 0.05 * t.cos(),
                0.01 * t,
                0.0,
                0.02,
                1.05,
            )
        })
        .collect();
    let t0 = std::time::Instant::now();
    let mut acc = 0.0;
    for k in 0..n {
        let s = svd::svd3(&fs[k % 1000]);
        acc += s.sigma[0];
    }
    let t1 = t0.elapsed().as_secs_f64() / n as f64 * 1e9;
    let t0 = std::time::Instant::now();
    for k in 0..n {
        let s = svd::svd3(&fs[k % 1000]);
        acc += corotated::project(&s)[0];
    }
    let t2 = t0.elapsed().as_secs_f64() / n as f64 * 1e9;
    let t0 = std::time::Instant::now();
    for k in 0..n {
        let s = svd::svd3(&fs[k % 1000]);
        acc += volume::project(&s).0[0];
    }
    let t3 = t0.elapsed().as_secs_f64() / n as f64 * 1e9;
    let p = neohookean::NhParams {
        mu: 1.0,
        lambda: 9.0,
        k: 11.0,
    };
    let t0 = std::time::Instant::now();
    for k in 0..n {
        let s = svd::svd3(&fs[k % 1000]);
        acc += neohookean::prox(&p, &s, None).0[0];
    }
    let t4 = t0.elapsed().as_secs_f64() / n as f64 * 1e9;
    println!("ns per call: svd {t1:.0}, svd+corot {t2:.0}, svd+volume {t3:.0}, svd+nh prox (cold) {t4:.0}  ({acc:.1})");
}
