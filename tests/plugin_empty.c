/* tests/plugin_empty.c - a plugin whose entry point registers nothing, for
 * tapegrad gradcheck --plugin's refusal; with TG_PLUGIN_EMPTY_FAILS set it
 * fails instead, without setting a message. */
#include <stdlib.h>

int tapegrad_register(void);
int tapegrad_register(void) { return getenv("TG_PLUGIN_EMPTY_FAILS") ? -3 : 0; }
