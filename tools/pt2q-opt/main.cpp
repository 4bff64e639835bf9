// pt2q-opt: reads IR text, runs registered passes, prints the result (mlir-opt's analogue).
//
//   pt2q-opt FILE|- [--passes=a,b] [--print-ir-after-all] [--split-input-file] [-o OUT] [--list-passes]
//
// FILE is IR text or a .pt2q graph file (recognized by its magic bytes). The result is printed,
// or written to OUT: a .pt2q file when OUT ends in .pt2q, IR text otherwise.
#include <c10/util/Exception.h>

#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "graph/ir_text.h"
#include "graph/pass.h"
#include "graph/serialize.h"

namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

int usage() {
  std::cerr << "usage: pt2q-opt FILE|- [--passes=a,b] [--print-ir-after-all] [--split-input-file] [-o OUT] "
               "[--list-passes]\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string file, out_path;
  std::vector<std::string> passes;
  bool print_after_all = false, split_input = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--passes=", 0) == 0) {
      passes = split(a.substr(9), ',');
    } else if (a == "--print-ir-after-all") {
      print_after_all = true;
    } else if (a == "--split-input-file") {
      split_input = true;
    } else if (a == "-o" && i + 1 < argc) {
      out_path = argv[++i];
    } else if (a == "--list-passes") {
      for (const pt2q::PassInfo* p : pt2q::defaultPassRegistry().all()) std::cout << p->flag << "\t" << p->summary << "\n";
      return 0;
    } else if (!a.empty() && a[0] == '-' && a != "-") {
      std::cerr << "pt2q-opt: unknown option " << a << "\n";
      return usage();
    } else if (file.empty()) {
      file = a;
    } else {
      return usage();
    }
  }
  if (file.empty()) return usage();
  std::stringstream buf;
  if (file == "-") {
    buf << std::cin.rdbuf();
  } else {
    std::ifstream in(file);
    if (!in) {
      std::cerr << "pt2q-opt: cannot read " << file << "\n";
      return 1;
    }
    buf << in.rdbuf();
  }
  const bool binary = buf.str().compare(0, 8, "PT2QGRPH") == 0;
  if (binary) split_input = false;
  const auto cases = split_input ? pt2q::splitTestCases(buf.str()) : std::vector<std::pair<std::string, int>>{{buf.str(), 1}};
  int status = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    if (i) std::cout << "# -----\n";
    try {
      // Keep line numbers in errors true to the file: pad with the lines before the case.
      auto graph = binary ? pt2q::deserializeGraph(cases[i].first, file)
                          : pt2q::parseGraph(std::string(cases[i].second - 1, '\n') + cases[i].first, file);
      pt2q::PassRunOptions options;
      if (print_after_all) options.print_after = &std::cout;
      pt2q::runPasses(*graph, passes, options);
      if (!out_path.empty()) {
        if (out_path.size() > 5 && out_path.compare(out_path.size() - 5, 5, ".pt2q") == 0) {
          pt2q::saveGraph(*graph, out_path);
        } else {
          std::ofstream(out_path) << pt2q::printGraph(*graph);
        }
      } else if (!print_after_all || passes.empty()) {
        std::cout << pt2q::printGraph(*graph);
      }
    } catch (const c10::Error& e) {
      std::cout << "error: " << e.what_without_backtrace() << "\n";
      std::cerr << "pt2q-opt: " << e.what_without_backtrace() << "\n";
      status = 1;
    }
  }
  return status;
}
