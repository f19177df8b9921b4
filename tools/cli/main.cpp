// Placeholder entry point while the CLI is being written (replaced by the CLI helper).
#include <cstdio>
int main() { std::puts("lacuna: under construction"); return 1; }
