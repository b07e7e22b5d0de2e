// File: openlake/export.h
//
// OL_EXPORT marks the symbols of libopenlake's public API. The library is built with
// hidden visibility, so anything an embedder calls must carry it.
#pragma once

#if defined(OPENLAKE_BUILDING_LIBRARY)
#define OL_EXPORT __attribute__((visibility("default")))
#else
#define OL_EXPORT
#endif
