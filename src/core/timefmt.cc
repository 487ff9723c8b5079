// placeholder, being written
#include "flurry/timefmt.h"
