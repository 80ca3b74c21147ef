/* The little JSON the usmc tool writes: its output is built with printf, and
 * strings from outside (process names, paths) go through here. */
#ifndef USMC_TOOL_JSON_H
#define USMC_TOOL_JSON_H

#include <stdio.h>

/* Writes s as a JSON string, quotes included. */
void json_string(FILE *f, const char *s);

#endif
