# The GPU-campaign scripts' own checks (stdlib Python, no GPU, no torch):
# calib/device/kernel_bench_test.py. Included by the top-level CMakeLists.txt.
add_test(NAME calib_device_scripts COMMAND python3 ${CMAKE_SOURCE_DIR}/calib/device/kernel_bench_test.py)
set_tests_properties(calib_device_scripts PROPERTIES LABELS "quick" TIMEOUT 120)
