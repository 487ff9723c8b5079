// placeholder, being written
#include "flurry/generator.h"
