// Options a library message points to, spelled by its caller. The library
// never writes a front end's syntax ("--fold" is the CLI's, fold=True would
// be a Python keyword's): it writes a reference, ‹fold› or ‹network
// analytic› (name, then an optional value), and whoever shows the message
// spells the references its own way (docs/architecture.md#option-names).
// Error::what() and every text that reaches no front end use the neutral
// spelling, `fold` and `network analytic`.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace lacuna {

// The reference markers (U+2039, U+203A), which no other message uses.
inline constexpr std::string_view kOptionOpen = "\u2039";
inline constexpr std::string_view kOptionClose = "\u203a";

// ‹name› or ‹name value›, for references built at run time.
std::string option_ref(std::string_view name, std::string_view value = {});
// A value as a message quotes it: whole up to `shown` bytes, else its start
// and its size ("aaaa… (40005 bytes)"), so that a huge value does not bury
// the error. option_ref quotes values so.
std::string abbreviate(std::string_view value, size_t shown = 120);

// How a front end writes option `name` with `value` (empty: a flag alone).
using OptionSpelling = std::function<std::string(std::string_view name, std::string_view value)>;

// `text` with every reference spelled by `spell`; a marker without its
// closing partner is left as written.
std::string spell_options(std::string_view text, const OptionSpelling& spell);

// The neutral spelling: `name` or `name value`, in backquotes.
std::string neutral_option(std::string_view name, std::string_view value);
std::string neutral_options(std::string_view text);

// The CLI's spelling: "--name" ("-n" for a one-letter name), then " value".
std::string cli_option(std::string_view name, std::string_view value);

}  // namespace lacuna
