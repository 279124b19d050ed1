"""The statistics of a comparison: paired tests, intervals, multiplicity and power.

Pure functions over numbers; `compare`, `baseline` and the reports call them. Every random
draw comes from `stream(seed, *names)`, a generator of its own for each named figure, so a
figure depends only on its own inputs, the seed and its names: never on which other
systems, measures or categories were computed before it, nor in what order.

Definitions (d_i = challenger_i - reference_i over the n paired queries; m = #{d_i != 0}):

- **Sign-flip test** (paired randomization test, Fisher; Smucker et al., CIKM 2007) of
  mean(d) = 0, two-sided: the null distribution of mean(d) is that of mean(s_i d_i) over
  independent signs s_i = ±1. Zero differences do not change it, so it runs over the m
  non-zero ones. p is the share of sign patterns whose |sum(s_i d_i)| is at least the
  observed |sum(d_i)|: exact over all 2**m patterns when m <= `EXACT_LIMIT`, else over `R`
  random patterns with the observed one counted, p = (1 + #{as extreme}) / (R + 1), which
  cannot go below the floor 1 / (R + 1) (`SignFlip.floor`; p < 0.0001 with 10,000).
- **Bootstrap interval** of a mean (of d, or of one system's values): the 2.5th and 97.5th
  percentiles of the means of R resamples of the n values with replacement (the percentile
  method of `scipy.stats.bootstrap`, drawn here with numpy).
- **Wilson interval** of a proportion (a 0/1 measure's mean x/n), closed form:
  (p + z²/2n ± z sqrt(p(1-p)/n + z²/4n²)) / (1 + z²/n), z = Φ⁻¹(0.975).
- **Holm** (1979) step-down, family-wise: sort the k p-values ascending, p_(i) adjusted =
  max_{j<=i} min(1, (k - j + 1) p_(j)). **Benjamini-Hochberg** (1995), false discovery
  rate: p_(i) adjusted = min_{j>=i} min(1, k p_(j) / j). Both as statsmodels'
  `multipletests` computes them (the tests check it).
- **Minimum detectable difference** of a paired comparison at level alpha (two-sided) and
  power 1 - beta: MDE = (t_{1-alpha/2, n-1} + t_{1-beta, n-1}) * sd(d) / sqrt(n), sd with
  n - 1 degrees of freedom (the normal approximation of the paired t-test's power, with t
  quantiles for small n). **Questions needed** for an effect delta: the smallest n with
  MDE(n) <= delta at the observed sd(d); the normal-quantile start is
  n0 = ((z_{1-alpha/2} + z_{1-beta}) sd(d) / delta)**2.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

#: the sign-flip test enumerates every pattern up to 2**EXACT_LIMIT (about a million, as
#: the sums of two halves' patterns: 0.03 s at m = 20) and draws random ones above that
EXACT_LIMIT = 20
#: the level of every interval and test here, and the power the MDE is stated at
ALPHA = 0.05
POWER = 0.80
#: how a figure's random stream is derived (compare.json records it)
STREAM_RULE = (
    "numpy.random.SeedSequence([seed, int(sha256(NUL-joined names))]): one stream per "
    "figure, named by (kind, reference, challenger, measure, level)"
)
CORRECTIONS = ("holm", "bh", "none")


def stream(seed: int, *names: str) -> np.random.Generator:
    """The random generator of one figure: seeded by `seed` and the figure's `names` alone."""
    if seed < 0:
        raise ValueError(f"seed must be >= 0, got {seed}")
    digest = hashlib.sha256("\0".join(names).encode("utf-8")).digest()
    return np.random.Generator(
        np.random.PCG64(np.random.SeedSequence([seed, int.from_bytes(digest, "big")]))
    )


@dataclass(frozen=True)
class SignFlip:
    """A sign-flip test's outcome: the two-sided p; `exact` (every pattern) or not; the
    number of patterns used; the non-zero differences m; `floor`, the smallest p the random
    version can give (None when exact)."""

    p_value: float
    exact: bool
    patterns: int
    non_zero: int
    floor: float | None

    @property
    def at_floor(self) -> bool:
        """Whether p is the random test's floor (the true p may be smaller)."""
        return at_floor(self.p_value, self.floor)

    def name(self) -> str:
        """The test as a row names it."""
        if self.exact:
            return f"exact sign-flip over 2^{self.non_zero} patterns"
        return f"sign-flip, {self.patterns:,} random patterns"


def at_floor(p_value: float, floor: float | None) -> bool:
    """Whether a p-value is the floor of the random test that gave it (`SignFlip.floor`;
    None for an exact test): the true p may then be smaller."""
    return floor is not None and p_value <= floor * (1 + 1e-9)


def _signed_sums(values: np.ndarray) -> np.ndarray:
    """sum(s_i v_i) for every sign pattern s of `values` (2**len(values) sums)."""
    sums = np.zeros(1)
    for v in values:
        sums = np.concatenate((sums + v, sums - v))
    return sums


#: random sign patterns are drawn in blocks of this many (bounded memory for any m)
_BLOCK = 1000


def sign_flip(
    differences: Sequence[float], *, resamples: int, rng: np.random.Generator
) -> SignFlip | None:
    """The two-sided sign-flip test of mean(d) = 0 over the non-zero differences; None when
    there is none (nothing to test). p = #{patterns with |sum(s d)| >= |sum d|} / 2**m when
    exact (enumerated as every sum of the first half's patterns plus every sum of the
    second's), else (1 + #{random patterns as extreme}) / (R + 1). "As extreme" allows a
    relative 1e-9 for the rounding of sums taken in another order."""
    d = np.asarray(differences, dtype=float)
    d = d[d != 0]
    m = len(d)
    if m == 0:
        return None
    observed = abs(float(d.sum()))
    tolerance = 1e-9 * float(np.abs(d).sum())
    if m <= EXACT_LIMIT:
        half = m // 2
        totals = _signed_sums(d[:half])[:, None] + _signed_sums(d[half:])[None, :]
        extreme = int(np.count_nonzero(np.abs(totals) >= observed - tolerance))
        return SignFlip(extreme / 2**m, True, 2**m, m, None)
    extreme = 0
    for start in range(0, resamples, _BLOCK):
        size = min(_BLOCK, resamples - start)
        signs = rng.integers(0, 2, size=(size, m), dtype=np.int8) * 2 - 1
        totals = signs @ d
        extreme += int(np.count_nonzero(np.abs(totals) >= observed - tolerance))
    floor = 1 / (resamples + 1)
    return SignFlip((1 + extreme) / (resamples + 1), False, resamples, m, floor)


#: bootstrap resamples are drawn in blocks of this many (a block holds BLOCK x n indices)
_BOOT_BLOCK = 500


def bootstrap_interval(
    values: Sequence[float], *, resamples: int, rng: np.random.Generator
) -> tuple[float, float]:
    """The 95% percentile bootstrap interval of the mean of `values` (n >= 2): the 2.5th
    and 97.5th percentiles (numpy's linear interpolation) of the means of `resamples`
    samples of n values drawn with replacement; a constant sample gives its value twice.
    numpy alone (scipy.stats' import costs a run 0.7 s): the same definition as
    `scipy.stats.bootstrap(method="percentile")`, whose draws differ."""
    x = np.asarray(values, dtype=float)
    if np.all(x == x[0]):
        return float(x[0]), float(x[0])
    n = len(x)
    means = np.empty(resamples)
    for start in range(0, resamples, _BOOT_BLOCK):
        size = min(_BOOT_BLOCK, resamples - start)
        means[start : start + size] = x[rng.integers(0, n, size=(size, n))].mean(axis=1)
    low, high = np.percentile(means, [100 * ALPHA / 2, 100 * (1 - ALPHA / 2)])
    return float(low), float(high)


def wilson_interval(successes: float, n: int) -> tuple[float, float]:
    """Wilson's 95% score interval of the proportion successes / n (n >= 1)."""
    z = NormalDist().inv_cdf(1 - ALPHA / 2)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class Interval:
    """A mean with its 95% interval and how it was computed (`wilson` or `bootstrap`; with
    one value there is no interval: `low`, `high` and `method` are None)."""

    mean: float
    low: float | None
    high: float | None
    method: str | None
    n: int

    def record(self) -> dict:
        """As JSON: mean, ci95 ([low, high] or None), method and n."""
        ci = None if self.low is None else [self.low, self.high]
        return {"mean": self.mean, "ci95": ci, "method": self.method, "n": self.n}


def mean_interval(
    values: Sequence[float],
    *,
    seed: int,
    names: Sequence[str],
    resamples: int,
) -> Interval | None:
    """One system's mean over its queries with a 95% interval: Wilson's when every value is
    0 or 1 (the mean is a proportion), else the percentile bootstrap drawn from
    `stream(seed, *names)`; None for no value, no interval for one."""
    x = np.asarray(values, dtype=float)
    n = len(x)
    if n == 0:
        return None
    mean = float(x.mean())
    if n == 1:
        return Interval(mean, None, None, None, 1)
    if np.isin(x, (0.0, 1.0)).all():
        low, high = wilson_interval(float(x.sum()), n)
        return Interval(mean, low, high, "wilson", n)
    low, high = bootstrap_interval(x, resamples=resamples, rng=stream(seed, *names))
    return Interval(mean, low, high, "bootstrap", n)


def adjust(p_values: Sequence[float], method: str) -> list[float]:
    """The p-values adjusted for multiple comparisons over their family: `holm`, `bh`
    (Benjamini-Hochberg) or `none` (unchanged)."""
    p = np.asarray(p_values, dtype=float)
    k = len(p)
    if method == "none" or k == 0:
        return [float(x) for x in p]
    order = np.argsort(p, kind="stable")
    ranked = p[order]
    if method == "holm":
        steps = np.maximum.accumulate(np.minimum(1.0, (k - np.arange(k)) * ranked))
    elif method == "bh":
        steps = np.minimum.accumulate(np.minimum(1.0, k * ranked / np.arange(1, k + 1))[::-1])[::-1]
    else:
        raise ValueError(f"unknown correction {method!r}; one of {', '.join(CORRECTIONS)}")
    out = np.empty(k)
    out[order] = steps
    return [float(x) for x in out]


def _quantiles(n: int, alpha: float, power: float) -> float:
    """t_{1-alpha/2, n-1} + t_{power, n-1}."""
    from scipy import stats as sps

    return float(sps.t.ppf(1 - alpha / 2, n - 1) + sps.t.ppf(power, n - 1))


def minimum_detectable(
    sd: float, n: int, *, alpha: float = ALPHA, power: float = POWER
) -> float | None:
    """The smallest mean difference a paired comparison of n queries with this sd(d)
    detects at `alpha` (two-sided) with `power`; None below 2 queries."""
    if n < 2:
        return None
    return _quantiles(n, alpha, power) * sd / math.sqrt(n)


def questions_needed(
    sd: float, effect: float, *, alpha: float = ALPHA, power: float = POWER
) -> int | None:
    """The fewest paired queries whose MDE at this sd(d) is at most |effect|; None when sd
    is 0 (no observed spread: nothing to extrapolate from)."""
    from scipy import stats as sps

    effect = abs(effect)
    if sd <= 0 or effect <= 0:
        return None
    z = float(sps.norm.ppf(1 - alpha / 2) + sps.norm.ppf(power))
    n = max(2, math.ceil((z * sd / effect) ** 2))
    while minimum_detectable(sd, n, alpha=alpha, power=power) > effect:
        n += 1
    return n


def difference_sd(differences: Sequence[float]) -> float | None:
    """The sample standard deviation (n - 1) of paired differences; None below 2."""
    d = np.asarray(differences, dtype=float)
    return float(d.std(ddof=1)) if len(d) >= 2 else None
