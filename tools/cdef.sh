#!/bin/sh
# cdef.sh KWB_H OUT: the declarations of core/kwb.h as LuaJIT's ffi.cdef reads
# them: the lines between the include guard, without the #include lines (the
# types they bring, LuaJIT knows).
set -e
sed -n '/^#define KWB_H$/,/^#endif$/p' "$1" | sed -e '1d' -e '$d' -e '/^#include/d' >"$2"
