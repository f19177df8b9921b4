#include "sim/kernelfit/measured_table.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <sstream>

#include <fmt/format.h>

#include "sim/core/error.h"
#include "sim/core/input_file.h"

namespace lacuna::kernelfit {
namespace {

// Several times the largest shipped table (the public A100 and H100 tables
// are under 1 MiB each).
constexpr InputKind kTableInput{"measured kernel table", 64 * kMiB,
                                "give a kernel table as described in calib/measurements/README.md"};

constexpr int kColumns = 8;
constexpr const char* kColumnNames[kColumns] = {"gpu", "class", "pass", "dtype", "shape", "time_us", "group", "label"};

std::vector<std::string> split(const std::string& line, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : line) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

// The optimizer step runs once, in no backward pass; every other class has
// kernels in any pass (a compiled zero-bubble W pass holds memory-bound
// kernels too).
bool passes_of(ir::OpClass c, Pass p) { return c != ir::OPTIMIZER || p == Pass::kForward; }

}  // namespace

const char* pass_name(Pass p) {
  switch (p) {
    case Pass::kForward:
      return "fwd";
    case Pass::kDgrad:
      return "dgrad";
    case Pass::kWgrad:
      return "wgrad";
  }
  return "?";
}

Pass pass_of(ir::KernelVariant v) {
  switch (v) {
    case ir::VARIANT_BACKWARD_INPUT:
      return Pass::kDgrad;
    case ir::VARIANT_BACKWARD_WEIGHT:
      return Pass::kWgrad;
    default:
      return Pass::kForward;
  }
}

ir::Phase phase_of(Pass p) {
  switch (p) {
    case Pass::kDgrad:
      return ir::BACKWARD_INPUT;
    case Pass::kWgrad:
      return ir::BACKWARD_WEIGHT;
    default:
      return ir::FORWARD;
  }
}

std::pair<int, int> shape_arity(ir::OpClass c) {
  switch (c) {
    case ir::GEMM:
      return {3, 4};
    case ir::ATTENTION:
      return {7, 8};
    case ir::LAYERNORM:
    case ir::RMSNORM:
    case ir::SWIGLU:
    case ir::CROSS_ENTROPY:
    case ir::SOFTMAX:
      return {2, 2};
    case ir::GELU:
    case ir::RESIDUAL_ADD:
      return {1, 1};
    case ir::EMBEDDING:
      return {3, 3};
    case ir::OPTIMIZER:
    case ir::ELEMENTWISE:
      return {1, 2};
    default:
      return {0, 0};
  }
}

std::vector<MeasuredKernel> parse_measured_table(const std::string& text, const std::string& name) {
  std::vector<MeasuredKernel> rows;
  std::istringstream in(text);
  std::string line;
  int line_no = 0;
  bool header_seen = false;
  // Columns start at 1; a field's column is where its text starts.
  auto fail = [&](int column, const std::string& field, const std::string& what, const std::string& fix = {}) {
    throw Error(SourceLocation{name, line_no, column, field}, what, fix);
  };
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    if (!header_seen) {
      if (line != kMeasuredTableHeader)
        fail(1, "header", fmt::format("the header is \"{}\"", line), fmt::format("write \"{}\"", kMeasuredTableHeader));
      header_seen = true;
      continue;
    }
    const std::vector<std::string> f = split(line, ',');
    if (f.size() != kColumns)
      fail(1, "row", fmt::format("{} columns, expected {}", f.size(), kColumns),
           "a label may not contain a comma; an empty time_us is still a column");
    std::vector<int> col(kColumns, 1);
    for (int i = 1; i < kColumns; ++i) col[i] = col[i - 1] + static_cast<int>(f[i - 1].size()) + 1;
    MeasuredKernel k;
    k.file = name;
    k.line = line_no;
    k.gpu = f[0];
    if (k.gpu.empty()) fail(col[0], kColumnNames[0], "empty", "name the hardware preset, e.g. h100-sxm");
    if (!ir::OpClass_Parse(f[1], &k.op_class) || k.op_class == ir::OP_CLASS_UNSPECIFIED ||
        shape_arity(k.op_class).first == 0)
      fail(col[1], kColumnNames[1], fmt::format("unknown kernel class \"{}\"", f[1]),
           "one of program.proto's OpClass names, e.g. GEMM, ATTENTION, RMSNORM");
    if (f[2] == "fwd") {
      k.pass = Pass::kForward;
    } else if (f[2] == "dgrad") {
      k.pass = Pass::kDgrad;
    } else if (f[2] == "wgrad") {
      k.pass = Pass::kWgrad;
    } else {
      fail(col[2], kColumnNames[2], fmt::format("unknown pass \"{}\"", f[2]), "fwd, dgrad or wgrad");
    }
    if (!passes_of(k.op_class, k.pass))
      fail(col[2], kColumnNames[2], fmt::format("{} has no {} kernel", f[1], f[2]));
    if (f[3] == "bf16") {
      k.dtype = scenario::BF16;
    } else if (f[3] == "fp16") {
      k.dtype = scenario::FP16;
    } else if (f[3] == "fp8") {
      k.dtype = scenario::FP8;
    } else {
      fail(col[3], kColumnNames[3], fmt::format("unknown dtype \"{}\"", f[3]), "bf16, fp16 or fp8");
    }
    if (k.dtype == scenario::FP8 && k.op_class != ir::GEMM)
      fail(col[3], kColumnNames[3], "only GEMMs run in fp8 in lacuna's model", "bf16 or fp16");
    for (const std::string& v : split(f[4], ' ')) {
      int64_t x = 0;
      const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
      // Attention's causal flag (6th) and window (8th, 0: none) may be 0.
      const size_t i = k.shape.size();
      const bool zero_ok = k.op_class == ir::ATTENTION && (i == 5 || i == 7);
      if (v.empty() || ec != std::errc() || p != v.data() + v.size() || x < 0 || (x == 0 && !zero_ok))
        fail(col[4], kColumnNames[4], fmt::format("\"{}\" is not a positive integer", v),
             "integers separated by single spaces");
      // Bounded so that any product of a shape's entries fits int64 (the
      // kernel formulas multiply them): 2^40 each, 2^62 together.
      if (x > (int64_t{1} << 40))
        fail(col[4], kColumnNames[4], fmt::format("{} is larger than 2^40", x), "a kernel's dimension, not a byte count");
      k.shape.push_back(x);
    }
    {
      double product = 1;
      for (int64_t v : k.shape) product *= static_cast<double>(std::max<int64_t>(v, 1));
      if (product > std::ldexp(1.0, 62))
        fail(col[4], kColumnNames[4], "the entries' product is larger than 2^62", "a kernel this size does not fit a GPU");
    }
    const auto [lo, hi] = shape_arity(k.op_class);
    const int n = static_cast<int>(k.shape.size());
    if (n < lo || n > hi)
      fail(col[4], kColumnNames[4],
           fmt::format("{} has a shape of {} entries, this one has {}", f[1], lo == hi ? fmt::format("{}", lo)
                                                                                     : fmt::format("{}–{}", lo, hi), n),
           "program.proto gives each class's shape");
    if (k.op_class == ir::ATTENTION && k.shape[5] > 1)
      fail(col[4], kColumnNames[4], "the causal entry (6th) is 0 or 1");
    if (!f[5].empty()) {
      double t = 0;
      const auto [p, ec] = std::from_chars(f[5].data(), f[5].data() + f[5].size(), t);
      if (ec != std::errc() || p != f[5].data() + f[5].size() || !std::isfinite(t) || t <= 0)
        fail(col[5], kColumnNames[5], fmt::format("\"{}\" is not a positive time in microseconds", f[5]));
      k.time_us = t;
    }
    k.group = f[6];
    if (k.group.empty()) fail(col[6], kColumnNames[6], "empty", "name the model the row comes from, or \"grid\"");
    k.label = f[7];
    rows.push_back(std::move(k));
  }
  if (!header_seen)
    throw Error(SourceLocation{name, line_no, 0, "header"}, "no header line",
                fmt::format("start the table with \"{}\"", kMeasuredTableHeader));
  return rows;
}

std::vector<MeasuredKernel> read_measured_table(const std::string& path) {
  return parse_measured_table(read_input_file(path, kTableInput), path);
}

MeasuredTable read_measured_table_with_comments(const std::string& path) {
  const std::string text = read_input_file(path, kTableInput);
  MeasuredTable t;
  t.rows = parse_measured_table(text, path);
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] != '#') continue;
    line.erase(0, line.size() > 1 && line[1] == ' ' ? 2 : 1);
    t.comments.push_back(line);
  }
  return t;
}

std::string format_measured_table(const std::vector<MeasuredKernel>& rows, const std::vector<std::string>& comments) {
  std::string out;
  for (const std::string& c : comments) out += "# " + c + "\n";
  out += kMeasuredTableHeader;
  out += '\n';
  for (const MeasuredKernel& k : rows) {
    std::string shape;
    for (size_t i = 0; i < k.shape.size(); ++i) {
      if (i) shape += ' ';
      shape += std::to_string(k.shape[i]);
    }
    const char* dtype = k.dtype == scenario::FP16 ? "fp16" : k.dtype == scenario::FP8 ? "fp8" : "bf16";
    // A comma would split the row: free text takes a semicolon instead.
    auto text = [](std::string t) {
      std::replace(t.begin(), t.end(), ',', ';');
      std::replace(t.begin(), t.end(), '\n', ' ');
      return t;
    };
    out += fmt::format("{},{},{},{},{},{},{},{}\n", text(k.gpu), ir::OpClass_Name(k.op_class), pass_name(k.pass),
                       dtype, shape, k.time_us ? fmt::format("{}", *k.time_us) : std::string(), text(k.group),
                       text(k.label));
  }
  return out;
}

}  // namespace lacuna::kernelfit
