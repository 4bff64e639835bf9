// Runs the IR text tests of tests/ir/: every file names its passes on a RUN line and holds
// `# -----` separated cases whose CHECK lines are matched (torch's FileCheck) against the printed
// result, or against "error: ..." when the case must fail. Every case's input must also print
// back to a fixed point.
#include <gtest/gtest.h>
#include <torch/csrc/jit/testing/file_check.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "graph/ir_text.h"
#include "graph/pass.h"

namespace pt2q {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> irFiles() {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(PT2Q_IR_TEST_DIR)) {
    if (e.path().extension() == ".ir") out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> runLinePasses(const std::string& text, const std::string& file) {
  const size_t at = text.find("# RUN:");
  EXPECT_NE(at, std::string::npos) << file << " has no '# RUN:' line";
  const std::string line = text.substr(at, text.find('\n', at) - at);
  std::vector<std::string> passes;
  const size_t p = line.find("--passes=");
  if (p == std::string::npos) return passes;
  std::stringstream list(line.substr(p + 9, line.find(' ', p) - p - 9));
  for (std::string f; std::getline(list, f, ',');) passes.push_back(f);
  return passes;
}

class IrFileTest : public ::testing::TestWithParam<std::string> {};

TEST_P(IrFileTest, CasesMatchTheirChecks) {
  std::ifstream in(GetParam());
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string text = buf.str();
  const std::vector<std::string> passes = runLinePasses(text, GetParam());
  const auto cases = splitTestCases(text);
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string& case_text = cases[i].first;
    SCOPED_TRACE(GetParam() + ":" + std::to_string(cases[i].second));
    if (case_text.find("CHECK") == std::string::npos) continue;  // the RUN header alone
    std::string result;
    try {
      auto graph = parseGraph(case_text, GetParam());
      const std::string printed = printGraph(*graph);
      EXPECT_EQ(printGraph(*parseGraph(printed, GetParam())), printed) << "printing is not a fixed point";
      runPasses(*graph, passes);
      result = printGraph(*graph);
    } catch (const c10::Error& e) {
      result = std::string("error: ") + e.what_without_backtrace();
    }
    try {
      torch::jit::testing::FileCheck().run(case_text, result);
    } catch (const std::exception& e) {
      ADD_FAILURE() << e.what() << "\n--- output ---\n" << result;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(IrFiles, IrFileTest, ::testing::ValuesIn(irFiles()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = fs::path(info.param).stem().string();
                           for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return name;
                         });

}  // namespace
}  // namespace pt2q
