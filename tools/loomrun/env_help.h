// `loomrun --help-env`: the table of environment variables (common/config.h,
// configKnobs()) as aligned text for a terminal, or as the Markdown document
// checked in as docs/environment.md (a test keeps the two equal).
#pragma once

#include <string>

namespace loom::launcher {

std::string envHelpText();
std::string envHelpMarkdown();

}  // namespace loom::launcher
