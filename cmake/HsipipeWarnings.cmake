# Warnings as an INTERFACE target every hsipipe target links (HighFive's HighFiveWarnings pattern).
add_library(hsipipe_warnings INTERFACE)
add_library(hsipipe::warnings ALIAS hsipipe_warnings)
target_compile_options(hsipipe_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wcast-align -Woverloaded-virtual>)
if(HSIPIPE_WERROR)
  target_compile_options(hsipipe_warnings INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
endif()
