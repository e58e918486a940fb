# Script mode, run at every build by the hsipipe_version target (src/core/CMakeLists.txt): writes
# core/version.hpp with the current git commit. configure_file rewrites the file only when its content
# changes, so an unchanged commit recompiles nothing and a new one refreshes `hsipipe --version` and the
# manifests' commit (instead of the commit CMake was first configured at).
#   cmake -DSRC=<source dir> -DIN=<version.hpp.in> -DOUT=<version.hpp> -DVERSION=<x.y.z> -P HsipipeVersion.cmake
execute_process(COMMAND git rev-parse --short=12 HEAD
  WORKING_DIRECTORY ${SRC} OUTPUT_VARIABLE HSIPIPE_GIT_COMMIT OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT HSIPIPE_GIT_COMMIT)
  set(HSIPIPE_GIT_COMMIT unknown)
endif()
set(PROJECT_VERSION ${VERSION})
configure_file(${IN} ${OUT} @ONLY)
