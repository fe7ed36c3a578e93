# Sanitizer builds apply to every target of the project (GoogleTest is linked as a system library).
if(LEAKBOUND_SANITIZE AND LEAKBOUND_TSAN)
  message(FATAL_ERROR "LEAKBOUND_SANITIZE and LEAKBOUND_TSAN cannot be combined; pick one build")
endif()
if(LEAKBOUND_SANITIZE)
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fsanitize=address,undefined>
                      $<$<COMPILE_LANGUAGE:CXX>:-fno-omit-frame-pointer>
                      $<$<COMPILE_LANGUAGE:CXX>:-fno-sanitize-recover=undefined>)
  add_link_options(-fsanitize=address,undefined)
endif()
if(LEAKBOUND_TSAN)
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fsanitize=thread> $<$<COMPILE_LANGUAGE:CXX>:-fno-omit-frame-pointer>)
  add_link_options(-fsanitize=thread)
endif()

# LEAKBOUND_FUZZ: coverage instrumentation, ASan and UBSan on every target, so that libFuzzer sees
# the branches of the libraries it drives; each fuzz target adds -fsanitize=fuzzer (libFuzzer's
# main) itself. Clang only; with another compiler the fuzz targets are skipped with a warning.
if(LEAKBOUND_FUZZ AND LEAKBOUND_TSAN)
  message(FATAL_ERROR "LEAKBOUND_FUZZ and LEAKBOUND_TSAN cannot be combined; pick one build")
endif()
if(LEAKBOUND_FUZZ AND CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fsanitize=fuzzer-no-link,address,undefined>
                      $<$<COMPILE_LANGUAGE:CXX>:-fno-omit-frame-pointer>
                      $<$<COMPILE_LANGUAGE:CXX>:-fno-sanitize-recover=undefined>)
  add_link_options(-fsanitize=address,undefined)
endif()
