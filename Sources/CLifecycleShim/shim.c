int lc_placeholder(void) { return 0; }
