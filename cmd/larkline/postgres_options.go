package main

import (
	"github.com/larkline/larkline/internal/config"
	"github.com/larkline/larkline/internal/store"
)

// poolConfig maps the postgres section onto the store's pool options.
func poolConfig(cfg *config.Config) mapped[store.PoolConfig] {
	p := cfg.Postgres
	m, o := newMapped[store.PoolConfig]()
	set(m, &o.DSN, "postgres.dsn", p.DSN.Value())
	set(m, &o.MaxConns, "postgres.maxConns", p.MaxConns)
	set(m, &o.ConnectTimeout, "postgres.connectTimeout", p.ConnectTimeout)
	set(m, &o.AllowInsecure, "allowInsecure", cfg.AllowInsecure)
	return *m
}
