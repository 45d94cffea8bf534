package main

import (
	"testing"

	"github.com/larkline/larkline/internal/config"
	"github.com/larkline/larkline/internal/config/configtest"
)

// TestTransportRules (issue #29): larkline refuses to start with SASL PLAIN without
// TLS, an http:// model URL to a host that is not loopback, or a Postgres DSN to such
// a host with an sslmode below require, unless allowInsecure is set; loopback and TLS
// pass.
func TestTransportRules(t *testing.T) {
	type want = configtest.Want
	openAIReady := func(c *config.Config) {
		c.Synthesis.Synthesizer = config.SynthesizerOpenAI
		c.Synthesis.OpenAI.BaseURL, c.Synthesis.OpenAI.Model, c.Synthesis.OpenAI.APIKey = "https://llm.example/v1", "m", "k"
	}
	plain := func(c *config.Config) {
		c.Kafka.SASL = config.SASL{Mechanism: config.SASLPlain, Username: "u", Password: "p"}
	}
	model := func(url string) func(c *config.Config) {
		return func(c *config.Config) { openAIReady(c); c.Synthesis.OpenAI.BaseURL = url }
	}
	dsn := func(d string) func(c *config.Config) {
		return func(c *config.Config) { c.Postgres.DSN = config.Secret(d) }
	}
	tests := []struct {
		name   string
		mutate []func(*config.Config)
		want   []want
	}{
		{"sasl plain without tls", []func(*config.Config){plain},
			[]want{{"kafka.sasl.mechanism", "PLAIN without TLS"}}},
		{"sasl plain with tls", []func(*config.Config){plain, func(c *config.Config) { c.Kafka.TLS.Enabled = true }}, nil},
		{"model over http to another host", []func(*config.Config){model("http://llm.internal:8000/v1")},
			[]want{{"synthesis.openai.baseURL", "not loopback"}}},
		{"model over http on loopback", []func(*config.Config){model("http://127.0.0.1:8000/v1")}, nil},
		{"model over https", []func(*config.Config){model("https://llm.internal/v1")}, nil},
		{"postgres without sslmode to another host", []func(*config.Config){dsn("postgres://u@db.internal/x")},
			[]want{{"postgres.dsn", "sslmode below require"}}},
		{"postgres sslmode=prefer to another host", []func(*config.Config){dsn("postgres://u@db.internal/x?sslmode=prefer")},
			[]want{{"postgres.dsn", "sslmode below require"}}},
		{"postgres sslmode=require", []func(*config.Config){dsn("postgres://u@db.internal/x?sslmode=require")}, nil},
		{"postgres on loopback without tls", []func(*config.Config){dsn("postgres://u@127.0.0.1/x?sslmode=disable")}, nil},
		{"everything insecure, allowed", []func(*config.Config){plain, model("http://llm.internal/v1"), dsn("postgres://u@db.internal/x?sslmode=disable"),
			func(c *config.Config) { c.AllowInsecure = true }}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := config.Default()
			for _, m := range tc.mutate {
				m(c)
			}
			configtest.CheckProblems(t, validateConfig(c), tc.want)
		})
	}
}
