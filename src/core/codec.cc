// placeholder, being written
#include "flurry/codec.h"
