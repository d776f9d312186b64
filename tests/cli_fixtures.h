/* The inputs and outputs of the dcgan runs shared by test_cli_dcgan.c and
 * test_cli_ddp.c (compiled with tests/cli_fixtures.c). */
#ifndef TG_TESTS_CLI_FIXTURES_H
#define TG_TESTS_CLI_FIXTURES_H

#include <stdbool.h>
#include <stdint.h>

/* An IDX training set of n 28x28 images in th_tmp_dir. */
void write_train_set(uint32_t n);

/* Whether dir/name can be opened for reading. */
bool file_exists(const char *dir, const char *name);

#endif
