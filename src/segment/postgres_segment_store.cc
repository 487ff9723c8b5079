#include "flurry/segment_store.h"
