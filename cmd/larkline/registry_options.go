package main

import (
	"errors"

	"github.com/larkline/larkline/internal/config"
	"github.com/larkline/larkline/internal/options"
	"github.com/larkline/larkline/schemas"
)

// registryOptions: the schema registry client of the codecs.
func registryOptions(cfg *config.Config) mapped[schemas.RegistryOptions] {
	r := cfg.Schemas.Registry
	m, o := newMapped[schemas.RegistryOptions]()
	set(m, &o.URL, "schemas.registry.url", r.URL)
	set(m, &o.Username, "schemas.registry.username", r.Username)
	set(m, &o.Password, "schemas.registry.password", r.Password.Value())
	set(m, &o.BearerToken, "schemas.registry.bearerToken", r.BearerToken.Value())
	set(m, &o.CAFile, "schemas.registry.tls.caFile", r.TLS.CAFile)
	set(m, &o.CertFile, "schemas.registry.tls.certFile", r.TLS.CertFile)
	set(m, &o.KeyFile, "schemas.registry.tls.keyFile", r.TLS.KeyFile)
	set(m, &o.ServerName, "schemas.registry.tls.serverName", r.TLS.ServerName)
	set(m, &o.Timeout, "schemas.registry.timeout", r.Timeout)
	set(m, &o.AutoRegister, "schemas.autoRegister", cfg.Schemas.AutoRegister)
	return *m
}

// registryProblems carries schemas' own option problems (schemas lies below internal
// and cannot use internal/options) over into the options.Error every stage returns;
// any other error is returned as it is.
func registryProblems(err error) error {
	var re *schemas.RegistryOptionsError
	if !errors.As(err, &re) {
		return err
	}
	p := new(options.Problems)
	for _, rp := range re.Problems {
		p.Add(rp.Field, rp.Value, "%s", rp.Message)
	}
	return p.Err(schemas.ErrInvalidRegistryOptions)
}
