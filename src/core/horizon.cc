// placeholder, being written
#include "flurry/horizon.h"
