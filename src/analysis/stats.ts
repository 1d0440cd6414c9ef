// Summary statistics of bucket loads and the chi-square goodness-of-fit test against a uniform
// spread (mean and standard deviation alone do not say whether the imbalance is more than chance; a
// p-value does
// imbalance is more than chance).

export interface BucketStats {
  buckets: number;
  keys: number;
  mean: number;
  stddev: number;
  min: number;
  max: number;
  maxOverMean: number;
  chiSquare: number;
  degreesOfFreedom: number;
  /** P(X >= chiSquare) for a uniform spread; tiny values mean "not uniform". */
  pValue: number;
}

export function bucketStats(counts: ArrayLike<number>): BucketStats {
  const n = counts.length;
  let sum = 0;
  let min = Infinity;
  let max = -Infinity;
  for (let i = 0; i < n; i++) {
    const c = counts[i]!;
    sum += c;
    if (c < min) min = c;
    if (c > max) max = c;
  }
  const mean = sum / n;
  let ss = 0;
  for (let i = 0; i < n; i++) ss += (counts[i]! - mean) ** 2;
  const chi = mean > 0 ? ss / mean : 0;
  const df = n - 1;
  return {
    buckets: n,
    keys: sum,
    mean,
    stddev: Math.sqrt(ss / n),
    min,
    max,
    maxOverMean: mean > 0 ? max / mean : 0,
    chiSquare: chi,
    degreesOfFreedom: df,
    pValue: df > 0 ? chiSquareSurvival(chi, df) : 1,
  };
}

/** ln Gamma(x) for x > 0 (Lanczos, g = 7, n = 9). */
export function logGamma(x: number): number {
  const c = [0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313, -176.61503916999185, 12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7];
  if (x < 0.5) return Math.log(Math.PI / Math.sin(Math.PI * x)) - logGamma(1 - x);
  x -= 1;
  let a = c[0]!;
  const t = x + 7.5;
  for (let i = 1; i < 9; i++) a += c[i]! / (x + i);
  return 0.5 * Math.log(2 * Math.PI) + (x + 0.5) * Math.log(t) - t + Math.log(a);
}

/** Regularized upper incomplete gamma Q(a, x): power series below a+1, continued fraction above. */
export function gammaQ(a: number, x: number): number {
  if (x <= 0) return 1;
  const lg = logGamma(a);
  if (x < a + 1) {
    let term = 1 / a;
    let sum = term;
    for (let k = 1; k < 10_000; k++) {
      term *= x / (a + k);
      sum += term;
      if (Math.abs(term) < Math.abs(sum) * 1e-15) break;
    }
    return Math.max(0, 1 - sum * Math.exp(-x + a * Math.log(x) - lg));
  }
  // modified Lentz for the continued fraction of Q
  const tiny = 1e-300;
  let b = x + 1 - a;
  let c = 1 / tiny;
  let d = 1 / b;
  let h = d;
  for (let i = 1; i < 10_000; i++) {
    const an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (Math.abs(d) < tiny) d = tiny;
    c = b + an / c;
    if (Math.abs(c) < tiny) c = tiny;
    d = 1 / d;
    const del = d * c;
    h *= del;
    if (Math.abs(del - 1) < 1e-15) break;
  }
  return Math.min(1, Math.exp(-x + a * Math.log(x) - lg) * h);
}

/** P(X >= x) for X ~ chi-square with k degrees of freedom. */
export function chiSquareSurvival(x: number, k: number): number {
  return gammaQ(k / 2, x / 2);
}
