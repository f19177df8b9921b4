#include "sim/report/analyses/sample_stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <boost/math/distributions/binomial.hpp>
#include <boost/math/distributions/students_t.hpp>

#include "sim/core/error.h"

namespace lacuna::report {

int32_t nearest_rank(int32_t percent, int32_t count) {
  const int64_t r = (static_cast<int64_t>(percent) * count + 99) / 100;  // ceil(p K)
  return static_cast<int32_t>(std::clamp<int64_t>(r, 1, count));
}

double binomial_cdf(int32_t j, int32_t n, double p) {
  if (j < 0) return 0.0;
  if (j >= n) return 1.0;
  return boost::math::cdf(boost::math::binomial_distribution<double>(n, p), j);
}

RankInterval quantile_rank_interval(int32_t percent, int32_t count, double confidence) {
  const double p = percent / 100.0;
  const double tail = (1.0 - confidence) / 2.0;
  RankInterval r;
  // F(l - 1) rises with l: the largest l whose F(l - 1) <= α/2.
  int32_t low = 0;
  for (int32_t l = 1; l <= count && binomial_cdf(l - 1, count, p) <= tail; ++l) low = l;
  int32_t high = 0;
  for (int32_t u = 1; u <= count; ++u) {
    if (binomial_cdf(u - 1, count, p) >= 1.0 - tail) {
      high = u;
      break;
    }
  }
  if (low == 0 || high == 0) return r;
  r.low = low;
  r.high = high;
  r.coverage = binomial_cdf(high - 1, count, p) - binomial_cdf(low - 1, count, p);
  return r;
}

double student_t_critical(double confidence, int32_t dof) {
  return boost::math::quantile(boost::math::students_t_distribution<double>(dof), 1.0 - (1.0 - confidence) / 2.0);
}

Distribution describe(std::vector<double> values, const std::vector<int32_t>& percents, double confidence) {
  if (values.empty()) throw Error("describe: no samples");
  std::sort(values.begin(), values.end());
  Distribution d;
  const auto k = static_cast<int32_t>(values.size());
  d.count = k;
  d.min = values.front();
  d.max = values.back();
  // The mean as min + Σ (x_i − min) / K: exactly v when every sample is v (a
  // plain Σ x_i / K is not: 0.1 × 10 / 10 = 0.09999999999999999), and never
  // outside [min, max].
  double excess = 0;
  for (double v : values) excess += v - d.min;
  d.mean = std::clamp(d.min + excess / k, d.min, d.max);
  if (k > 1) {
    double ss = 0;
    for (double v : values) ss += (v - d.mean) * (v - d.mean);
    d.stddev = std::sqrt(ss / (k - 1));
    const double half = student_t_critical(confidence, k - 1) * d.stddev / std::sqrt(static_cast<double>(k));
    d.mean_ci = Interval{d.mean - half, d.mean + half};
  }
  for (int32_t percent : percents) {
    Quantile q;
    q.percent = percent;
    q.value = values[static_cast<size_t>(nearest_rank(percent, k) - 1)];
    const RankInterval r = quantile_rank_interval(percent, k, confidence);
    if (r.low > 0) {
      q.ci = Interval{values[static_cast<size_t>(r.low - 1)], values[static_cast<size_t>(r.high - 1)]};
      q.ci_low_rank = r.low;
      q.ci_high_rank = r.high;
      q.coverage = r.coverage;
    }
    d.quantiles.push_back(q);
  }
  return d;
}

}  // namespace lacuna::report
