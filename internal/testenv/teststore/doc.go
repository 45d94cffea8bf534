// Package teststore gives an integration test a larkline store on a fresh, migrated
// database of the real PostgreSQL server that testenv provides: pool, migrations and
// store in one call, closed at the test's cleanup.
//
//	st := teststore.New(t)                       // the store only
//	db := teststore.Open(t, teststore.MaxConns(12)) // db.Store, db.Pool, db.DSN
//
// It is a package of its own, not part of testenv, because internal/store's own tests
// use testenv: testenv importing the store would make an import cycle there.
//
// Bounds: one database and one pool (4 connections unless MaxConns says otherwise)
// per call; failures end the test with t.Fatal.
package teststore
