// SegmentService: see include/flurry/segment_service.h. (Implementation follows.)
#include "flurry/segment_service.h"
