// printf-style formatting into std::string (g++ 12 has no std::format).
#pragma once

#include <cstdarg>
#include <string>

namespace loom {

std::string strprintf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string vstrprintf(const char* fmt, va_list args);

}  // namespace loom
