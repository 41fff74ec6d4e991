int lc_placeholder(void);
