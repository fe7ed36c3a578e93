# leakbound as a dependency: leakbound::* ALIAS targets (add_subdirectory, FetchContent), and with
# LEAKBOUND_INSTALL the install rules, the exported targets, leakboundConfig.cmake (+ version file)
# for find_package(leakbound CONFIG) and leakbound.pc / leakbound-gtest.pc for pkg-config.
# Included once, at the end of the top-level CMakeLists.txt, after every target exists.

# The package: one line per target, "<target> <name>"; consumers see leakbound::<name>. A new
# library or tool that users link or run is added here and nowhere else; targets that are not
# part of this build (no GoogleTest, CLI off, not yet written) are skipped.
set(LEAKBOUND_PACKAGE_TARGETS
  "leakbound_runtime runtime"       # the reference tape runtime
  "leakbound_reports reports"       # report schema, JSON, Markdown, HTML, diff
  "leakbound_workloads workloads"   # clean workloads, traps, the leak zoo
  "leakbound_harness harness"       # Runner, probes, Judge, suite
  "leakbound_cupti cupti"           # CUPTI ledger and observer (in harness' link interface)
  "leakbound_heap heap"             # the exact host-heap interposer (shared)
  "leakbound_preload preload"       # the LD_PRELOAD library of `leakbound watch` (shared)
  "leakbound_nvtx_inject nvtx_inject"  # NVTX injection for `watch --step-range` (shared)
  "leakbound_inject cuda_inject"    # CUDA/CUPTI injection for `watch` on CUDA programs (shared)
  "leakbound_watch_step watch_step" # header-only step marker for programs under `leakbound watch`
  "leakbound_gtest gtest"           # EXPECT_LEAK_BOUND (when GoogleTest is found)
  "leakbound_warnings warnings"     # build-tree warning flags; empty once installed
  "leakbound cli"                   # the `leakbound` command
)

set(_lb_targets "")
foreach(_lb_entry IN LISTS LEAKBOUND_PACKAGE_TARGETS)
  separate_arguments(_lb_pair UNIX_COMMAND "${_lb_entry}")
  list(GET _lb_pair 0 _lb_target)
  list(GET _lb_pair 1 _lb_name)
  if(NOT TARGET ${_lb_target})
    continue()
  endif()
  list(APPEND _lb_targets ${_lb_target})
  set_target_properties(${_lb_target} PROPERTIES EXPORT_NAME ${_lb_name})
  get_target_property(_lb_type ${_lb_target} TYPE)
  if(_lb_type STREQUAL "EXECUTABLE")
    add_executable(leakbound::${_lb_name} ALIAS ${_lb_target})
  else()
    add_library(leakbound::${_lb_name} ALIAS ${_lb_target})
  endif()
endforeach()

if(NOT LEAKBOUND_INSTALL)
  return()
endif()

# `cmake --build B --target leakbound_package` builds what `cmake --install B` installs, and no test.
add_custom_target(leakbound_package)
add_dependencies(leakbound_package ${_lb_targets})

include(CMakePackageConfigHelpers)
set(LEAKBOUND_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/leakbound)

# Include directories: a plain path into this tree (`PUBLIC include`) cannot be exported, so it is
# wrapped in $<BUILD_INTERFACE:...> here, and every target gets $<INSTALL_INTERFACE:include>. The
# directories found this way are the public header trees, installed under include/.
set(_lb_header_dirs "")
foreach(_lb_target IN LISTS _lb_targets)
  get_target_property(_lb_dirs ${_lb_target} INTERFACE_INCLUDE_DIRECTORIES)
  if(NOT _lb_dirs)
    continue()
  endif()
  set(_lb_new_dirs "")
  foreach(_lb_dir IN LISTS _lb_dirs)
    if(_lb_dir MATCHES "^\\$<BUILD_INTERFACE:([^$<>]+)>$")
      set(_lb_path "${CMAKE_MATCH_1}")
    elseif(NOT _lb_dir MATCHES "\\$<" AND
           (_lb_dir MATCHES "^${PROJECT_SOURCE_DIR}/" OR _lb_dir MATCHES "^${PROJECT_BINARY_DIR}/"))
      set(_lb_path "${_lb_dir}")
      set(_lb_dir "$<BUILD_INTERFACE:${_lb_dir}>")
    else()
      set(_lb_path "")
    endif()
    if(_lb_path MATCHES "^${PROJECT_SOURCE_DIR}/")
      list(APPEND _lb_header_dirs "${_lb_path}")
    endif()
    list(APPEND _lb_new_dirs "${_lb_dir}")
  endforeach()
  list(APPEND _lb_new_dirs "$<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>")
  list(REMOVE_DUPLICATES _lb_new_dirs)
  set_property(TARGET ${_lb_target} PROPERTY INTERFACE_INCLUDE_DIRECTORIES "${_lb_new_dirs}")
endforeach()
list(REMOVE_DUPLICATES _lb_header_dirs)
foreach(_lb_dir IN LISTS _lb_header_dirs)
  install(DIRECTORY "${_lb_dir}/" DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
          FILES_MATCHING PATTERN "*.h" PATTERN "*.hpp" PATTERN "*.cuh")
endforeach()

# RPATH. The shared libraries get none: each needs only the system's libraries (libc,
# libstdc++). The executable is built with its install RPATH: $ORIGIN/../lib (where the installed
# CLI finds libleakbound_heap.so), the build tree's $ORIGIN-relative folders of the package's
# shared libraries (absent once installed) and the folders outside the project it links from
# (CUDA's, OpenBLAS's). Either way no RUNPATH is left for CMake to rewrite at install, which it
# makes room for with empty entries (the preload's was ":::::::", `leakbound`'s ended in ":"),
# and the loader reads an empty entry as the current directory: the build tree's `leakbound`
# opened libz.so.1, libdw.so.1 and libc.so.6 relative to wherever it was run. Consumers'
# executables get the imported library's directory from CMake's build RPATH.
file(RELATIVE_PATH _lb_bin_to_lib "${CMAKE_INSTALL_FULL_BINDIR}" "${CMAKE_INSTALL_FULL_LIBDIR}")
foreach(_lb_target IN LISTS _lb_targets)
  get_target_property(_lb_type ${_lb_target} TYPE)
  if(_lb_type STREQUAL "EXECUTABLE")
    set(_lb_rpath "$ORIGIN/${_lb_bin_to_lib}")
    get_target_property(_lb_from ${_lb_target} BINARY_DIR)
    foreach(_lb_other IN LISTS _lb_targets)
      get_target_property(_lb_other_type ${_lb_other} TYPE)
      if(_lb_other_type MATCHES "SHARED_LIBRARY|MODULE_LIBRARY")
        get_target_property(_lb_to ${_lb_other} BINARY_DIR)
        file(RELATIVE_PATH _lb_rel "${_lb_from}" "${_lb_to}")
        list(APPEND _lb_rpath "$ORIGIN/${_lb_rel}")
      endif()
    endforeach()
    list(REMOVE_DUPLICATES _lb_rpath)
    set_target_properties(${_lb_target} PROPERTIES INSTALL_RPATH "${_lb_rpath}"
                          BUILD_WITH_INSTALL_RPATH ON INSTALL_RPATH_USE_LINK_PATH ON)
  endif()
endforeach()

install(TARGETS ${_lb_targets} EXPORT leakboundTargets
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT leakboundTargets NAMESPACE leakbound:: DESTINATION ${LEAKBOUND_CMAKE_DIR})

# `leakbound watch`'s Python folder (the `leakbound` module, the sitecustomize that --step-on puts
# on PYTHONPATH), where the installed CLI looks for it: <prefix>/share/leakbound/python (next to
# <prefix>/bin, as <build>/watch/python is next to <build>/harness). Until 2026-12-07 it was not
# installed, and an installed `leakbound watch --step-on` marked no step.
if(TARGET leakbound_watch_python AND TARGET leakbound)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/watch/python/leakbound
                    ${PROJECT_SOURCE_DIR}/watch/python/sitecustomize
          DESTINATION ${CMAKE_INSTALL_DATADIR}/leakbound/python
          FILES_MATCHING PATTERN "*.py")
  # Compiled where installed, as in the build tree (watch/python/CMakeLists.txt): an installed
  # folder is often one the user running a program cannot write.
  find_package(Python3 COMPONENTS Interpreter QUIET)
  if(Python3_Interpreter_FOUND)
    # The prefix as `cmake --install --prefix` gives it, read when installing.
    if(IS_ABSOLUTE "${CMAKE_INSTALL_DATADIR}")
      set(_lb_python_dir "${CMAKE_INSTALL_DATADIR}/leakbound/python")
    else()
      set(_lb_python_dir "\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_DATADIR}/leakbound/python")
    endif()
    install(CODE "execute_process(COMMAND \"${Python3_EXECUTABLE}\" -m compileall -q
                    -d \"${_lb_python_dir}\" \"\$ENV{DESTDIR}${_lb_python_dir}\"
                    RESULT_VARIABLE _lb_compiled)
                  if(NOT _lb_compiled EQUAL 0)
                    message(WARNING \"leakbound: the Python folder was not compiled to bytecode \"
                                    \"(\${_lb_compiled}); watched Python processes compile it \"
                                    \"each time where they cannot write __pycache__\")
                  endif()
                  file(GLOB_RECURSE _lb_bytecode \"\$ENV{DESTDIR}${_lb_python_dir}/*.pyc\")
                  list(APPEND CMAKE_INSTALL_MANIFEST_FILES \${_lb_bytecode})")
  endif()
endif()
# The installed CLI looks for the libraries and that folder relative to itself: the same layout
# (another CMAKE_INSTALL_LIBDIR or DATADIR, a deeper BINDIR) is compiled into the watcher.
if(TARGET leakbound_watcher)
  file(RELATIVE_PATH _lb_lib_from_bin "${CMAKE_INSTALL_FULL_BINDIR}" "${CMAKE_INSTALL_FULL_LIBDIR}")
  file(RELATIVE_PATH _lb_python_from_bin "${CMAKE_INSTALL_FULL_BINDIR}"
       "${CMAKE_INSTALL_FULL_DATADIR}/leakbound/python")
  target_compile_definitions(leakbound_watcher PRIVATE
    LEAKBOUND_LIB_FROM_BIN="${_lb_lib_from_bin}"
    LEAKBOUND_PYTHON_FROM_BIN="${_lb_python_from_bin}")
endif()

# What the config file must find again: whatever the exported link interface names.
set(LEAKBOUND_CONFIG_HAVE_CUDA ${LEAKBOUND_HAVE_CUDA})
if(TARGET leakbound_gtest)
  set(LEAKBOUND_CONFIG_HAVE_GTEST ON)
else()
  set(LEAKBOUND_CONFIG_HAVE_GTEST OFF)
endif()
set(LEAKBOUND_CONFIG_TARGETS "")
foreach(_lb_target IN LISTS _lb_targets)
  get_target_property(_lb_name ${_lb_target} EXPORT_NAME)
  list(APPEND LEAKBOUND_CONFIG_TARGETS leakbound::${_lb_name})
endforeach()
list(JOIN LEAKBOUND_CONFIG_TARGETS " " LEAKBOUND_CONFIG_TARGETS)

# The same config serves the install tree and the build tree (-Dleakbound_DIR=<build dir>): it
# locates nothing by prefix, the targets file does.
configure_file(${CMAKE_CURRENT_LIST_DIR}/leakboundConfig.cmake.in
               ${PROJECT_BINARY_DIR}/leakboundConfig.cmake @ONLY)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/leakboundConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/leakboundConfig.cmake
              ${PROJECT_BINARY_DIR}/leakboundConfigVersion.cmake
        DESTINATION ${LEAKBOUND_CMAKE_DIR})
export(EXPORT leakboundTargets NAMESPACE leakbound::
       FILE ${PROJECT_BINARY_DIR}/leakboundTargets.cmake)

# pkg-config: leakbound (runtime, reports, workloads, harness) and leakbound-gtest. The libraries
# are static (but the heap interposer), so their dependencies are public in the .pc file.
file(RELATIVE_PATH LEAKBOUND_PC_TO_PREFIX "${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig"
     "${CMAKE_INSTALL_PREFIX}")
string(REGEX REPLACE "/$" "" LEAKBOUND_PC_TO_PREFIX "${LEAKBOUND_PC_TO_PREFIX}")
set(LEAKBOUND_PC_CFLAGS "")
set(LEAKBOUND_PC_LIBS "")
if(LEAKBOUND_HAVE_CUDA)
  string(APPEND LEAKBOUND_PC_CFLAGS " -DLEAKBOUND_HAVE_CUDA=1 -I${CUDAToolkit_INCLUDE_DIRS}")
  string(APPEND LEAKBOUND_PC_LIBS " -L${CUDAToolkit_LIBRARY_DIR} -lcudart")
endif()
if(LEAKBOUND_HAVE_CUPTI)
  string(APPEND LEAKBOUND_PC_CFLAGS " -DLEAKBOUND_HAVE_CUPTI=1")
endif()
configure_file(${CMAKE_CURRENT_LIST_DIR}/leakbound.pc.in ${PROJECT_BINARY_DIR}/leakbound.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/leakbound.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
if(TARGET leakbound_gtest)
  configure_file(${CMAKE_CURRENT_LIST_DIR}/leakbound-gtest.pc.in
                 ${PROJECT_BINARY_DIR}/leakbound-gtest.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/leakbound-gtest.pc
          DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endif()

# Debian package of the same install tree: `cpack -G DEB --config <build>/CPackConfig.cmake`
# (ci/consumer.sh builds it and the example against its contents).
set(CPACK_PACKAGE_NAME leakbound)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "Memory-leak stress harness for eager ML runtimes, with a reference tape runtime")
set(CPACK_PACKAGE_CONTACT "leakbound maintainers")
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
# What the exported link interface and the headers need (CUDA builds also need the toolkit).
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libopenblas-dev, nlohmann-json3-dev, pkg-config")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "libgtest-dev")
include(CPack)
