# What makes the build fast (docs/performance.md#build): ccache, a fast
# linker, and one precompiled header shared by every target.

# ccache, when installed (tools/bootstrap installs it). Without this
# sloppiness ccache refuses translation units that use a precompiled header
# (ccache manual, "Precompiled headers"); it is safe here because no source
# uses __DATE__ or __TIME__. Checked: a deleted object that uses the PCH came
# back as a direct cache hit.
find_program(LACUNA_CCACHE ccache)
if(LACUNA_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  set(CMAKE_CXX_COMPILER_LAUNCHER ${CMAKE_COMMAND} -E env
      "CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime" ${LACUNA_CCACHE})
endif()

# A fast linker: mold, else lld. After an edit to a library every test
# binary that uses it relinks; the edit-compile-test loop of
# docs/performance.md#build (9 s to rebuild and relink) was measured with mold.
option(LACUNA_FAST_LINKER "Link with mold (or lld) when installed" ON)
if(LACUNA_FAST_LINKER)
  find_program(LACUNA_MOLD mold)
  find_program(LACUNA_LLD ld.lld)
  if(LACUNA_MOLD AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_GREATER_EQUAL 12.1)
    add_link_options(-fuse-ld=mold)
    message(STATUS "lacuna: linking with mold")
  elseif(LACUNA_LLD)
    add_link_options(-fuse-ld=lld)
    message(STATUS "lacuna: linking with lld")
  endif()
endif()

# One precompiled header (the generated protobuf headers, fmt, nlohmann/json
# and the standard library): 81 % of the translation units include a .pb.h,
# whose parse was about 60 % of a typical file's front end. lacuna_pch builds
# it once; every library reuses it (lacuna_use_pch), which needs compatible
# compile flags, hence one PCH per build, not per target. The tests get a
# second one that adds GoogleTest and GoogleMock, the CLI a third that adds
# CLI11 (25 of its 29 files include it).
option(LACUNA_PCH "Precompile the protobuf, fmt and standard headers" ON)
set(LACUNA_PCH_HEADERS
    <algorithm> <array> <cmath> <cstdint> <functional> <map> <memory> <optional> <set> <string>
    <string_view> <unordered_map> <utility> <variant> <vector>
    <fmt/format.h> <nlohmann/json.hpp>
    <sim/proto/scenario.pb.h> <sim/proto/program.pb.h> <sim/proto/calibration.pb.h>)

function(lacuna_define_pch name)
  cmake_parse_arguments(P "" "" "HEADERS;LIBS;OPTIONS" ${ARGN})
  if(NOT LACUNA_PCH)
    return()
  endif()
  add_library(${name} STATIC ${CMAKE_SOURCE_DIR}/cmake/pch_anchor.cpp)
  target_link_libraries(${name} PRIVATE ${P_LIBS})
  target_compile_options(${name} PRIVATE ${P_OPTIONS})
  target_precompile_headers(${name} PRIVATE ${LACUNA_PCH_HEADERS} ${P_HEADERS})
endfunction()

# Sets a source property to ON on the CUDA sources of `target` (those added
# before the call): nvcc takes neither a PCH nor a unity batch.
function(lacuna_set_on_cuda_sources target property)
  get_target_property(srcs ${target} SOURCES)
  foreach(s IN LISTS srcs)
    if(s MATCHES "\\.cu$")
      set_source_files_properties(${s} TARGET_DIRECTORY ${target} PROPERTIES ${property} ON)
    endif()
  endforeach()
endfunction()

# Makes `target` reuse the precompiled header of `pch` (lacuna_pch,
# lacuna_cli_pch or lacuna_test_pch).
function(lacuna_use_pch target pch)
  if(LACUNA_PCH)
    lacuna_set_on_cuda_sources(${target} SKIP_PRECOMPILE_HEADERS)
    target_precompile_headers(${target} REUSE_FROM ${pch})
  endif()
endfunction()

# Unity builds for the libraries and the CLI: CMake compiles each batch of
# LACUNA_UNITY_BATCH files as one translation unit, so the inline functions
# and templates they share (protobuf's, fmt's, CLI11's, the standard
# library's) are compiled once per batch instead of once per file. That is
# where most of a file's time went once the PCH had removed the parse: the
# CLI's 29 files took 160 s of CPU one by one and 43 s in batches of 8
# (docs/performance.md#build). The price is that an edit recompiles its
# batch, and that file-local names must be unique across a library (each
# file's anonymous namespace is shared with its batch). Tests build file by
# file: their helpers reuse names freely.
option(LACUNA_UNITY "Compile the libraries and the CLI in batches of files (CMake unity builds)" ON)
set(LACUNA_UNITY_BATCH 8 CACHE STRING "Files per unity batch")
function(lacuna_use_unity target)
  if(LACUNA_UNITY)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE ${LACUNA_UNITY_BATCH})
    lacuna_set_on_cuda_sources(${target} SKIP_UNITY_BUILD_INCLUSION)
  endif()
endfunction()
