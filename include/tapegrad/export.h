/* tapegrad/export.h - symbol visibility.  The library is built with hidden
 * visibility; only declarations marked TG_API are exported. */
#ifndef TAPEGRAD_EXPORT_H
#define TAPEGRAD_EXPORT_H
#if defined(TG_BUILDING_LIBRARY) && defined(__GNUC__)
#define TG_API __attribute__((visibility("default")))
#else
#define TG_API
#endif
#endif
