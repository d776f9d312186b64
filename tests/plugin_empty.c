/* tests/plugin_empty.c - a plugin whose entry point registers nothing, for
 * tapegrad gradcheck --plugin's refusal. */
int tapegrad_register(void);
int tapegrad_register(void) { return 0; }
