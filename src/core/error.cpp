#include "core/error.hpp"

#include <cstring>

namespace hsipipe {

FormatError::FormatError(const std::string& file, const std::string& field, const std::string& what)
    : Error(file + ": field '" + field + "': " + what), file_(file), field_(field) {}

IoError::IoError(const std::string& path, const std::string& op, int err)
    : Error(path + ": " + op + " failed: " + std::strerror(err)) {}

IoError::IoError(const std::string& path, const std::string& what) : Error(path + ": " + what) {}

}  // namespace hsipipe
