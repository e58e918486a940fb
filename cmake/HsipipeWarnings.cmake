# Warnings as an INTERFACE target every hsipipe target links (HighFive's HighFiveWarnings pattern).
add_library(hsipipe_warnings INTERFACE)
add_library(hsipipe::warnings ALIAS hsipipe_warnings)
target_compile_options(hsipipe_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wcast-align -Woverloaded-virtual>)
if(HSIPIPE_WERROR)
  target_compile_options(hsipipe_warnings INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
endif()
# GCC 12 (Debian 12's compiler) warns -Wrestrict on `"x" + std::string` and string appends at -O2, inside
# libstdc++'s char_traits::copy: a false positive (GCC bugs 105329, 105651: a GCC 12 regression). Off for that
# compiler only, so that HSIPIPE_WERROR builds and real warnings are not lost among seven of these.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_GREATER_EQUAL 12
   AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(hsipipe_warnings INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Wno-restrict>)
endif()
