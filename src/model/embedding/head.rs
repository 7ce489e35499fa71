//! `LinearHead`: a softmax (multinomial logistic) classifier over example embeddings, fitted
//! deterministically — zero randomness, fixed order, fixed steps — so the same examples always
//! give the same head, and a cached head is exactly the one a restart would fit.
//!
//! It starts from the class centroids (nearest-centroid is the classifier before any step) and
//! refines them by full-batch gradient descent with L2 regularisation. Its probabilities are then
//! calibrated by a temperature chosen on a held-out part of the examples (every fifth one, by
//! position), so "0.90" means what the seed's thresholds expect of it, not an over-confident fit.

use serde::{Deserialize, Serialize};

/// How the head is fitted; the defaults suit a few hundred to a few thousand examples.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FitOptions {
    pub steps: usize,
    pub learning_rate: f32,
    pub l2: f32,
    /// Logit scale of the centroid start (unit vectors have small dot products).
    pub initial_scale: f32,
}

impl Default for FitOptions {
    fn default() -> Self {
        FitOptions {
            steps: 150,
            learning_rate: 4.0,
            l2: 1e-4,
            initial_scale: 20.0,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinearHead {
    pub classes: usize,
    pub dim: usize,
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
        let dim = vectors.first().map_or(0, Vec::len);
        // Calibrate on a held-out fifth, then refit on everything with that temperature.
        let (train, held): (Vec<usize>, Vec<usize>) =
            (0..vectors.len()).partition(|i| i % 5 != 4 || vectors.len() < 10);
        let temperature = if held.is_empty() {
            1.0
        } else {
            let head = fit_rows(vectors, labels, &train, classes, dim, options);
            best_temperature(&head, vectors, labels, &held)
        };
        let all: Vec<usize> = (0..vectors.len()).collect();
        let mut head = fit_rows(vectors, labels, &all, classes, dim, options);
        head.temperature = temperature;
        head
    }

    pub fn logits(&self, x: &[f32]) -> Vec<f32> {
        let row = self.dim + 1;
        (0..self.classes)
            .map(|c| {
                let w = &self.weights[c * row..(c + 1) * row];
                w[..self.dim].iter().zip(x).map(|(a, b)| a * b).sum::<f32>() + w[self.dim]
            })
            .collect()
    }

    /// Class probabilities of `x` (calibrated).
    pub fn probabilities(&self, x: &[f32]) -> Vec<f32> {
        softmax(&self.logits(x), self.temperature)
    }
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

fn fit_rows(
    vectors: &[Vec<f32>],
    labels: &[usize],
    rows: &[usize],
    classes: usize,
    dim: usize,
    options: FitOptions,
) -> LinearHead {
    let row = dim + 1;
    let mut weights = vec![0.0f32; classes * row];
    let mut counts = vec![0usize; classes];
    for &i in rows {
        let c = labels[i];
        counts[c] += 1;
        for (w, x) in weights[c * row..c * row + dim].iter_mut().zip(&vectors[i]) {
            *w += x;
        }
    }
    for c in 0..classes {
        let n = counts[c].max(1) as f32;
        weights[c * row..c * row + dim]
            .iter_mut()
            .for_each(|w| *w *= options.initial_scale / n);
    }
    let mut head = LinearHead {
        classes,
        dim,
        weights,
        temperature: 1.0,
    };
    let n = rows.len().max(1) as f32;
    let mut gradient = vec![0.0f32; classes * row];
    for _ in 0..options.steps {
        gradient.iter_mut().for_each(|g| *g = 0.0);
        for &i in rows {
            let x = &vectors[i];
            let p = softmax(&head.logits(x), 1.0);
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
        for (w, g) in head.weights.iter_mut().zip(&gradient) {
            *w -= options.learning_rate * (g / n + options.l2 * *w);
        }
    }
    head
}

/// The temperature (from a fixed grid) with the least negative log-likelihood on `held`.
fn best_temperature(
    head: &LinearHead,
    vectors: &[Vec<f32>],
    labels: &[usize],
    held: &[usize],
) -> f32 {
    let logits: Vec<Vec<f32>> = held.iter().map(|&i| head.logits(&vectors[i])).collect();
    let mut best = (f32::INFINITY, 1.0);
    for step in 0..=60 {
        let t = 0.25 * 1.06f32.powi(step);
        let nll: f32 = held
            .iter()
            .zip(&logits)
            .map(|(&i, l)| -softmax(l, t)[labels[i]].max(1e-12).ln())
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
