package config_test

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/larkline/larkline/internal/config"
	"github.com/larkline/larkline/internal/config/configtest"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadYAML(t *testing.T) {
	tests := []struct {
		name  string
		yaml  string
		check func(t *testing.T, c *config.Config)
		want  []want // problems; empty means Load succeeds
	}{
		{name: "empty file keeps defaults", yaml: "",
			check: func(t *testing.T, c *config.Config) { sameAsDefault(t, c) }},
		{name: "comments only keep defaults", yaml: "# nothing here\n",
			check: func(t *testing.T, c *config.Config) { sameAsDefault(t, c) }},
		{name: "empty sections keep defaults", yaml: "kafka:\nservices:\n  workspace:\n",
			check: func(t *testing.T, c *config.Config) { sameAsDefault(t, c) }},
		{name: "every kind of value parses", yaml: `
services:
  workspace:
    timeline:
      lark:
        enabled: true
        eventIngestionEnabled: false
        synthesisWindow: 15m
        synthesisWindowCloseGrace: 90s
        evidenceBatchLimit: 25
        workspaceTypes: [incident, major-incident]
kafka:
  brokers:
    - k1:9092
    - k2:9092
  partitions: 24
  replicationFactor: 2
  producer:
    linger: 0s
  saramaVersion: "4.0.0"
lark:
  appID: 12345
  api:
    requestsPerSecond: 2.5
http:
  apiTokens:
    - name: ci
      sha256: ` + hashA + `
      workspaces: ["*"]
    - name: team
      sha256: ` + hashB + `
      workspaces: [ws-1, ws-2]
`, want: []want{{"lark.appID", "starts with cli_"}}},
		{name: "values land in fields", yaml: `
services: {workspace: {timeline: {lark: {synthesisWindow: 15m, synthesisWindowCloseGrace: 90s, workspaceTypes: [incident, major]}}}}
kafka: {brokers: [k1:9092, k2:9092], partitions: 24, replicationFactor: 2, producer: {linger: 0s}}
lark: {appID: cli_1, api: {requestsPerSecond: 2.5}}
http:
  apiTokens:
    - {name: ci, sha256: ` + hashA + `, workspaces: ["*"]}
`, check: func(t *testing.T, c *config.Config) {
			l := c.Services.Workspace.Timeline.Lark
			eq(t, "synthesisWindow", l.SynthesisWindow, 15*time.Minute)
			eq(t, "synthesisWindowCloseGrace", l.SynthesisWindowCloseGrace, 90*time.Second)
			eq(t, "workspaceTypes", l.WorkspaceTypes, []string{"incident", "major"})
			eq(t, "brokers", c.Kafka.Brokers, []string{"k1:9092", "k2:9092"})
			eq(t, "partitions", c.Kafka.Partitions, int32(24))
			eq(t, "replicationFactor", c.Kafka.ReplicationFactor, int16(2))
			eq(t, "linger", c.Kafka.Producer.Linger, time.Duration(0))
			eq(t, "appID", c.Lark.AppID, "cli_1")
			eq(t, "requestsPerSecond", c.Lark.API.RequestsPerSecond, 2.5)
			eq(t, "apiTokens", c.HTTP.APITokens, []config.APIToken{{Name: "ci", SHA256: hashA, Workspaces: []string{"*"}}})
			eq(t, "untouched default", c.Kafka.ClientID, "larkline")
		}},
		{name: "aliases resolve to their anchor", yaml: "kafka:\n  consumer:\n    sessionTimeout: &t 30s\n    rebalanceTimeout: *t\n",
			check: func(t *testing.T, c *config.Config) {
				eq(t, "rebalanceTimeout", c.Kafka.Consumer.RebalanceTimeout, 30*time.Second)
			}},
		{name: "unknown key with a near spelling", yaml: "services:\n  workspace:\n    timeline:\n      lark:\n        synthesisWindw: 10m\n",
			want: []want{{tl + "synthesisWindw", `did you mean "synthesisWindow"?`}}},
		{name: "unknown key in wrong case", yaml: "kafka:\n  clientId: x\n",
			want: []want{{"kafka.clientId", `did you mean "clientID"?`}}},
		{name: "key at the wrong level", yaml: "kafka:\n  compression: zstd\n",
			want: []want{{"kafka.compression", "a key of that name is at kafka.producer.compression"}}},
		{name: "unknown key lists the known ones", yaml: "postgres:\n  hostname: db\n",
			want: []want{{"postgres.hostname", "known keys here: dsn, dsnFile, maxConns, connectTimeout"}}},
		{name: "unknown top-level key", yaml: "kafak:\n  brokers: [a:1]\n",
			want: []want{{"kafak", `did you mean "kafka"?`}}},
		{name: "unknown key in a list item", yaml: "http:\n  apiTokens:\n    - {name: a, sha: x, workspaces: ['*']}\n",
			want: []want{{"http.apiTokens[0].sha", `did you mean "sha256"?`}, {"http.apiTokens[0].sha256", "64 lower-case hex"}}},
		{name: "key set twice", yaml: "log:\n  level: info\n  level: debug\n",
			want: []want{{"log.level", "set twice (first on line 2)"}}},
		{name: "bad duration names file and line", yaml: "kafka:\n  producer:\n    linger: 5 ms\n",
			want: []want{{"kafka.producer.linger", `= "5 ms" (` /* then the file */}}},
		{name: "duration without unit", yaml: "postgres:\n  connectTimeout: 10\n",
			want: []want{{"postgres.connectTimeout", "Go duration such as"}}},
		{name: "bool must be true or false", yaml: "kafka:\n  producer:\n    idempotent: yes\n",
			want: []want{{"kafka.producer.idempotent", "must be true or false"}}},
		{name: "integer with fraction", yaml: "kafka:\n  partitions: 12.5\n",
			want: []want{{"kafka.partitions", "whole number"}}},
		{name: "int32 out of range", yaml: "kafka:\n  partitions: 3000000000\n",
			want: []want{{"kafka.partitions", "out of range (at most 2147483647)"}}},
		{name: "int16 out of range", yaml: "kafka:\n  replicationFactor: 40000\n",
			want: []want{{"kafka.replicationFactor", "out of range (at most 32767)"}}},
		{name: "number not a number", yaml: "lark:\n  api:\n    requestsPerSecond: fast\n",
			want: []want{{"lark.api.requestsPerSecond", "must be a number"}}},
		{name: "list where a value belongs", yaml: "log:\n  level: [info]\n",
			want: []want{{"log.level", "must be a single string, not a list"}}},
		{name: "value where a list belongs", yaml: "kafka:\n  brokers: a:9092\n",
			want: []want{{"kafka.brokers", "must be a list of strings"}}},
		{name: "empty list item", yaml: "kafka:\n  brokers: [a:9092, '']\n",
			want: []want{{"kafka.brokers[1]", "non-empty string"}}},
		{name: "value where a section belongs", yaml: "kafka: 5\n",
			want: []want{{"kafka", "must be a mapping of keys, not a single value"}}},
		{name: "top level not a mapping", yaml: "- a\n- b\n",
			want: []want{{"the top level", "must be a mapping"}}},
		{name: "list item not a mapping", yaml: "http:\n  apiTokens: [abc]\n",
			want: []want{{"http.apiTokens[0]", "must be a mapping of keys"}}},
		{name: "null duration has no value", yaml: "kafka:\n  producer:\n    linger:\n",
			want: []want{{"kafka.producer.linger", "has no value; want a duration"}}},
		{name: "null string and list are empty", yaml: "lark:\n  botOpenID:\nhttp:\n  apiTokens:\n",
			check: func(t *testing.T, c *config.Config) {
				eq(t, "botOpenID", c.Lark.BotOpenID, "")
				eq(t, "apiTokens", len(c.HTTP.APITokens), 0)
			}},
		{name: "merge keys are refused", yaml: "base: &b {level: info}\nlog:\n  <<: *b\n",
			want: []want{{"base", "unknown key"}, {"log", "merge key"}}},
		{name: "two documents are refused", yaml: "log: {level: info}\n---\nlog: {level: debug}\n",
			want: []want{{"larkline.yaml", "exactly one YAML document"}}},
		{name: "syntax error", yaml: "log:\n  level: info\n   format: json\n",
			want: []want{{"larkline.yaml", "is not valid YAML"}}},
		{name: "parse and validation problems together", yaml: `
services: {workspace: {timeline: {lark: {environment: Prod, synthesisScanInterval: soon}}}}
kafka: {partitions: 0}
`, want: []want{
			{tl + "environment", "lower-case"},
			{tl + "synthesisScanInterval", "Go duration"},
			{"kafka.partitions", "at least 1"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, "larkline.yaml", tt.yaml)
			c, err := config.Load(path, nil)
			if len(tt.want) > 0 && c != nil {
				t.Errorf("Load returned a config with error %v", err)
			}
			if len(tt.want) > 0 {
				// Problem paths for file-level problems are the file name.
				for i := range tt.want {
					if tt.want[i][0] == "larkline.yaml" {
						tt.want[i][0] = path
					}
				}
			}
			configtest.CheckProblems(t, err, tt.want)
			if err == nil && tt.check != nil {
				tt.check(t, c)
			}
		})
	}
}

func TestLoadReportsWhereValuesCameFrom(t *testing.T) {
	path := writeFile(t, "larkline.yaml", "kafka:\n  producer:\n    linger: 5 ms\nservices:\n  workspace:\n    timeline:\n      lark:\n        environment: Prod\n")
	_, err := config.Load(path, nil)
	var cerr *config.Error
	if !errors.As(err, &cerr) || len(cerr.Problems) != 2 {
		t.Fatalf("Load = %v", err)
	}
	if got, want := cerr.Problems[0].Source, path+":3"; got != want {
		t.Errorf("parse problem source = %q, want %q", got, want)
	}
	if got, want := cerr.Problems[1].Source, path+":8"; got != want {
		t.Errorf("validation problem source = %q, want %q", got, want)
	}

	c, err := config.Load(writeFile(t, "ok.yaml", "log:\n  level: debug\n"), []string{"LARKLINE_LOG__FORMAT=text"})
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		"log.level":              "ok.yaml:2",
		"log.format":             "env LARKLINE_LOG__FORMAT",
		"kafka.partitions":       "default",
		"kafka.brokers[0]":       "default",
		"http.apiTokens[0].name": "default",
	} {
		if got := c.Origin(path); !strings.HasSuffix(got, want) {
			t.Errorf("Origin(%s) = %q, want suffix %q", path, got, want)
		}
	}
	if got := config.Default().Origin("log.level"); got != "" {
		t.Errorf("Origin on a Config not from Load = %q, want empty", got)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := config.Load(filepath.Join(t.TempDir(), "absent.yaml"), nil)
	if !errors.Is(err, fs.ErrNotExist) || errors.Is(err, config.ErrInvalid) {
		t.Fatalf("Load(absent) = %v, want fs.ErrNotExist and not ErrInvalid", err)
	}
}

func TestLoadWithoutFile(t *testing.T) {
	c, err := config.Load("", []string{"LARKLINE_LOG__LEVEL=warn"})
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "log.level", c.Log.Level, "warn")
}

func TestLoadEnv(t *testing.T) {
	file := "kafka:\n  brokers: [file:9092]\n  partitions: 6\n"
	tests := []struct {
		name  string
		env   []string
		check func(t *testing.T, c *config.Config)
		want  []want
	}{
		{name: "duration deep in the design block",
			env: []string{"LARKLINE_SERVICES__WORKSPACE__TIMELINE__LARK__SYNTHESISWINDOW=15m"},
			check: func(t *testing.T, c *config.Config) {
				eq(t, "synthesisWindow", c.Services.Workspace.Timeline.Lark.SynthesisWindow, 15*time.Minute)
			}},
		{name: "env beats the file; the file beats defaults",
			env: []string{"LARKLINE_KAFKA__BROKERS=a:9092, b:9092"},
			check: func(t *testing.T, c *config.Config) {
				eq(t, "brokers", c.Kafka.Brokers, []string{"a:9092", "b:9092"})
				eq(t, "partitions", c.Kafka.Partitions, int32(6))
			}},
		{name: "empty list",
			env: []string{"LARKLINE_SERVICES__WORKSPACE__TIMELINE__LARK__WORKSPACETYPES="},
			check: func(t *testing.T, c *config.Config) {
				eq(t, "workspaceTypes", len(c.Services.Workspace.Timeline.Lark.WorkspaceTypes), 0)
			}},
		{name: "list with an empty item",
			env:  []string{"LARKLINE_KAFKA__BROKERS=a:9092,,b:9092"},
			want: []want{{"kafka.brokers", "item 2 is empty"}}},
		{name: "list of mappings as YAML flow",
			env: []string{`LARKLINE_HTTP__APITOKENS=[{name: ci, sha256: ` + hashA + `, workspaces: ["*"]}]`},
			check: func(t *testing.T, c *config.Config) {
				eq(t, "apiTokens", c.HTTP.APITokens, []config.APIToken{{Name: "ci", SHA256: hashA, Workspaces: []string{"*"}}})
			}},
		{name: "list of mappings as JSON",
			env: []string{`LARKLINE_HTTP__APITOKENS=[{"name":"ci","sha256":"` + hashA + `","workspaces":["ws-1"]}]`},
			check: func(t *testing.T, c *config.Config) {
				eq(t, "apiTokens", c.HTTP.APITokens, []config.APIToken{{Name: "ci", SHA256: hashA, Workspaces: []string{"ws-1"}}})
			}},
		{name: "list of mappings emptied",
			env:   []string{`LARKLINE_HTTP__APITOKENS=`},
			check: func(t *testing.T, c *config.Config) { eq(t, "apiTokens", len(c.HTTP.APITokens), 0) }},
		{name: "list of mappings malformed",
			env:  []string{`LARKLINE_HTTP__APITOKENS=[{name: ci`},
			want: []want{{"http.apiTokens", "YAML or JSON list of mappings"}}},
		{name: "list of mappings with a bad key",
			env:  []string{`LARKLINE_HTTP__APITOKENS=[{name: ci, hash: x, workspaces: ["*"]}]`},
			want: []want{{"http.apiTokens[0].hash", "unknown key"}, {"http.apiTokens[0].sha256", "64 lower-case hex"}}},
		{name: "bool", env: []string{"LARKLINE_KAFKA__TLS__ENABLED=true"},
			check: func(t *testing.T, c *config.Config) { eq(t, "tls.enabled", c.Kafka.TLS.Enabled, true) }},
		{name: "bad bool", env: []string{"LARKLINE_KAFKA__TLS__ENABLED=on"},
			want: []want{{"kafka.tls.enabled", "true or false"}}},
		{name: "bad duration", env: []string{"LARKLINE_KAFKA__PRODUCER__LINGER=5x"},
			want: []want{{"kafka.producer.linger", `= "5x" (env LARKLINE_KAFKA__PRODUCER__LINGER)`}}},
		{name: "validation sees env values", env: []string{"LARKLINE_LARK__API__PAGESIZE=0"},
			want: []want{{"lark.api.pageSize", "(env LARKLINE_LARK__API__PAGESIZE): must be at least 1"}}},
		{name: "single underscore", env: []string{"LARKLINE_KAFKA_BROKERS=a:9092"},
			want: []want{{"LARKLINE_KAFKA_BROKERS", "did you mean LARKLINE_KAFKA__BROKERS?"}}},
		{name: "lower case name", env: []string{"larkline_kafka__brokers=a:9092"},
			want: []want{{"larkline_kafka__brokers", "did you mean LARKLINE_KAFKA__BROKERS?"}}},
		{name: "path left out", env: []string{"LARKLINE_SYNTHESISWINDOW=5m"},
			want: []want{{"LARKLINE_SYNTHESISWINDOW", "did you mean LARKLINE_SERVICES__WORKSPACE__TIMELINE__LARK__SYNTHESISWINDOW?"}}},
		{name: "nothing like it", env: []string{"LARKLINE_COLOUR_SCHEME=dark"},
			want: []want{{"LARKLINE_COLOUR_SCHEME", "names no configuration key"}}},
		{name: "a section", env: []string{"LARKLINE_KAFKA__TLS=true"},
			want: []want{{"kafka.tls", "names a section, not a key; set its keys, such as LARKLINE_KAFKA__TLS__ENABLED"}}},
		{name: "reserved and foreign variables are ignored",
			env: []string{"LARKLINE_CONFIG=/etc/larkline.yaml", "LARKLINE_TEST_KAFKA_BROKERS=127.0.0.1:39092", "PATH=/bin", "KAFKA_BROKERS=x", "NOEQUALS",
				// Kubernetes service links of a Service named larkline.
				"LARKLINE_SERVICE_HOST=10.0.0.7", "LARKLINE_SERVICE_PORT=8080", "LARKLINE_PORT=tcp://10.0.0.7:8080",
				"LARKLINE_PORT_8080_TCP_ADDR=10.0.0.7",
				// The broker and registry scripts' own variables.
				"LARKLINE_KAFKA_JARS=/cache/kafka", "LARKLINE_REGISTRY_JARS=/cache/registry", "LARKLINE_KAFKA_HEAP=1g"},
			check: func(t *testing.T, c *config.Config) { eq(t, "brokers", c.Kafka.Brokers, []string{"file:9092"}) }},
		{name: "the last assignment wins",
			env:   []string{"LARKLINE_LOG__LEVEL=debug", "LARKLINE_LOG__LEVEL=error"},
			check: func(t *testing.T, c *config.Config) { eq(t, "level", c.Log.Level, "error") }},
		{name: "value containing '='",
			env:   []string{"LARKLINE_POSTGRES__DSN=host=db user=u"},
			check: func(t *testing.T, c *config.Config) { eq(t, "dsn", c.Postgres.DSN.Value(), "host=db user=u") }},
		{name: "several problems at once",
			env: []string{"LARKLINE_KAFKA__PARTITIONS=many", "LARKLINE_NOPE=1", "LARKLINE_LOG__FORMAT=xml"},
			want: []want{
				{"kafka.partitions", "whole number"},
				{"LARKLINE_NOPE", "names no configuration key"},
				{"log.format", "json or text"},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := config.Load(writeFile(t, "larkline.yaml", file), tt.env)
			configtest.CheckProblems(t, err, tt.want)
			if err == nil && tt.check != nil {
				tt.check(t, c)
			}
		})
	}
}

func TestEnvName(t *testing.T) {
	tests := map[string]string{
		"services.workspace.timeline.lark.synthesisWindow": "LARKLINE_SERVICES__WORKSPACE__TIMELINE__LARK__SYNTHESISWINDOW",
		"kafka.brokers":               "LARKLINE_KAFKA__BROKERS",
		"http.adminTokenSHA256":       "LARKLINE_HTTP__ADMINTOKENSHA256",
		"synthesis.openai.apiKeyFile": "LARKLINE_SYNTHESIS__OPENAI__APIKEYFILE",
	}
	for path, want := range tests {
		t.Run(path, func(t *testing.T) {
			if got := config.EnvName(path); got != want {
				t.Errorf("EnvName(%s) = %s, want %s", path, got, want)
			}
		})
	}
}

func TestSecretFiles(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	secret := file("secret", "s3cr3t-from-file\n")
	crlf := file("crlf", "s3cr3t\r\n")
	empty := file("empty", "\n")
	big := file("big", strings.Repeat("x", 70<<10))
	missing := filepath.Join(dir, "missing")

	tests := []struct {
		name  string
		yaml  string
		env   []string
		check func(t *testing.T, c *config.Config)
		want  []want
	}{
		{name: "file from YAML, trailing newline trimmed", yaml: "lark:\n  appSecretFile: " + secret + "\n",
			check: func(t *testing.T, c *config.Config) {
				eq(t, "appSecret", c.Lark.AppSecret.Value(), "s3cr3t-from-file")
				eq(t, "origin", c.Origin("lark.appSecret"), "file "+secret)
			}},
		{name: "file from env, CRLF trimmed", env: []string{"LARKLINE_POSTGRES__DSNFILE=" + crlf},
			check: func(t *testing.T, c *config.Config) { eq(t, "dsn", c.Postgres.DSN.Value(), "s3cr3t") }},
		{name: "every secret has a file key", env: []string{
			"LARKLINE_LARK__APPSECRETFILE=" + secret, "LARKLINE_LARK__VERIFICATIONTOKENFILE=" + secret,
			"LARKLINE_LARK__ENCRYPTKEYFILE=" + secret, "LARKLINE_SYNTHESIS__OPENAI__APIKEYFILE=" + secret,
			"LARKLINE_KAFKA__SASL__PASSWORDFILE=" + secret, "LARKLINE_POSTGRES__DSNFILE=" + secret,
			"LARKLINE_KAFKA__SASL__MECHANISM=plain", "LARKLINE_KAFKA__SASL__USERNAME=u",
		}, check: func(t *testing.T, c *config.Config) {
			for name, s := range map[string]config.Secret{
				"appSecret": c.Lark.AppSecret, "verificationToken": c.Lark.VerificationToken, "encryptKey": c.Lark.EncryptKey,
				"apiKey": c.Synthesis.OpenAI.APIKey, "password": c.Kafka.SASL.Password, "dsn": c.Postgres.DSN,
			} {
				eq(t, name, s.Value(), "s3cr3t-from-file")
			}
		}},
		{name: "secret from env only", env: []string{"LARKLINE_LARK__APPSECRET=from-env"},
			check: func(t *testing.T, c *config.Config) { eq(t, "appSecret", c.Lark.AppSecret.Value(), "from-env") }},
		{name: "value and file both set", yaml: "lark:\n  appSecret: inline\n", env: []string{"LARKLINE_LARK__APPSECRETFILE=" + secret},
			want: []want{{"lark.appSecretFile", "is set and so is lark.appSecret"}}},
		{name: "missing file, and the feature needing it reports nothing more",
			yaml: "services: {workspace: {timeline: {lark: {enabled: true, reconciliationEnabled: true}}}}\nlark: {appID: cli_1, appSecretFile: " + missing + "}\n",
			want: []want{{"lark.appSecretFile", "cannot open the secret file"}}},
		{name: "empty file", env: []string{"LARKLINE_LARK__ENCRYPTKEYFILE=" + empty},
			want: []want{{"lark.encryptKeyFile", "secret file is empty"}}},
		{name: "oversized file", env: []string{"LARKLINE_LARK__ENCRYPTKEYFILE=" + big},
			want: []want{{"lark.encryptKeyFile", "larger than 65536 bytes"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := config.Load(writeFile(t, "larkline.yaml", tt.yaml), tt.env)
			configtest.CheckProblems(t, err, tt.want)
			if err != nil && strings.Contains(err.Error(), "s3cr3t") {
				t.Errorf("error leaks a secret: %v", err)
			}
			if err == nil && tt.check != nil {
				tt.check(t, c)
			}
		})
	}
}

// TestLoadNeverPrintsSecrets puts secrets where they would end up in messages:
// a misspelt secret key, a secret in a list, and a secret conflicting with its file.
func TestLoadNeverPrintsSecrets(t *testing.T) {
	yaml := "lark:\n  appSecert: hunter2-a\n  encryptKey: [hunter2-b]\n  appSecret: hunter2-c\n  appSecretFile: /nowhere\n"
	_, err := config.Load(writeFile(t, "larkline.yaml", yaml), []string{"LARKLINE_LARK__APPSECRT=hunter2-d"})
	if err == nil {
		t.Fatal("want problems")
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("Load error leaks a secret: %v", err)
	}
}

func TestWriteYAMLRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	if err := config.Default().WriteYAML(&buf); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(writeFile(t, "printed.yaml", buf.String()), nil)
	if err != nil {
		t.Fatalf("loading printed defaults: %v\n%s", err, buf.String())
	}
	sameAsDefault(t, c)
	keys, _ := config.Keys()
	for _, k := range keys {
		if o := c.Origin(k.Path); !strings.Contains(o, "printed.yaml") {
			t.Errorf("printed YAML lacks %s (origin %q)", k.Path, o)
		}
	}
}

func TestWriteYAMLWithholdsSecrets(t *testing.T) {
	c := config.Default()
	c.Lark.AppSecret = "hunter2"
	c.HTTP.APITokens = []config.APIToken{{Name: "ci", SHA256: hashA, Workspaces: []string{"*"}}}
	var buf bytes.Buffer
	if err := c.WriteYAML(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if strings.Contains(out, "hunter2") {
		t.Fatalf("WriteYAML printed a secret:\n%s", out)
	}
	if !strings.Contains(out, `appSecret: "" # redacted`) {
		t.Errorf("set secret not marked redacted:\n%s", out)
	}
	if !strings.Contains(out, "name: ci") {
		t.Errorf("list of mappings missing:\n%s", out)
	}
}

func TestDeployFiles(t *testing.T) {
	t.Run("example is production-shaped: every key, all defaults, valid", func(t *testing.T) {
		c, err := config.Load("../../deploy/larkline.example.yaml", nil)
		if err != nil {
			t.Fatal(err)
		}
		sameAsDefault(t, c)
		keys, _ := config.Keys()
		for _, k := range keys {
			if o := c.Origin(k.Path); !strings.Contains(o, "larkline.example.yaml") {
				t.Errorf("example does not set %s (origin %q)", k.Path, o)
			}
		}
	})
	t.Run("demo turns the features on and is valid", func(t *testing.T) {
		c, err := config.Load("../../deploy/larkline.demo.yaml", nil)
		if err != nil {
			t.Fatal(err)
		}
		l := c.Services.Workspace.Timeline.Lark
		if !l.EventIngestionActive() || !l.ReconciliationActive() || !l.Retention.Enabled || !l.EvidenceListedInAPI {
			t.Errorf("demo features: %+v", l)
		}
		tok := c.HTTP.APITokens
		if len(tok) != 1 || !tok[0].Allows("any-workspace") {
			t.Errorf("demo API token = %+v", tok)
		}
	})
}

func sameAsDefault(t *testing.T, c *config.Config) {
	t.Helper()
	var got, want bytes.Buffer
	if err := c.WriteYAML(&got); err != nil {
		t.Fatal(err)
	}
	if err := config.Default().WriteYAML(&want); err != nil {
		t.Fatal(err)
	}
	if got.String() != want.String() {
		t.Errorf("config differs from the defaults:\n%s\nwant:\n%s", got.String(), want.String())
	}
}

func eq[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s = %#v, want %#v", what, got, want)
	}
}
