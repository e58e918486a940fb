#include "folds/rng.hpp"
// Header-only generator; this unit keeps the target non-empty and checks the header compiles alone.
