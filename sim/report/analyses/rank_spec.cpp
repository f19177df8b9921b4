#include "sim/report/analyses/rank_spec.h"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>

#include "sim/core/error.h"

namespace lacuna::report {

namespace {

const char* kFix = "use \"pipeline\", \"all\", a list such as \"0-7,64\" or \"stage:N\"";

Error spec_error(const std::string& option, std::string_view text, const std::string& what) {
  return Error(SourceLocation{{}, 0, 0, option}, fmt::format("\"{}\": {}", text, what), kFix);
}

int32_t parse_int(const std::string& option, std::string_view whole, std::string_view part) {
  int32_t v = 0;
  const char* end = part.data() + part.size();
  auto [ptr, ec] = std::from_chars(part.data(), end, v);
  if (part.empty() || ec != std::errc() || ptr != end || v < 0) {
    throw spec_error(option, whole, fmt::format("\"{}\" is not a rank number", part));
  }
  return v;
}

}  // namespace

RankSpec parse_rank_spec(std::string_view text, std::string option) {
  RankSpec spec;
  spec.text = std::string(text);
  spec.option = std::move(option);
  if (text == "pipeline") return spec;
  if (text == "all") {
    spec.kind = RankSpec::Kind::kAll;
    return spec;
  }
  if (text.starts_with("stage:")) {
    spec.kind = RankSpec::Kind::kStage;
    spec.stage = parse_int(spec.option, text, text.substr(6));
    return spec;
  }
  if (text.empty()) throw spec_error(spec.option, text, "empty rank selection");
  spec.kind = RankSpec::Kind::kList;
  std::string_view rest = text;
  while (true) {
    const size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    const size_t dash = item.find('-');
    if (dash == std::string_view::npos) {
      const int32_t r = parse_int(spec.option, text, item);
      spec.ranges.emplace_back(r, r);
    } else {
      const int32_t lo = parse_int(spec.option, text, item.substr(0, dash));
      const int32_t hi = parse_int(spec.option, text, item.substr(dash + 1));
      if (hi < lo) throw spec_error(spec.option, text, fmt::format("range \"{}\" runs backwards", item));
      spec.ranges.emplace_back(lo, hi);
    }
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return spec;
}

std::vector<int32_t> select_ranks(const RankSpec& spec, const ir::Program& program) {
  const int32_t n = program.ranks_size();
  std::vector<int32_t> out;
  switch (spec.kind) {
    case RankSpec::Kind::kPipeline:
      for (int32_t r = 0; r < n; ++r) {
        const ir::Coordinates& c = program.ranks(r).coord();
        if (c.tp() == 0 && c.cp() == 0 && c.dp() == 0) out.push_back(r);
      }
      break;
    case RankSpec::Kind::kAll:
      for (int32_t r = 0; r < n; ++r) out.push_back(r);
      break;
    case RankSpec::Kind::kStage:
      for (int32_t r = 0; r < n; ++r) {
        if (program.ranks(r).coord().pp() == spec.stage) out.push_back(r);
      }
      if (out.empty()) {
        throw spec_error(spec.option, spec.text,
                         fmt::format("no rank has pp stage {} (pp = {})", spec.stage, program.info().pp()));
      }
      break;
    case RankSpec::Kind::kList:
      for (const auto& [lo, hi] : spec.ranges) {
        if (hi >= n)
          throw spec_error(spec.option, spec.text, fmt::format("rank {} out of range (program has {} ranks)", hi, n));
        for (int32_t r = lo; r <= hi; ++r) out.push_back(r);
      }
      std::sort(out.begin(), out.end());
      out.erase(std::unique(out.begin(), out.end()), out.end());
      break;
  }
  std::stable_sort(out.begin(), out.end(), [&](int32_t a, int32_t b) {
    return program.ranks(a).coord().pp() < program.ranks(b).coord().pp();
  });
  return out;
}

std::vector<int32_t> select_simulated_ranks(const RankSpec& spec, const ir::Program& program,
                                            const engine::RunInfo& info) {
  std::vector<int32_t> representative(static_cast<size_t>(program.ranks_size()), -1);
  for (size_t i = 0; i < info.simulated_ranks.size(); ++i) {
    const int32_t sim = info.simulated_ranks[i];
    representative[static_cast<size_t>(sim)] = sim;
    if (i < info.represents.size()) {
      for (int32_t r : info.represents[i]) representative[static_cast<size_t>(r)] = sim;
    }
  }
  std::vector<int32_t> out;
  std::vector<bool> taken(representative.size(), false);
  for (int32_t r : select_ranks(spec, program)) {
    const int32_t sim = representative[static_cast<size_t>(r)];
    if (sim < 0 || taken[static_cast<size_t>(sim)]) continue;
    taken[static_cast<size_t>(sim)] = true;
    out.push_back(sim);
  }
  return out;
}

}  // namespace lacuna::report
