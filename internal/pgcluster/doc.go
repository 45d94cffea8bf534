// Package pgcluster starts and stops a private PostgreSQL cluster on loopback: the
// demo's (a data directory kept across runs) and the test harness's (a throwaway
// one). It runs the machine's initdb and pg_ctl (PostgreSQL 15 under
// /usr/lib/postgresql/15/bin on Debian) or, without them, the binaries
// embedded-postgres fetches from Maven Central.
//
// Bounds: 127.0.0.1 only, trust authentication (nothing else can reach it),
// durability relaxed (fsync off). initdb refuses root, so a root caller runs the
// server tools as the "postgres" user. Start and Stop are bounded by their context
// and pg_ctl's timeouts, and a reaper (internal/reaper) stops the server if the
// process that started it dies without calling Stop.
package pgcluster
