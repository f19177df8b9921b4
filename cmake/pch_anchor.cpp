// The one source file of lacuna_pch and lacuna_test_pch
// (cmake/LacunaBuildSpeed.cmake): those targets exist to build the
// precompiled header that every other target reuses.
