// placeholder, being written
#include "flurry/layout.h"
