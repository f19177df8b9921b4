# The slow tier (cmake/LacunaTests.cmake, docs/testing.md#tiers): the
# GoogleTest cases that run whole scenario sets, full-rank 3,072-GPU
# simulations, golden outputs, search, sweep, MPI, calibrate or the closed
# loop. Every case not listed here is quick (60 s timeout, × 6 under the
# sanitizers). Times are measured: Release build, 2-core machine, ctest -j1,
# 2026-12-02 (docs/performance.md#build); each timeout is several times that.
#
#   lacuna_slow_test(BINARY GTEST_FILTER TIMEOUT_S [NOT_SANITIZED "why"])
#
# NOT_SANITIZED leaves the cases out of the ASan+UBSan build, where ctest
# lists them as "Not Run (Disabled)" and configure prints the reason. Filters
# of one binary must not overlap (a case would be registered twice).

# 118 s: compiles and simulates every shipped scenario, folded. The sanitizer
# build runs the ones under 2 s (simulate_e2e_test.cpp, left_to_the_release_build).
lacuna_slow_test(lacuna_tests "SimulateE2E.EveryShippedScenarioSimulatesFolded" 600)
# 36 s: the kernel shapes of every shipped scenario (llm/ and moe/ when sanitized).
lacuna_slow_test(lacuna_tests "KernelShapesE2E.RowsAreTheCompiledKernelsOfEveryShippedScenario" 300)
# 17 s: GPT-3 175B on 3,072 GPUs, full rank against folded.
lacuna_slow_test(lacuna_tests "SimulateE2E.Gpt3On3072GpusFoldedMatchesFullRank" 180)
# 7.7 s: golden hashes of the shipped scenarios' summaries.
lacuna_slow_test(lacuna_tests "GoldenOutputs.*" 120
                 NOT_SANITIZED "the golden hashes pin the Release build's floating-point arithmetic")
# 9.4 s, 8.1 s, 6.6 s, 3.4 s: span-trace diffs with replay, calibrate on the
# CPU, the closed loop (calibrate, simulate, execute, diff), several iterations.
lacuna_slow_test(lacuna_tests "DiffE2E.SpanTracesDiffAsTheirJsonAndASavedPredictionReplays" 120)
lacuna_slow_test(lacuna_tests "CalibrateE2E.*:CalibrationE2E.*:CalibrateFromTableE2E.*" 180)
lacuna_slow_test(lacuna_tests "ClosedLoop.*" 120)
lacuna_slow_test(lacuna_tests "IterationsE2E.SeveralIterationsReportEachAndTheSteadyStateMean" 60)
# Search and sweep end to end, with MPI processes when mpirun is there
# (SearchE2E 0.6 s, SweepE2E 1.2 s: slow by kind, as the issue defines it).
lacuna_slow_test(lacuna_tests "SearchE2E.*:SweepE2E.*" 120)
# 16 s: Optimus plans every shipped Optimus scenario (the 175B ones Release only).
lacuna_slow_test(lacuna_placement_tests "Optimus.ShippedScenariosKeepTheirDependencies" 180)
# 3.4 s: the search against brute force on a small space.
lacuna_slow_test(lacuna_search_tests "Search.EqualsBruteForceOnASmallSpace" 60)
