# Test tiers (docs/testing.md#tiers): every GoogleTest case is registered with
# CTest under one of two labels, with a timeout that fits it.
#
#   quick  every case not listed in tests/tiers.cmake; TIMEOUT
#          LACUNA_QUICK_TIMEOUT_S (60 s in Release). `tools/test --quick`.
#   slow   the cases tests/tiers.cmake lists (full-rank 3,072-GPU runs,
#          golden outputs, search, sweep, MPI, calibrate, the closed loop),
#          each with its own timeout.
#
# ns-3's QUICK / EXTENSIVE / TAKES_FOREVER are the model; here a case's tier
# sits in one table beside the tests rather than in each test, because
# GoogleTest has no per-case attributes. A case can be in one tier only:
# discovery runs the binary twice, with complementary --gtest_filter's.
#
# Sanitizer builds scale every timeout by LACUNA_TEST_TIMEOUT_SCALE and
# leave out (DISABLED, so ctest lists them as "Not Run") the cases that
# tests/tiers.cmake marks not-sanitized, printing why at configure time.

include(GoogleTest)

set(LACUNA_QUICK_TIMEOUT_S 60 CACHE STRING "CTest timeout of a quick test, in seconds, before scaling")
if(LACUNA_SANITIZE)
  set(LACUNA_TEST_TIMEOUT_SCALE 6 CACHE STRING "Factor on every test timeout (sanitizers slow code 2–10×)")
else()
  set(LACUNA_TEST_TIMEOUT_SCALE 1 CACHE STRING "Factor on every test timeout")
endif()

set_property(GLOBAL PROPERTY LACUNA_SLOW_TESTS "")

# lacuna_slow_test(BINARY FILTER TIMEOUT_S [NOT_SANITIZED "why"])
# FILTER is a --gtest_filter pattern (':'-separated). Called by tests/tiers.cmake.
function(lacuna_slow_test binary filter timeout_s)
  cmake_parse_arguments(S "" "NOT_SANITIZED" "" ${ARGN})
  set_property(GLOBAL APPEND PROPERTY LACUNA_SLOW_TESTS "${binary}|${filter}|${timeout_s}|${S_NOT_SANITIZED}")
endfunction()

# Registers the cases of a GoogleTest binary in their tiers.
function(lacuna_add_gtests target)
  math(EXPR quick_timeout "${LACUNA_QUICK_TIMEOUT_S} * ${LACUNA_TEST_TIMEOUT_SCALE}")
  get_property(slow GLOBAL PROPERTY LACUNA_SLOW_TESTS)
  set(slow_filters "")
  set(n 0)
  foreach(entry IN LISTS slow)
    string(REPLACE "|" ";" fields "${entry}")
    list(GET fields 0 binary)
    if(NOT binary STREQUAL target)
      continue()
    endif()
    list(GET fields 1 filter)
    list(GET fields 2 timeout_s)
    list(LENGTH fields nfields)
    set(why "")
    if(nfields GREATER 3)
      list(GET fields 3 why)
    endif()
    math(EXPR timeout "${timeout_s} * ${LACUNA_TEST_TIMEOUT_SCALE}")
    set(props LABELS slow TIMEOUT ${timeout})
    if(LACUNA_SANITIZE AND NOT why STREQUAL "")
      list(APPEND props DISABLED TRUE)
      message(STATUS "lacuna: not under sanitizers: ${target} ${filter}: ${why}")
    endif()
    gtest_discover_tests(${target} TEST_FILTER "${filter}" DISCOVERY_MODE PRE_TEST
                         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR} TEST_LIST ${target}_slow_${n}
                         PROPERTIES ${props})
    string(APPEND slow_filters ":${filter}")
    math(EXPR n "${n} + 1")
  endforeach()
  set(quick_filter "*")
  if(NOT slow_filters STREQUAL "")
    string(SUBSTRING "${slow_filters}" 1 -1 slow_filters)
    set(quick_filter "-${slow_filters}")
  endif()
  gtest_discover_tests(${target} TEST_FILTER "${quick_filter}" DISCOVERY_MODE PRE_TEST
                       WORKING_DIRECTORY ${CMAKE_SOURCE_DIR} TEST_LIST ${target}_quick
                       PROPERTIES LABELS quick TIMEOUT ${quick_timeout})
endfunction()
