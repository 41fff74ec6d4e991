// SQLite, for the daemon's saved state: per-app rows, written in one
// transaction per change, so that a step costs the records it touched.
#include <sqlite3.h>
