package testenv

import (
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestTopicName(t *testing.T) {
	tests := []struct {
		testName string
		want     string // regexp
	}{
		{"TestFoo", `^lt-TestFoo-[0-9a-f]{12}$`},
		{"TestFoo/sub_case#01", `^lt-TestFoo-sub-case-01-[0-9a-f]{12}$`},
		{"TestÜnïcode/✓ok", `^lt-Test-n-code-ok-[0-9a-f]{12}$`},
		{"///", `^lt-[0-9a-f]{12}$`},
		{"", `^lt-[0-9a-f]{12}$`},
		{strings.Repeat("a", 300), `^lt-a{100}-[0-9a-f]{12}$`},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			got, err := topicName(tt.testName)
			if err != nil {
				t.Fatal(err)
			}
			if !regexp.MustCompile(tt.want).MatchString(got) {
				t.Errorf("topicName(%q) = %q, want match for %s", tt.testName, got, tt.want)
			}
			if len(got) > 249 {
				t.Errorf("topicName(%q) is %d characters, Kafka allows 249", tt.testName, len(got))
			}
		})
	}
}

func TestWithDatabase(t *testing.T) {
	tests := []struct {
		name, dsn string
		want      string // expected database as pgx parses it
		wantErr   bool
	}{
		{name: "url", dsn: "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", want: "t_1"},
		{name: "postgresql url without path", dsn: "postgresql://u:p@h:1?sslmode=disable", want: "t_1"},
		{name: "url with dbname parameter", dsn: "postgres://u@h:1/postgres?dbname=other&sslmode=disable", want: "t_1"},
		{name: "keyword form", dsn: "host=127.0.0.1 port=5432 user=postgres dbname=postgres sslmode=disable", want: "t_1"},
		{name: "keyword form without dbname", dsn: "host=127.0.0.1 user=postgres", want: "t_1"},
		{name: "bad url", dsn: "postgres://u@h:notaport/x", wantErr: true},
		{name: "bad keyword form", dsn: "host='unterminated", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := withDatabase(tt.dsn, "t_1")
			if tt.wantErr {
				if err == nil {
					t.Fatalf("withDatabase(%q) = %q, want an error", tt.dsn, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("withDatabase(%q): %v", tt.dsn, err)
			}
			cfg, err := pgx.ParseConfig(got)
			if err != nil {
				t.Fatalf("result %q does not parse: %v", got, err)
			}
			if cfg.Database != tt.want {
				t.Errorf("withDatabase(%q) = %q, database %q, want %q", tt.dsn, got, cfg.Database, tt.want)
			}
			orig, err := pgx.ParseConfig(tt.dsn)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Host != orig.Host || cfg.Port != orig.Port || cfg.User != orig.User || cfg.Password != orig.Password {
				t.Errorf("withDatabase changed more than the database: %+v -> %+v", orig.Config, cfg.Config)
			}
		})
	}
}
