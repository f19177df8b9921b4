// What `lacuna fit-kernels` prints and writes: the fitted parameters against
// the preset's, the error per kernel class, pass and precision before, after
// and held out, every row as CSV, and predicted-against-measured plots.
#pragma once

#include <string>
#include <vector>

#include "sim/kernelfit/efficiency_fit.h"

namespace lacuna::kernelfit {

// The preset the rows were measured on: `requested` if given, else the rows'
// gpu column. Throws lacuna::Error naming the file, line and field `gpu` of
// the first row measured on another GPU, or when `requested` is no preset.
std::string table_preset(const std::vector<MeasuredKernel>& rows, const std::string& requested);

// The terminal report; `tables` names the inputs.
std::string format_report(const FitReport& r, const std::string& preset, const std::vector<std::string>& tables);

// The fitted parameters as a GpuSpec text fragment (the lines a preset takes).
std::string params_pbtxt(const FitParams& p);

// One line per scored row: gpu,class,pass,dtype,shape,group,label,
// measured_us,before_us,fitted_us,held_out_us.
std::string report_csv(const FitReport& r);

// Predicted (fitted, held out) against measured time, log-log, one panel per
// kernel class.
std::string report_svg(const FitReport& r, const std::string& preset);

}  // namespace lacuna::kernelfit
