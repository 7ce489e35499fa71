//! `LinearHead`: a softmax (multinomial logistic) classifier over example embeddings, fitted
//! deterministically — zero randomness, fixed order, fixed steps — so the same examples always
//! give the same head, and a cached head is exactly the one a restart would fit.
//!
//! Inputs are standardised first (each dimension minus its mean over the examples, divided by its
//! standard deviation). Sentence embeddings of one model all point into a narrow cone: between
//! any two texts the cosine is high, and what tells intents apart are small differences that plain
//! gradient descent on the raw vectors barely moves along (on CLINC150 `val`, 150 steps on raw
//! vectors: 89.8 % top-1 in-scope; standardised, 100 steps: 96.1 %). The head then starts from
//! zero and takes full-batch gradient steps with L2 regularisation. Its probabilities are
//! calibrated by a temperature chosen by 5-fold cross-validation over the examples (folds by
//! position), so "0.90" means what the seed's thresholds expect of it, not an over-confident fit.
//!
use serde::{Deserialize, Serialize};

/// Changes whenever the fitting arithmetic does (not only its options), so a cached head is
/// always the one this build would fit.
pub const FIT_VERSION: u32 = 5;

/// Cross-validation folds of the temperature calibration.
const FOLDS: usize = 5;

/// How the head is fitted; the defaults suit a few hundred to a few thousand examples.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FitOptions {
    pub steps: usize,
    pub learning_rate: f32,
    pub l2: f32,
}

impl Default for FitOptions {
    fn default() -> Self {
        FitOptions {
            steps: 100,
            learning_rate: 1.0,
            l2: 1e-4,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinearHead {
    pub classes: usize,
    pub dim: usize,
    /// Per-dimension mean and 1 / standard deviation of the examples: `x` is read as
    /// `(x - mean) * inverse_std`.
    pub mean: Vec<f32>,
    pub inverse_std: Vec<f32>,
    /// `classes × (dim + 1)`, the bias last in each row.
    pub weights: Vec<f32>,
    /// Logits are divided by it before the softmax (calibration).
    pub temperature: f32,
}

impl LinearHead {
    /// Fits on `(vector, class)` pairs; every class in `0..classes` should have examples.
    pub fn fit(
        vectors: &[Vec<f32>],
        labels: &[usize],
        classes: usize,
        options: FitOptions,
    ) -> LinearHead {
        LinearHead::fit_calibrating(vectors, labels, classes, options, &[])
    }

    /// [`LinearHead::fit`], calibrating the temperature on the held-out examples of the classes
    /// not listed in `uncalibrated` only: classes whose examples are short and alike (a greeting,
    /// `ok`) would otherwise flatten every probability, and the thresholds gate the others.
    pub fn fit_calibrating(
        vectors: &[Vec<f32>],
        labels: &[usize],
        classes: usize,
        options: FitOptions,
        uncalibrated: &[usize],
    ) -> LinearHead {
        let dim = vectors.first().map_or(0, Vec::len);
        let (mean, inverse_std) = standardisation(vectors, dim);
        let standardised: Vec<Vec<f32>> = vectors
            .iter()
            .map(|x| standardise(x, &mean, &inverse_std))
            .collect();
        // Calibrate by 5-fold cross-validation: each example is scored once by a head fitted
        // without it, and the temperature is the one that fits those held-out scores best. One
        // held-out fifth alone was too noisy on small example sets (a few dozen examples).
        let folds = if vectors.len() < 10 { 0 } else { FOLDS };
        let mut held_logits = Vec::with_capacity(vectors.len());
        for fold in 0..folds {
            let (train, held): (Vec<usize>, Vec<usize>) =
                (0..vectors.len()).partition(|i| i % folds != fold);
            let weights = fit_rows(&standardised, labels, &train, classes, dim, options);
            held_logits.extend(
                held.iter()
                    .filter(|&&i| !uncalibrated.contains(&labels[i]))
                    .map(|&i| (labels[i], logits(&weights, classes, dim, &standardised[i]))),
            );
        }
        let temperature = if held_logits.is_empty() {
            1.0
        } else {
            best_temperature(&held_logits)
        };
        let all: Vec<usize> = (0..vectors.len()).collect();
        LinearHead {
            classes,
            dim,
            mean,
            inverse_std,
            weights: fit_rows(&standardised, labels, &all, classes, dim, options),
            temperature,
        }
    }

    /// Logits of `x` as given (standardisation is the caller's).
    fn raw_logits(&self, z: &[f32]) -> Vec<f32> {
        logits(&self.weights, self.classes, self.dim, z)
    }

    pub fn logits(&self, x: &[f32]) -> Vec<f32> {
        self.raw_logits(&standardise(x, &self.mean, &self.inverse_std))
    }

    /// Class probabilities of `x` (calibrated).
    pub fn probabilities(&self, x: &[f32]) -> Vec<f32> {
        softmax(&self.logits(x), self.temperature)
    }
}

fn standardisation(vectors: &[Vec<f32>], dim: usize) -> (Vec<f32>, Vec<f32>) {
    let n = vectors.len().max(1) as f64;
    let mut mean = vec![0.0f64; dim];
    for v in vectors {
        mean.iter_mut()
            .zip(v)
            .for_each(|(m, x)| *m += f64::from(*x));
    }
    mean.iter_mut().for_each(|m| *m /= n);
    let mut var = vec![0.0f64; dim];
    for v in vectors {
        var.iter_mut()
            .zip(v.iter().zip(&mean))
            .for_each(|(s, (x, m))| *s += (f64::from(*x) - m).powi(2));
    }
    // A dimension that never varies carries nothing: left unscaled rather than divided by ~0.
    let inverse_std = var
        .iter()
        .map(|s| {
            let sd = (s / n).sqrt();
            if sd > 1e-6 {
                (1.0 / sd) as f32
            } else {
                1.0
            }
        })
        .collect();
    (mean.into_iter().map(|m| m as f32).collect(), inverse_std)
}

fn standardise(x: &[f32], mean: &[f32], inverse_std: &[f32]) -> Vec<f32> {
    x.iter()
        .zip(mean.iter().zip(inverse_std))
        .map(|(x, (m, s))| (x - m) * s)
        .collect()
}

fn logits(weights: &[f32], classes: usize, dim: usize, z: &[f32]) -> Vec<f32> {
    let row = dim + 1;
    (0..classes)
        .map(|c| {
            let w = &weights[c * row..(c + 1) * row];
            dot(&w[..dim], z) + w[dim]
        })
        .collect()
}

/// Eight independent sums, so the compiler can keep them in SIMD lanes (a single running sum is
/// a dependency chain it may not reorder): the fit over CLINC150's 15,000 examples is dominated
/// by these dot products.
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0.0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            lanes[i] += x[i] * y[i];
        }
    }
    lanes.iter().sum::<f32>() + tail
}

fn softmax(logits: &[f32], temperature: f32) -> Vec<f32> {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let exp: Vec<f32> = logits
        .iter()
        .map(|l| ((l - max) / temperature).exp())
        .collect();
    let sum: f32 = exp.iter().sum();
    exp.into_iter().map(|e| e / sum).collect()
}

/// Weights fitted on `rows` of the standardised vectors.
fn fit_rows(
    vectors: &[Vec<f32>],
    labels: &[usize],
    rows: &[usize],
    classes: usize,
    dim: usize,
    options: FitOptions,
) -> Vec<f32> {
    let row = dim + 1;
    let mut weights = vec![0.0f32; classes * row];
    let n = rows.len().max(1) as f32;
    let mut gradient = vec![0.0f32; classes * row];
    for _ in 0..options.steps {
        gradient.iter_mut().for_each(|g| *g = 0.0);
        for &i in rows {
            let x = &vectors[i];
            let p = softmax(&logits(&weights, classes, dim, x), 1.0);
            for (c, pc) in p.iter().enumerate() {
                let err = pc - if labels[i] == c { 1.0 } else { 0.0 };
                if err == 0.0 {
                    continue;
                }
                let g = &mut gradient[c * row..(c + 1) * row];
                for (gj, xj) in g[..dim].iter_mut().zip(x) {
                    *gj += err * xj;
                }
                g[dim] += err;
            }
        }
        for (w, g) in weights.iter_mut().zip(&gradient) {
            *w -= options.learning_rate * (g / n + options.l2 * *w);
        }
    }
    weights
}

/// The temperature (from a fixed grid) with the least negative log-likelihood of the held-out
/// `(label, logits)`.
fn best_temperature(held: &[(usize, Vec<f32>)]) -> f32 {
    let mut best = (f32::INFINITY, 1.0);
    for step in 0..=60 {
        let t = 0.25 * 1.06f32.powi(step);
        let nll: f32 = held
            .iter()
            .map(|(label, l)| -softmax(l, t)[*label].max(1e-12).ln())
            .sum();
        if nll < best.0 {
            best = (nll, t);
        }
    }
    best.1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(v: &[f32]) -> Vec<f32> {
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter().map(|x| x / n).collect()
    }

    #[test]
    fn separable_classes_are_learned_deterministically() {
        let mut vectors = Vec::new();
        let mut labels = Vec::new();
        for i in 0..30 {
            let jitter = (i as f32) * 0.01;
            vectors.push(unit(&[1.0, jitter, 0.1]));
            labels.push(0);
            vectors.push(unit(&[jitter, 1.0, 0.1]));
            labels.push(1);
            vectors.push(unit(&[0.1, jitter, 1.0]));
            labels.push(2);
        }
        let a = LinearHead::fit(&vectors, &labels, 3, FitOptions::default());
        let b = LinearHead::fit(&vectors, &labels, 3, FitOptions::default());
        assert_eq!(a, b, "same examples, same head");
        let p = a.probabilities(&unit(&[0.9, 0.1, 0.1]));
        assert!(p[0] > 0.9, "{p:?}");
        let between = a.probabilities(&unit(&[1.0, 1.0, 0.1]));
        assert!(
            between[0] < 0.9 && between[1] < 0.9,
            "an in-between message is not confident: {between:?}"
        );
        assert!((p.iter().sum::<f32>() - 1.0).abs() < 1e-5);
    }
}
