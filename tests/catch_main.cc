// The one Catch2 main, compiled once into a static library (catch.hpp's main is the slowest
// translation unit of the test build).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
