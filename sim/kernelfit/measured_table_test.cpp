#include "sim/kernelfit/measured_table.h"

#include <gtest/gtest.h>

#include "sim/core/error.h"

namespace lacuna::kernelfit {
namespace {

const std::string kHeader = std::string(kMeasuredTableHeader) + "\n";

Error parse_error(const std::string& body) {
  try {
    parse_measured_table("# a comment\n" + kHeader + body, "t.csv");
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "accepted: " << body;
  return Error("none");
}

TEST(MeasuredTable, ParsesEveryColumn) {
  const auto rows = parse_measured_table(kHeader +
                                             "h100-sxm,GEMM,wgrad,bf16,12288 9216 2048,672.5,gpt3,qkv wgrad\n"
                                             "h100-sxm,RMSNORM,dgrad,fp16,4096 8192,,llama,\n"
                                             "h100-sxm,ATTENTION,fwd,bf16,1 32 4096 4096 128 1 8,900,g,\n"
                                             "h100-sxm,ATTENTION,dgrad,bf16,2 16 2304 2304 72 0 16,900,g,\n",
                                         "t.csv");
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[3].shape[5], 0);  // non-causal
  EXPECT_EQ(rows[0].op_class, ir::GEMM);
  EXPECT_EQ(rows[0].pass, Pass::kWgrad);
  EXPECT_EQ(rows[0].shape, (std::vector<int64_t>{12288, 9216, 2048}));
  EXPECT_DOUBLE_EQ(*rows[0].time_us, 672.5);
  EXPECT_EQ(rows[0].line, 2);
  EXPECT_EQ(rows[1].dtype, scenario::FP16);
  EXPECT_FALSE(rows[1].time_us.has_value());
  EXPECT_EQ(rows[2].shape.size(), 7u);
}

TEST(MeasuredTable, EveryBadRowNamesItsLineAndField) {
  struct Case {
    std::string row, field;
    int column;
  };
  const std::vector<Case> cases = {
      {"h100-sxm,GEMM,fwd,bf16,1 2 3,5,g", "row", 1},                 // 7 columns
      {",GEMM,fwd,bf16,1 2 3,5,g,", "gpu", 1},
      {"h100-sxm,MATMUL,fwd,bf16,1 2 3,5,g,", "class", 10},
      {"h100-sxm,GEMM,backward,bf16,1 2 3,5,g,", "pass", 15},
      {"h100-sxm,OPTIMIZER,dgrad,bf16,100,5,g,", "pass", 20},
      {"h100-sxm,GEMM,fwd,int8,1 2 3,5,g,", "dtype", 19},
      {"h100-sxm,RMSNORM,fwd,fp8,1 2,5,g,", "dtype", 22},
      {"h100-sxm,GEMM,fwd,bf16,1 2,5,g,", "shape", 24},
      {"h100-sxm,GEMM,fwd,bf16,1 0 3,5,g,", "shape", 24},
      {"h100-sxm,GEMM,fwd,bf16,1  3 4,5,g,", "shape", 24},
      {"h100-sxm,ATTENTION,fwd,bf16,1 2 3 4 5 2 1,5,g,", "shape", 29},
      {"h100-sxm,ATTENTION,fwd,bf16,1 0 3 4 5 1 1,5,g,", "shape", 29},
      {"h100-sxm,GEMM,fwd,bf16,1 2 9999999999999,5,g,", "shape", 24},
      {"h100-sxm,GEMM,fwd,bf16,1099511627776 1099511627776 2,5,g,", "shape", 24},
      {"h100-sxm,GEMM,fwd,bf16,1 2 3,-5,g,", "time_us", 30},
      {"h100-sxm,GEMM,fwd,bf16,1 2 3,nan,g,", "time_us", 30},
      {"h100-sxm,GEMM,fwd,bf16,1 2 3,5us,g,", "time_us", 30},
      {"h100-sxm,GEMM,fwd,bf16,1 2 3,5,,", "group", 32},
  };
  for (const Case& c : cases) {
    const Error e = parse_error(c.row + "\n");
    EXPECT_EQ(e.where().file, "t.csv") << c.row;
    EXPECT_EQ(e.where().line, 3) << c.row;
    EXPECT_EQ(e.where().field, c.field) << c.row << ": " << e.what();
    EXPECT_EQ(e.where().column, c.column) << c.row << ": " << e.what();
  }
}

TEST(MeasuredTable, RefusesAWrongOrMissingHeader) {
  EXPECT_THROW(parse_measured_table("gpu,class,pass\n", "t.csv"), Error);
  EXPECT_THROW(parse_measured_table("# only comments\n", "t.csv"), Error);
  EXPECT_THROW(read_measured_table("/nonexistent/table.csv"), Error);
}

TEST(MeasuredTable, FormatReadsBackTheSameRows) {
  MeasuredKernel k;
  k.gpu = "a100-80gb-sxm";
  k.op_class = ir::SWIGLU;
  k.pass = Pass::kDgrad;
  k.dtype = scenario::FP16;
  k.shape = {4096, 11008};
  k.time_us = 123.456789012345;
  k.group = "llama, 7b";  // a comma in free text becomes a semicolon
  k.label = "act";
  MeasuredKernel empty = k;
  empty.time_us.reset();
  const std::string text = format_measured_table({k, empty}, {"source: a test"});
  const auto rows = parse_measured_table(text, "t.csv");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].op_class, k.op_class);
  EXPECT_EQ(rows[0].pass, k.pass);
  EXPECT_EQ(rows[0].dtype, k.dtype);
  EXPECT_EQ(rows[0].shape, k.shape);
  EXPECT_EQ(*rows[0].time_us, *k.time_us);  // exact: shortest round-trip digits
  EXPECT_EQ(rows[0].group, "llama; 7b");
  EXPECT_FALSE(rows[1].time_us.has_value());
  EXPECT_EQ(format_measured_table(rows, {"source: a test"}), text);
}

}  // namespace
}  // namespace lacuna::kernelfit
