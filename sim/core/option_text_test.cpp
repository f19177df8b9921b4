// Option references (option_text.h): spelled by the caller, neutral by
// default, and Error keeps them for the front end.
#include "sim/core/option_text.h"

#include <gtest/gtest.h>

#include "sim/core/error.h"

namespace lacuna {
namespace {

TEST(OptionText, TheCallerSpellsEveryReference) {
  const std::string text = "simulate every rank (without " + option_ref("fold") + "), or use " +
                           option_ref("network", "flow") + " with " + option_ref("j", "4");
  EXPECT_EQ(spell_options(text, cli_option), "simulate every rank (without --fold), or use --network flow with -j 4");
  EXPECT_EQ(neutral_options(text), "simulate every rank (without `fold`), or use `network flow` with `j 4`");
  const auto python = [](std::string_view name, std::string_view value) {
    return std::string(name) + "=" + (value.empty() ? std::string("True") : "'" + std::string(value) + "'");
  };
  EXPECT_EQ(spell_options(text, python), "simulate every rank (without fold=True), or use network='flow' with j='4'");
}

TEST(OptionText, TextWithoutReferencesOrAnUnclosedOneIsLeftAsWritten) {
  EXPECT_EQ(neutral_options("no options here"), "no options here");
  EXPECT_EQ(neutral_options(""), "");
  const std::string open = std::string("a ") + std::string(kOptionOpen) + "fold";
  EXPECT_EQ(neutral_options(open), open);
}

TEST(OptionText, ErrorsAreNeutralUntilAFrontEndSpellsThem) {
  const Error e(SourceLocation{option_ref("set", "parallel.tp=3"), 0, 0, {}}, "not a divisor",
                "drop " + option_ref("fold"));
  EXPECT_EQ(std::string(e.what()), "`set parallel.tp=3`: not a divisor (drop `fold`)");
  EXPECT_EQ(spell_options(e.raw(), cli_option), "--set parallel.tp=3: not a divisor (drop --fold)");
  // Errors combined from several keep their references.
  const Error all = Error::all_of({e, Error(SourceLocation{}, "second " + option_ref("ideal"))});
  EXPECT_NE(spell_options(all.raw(), cli_option).find("second --ideal"), std::string::npos);
  EXPECT_EQ(std::string(all.what()).find("--"), std::string::npos);
}

}  // namespace
}  // namespace lacuna
