/* PLACEHOLDER while the codec is being written this session; replaced before commit. */
#include "codecs.h"
typedef int tl_placeholder_unit;
