package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestBuildSchemaInvariants(t *testing.T) {
	type noTag struct {
		A string
	}
	type badType struct {
		A map[string]string `yaml:"a"`
	}
	type secretNoFile struct {
		Token Secret `yaml:"token"`
	}
	type envClash struct {
		A string `yaml:"aB"`
		B string `yaml:"ab"`
	}
	type fine struct {
		Token     Secret   `yaml:"token"`
		TokenFile string   `yaml:"tokenFile"`
		List      []string `yaml:"list"`
	}
	tests := []struct {
		name    string
		typ     reflect.Type
		wantErr string
	}{
		{"field without yaml key", reflect.TypeFor[noTag](), "has no yaml key"},
		{"unsupported type", reflect.TypeFor[badType](), "unsupported type"},
		{"secret without file key", reflect.TypeFor[secretNoFile](), "has no tokenFile key"},
		{"keys differing only in case", reflect.TypeFor[envClash](), "share environment variable LARKLINE_AB"},
		{"well-formed", reflect.TypeFor[fine](), ""},
		{"the real Config", reflect.TypeFor[Config](), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := buildSchema(tt.typ)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("buildSchema: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("buildSchema error = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestKeysCoverSecrets(t *testing.T) {
	keys, err := Keys()
	if err != nil {
		t.Fatal(err)
	}
	var secrets []string
	for _, k := range keys {
		if k.Secret {
			secrets = append(secrets, k.Path)
		}
	}
	want := []string{"kafka.sasl.password", "kafka.sasl.oauth.clientSecret", "schemas.registry.password", "schemas.registry.bearerToken", "postgres.dsn", "lark.appSecret", "lark.verificationToken", "lark.encryptKey", "http.cursorKey", "synthesis.openai.apiKey"}
	if strings.Join(secrets, ",") != strings.Join(want, ",") {
		t.Errorf("secret keys = %v, want %v", secrets, want)
	}
}

// TestEveryKeyFromEnv sets every key through its variable and reads the field back:
// the env rule reaches the whole schema, and each value lands in its own field.
func TestEveryKeyFromEnv(t *testing.T) {
	idx, err := loadSchema()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range idx.leaves {
		t.Run(k.path, func(t *testing.T) {
			var val string
			var want any
			switch k.kind {
			case kindBool:
				val, want = "true", true
			case kindInt:
				val, want = "7", int64(7)
			case kindFloat:
				val, want = "7.5", 7.5
			case kindDuration:
				val, want = "7h", int64(7*time.Hour)
			case kindStrings:
				val, want = "x, y", []string{"x", "y"}
			case kindList:
				val, want = "[{name: probe}]", "probe"
			default:
				val, want = "probe-value", "probe-value"
			}
			cfg := Default()
			cfg.origins = map[string]string{}
			d := &decoder{idx: idx, cfg: cfg, failed: map[string]bool{}}
			d.applyEnv([]string{k.env + "=" + val})
			if len(d.problems) > 0 {
				t.Fatalf("%s=%s: %v", k.env, val, d.problems)
			}
			if got := cfg.Origin(k.path); got != "env "+k.env {
				t.Errorf("Origin = %q, want env %s", got, k.env)
			}
			f := idx.field(reflect.ValueOf(cfg).Elem(), k)
			var got any
			switch k.kind {
			case kindBool:
				got = f.Bool()
			case kindInt, kindDuration:
				got = f.Int()
			case kindFloat:
				got = f.Float()
			case kindStrings:
				s := make([]string, f.Len())
				for i := range s {
					s[i] = f.Index(i).String()
				}
				got = s
			case kindList:
				got = f.Index(0).Field(0).String()
			default:
				got = f.String()
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("field = %#v, want %#v", got, want)
			}
		})
	}
}
