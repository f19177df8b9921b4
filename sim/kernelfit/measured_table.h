// Measured kernel tables (calib/measurements/README.md): one row per kernel
// that ran on a GPU, with its IR class, pass, precision, shape and median
// time. They are the data the per-shape efficiency model is fitted to and
// scored against (efficiency_fit.h), and the shape lists the device campaign
// fills (`lacuna kernel-shapes`, calib/device/campaign).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/proto/program.pb.h"
#include "sim/proto/scenario.pb.h"

namespace lacuna::kernelfit {

// Which kernel of a layer's three: the forward, the gradient of the inputs
// (a memory-bound class's fused backward), the GEMM weight gradient.
enum class Pass { kForward, kDgrad, kWgrad };

const char* pass_name(Pass p);  // "fwd", "dgrad", "wgrad"

// The pass of a compiled kernel's variant and the phase a pass's kernel is
// built in (the compiler's model::variant_of maps the phase back).
Pass pass_of(ir::KernelVariant v);
ir::Phase phase_of(Pass p);

struct MeasuredKernel {
  std::string gpu;                 // hardware preset name, e.g. "h100-sxm"
  ir::OpClass op_class = ir::OP_CLASS_UNSPECIFIED;
  Pass pass = Pass::kForward;
  scenario::Precision dtype = scenario::BF16;
  std::vector<int64_t> shape;      // the IR shape of op_class (program.proto)
  std::optional<double> time_us;   // median kernel time; empty: still to measure
  std::string group;               // unit of cross-validation (a model, "grid")
  std::string label;               // free text
  std::string file;                // where the row came from, for messages
  int line = 0;
};

// Reads a table. Comment lines ('#') are kept out; the header must be
// exactly the documented one. Throws lacuna::Error naming the file, line and
// column (field) of the first bad row: unknown class or pass, a pass the
// class has no kernel for, a shape of the wrong arity or with a
// non-positive entry, a time that is not a positive finite number.
std::vector<MeasuredKernel> read_measured_table(const std::string& path);
// The rows and the comment lines (without their '#').
struct MeasuredTable {
  std::vector<MeasuredKernel> rows;
  std::vector<std::string> comments;
};
MeasuredTable read_measured_table_with_comments(const std::string& path);

// The same from text already read (`name` names it in messages).
std::vector<MeasuredKernel> parse_measured_table(const std::string& text, const std::string& name);

// The table as text: `comments` (each written after "# "), the header, the
// rows in the given order; time_us empty where unset, else printed with
// enough digits to read back the same double.
std::string format_measured_table(const std::vector<MeasuredKernel>& rows, const std::vector<std::string>& comments);

// The documented header line.
inline constexpr const char* kMeasuredTableHeader = "gpu,class,pass,dtype,shape,time_us,group,label";

// Shape entries a class's IR shape has: {min, max}.
std::pair<int, int> shape_arity(ir::OpClass c);

}  // namespace lacuna::kernelfit
